"""The Kùzu tables written once (``ebb_core.kuzu.tables``): the CREATE statements built from the
column lists are the ones existing stores were created with, and a store's catalog and Arrow
results have the listed columns and types."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ebb_core.kuzu import tables
from ebb_core.kuzu.schema import SCHEMA_VERSION
from ebb_core.kuzu_store import KuzuStore

# The statements of schema version 4, as written out by hand before the column lists, and the
# table version 5 added. A change here is a new schema: bump SCHEMA_VERSION (an existing store
# then needs a migration on open, or asks for an export/import).
VERSION_4 = [
    (
        "Memory",
        "CREATE NODE TABLE IF NOT EXISTS Memory(uid STRING PRIMARY KEY, id STRING, ns STRING, "
        "kind STRING, text STRING, props STRING, created_us INT64, updated_us INT64, "
        "last_read_us INT64, pinned BOOLEAN, tier INT64, review_reason STRING, queued_us INT64, "
        "base_key DOUBLE, key DOUBLE, degree INT64, recent_links STRING)",
    ),
    (
        "Link",
        "CREATE REL TABLE IF NOT EXISTS Link(FROM Memory TO Memory, kind STRING, weight DOUBLE, "
        "created_us INT64, reinforced_us INT64, props STRING)",
    ),
    (
        "Audit",
        "CREATE NODE TABLE IF NOT EXISTS Audit(uid STRING PRIMARY KEY, ns STRING, seq INT64, "
        "at_us INT64, action STRING, node_id STRING, from_tier INT64, to_tier INT64, "
        "actor STRING, reason STRING, payload STRING)",
    ),
    ("Meta", "CREATE NODE TABLE IF NOT EXISTS Meta(key STRING PRIMARY KEY, value STRING)"),
]
VERSION_5 = [
    *VERSION_4,
    ("LinkList", "CREATE NODE TABLE IF NOT EXISTS LinkList(uid STRING PRIMARY KEY, links STRING)"),
]


def test_the_generated_statements_are_those_of_schema_version_5() -> None:
    assert SCHEMA_VERSION == "5"
    assert list(tables.SCHEMA) == VERSION_5


def test_a_new_store_has_the_listed_columns_and_arrow_types(tmp_path: Path) -> None:
    store = KuzuStore(tmp_path / "t.kuzu")
    try:
        listed = {"Memory": tables.MEMORY, "Link": tables.LINK}
        listed |= {"Audit": tables.AUDIT, "Meta": tables.META, "LinkList": tables.LINK_LIST}
        for name, columns in listed.items():
            info = store._rows(f"CALL table_info('{name}') RETURN name, type")
            # Kùzu names BOOLEAN "BOOL" in its catalog
            assert [(r[0], r[1].replace("BOOL", "BOOLEAN")) for r in info] == [
                (c.name, c.kuzu) for c in columns
            ], name
        # what Kùzu hands back as Arrow has the types the bulk path writes
        store._q("CREATE (:Memory {uid: 'a'})")
        store._q(tables.AUDIT_CREATE, {c: None for c in tables.AUDIT_COLUMNS} | {"uid": "a"})
        for name, types in (
            ("Memory", tables.memory_arrow_types()),
            ("Audit", tables.audit_arrow_types()),
        ):
            got = store._conn.execute(f"MATCH (x:{name}) RETURN x.*").get_as_arrow()
            assert isinstance(got, pa.Table)
            assert [(f.name, f.type) for f in got.schema] == [
                (f"x.{c}", t) for c, t in types.items()
            ], name
        store._q("MATCH (a:Memory {uid: 'a'}) CREATE (a)-[:Link]->(a)")
        got = store._conn.execute("MATCH ()-[e:Link]->() RETURN e.*").get_as_arrow()
        assert isinstance(got, pa.Table)
        assert [(f.name, f.type) for f in got.schema if not f.name.startswith("e._")] == [
            (f"e.{c}", t) for c, t in tables.link_arrow_types().items()
        ]
    finally:
        store.close()
