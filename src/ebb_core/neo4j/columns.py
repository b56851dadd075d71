"""``maintain``'s re-score on Neo4j as columns: read out, scored in numpy, changes written back.

The same pass as the Kùzu store's (:mod:`ebb_core.kuzu.maintain`): one read statement streams
every memory of the namespace with its outgoing links as lists (``id(m)``, weight, reinforced
time: numbers only, no link is expanded twice), :func:`ebb_core.scoring.graph_keys` computes
every ``(base_key, key, degree)`` at once, and only the rows whose stored values differ are
written back, by the ``(ns, id)`` key, in ``UNWIND`` batches of ``batch_size`` that each commit
on their own (outside a transaction) — so a pass cut short leaves every memory with either its
old scores or its new ones. Each write is conditional on the stored values still being the ones
read: an event that adjusted a memory meanwhile (another process) keeps its own, exact for that
memory, and the next ``maintain`` recomputes it.

At 1M memories and 5M links the two Cypher aggregations this replaces expanded every link twice
per pass in the row runtime (~70-95 s a ``maintain``); the columns take 1M rows over Bolt and
about 0.2 GB in the client (see docs/neo4j.md).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .session import Neo4jSession

#: A page of ``$lim`` memories of ``$ns`` after id ``$after`` (in the ``(ns, id)`` index's
#: order), each as ``[internal id, id, last read, base_key, key, degree, number of links]``,
#: with their outgoing links' other ends (internal ids, only to find their rows here), weights
#: and reinforced times, as one record of lists: the driver's cost is per record (~30 µs), so
#: a million one-memory records cost more than the server's whole scan. ``id()`` is deprecated
#: in Neo4j 5 in favour of ``elementId()``, whose strings would be ~45 bytes a link end here; it
#: is only read within one pass, never stored. An aggregation without grouping keys returns its
#: one row for a memory without links too (empty lists).
READ_SCORE_PAGE = (
    "MATCH (n:Memory) WHERE n.ns = $ns AND n.id > $after WITH n ORDER BY n.ns, n.id LIMIT $lim "
    "CALL (n) { MATCH (n)-[e:LINK]->(m) "
    "RETURN collect(id(m)) AS m, collect(coalesce(e.weight, 0.0)) AS w, "
    "collect(coalesce(e.reinforced_us, 0)) AS t } "
    "RETURN collect([id(n), n.id, n.last_read_us, n.base_key, n.key, n.degree, size(m)]) AS n, "
    "collect(m) AS m, collect(w) AS w, collect(t) AS t"
)

#: The changed rows, each only where its stored values are still those read (``$b0, $k0,
#: $d0``; null where there was none).
WRITE_KEYS = (
    "UNWIND range(0, size($id) - 1) AS i MATCH (n:Memory {ns: $ns, id: $id[i]}) "
    "WHERE (n.base_key = $b0[i] OR (n.base_key IS NULL AND $b0[i] IS NULL)) "
    "AND (n.key = $k0[i] OR (n.key IS NULL AND $k0[i] IS NULL)) "
    "AND (n.degree = $d0[i] OR (n.degree IS NULL AND $d0[i] IS NULL)) "
    "SET n.base_key = $b[i], n.key = $k[i], n.degree = $d[i]"
)


@dataclass
class ScoreColumns:
    """A namespace's memories (rows ``0..n-1``) and links (``src`` and ``dst`` are rows)."""

    node: Any  # internal ids (int64), one per row
    ids: list[str]
    read_us: Any  # int64 (0 where none)
    has_read: Any  # bool
    old_base: list[float | None]
    old_key: list[float | None]
    old_degree: list[int | None]
    src: Any
    dst: Any
    weight: Any
    reinforced_us: Any


