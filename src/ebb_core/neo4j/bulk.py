"""The Neo4j store's import path: columns sent as columns, links made by element id.

An import sends each batch as one list per column (``UNWIND range(0, size($id) - 1) AS i
CREATE (n:Memory {id: $id[i], …})``) rather than as a list of row maps: no dict per row in the
client and less to encode. The statement that creates a batch of memories returns their element
ids, and a link whose two ends were created by the same call is made from them
(``MATCH (a) WHERE elementId(a) = …``): a direct record lookup instead of a seek of the
``(ns, id)`` index, which inside a transaction that has just created those nodes must also
search the transaction's own uncommitted index changes. Links to memories stored before the
call fall back to the index. Measured figures are in ``docs/neo4j.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InvalidInput
from ..records import EDGE_COLUMNS, NODE_COLUMNS
from .queries import _pylist

#: Scoring columns an import may carry (else they start at zero, as ``bulk_insert`` says).
_SCORES = {"base_key": "0.0", "key": "0.0", "degree": "0"}
_LINK = (
    "CREATE (a)-[:LINK {kind: $kind[i], weight: toFloat($weight[i]), "
    "created_us: $created_us[i], reinforced_us: $reinforced_us[i], props: $props[i]}]->(b)"
)
#: Links whose ends were created in this call: by element id.
LINKS_BY_ELEMENT_ID = (
    "UNWIND range(0, size($a) - 1) AS i "
    "MATCH (a) WHERE elementId(a) = $a[i] MATCH (b) WHERE elementId(b) = $b[i] " + _LINK
)
#: Links to memories stored before: by the ``(ns, id)`` index.
LINKS_BY_ID = (
    "UNWIND range(0, size($src) - 1) AS i "
    "MATCH (a:Memory {ns: $namespace[i], id: $src[i]}) "
    "MATCH (b:Memory {ns: $namespace[i], id: $dst[i]}) " + _LINK
)


def create_nodes_query(columns: Sequence[str]) -> str:
    """``CREATE`` for a batch of node columns named ``columns`` (returns ``i`` and element id).

    Only this module's known column names reach the query text; anything else is refused.
    """
    unknown = set(columns) - set(NODE_COLUMNS) - set(_SCORES)
    if unknown or "id" not in columns:
        raise InvalidInput(
            f"bulk_insert node columns {sorted(unknown) or ['id (missing)']} are not import "
            f"columns: use those of ebb_core.records.NODE_COLUMNS",
            field="nodes",
        )
    props = [f"{'ns' if c == 'namespace' else c}: ${c}[i]" for c in columns]
    props += [f"{c}: {zero}" for c, zero in _SCORES.items() if c not in columns]
    return (
        "UNWIND range(0, size($id) - 1) AS i "
        f"CREATE (n:Memory {{{', '.join(props)}}}) RETURN i, elementId(n) AS e"
    )


def create_nodes(tx: Any, nodes: Mapping[str, Sequence[Any]], batch: int) -> list[str]:
    """Create ``nodes`` (columns) in batches; their element ids, in column order."""
    names = list(nodes)
    if not names or not len(nodes[names[0]]):
        return []
    query = create_nodes_query(names)
    total = len(nodes[names[0]])
    out: list[str] = [""] * total
    for lo in range(0, total, batch):
        params = {c: _pylist(nodes[c][lo : lo + batch]) for c in names}
        for r in tx.run(query, params):
            out[lo + r["i"]] = r["e"]
    return out


def create_links(
    tx: Any,
    edges: Mapping[str, Sequence[Any]],
    nodes: Mapping[str, Sequence[Any]],
    element_ids: Sequence[str],
    batch: int,
) -> None:
    """Create ``edges`` (columns): by element id where both ends are among ``nodes`` (created
    by this call, with ``element_ids``), else through the ``(ns, id)`` index."""
    if set(edges) != set(EDGE_COLUMNS):
        raise InvalidInput(
            f"bulk_insert edge columns must be {list(EDGE_COLUMNS)}, got {sorted(edges)}",
            field="edges",
        )
    total = len(edges["src"])
    if not total:
        return
    import pyarrow as pa
    import pyarrow.compute as pc

    ends = {c: pa.nulls(total, pa.string()) for c in ("src", "dst")}
    if element_ids:
        known = _keys(nodes["namespace"], nodes["id"])
        eids = pa.array(element_ids, pa.string())
        for c in ("src", "dst"):
            where = pc.index_in(_keys(edges["namespace"], edges[c]), value_set=known)
            ends[c] = eids.take(where)
    direct = pc.and_(pc.is_valid(ends["src"]), pc.is_valid(ends["dst"]))
    cols = {c: _arrow(edges[c]) for c in EDGE_COLUMNS}
    by_eid = {c: cols[c].filter(direct) for c in EDGE_COLUMNS if c not in ("namespace",)}
    by_eid["a"], by_eid["b"] = ends["src"].filter(direct), ends["dst"].filter(direct)
    del by_eid["src"], by_eid["dst"]
    by_id = {c: cols[c].filter(pc.invert(direct)) for c in EDGE_COLUMNS}
    for query, part in ((LINKS_BY_ELEMENT_ID, by_eid), (LINKS_BY_ID, by_id)):
        size = len(next(iter(part.values())))
        for lo in range(0, size, batch):
            params = {c: v.slice(lo, batch).to_pylist() for c, v in part.items()}
            tx.run(query, params).consume()


def _arrow(column: Any) -> Any:
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks()
    if isinstance(column, pa.Array):
        return column
    return pa.array(list(column))


def _keys(namespaces: Any, ids: Any) -> Any:
    """One string per row naming a memory across namespaces (neither part holds ``\\x1f``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.binary_join_element_wise(
        _arrow(namespaces).cast(pa.string()), _arrow(ids).cast(pa.string()), "\x1f"
    )
