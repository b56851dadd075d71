"""The Kùzu store's tables, each column written once with its types: the schema's ``CREATE``
statements, the Arrow types of the bulk path (``COPY``, ``LOAD FROM``) and the Audit table's
rows are all built from the lists here.

The Memory and Link columns are the stored properties of :mod:`ebb_core.records`
(``NODE_PROPERTIES``, ``EDGE_PROPERTIES``) with Kùzu's own columns around them; a list that
no longer matches them fails on import. Changing a column's name, type or order changes the
``CREATE`` statements, so an existing store's schema (``SCHEMA_VERSION`` in ``kuzu.schema``):
``tests/test_kuzu_tables.py`` holds today's statements.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

from ..records import EDGE_PROPERTIES, NODE_PROPERTIES


class Column(NamedTuple):
    name: str
    kuzu: str  # the Kùzu type
    arrow: str  # the pyarrow type, as the name of its factory (``pa.<arrow>()``)


def _col(name: str, kuzu: str) -> Column:
    return Column(name, kuzu, _ARROW_OF[kuzu])


_ARROW_OF = {"STRING": "string", "INT64": "int64", "DOUBLE": "float64", "BOOLEAN": "bool_"}

#: Memory: the primary key, the stored properties (``NODE_PROPERTIES``), then the recent-link
#: list the store keeps for recall's explanations.
MEMORY = (
    _col("uid", "STRING"),
    _col("id", "STRING"),
    _col("ns", "STRING"),
    _col("kind", "STRING"),
    _col("text", "STRING"),
    _col("props", "STRING"),
    _col("created_us", "INT64"),
    _col("updated_us", "INT64"),
    _col("last_read_us", "INT64"),
    _col("pinned", "BOOLEAN"),
    _col("tier", "INT64"),
    _col("review_reason", "STRING"),
    _col("queued_us", "INT64"),
    _col("base_key", "DOUBLE"),
    _col("key", "DOUBLE"),
    _col("degree", "INT64"),
    _col("recent_links", "STRING"),
)
#: Link (Memory to Memory): the stored properties (``EDGE_PROPERTIES``).
LINK = (
    _col("kind", "STRING"),
    _col("weight", "DOUBLE"),
    _col("created_us", "INT64"),
    _col("reinforced_us", "INT64"),
    _col("props", "STRING"),
)
AUDIT = (
    _col("uid", "STRING"),
    _col("ns", "STRING"),
    _col("seq", "INT64"),
    _col("at_us", "INT64"),
    _col("action", "STRING"),
    _col("node_id", "STRING"),
    _col("from_tier", "INT64"),
    _col("to_tier", "INT64"),
    _col("actor", "STRING"),
    _col("reason", "STRING"),
    _col("payload", "STRING"),
)
META = (_col("key", "STRING"), _col("value", "STRING"))
#: LinkList: the recent-link lists of memories that changed after their row was written, in a
#: store past one node group of memories (the list of a new memory is written with its row, in
#: ``Memory.recent_links``, and so is a changed one while the table fits in one group: see
#: ``KuzuReads.lists_in_rows_upto``). A row here
#: overrides ``Memory.recent_links`` and never holds NULL (unsetting a list deletes its row).
#: Kùzu 0.11.3 rewrites a node group's whole ``recent_links`` chunk (131,072 rows of lists) at
#: the next checkpoint once one of its rows is SET: ~0.9 s of CPU per node group touched at
#: 1M, which made a remember stall 16.6 s and bench_core's "maintain again" pay ~5-7 s
#: (bench/checkpoint_cost.py). A row here is never SET either: a new list deletes the row and
#: creates another (appended; Kùzu 0.11.3 does not reuse a deleted row's space). SET in place,
#: a small table's long strings filled the buffer pool (a copy of the chunk held per commit
#: until the next checkpoint) and its checkpoints grew (300k rows, 400 SETs: 1.4-3.4 s); deleted
#: and created, 0.03-0.10 s (docs/benchmarks.md, "What a checkpoint costs").
LINK_LIST = (_col("uid", "STRING"), _col("links", "STRING"))

if tuple(c.name for c in MEMORY) != ("uid", *NODE_PROPERTIES, "recent_links"):
    raise RuntimeError("kuzu.tables.MEMORY does not match records.NODE_PROPERTIES")
if tuple(c.name for c in LINK) != EDGE_PROPERTIES:
    raise RuntimeError("kuzu.tables.LINK does not match records.EDGE_PROPERTIES")


def _node_ddl(table: str, columns: tuple[Column, ...]) -> str:
    """``CREATE NODE TABLE``, its first column the primary key."""
    key, *rest = columns
    cols = ", ".join([f"{key.name} {key.kuzu} PRIMARY KEY", *(f"{c.name} {c.kuzu}" for c in rest)])
    return f"CREATE NODE TABLE IF NOT EXISTS {table}({cols})"


def _rel_ddl(table: str, ends: str, columns: tuple[Column, ...]) -> str:
    cols = ", ".join(f"{c.name} {c.kuzu}" for c in columns)
    return f"CREATE REL TABLE IF NOT EXISTS {table}({ends}, {cols})"


#: The schema: each table's name and the statement creating it, in creation order.
SCHEMA = (
    ("Memory", _node_ddl("Memory", MEMORY)),
    ("Link", _rel_ddl("Link", "FROM Memory TO Memory", LINK)),
    ("Audit", _node_ddl("Audit", AUDIT)),
    ("Meta", _node_ddl("Meta", META)),
    ("LinkList", _node_ddl("LinkList", LINK_LIST)),
)

#: The Memory table's column names, in order.
MEMORY_COLUMNS = tuple(c.name for c in MEMORY)
#: The Audit table's column names, in order.
AUDIT_COLUMNS = tuple(c.name for c in AUDIT)
#: One Audit row's ``CREATE``, its values the parameters named after the columns.
AUDIT_CREATE = "CREATE (:Audit {" + ", ".join(f"{c}: ${c}" for c in AUDIT_COLUMNS) + "})"


def _arrow(columns: tuple[Column, ...]) -> dict[str, Any]:
    import pyarrow as pa

    return {c.name: getattr(pa, c.arrow)() for c in columns}


# Built on first use: pyarrow costs ~0.1 s to import, which a one-shot command should not pay.
@functools.cache
def memory_arrow_types() -> dict[str, Any]:
    """The Memory table's columns and their Arrow types."""
    return _arrow(MEMORY)


@functools.cache
def link_arrow_types() -> dict[str, Any]:
    """The Link table's property columns and their Arrow types."""
    return _arrow(LINK)


@functools.cache
def audit_arrow_types() -> dict[str, Any]:
    """The Audit table's columns and their Arrow types."""
    return _arrow(AUDIT)
