"""A first load of a Neo4j database without transactions: an Ebb export as ``neo4j-admin`` CSV.

Through Bolt, an import is bound by the server applying each transaction (about 4k memories/s
on a 2-core host, docs/neo4j.md). For an **empty** database, Neo4j's offline importer
(``neo4j-admin database import full``, the server stopped) writes the store files directly.
This module turns an export into the files it reads, laid out exactly as
:class:`~ebb_core.neo4j.store.Neo4jStore`'s own import stores the same export:

1. :func:`prepare` parses the export with the same code as ``Brain.import_`` (the same checks,
   the same keys from the file, the same renumbered audit entries, the same settings: schema
   version, scoring epoch and signature, tier references), by running that import against a
   store that writes CSV instead of a database (:class:`_CsvStore`). It writes
   ``memories.csv`` (``:Memory``), ``links.csv`` (``[:LINK]``), ``audit.csv`` (``:Audit``),
   ``meta.csv`` (``:Meta``) and ``manifest.json`` (counts and the command to run), each file's
   header naming Neo4j's property types (``long``, ``double``, ``boolean``; strings quoted, an
   empty unquoted field is no property, as a null is in a ``CREATE``). Every node's ``:ID`` is
   the node id it gets in the store (``--id-type=actual``), so the importer joins the links
   without an id map.
2. The user runs :func:`admin_command`'s ``neo4j-admin database import full`` against the stopped
   server. It refuses a database that already exists; only ``--overwrite-destination``, which
   Ebb never adds, would replace it. ``--bad-tolerance=0``: one bad row fails the whole import.
3. With the server started, :func:`finish` creates Ebb's constraints and indexes (the importer
   writes none; the plain ones in one transaction, populated side by side), waits until they
   are online however long the full-text index takes, checks the database holds what the
   manifest says, makes the lists of the hubs ``prepare`` found (memories with more than
   ``hubs.HUB_LINKS`` links, counted in the export's own columns), and opens the store as Ebb
   does.

Vectors are not carried (run ``ebb embed`` afterwards); a file that carries them is refused.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from ..clock import Clock
from ..errors import InvalidInput, StorageError
from ..model import AuditEntry, Tier
from ..scoring import Config
from ..store import GraphStore
from .hubs import HUB_META, HUB_VERSION, fix_hubs
from .queries import _SCHEMA, SCHEMA_VERSION, _pylist
from .rescore import WATERMARK, stored_signature

#: Property types of each file's columns (Neo4j header types; strings have none).
MEMORY_TYPES = {
    "ns": "", "id": "", "kind": "", "text": "", "props": "", "created_us": "long",
    "updated_us": "long", "last_read_us": "long", "pinned": "boolean", "tier": "long",
    "review_reason": "", "queued_us": "long", "base_key": "double", "key": "double",
    "degree": "long",
}  # fmt: skip
LINK_TYPES = {
    "kind": "", "weight": "double", "created_us": "long", "reinforced_us": "long", "props": "",
}  # fmt: skip
AUDIT_TYPES = {
    "seq": "long", "ns": "", "at_us": "long", "action": "", "node_id": "", "from_tier": "long",
    "to_tier": "long", "actor": "", "reason": "", "payload": "",
}  # fmt: skip
META_TYPES = {"key": "", "value": ""}
FILES = {"Memory": "memories.csv", "LINK": "links.csv", "Audit": "audit.csv", "Meta": "meta.csv"}


class _CsvStore(GraphStore):
    """What ``Brain.import_`` writes into an empty Neo4j database, collected instead of sent.

    Only what an import into a new store calls is here; anything else is a programming error.
    """

    backend = "neo4j-csv"
    bulk_rollback_safe = True

    def __init__(self) -> None:
        self.meta: dict[str, str] = {"schema_version": SCHEMA_VERSION}
        self.nodes: dict[str, Any] | None = None
        self.edges: dict[str, Any] | None = None
        self.audit: list[AuditEntry] = []
        #: each link end's position among the memories, as the import matched them (its
        #: ``_file_keys`` hands them over, see :func:`prepare`): the links' ``:START_ID`` and
        #: ``:END_ID``, and what the hubs are counted from
        self.ends: list[Any] = []

    def transaction(self) -> Any:
        return nullcontext()

    def close(self) -> None:
        return None

    def get_meta(self, key: str) -> str | None:
        return self.meta.get(key)

    def set_meta(self, key: str, value: str) -> None:
        self.meta[key] = value

    def existing_ids(self, namespace: str, ids: Sequence[str]) -> set[str]:
        return set()  # an empty database

    def top_by_key(self, namespace: str, max_tier: Tier, limit: int, kinds: Any = ()) -> list[Any]:
        return []

    def last_audit_seq(self, namespace: str) -> int:
        return max((a.seq for a in self.audit if a.namespace == namespace), default=0)

    def bulk_insert(
        self,
        nodes: Mapping[str, Any],
        edges: Mapping[str, Any],
        *,
        ends: tuple[Any, Any] | None = None,
    ) -> None:
        if self.nodes is not None or "key" not in nodes:  # only the one-shot, keyed path
            raise InvalidInput(
                "this export cannot be bulk-loaded into an empty database (its links point "
                "outside it): use `ebb import`",
                field="src",
            )
        self.nodes, self.edges = dict(nodes), dict(edges)
        # Keys computed from the file with this store's epoch and settings: the first
        # maintain re-scores only what changes after the load (.rescore).
        mark = stored_signature(self.get_meta)
        if mark is not None:
            for ns in set(_pylist(nodes["namespace"])):
                self.meta[WATERMARK + ns] = mark

    def append_audit(self, entries: Sequence[AuditEntry]) -> None:
        self.audit.extend(entries)

    def _unused(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("not part of an import into an empty database")

    get_nodes = incident = scan_nodes = namespaces = text_candidates = _unused
    upsert_nodes = upsert_edges = delete_nodes = audit_log = _unused


def prepare(
    src: str | Path,
    out_dir: str | Path,
    *,
    namespace: str | None = None,
    clock: Clock | None = None,
    config: Config | None = None,
) -> dict[str, Any]:
    """Write the ``neo4j-admin`` files for export ``src`` into ``out_dir`` (which must be empty
    or absent); returns the manifest (counts, files, the command; also ``manifest.json``).

    ``namespace`` puts every memory into one namespace (``ebb import --into``); ``clock`` sets
    the scoring epoch as a new store's first open would (now, by default).
    """

    import pyarrow as pa

    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise InvalidInput(f"{out} is not empty: give a new directory", field="out_dir")
    # Arrow's default pool (mimalloc) hands freed pages back and faults them in again: at a
    # million memories 15 s of system time, against 5 s with the C library's allocator.
    pool = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        return _prepare(Path(src), out, namespace, clock, config)
    finally:
        pa.set_memory_pool(pool)


def _prepare(
    src: Path, out: Path, namespace: str | None, clock: Clock | None, config: Config | None
) -> dict[str, Any]:
    from ..engine import Brain

    class _Brain(Brain):
        """An import that hands the links' matched ends to the CSV store (matched once)."""

        def _file_keys(self, node_cols: Any, edge_cols: Any, ends: Sequence[Any]) -> Any:
            store.ends = list(ends)
            return super()._file_keys(node_cols, edge_cols, ends)

    store = _CsvStore()
    brain = _Brain(store, clock=clock, config=config, embedder=False)
    counts = brain.import_(src, namespace=namespace)
    if "vectors" in counts:  # the file carried vector records (found by the import's own scan)
        raise InvalidInput(
            "this export carries vectors, which the bulk path does not load: import it with "
            "`ebb import`, or export without them and run `ebb embed` after the bulk load",
            field="src",
        )
    out.mkdir(parents=True, exist_ok=True)
    if store.nodes is None or store.edges is None:
        raise InvalidInput("the export holds no memories: nothing to bulk-load", field="src")
    multiline = _write_memories(out / FILES["Memory"], store.nodes)
    starts, ends = _positions(store)
    multiline |= _write_links(out / FILES["LINK"], store.edges, starts, ends)
    # Node ids are the store's own (--id-type=actual): memories 0..n-1, then settings, then
    # the audit entries; the links name their ends by them.
    n = len(store.nodes["id"])
    meta: dict[str, Any] = {**_meta_columns(store.meta), ":ID": range(n, n + len(store.meta))}
    _write_table(out / FILES["Meta"], META_TYPES, meta, id_cols=(":ID",))
    multiline |= _write_audit(out / FILES["Audit"], store.audit, first_id=n + len(store.meta))
    manifest: dict[str, Any] = {
        "memories": counts["nodes"],
        "links": counts["edges"],
        "audit": len(store.audit),
        "meta": len(store.meta),
        "multiline": multiline,
        "files": dict(FILES),
        # the memories with more links than a hub's bound: `finish` makes their lists
        "hubs": _hubs(store.nodes, starts, ends),
    }
    manifest["command"] = admin_command(out, multiline=multiline)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def admin_command(
    out_dir: str | Path, *, database: str = "neo4j", multiline: bool = False
) -> list[str]:
    """``neo4j-admin database import full`` for the files in ``out_dir`` (run with the server
    stopped; it refuses a database that exists)."""
    d = Path(out_dir).resolve()
    return [
        "neo4j-admin",
        "database",
        "import",
        "full",
        database,
        f"--nodes=Memory={d / FILES['Memory']}",
        f"--nodes=Audit={d / FILES['Audit']}",
        f"--nodes=Meta={d / FILES['Meta']}",
        f"--relationships=LINK={d / FILES['LINK']}",
        "--id-type=actual",
        "--bad-tolerance=0",
        f"--report-file={d / 'import.report'}",
        f"--multiline-fields={'true' if multiline else 'false'}",
    ]