def read_score_columns(store: Neo4jSession, namespace: str) -> ScoreColumns | None:
    """The namespace's scoring columns in one read statement (in the thread's transaction if
    it has one), or ``None`` when it has no memories."""

    page = max(1, store._batch)

    def work(tx: Any) -> ScoreColumns | None:
        node, reads = array("q"), array("q")
        has_read = array("b")
        ids: list[str] = []
        b0: list[float | None] = []
        k0: list[float | None] = []
        d0: list[int | None] = []
        counts, dst, weight, at = array("q"), array("q"), array("d"), array("q")
        after = ""
        while True:
            rec = tx.run(READ_SCORE_PAGE, {"ns": namespace, "after": after, "lim": page}).single()
            rows = rec["n"] if rec else []
            for o, i, r, b, k, d, c in rows:
                node.append(o)
                ids.append(i)
                has_read.append(r is not None)
                reads.append(0 if r is None else r)
                b0.append(b)
                k0.append(k)
                d0.append(d)
                counts.append(c)
            for m, w, t in zip(rec["m"], rec["w"], rec["t"], strict=True) if rows else ():
                dst.extend(m)
                weight.extend(w)
                at.extend(t)
            if len(rows) < page:
                break
            after = rows[-1][1]
        if not ids:
            return None
        return _columns(node, ids, reads, has_read, b0, k0, d0, counts, dst, weight, at)

    if store._local.tx is not None:
        return store._unit(work, write=False)
    # Its own session outside a transaction: no deprecation notice for ``id()`` in the log
    # every maintain.
    with store._errors(), store._session(**_NO_DEPRECATIONS) as session:
        return session.execute_read(work)  # type: ignore[no-any-return]


def _no_deprecations() -> dict[str, Any]:
    """Session options that turn the server's deprecation notifications off (the option's
    name changed in driver 5.22)."""
    import neo4j

    if hasattr(neo4j, "NotificationDisabledClassification"):
        return {"notifications_disabled_classifications": ["DEPRECATION"]}
    return {"notifications_disabled_categories": ["DEPRECATION"]}


_NO_DEPRECATIONS = _no_deprecations()


def _columns(
    node: array[int],
    ids: list[str],
    reads: array[int],
    has_read: array[int],
    b0: list[float | None],
    k0: list[float | None],
    d0: list[int | None],
    counts: array[int],
    dst: array[int],
    weight: array[float],
    at: array[int],
) -> ScoreColumns:
    """The arrays as numpy, each link's other end turned from an internal id into a row (a
    link to a memory outside the namespace, which Ebb never makes, is left out)."""
    import numpy as np

    nodes = np.frombuffer(node, np.int64)
    order = np.argsort(nodes, kind="stable")
    ends = np.frombuffer(dst, np.int64)
    found = np.searchsorted(nodes, ends, sorter=order)
    found = np.minimum(found, len(nodes) - 1)
    rows = order[found]
    inside = nodes[rows] == ends
    src = np.repeat(np.arange(len(nodes), dtype=np.int64), np.frombuffer(counts, np.int64))
    return ScoreColumns(
        node=nodes,
        ids=ids,
        read_us=np.frombuffer(reads, np.int64),
        has_read=np.frombuffer(has_read, np.int8).astype(np.bool_),
        old_base=b0,
        old_key=k0,
        old_degree=d0,
        src=src[inside],
        dst=rows[inside],
        weight=np.frombuffer(weight, np.float64)[inside],
        reinforced_us=np.frombuffer(at, np.int64)[inside],
    )


def changed_rows(cols: ScoreColumns, base: Any, key: Any, degree: Any) -> Any:
    """The rows whose stored ``(base_key, key, degree)`` differ from the computed ones (float
    noise is not a change: :func:`ebb_core.scoring.keys_changed`, as on Kùzu)."""
    import numpy as np

    b_old = np.array([np.nan if v is None else v for v in cols.old_base], np.float64)
    k_old = np.array([np.nan if v is None else v for v in cols.old_key], np.float64)
    d_old = np.array([-1 if v is None else v for v in cols.old_degree], np.int64)
    from .. import scoring

    return np.flatnonzero(scoring.keys_changed(base, b_old, key, k_old, degree, d_old))


def write_changed_keys(
    store: Neo4jSession, namespace: str, cols: ScoreColumns, base: Any, key: Any, degree: Any
) -> int:
    """Write the changed rows' scores in batches of ``batch_size`` (each its own transaction
    outside one); return how many rows differed."""
    rows = changed_rows(cols, base, key, degree).tolist()
    step = max(1, store._batch)
    for lo in range(0, len(rows), step):
        part = rows[lo : lo + step]
        params = {
            "ns": namespace,
            "id": [cols.ids[r] for r in part],
            "b0": [cols.old_base[r] for r in part],
            "k0": [cols.old_key[r] for r in part],
            "d0": [cols.old_degree[r] for r in part],
            "b": base[part].tolist(),
            "k": key[part].tolist(),
            "d": degree[part].tolist(),
        }
        store._unit(_writer(params))
    return len(rows)


def _writer(params: dict[str, Any]) -> Any:
    def work(tx: Any) -> None:
        tx.run(WRITE_KEYS, params).consume()

    return work