def finish(
    store_uri: str,
    out_dir: str | Path,
    *,
    auth: Any = None,
    database: str | None = None,
    poll_seconds: float = 1.0,
) -> dict[str, Any]:
    """After ``neo4j-admin`` and a server start: create Ebb's constraints and indexes, wait
    until every one is online, check the database holds the manifest's counts, and open the
    store as Ebb does. Returns the counts found and the seconds spent building the indexes."""
    import neo4j

    from .store import Neo4jStore

    manifest = json.loads((Path(out_dir) / "manifest.json").read_text(encoding="utf-8"))
    t0 = time.perf_counter()
    with neo4j.GraphDatabase.driver(store_uri, auth=auth) as driver:
        _create_schema(driver, database)
        while True:
            rows = driver.execute_query(
                "SHOW INDEXES YIELD name, state, populationPercent "
                "WHERE name STARTS WITH 'ebb_' RETURN name, state, populationPercent",
                database_=database,
            ).records
            failed = [r["name"] for r in rows if r["state"] == "FAILED"]
            if failed:
                raise StorageError(f"Neo4j failed to build index {failed[0]!r}: see its log")
            if all(r["state"] == "ONLINE" for r in rows):
                break
            time.sleep(poll_seconds)
        index_s = time.perf_counter() - t0
        found = {
            "memories": _count(driver, "MATCH (n:Memory) RETURN count(n) AS c", database),
            "links": _count(driver, "MATCH ()-[e:LINK]->() RETURN count(e) AS c", database),
            "audit": _count(driver, "MATCH (a:Audit) RETURN count(a) AS c", database),
            "meta": _count(driver, "MATCH (m:Meta) RETURN count(m) AS c", database),
        }
    wrong = {k: (v, manifest[k]) for k, v in found.items() if v != manifest[k]}
    if wrong:
        what = ", ".join(f"{k}: {v} found, {m} in the files" for k, (v, m) in wrong.items())
        raise StorageError(
            f"the database does not hold what was prepared ({what}): was it empty when "
            "neo4j-admin ran, and did the import finish?"
        )
    if "hubs" in manifest:  # the hubs' lists, of the memories prepare found: no pass over all
        with neo4j.GraphDatabase.driver(store_uri, auth=auth) as driver:
            _make_hubs(driver, database, manifest["hubs"])
    Neo4jStore(store_uri, auth=auth, database=database).close()  # Ebb's own checks at open
    return {**found, "index_s": round(index_s, 1)}


def _create_schema(driver: Any, database: str | None) -> None:
    """Ebb's indexes and constraints (:data:`~.queries._SCHEMA`) on a loaded database, built
    side by side: the plain indexes in one transaction, whose populations start together when
    it commits and run in the server's background, then each constraint, whose own index the
    server builds and verifies before the statement returns (meanwhile the others go on)."""
    plain = [ddl for ddl in _SCHEMA if not ddl.startswith("CREATE CONSTRAINT")]
    with driver.session(database=database) as session, session.begin_transaction() as tx:
        for ddl in plain:
            tx.run(ddl).consume()
        tx.commit()
    for ddl in _SCHEMA:
        if ddl not in plain:
            driver.execute_query(ddl, database_=database)


def _make_hubs(driver: Any, database: str | None, hubs: Mapping[str, Sequence[str]]) -> None:
    """The lists of the hubs among ``hubs`` (ids by namespace), then the setting saying the
    store has them (so that Ebb's open does not look for hubs among every memory)."""
    with driver.session(database=database) as session:
        for ns, ids in hubs.items():
            for lo in range(0, len(ids), 10_000):
                part = list(ids[lo : lo + 10_000])
                session.execute_write(lambda tx, ns=ns, part=part: fix_hubs(tx, ns, part))
        session.execute_write(
            lambda tx: tx.run(
                "MERGE (m:Meta {key: $k}) SET m.value = $v", {"k": HUB_META, "v": HUB_VERSION}
            ).consume()
        )


def _count(driver: Any, query: str, database: str | None) -> int:
    return int(driver.execute_query(query, database_=database).records[0]["c"])


def _meta_columns(meta: Mapping[str, str]) -> dict[str, list[str]]:
    keys = sorted(meta)
    return {"key": keys, "value": [meta[k] for k in keys]}


def _arrow(column: Any, typ: str) -> Any:
    """``column`` as an Arrow array or chunked array of Neo4j header type ``typ`` (chunks
    are kept: joining them copied ~2 s of columns at a million memories)."""
    import pyarrow as pa

    want = {"": pa.string(), "long": pa.int64(), "double": pa.float64(), "boolean": pa.bool_()}
    t = want[typ]
    if not isinstance(column, pa.Array | pa.ChunkedArray):
        column = pa.array(list(column), t)
    return column if column.type == t else column.cast(t)


def _breaks_lines(column: Any) -> bool:
    """Whether a string column holds a carriage return or a line feed (two literal searches:
    the regex ``[\\r\\n]`` took ~1 s at a million memories)."""
    import pyarrow.compute as pc

    return any(bool(pc.any(pc.match_substring(column, ch)).as_py()) for ch in ("\n", "\r"))


def _write_table(
    path: Path, types: Mapping[str, str], columns: Mapping[str, Any], id_cols: Sequence[str] = ()
) -> bool:
    """One CSV with Neo4j's header (``name:type``, and ``id_cols`` first); every string quoted,
    nulls as empty fields. Returns whether a string holds a line break."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    arrays = {n: _arrow(columns[n], "long") for n in id_cols}
    arrays.update({n: _arrow(columns[n], t) for n, t in types.items()})
    header = [*id_cols] + [f"{n}:{t}" if t else n for n, t in types.items()]
    multiline = any(_breaks_lines(arrays[n]) for n, t in types.items() if not t and len(arrays[n]))
    table = pa.table(list(arrays.values()), names=[f"c{i}" for i in range(len(arrays))])
    with path.open("wb") as f:
        f.write((",".join(header) + "\n").encode())
        pacsv.write_csv(table, f, pacsv.WriteOptions(include_header=False))
    return multiline


def _write_memories(path: Path, nodes: Mapping[str, Any]) -> bool:
    import pyarrow as pa

    cols = {("ns" if c == "namespace" else c): v for c, v in nodes.items()}
    cols[":ID"] = pa.array(range(len(cols["id"])), pa.int64())
    return _write_table(path, MEMORY_TYPES, cols, id_cols=(":ID",))


def _positions(store: _CsvStore) -> tuple[Any, Any]:
    """Each link's ends as the node ids ``prepare`` gives the memories: their positions among
    them, as the import matched them (``_Brain._file_keys`` hands them over)."""
    if len(store.ends) != 2:
        raise StorageError("the import did not match the links' ends (a programming error)")
    return _arrow(store.ends[0], "long"), _arrow(store.ends[1], "long")


def _write_links(path: Path, edges: Mapping[str, Any], starts: Any, ends: Any) -> bool:
    import pyarrow as pa
    import pyarrow.compute as pc

    cols: dict[str, Any] = {":START_ID": starts, ":END_ID": ends}
    cols.update({c: edges[c] for c in LINK_TYPES})
    props = _arrow(cols["props"], "")
    cols["props"] = pc.if_else(pc.equal(props, "{}"), pa.scalar(None, pa.string()), props)
    return _write_table(path, LINK_TYPES, cols, id_cols=(":START_ID", ":END_ID"))


def _hubs(nodes: Mapping[str, Any], starts: Any, ends: Any) -> dict[str, list[str]]:
    """The memories more than ``HUB_LINKS`` links end at, by namespace, in the order their
    first link end appears (starts, then ends), as :func:`.hubs.ends_of_links` lists them:
    counted on the ends' positions instead of on namespaced id strings (4 s at 1M)."""
    import numpy as np
    import pyarrow as pa

    from .hubs import HUB_LINKS

    n = len(nodes["id"])
    at = np.concatenate([np.asarray(starts.to_numpy()), np.asarray(ends.to_numpy())])
    hub = np.bincount(at, minlength=n) > HUB_LINKS
    if not hub.any():
        return {}
    seen = at[hub[at]]
    _, first = np.unique(seen, return_index=True)
    order = seen[np.sort(first)]
    which = pa.array(order, pa.int64())
    ns = _arrow(nodes["namespace"], "").take(which).to_pylist()
    ids = _arrow(nodes["id"], "").take(which).to_pylist()
    out: dict[str, list[str]] = {}
    for name, node_id in zip(ns, ids, strict=True):
        out.setdefault(name, []).append(node_id)
    return out


def _write_audit(path: Path, entries: Sequence[AuditEntry], first_id: int) -> bool:
    from .store import audit_row

    rows = [audit_row(a) for a in entries]
    cols: dict[str, Any] = {c: [r[c] for r in rows] for c in AUDIT_TYPES}
    cols[":ID"] = range(first_id, first_id + len(rows))
    return _write_table(path, AUDIT_TYPES, cols, id_cols=(":ID",))
