"""``maintain``'s re-score on Neo4j, incremental: only what changed since the last one.

A memory's key depends on its own links and read clock (its base and degree) and on its
neighbours' bases and degrees (one damped hop, :mod:`ebb_core.scoring`); it does not depend on
the time of the pass (keys are relative to the scoring epoch). So after a pass, a key can only
change when something happens to the memory or to a neighbour. Every write that changes a
base or a degree (a new memory, a changed one, a new or re-written link, a deleted neighbour)
labels the memories it touches ``:Rescore`` (:data:`MARK`), keeping the share each passed to
its neighbours at the last pass (``share0``: its base over its degree, read before the write
changes them; a memory already labelled keeps the one it has). The next pass takes the
labelled set ``D`` (removing labels and shares in the same statement), recomputes the base,
degree and key of each memory of ``D`` from its links, written only where they differ from
the stored ones beyond float noise (:func:`ebb_core.scoring.keys_changed`'s tolerance), as
the full pass writes; then each neighbour outside ``D`` (whose links and other neighbours are
as they were, else a write would have labelled it) gains ``spread`` times the change of each
labelled neighbour's share, once per link: its key as a full pass computes it, without
reading its other links (a hub among ``D`` has thousands of neighbours, and their links are
most of the namespace's). An eager-spreading push labels the memory it pushes to, which is
then recomputed from its links. Memories neither in ``D`` nor next to it keep stored scores
that a full pass would leave as they are.

The pass is incremental only when the namespace's watermark (``Meta`` ``rescored:<ns>``)
holds the same scoring parameters (epoch, half-life, read bonus, spread) as this pass: the
first pass, a rebase, a changed configuration, an import (which drops the watermark: its
memories carry no labels) or a pass cut short (the watermark is dropped before the labels are
taken and set again after the writes) each make the next one full (:mod:`.columns`). So is a
labelled set larger than a quarter of the namespace (and than :data:`SMALL`), where reading
everything costs less.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .queries import IN_NS

if TYPE_CHECKING:
    from .session import Neo4jSession

#: The label of a memory whose base or degree may have changed since the last re-score.
MARK = "Rescore"


def share_then(var: str) -> str:
    """The share ``var`` passed to each neighbour at the last re-score: kept in ``share0`` by
    the write that labels it first (its base and degree are still the pass's then)."""
    return (
        f"CASE WHEN {var}:{MARK} THEN {var}.share0 WHEN {var}.degree > 0 "
        f"THEN {var}.base_key / {var}.degree ELSE 0.0 END"
    )


def mark(*names: str) -> str:
    """``SET`` clauses that label the memories bound to ``names``, keeping each one's share
    at the last re-score (before anything changes its base or degree)."""
    keep = ", ".join(f"{v}.share0 = {share_then(v)}" for v in names)
    return f"SET {keep} SET " + ", ".join(f"{v}:{MARK}" for v in names)


MARK_N = mark("n")
MARK_ENDS = mark("a", "b")

WATERMARK = "rescored:"
#: A labelled set this small is always re-scored incrementally, whatever the namespace's size.
SMALL = 10_000

# |new - old| <= 1e-300 + 1e-12 |old| : numpy.isclose(new, old, rtol=1e-12, atol=1e-300)
_SAME = "({old} IS NOT NULL AND abs({new} - {old}) <= 1e-300 + 1e-12 * abs({old}))"
_TERM = "coalesce(e.weight, 0.0) * 2.0 ^ (toFloat(coalesce(e.reinforced_us, 0) - $epoch) / $h)"

#: Base and degree of the memories ``$ids`` from their links (both directions apart, so a
#: link counts at both its ends as in ``scoring.graph_keys``) and read clock.
BASES = (
    "UNWIND $ids AS i MATCH (n:Memory {ns: $ns, id: i}) "
    "CALL (n) { OPTIONAL MATCH (n)-[e:LINK]->(m:Memory) WHERE m.ns = $ns "
    f"RETURN sum({_TERM}) AS bo, count(e) AS do }} "
    "CALL (n) { OPTIONAL MATCH (n)<-[e:LINK]-(m:Memory) WHERE m.ns = $ns "
    f"RETURN sum({_TERM}) AS bi, count(e) AS di }} "
    "WITH n, do + di AS degree, bo + bi + CASE WHEN n.last_read_us IS NULL THEN 0.0 "
    "ELSE $rb * 2.0 ^ (toFloat(n.last_read_us - $epoch) / $h) END AS base "
    f"WHERE NOT {_SAME.format(new='base', old='n.base_key')} "
    "OR n.degree IS NULL OR n.degree <> degree "
    "SET n.base_key = base, n.degree = degree"
)

#: Keys of the memories ``$ids`` from their base and their neighbours' stored bases/degrees.
_SHARE = "CASE WHEN m.degree > 0 THEN coalesce(m.base_key, 0.0) / m.degree ELSE 0.0 END"
KEYS = (
    "UNWIND $ids AS i MATCH (n:Memory {ns: $ns, id: i}) "
    "CALL (n) { OPTIONAL MATCH (n)-[:LINK]->(m:Memory) WHERE m.ns = $ns "
    f"RETURN sum({_SHARE}) AS so }} "
    "CALL (n) { OPTIONAL MATCH (n)<-[:LINK]-(m:Memory) WHERE m.ns = $ns "
    f"RETURN sum({_SHARE}) AS si }} "
    "WITH n, coalesce(n.base_key, 0.0) + $spread * (so + si) AS key "
    f"WHERE NOT {_SAME.format(new='key', old='n.key')} SET n.key = key"
)

#: The neighbours outside the labelled set (``$marked``: a map of its ids) of the memories
#: ``$ids``: each key gains ``spread`` times the change of the share of each labelled
#: neighbour (now against ``$s0``, at the last pass), once per link. Their links and their
#: other neighbours are as they were at the last pass (a change would have labelled them).
NEAR = (
    "UNWIND range(0, size($ids) - 1) AS j MATCH (d:Memory {ns: $ns, id: $ids[j]}) "
    "WITH d, CASE WHEN d.degree > 0 THEN coalesce(d.base_key, 0.0) / d.degree ELSE 0.0 END "
    "- $s0[j] AS change WHERE change <> 0.0 "
    "MATCH (d)-[:LINK]-(m:Memory) WHERE m.ns = $ns AND $marked[m.id] IS NULL "
    "WITH m, sum(change) AS total SET m.key = m.key + $spread * total"
)


def signature(epoch_us: int, half_life_us: float, read_bonus: float, spread: float) -> str:
    """The watermark's value: what stored keys were computed with."""
    return json.dumps([int(epoch_us), float(half_life_us), float(read_bonus), float(spread)])


def stored_signature(get_meta: Callable[[str], str | None]) -> str | None:
    """The watermark of keys computed with the store's own epoch and scoring settings (the
    ``Meta`` ``epoch_us`` and ``scoring`` a Brain keeps), or ``None`` without them: what an
    import into empty namespaces, which computes its keys from the file with those, stores."""
    from ..scoring import US_PER_DAY

    epoch, settings = get_meta("epoch_us"), get_meta("scoring")
    if epoch is None or settings is None:
        return None
    cfg = json.loads(settings)
    h = cfg["half_life_days"] * US_PER_DAY
    return signature(int(epoch), h, cfg["read_bonus"], cfg["spread"])


def drop_watermarks(store: Neo4jSession, tx: Any, namespaces: Sequence[str]) -> None:
    """Forget that ``namespaces`` were re-scored (their next pass is full), in ``tx``."""
    keys = [WATERMARK + ns for ns in namespaces]
    tx.run("UNWIND $k AS k MATCH (m:Meta {key: k}) DELETE m", {"k": keys}).consume()
    cache = store._local.meta
    if cache is not None:
        cache.update(dict.fromkeys(keys))


def take_marked(
    store: Neo4jSession, namespace: str, at_most: int
) -> tuple[list[str], list[float]] | None:
    """Drop the namespace's watermark, then take its labelled memories (labels and kept
    shares removed): their ids and shares at the last pass, or ``None`` when there are more
    than ``at_most`` (the labels are removed then too, in batches)."""

    def first(tx: Any) -> int:
        drop_watermarks(store, tx, [namespace])
        row = tx.run(
            f"MATCH (n:{MARK}) WHERE n.ns = $ns RETURN count(n) AS c", {"ns": namespace}
        ).single()
        return int(row["c"])

    if store._unit(first) <= at_most:

        def take(tx: Any) -> tuple[list[str], list[float]]:
            row = tx.run(
                f"MATCH (n:{MARK}) WHERE n.ns = $ns WITH n, coalesce(n.share0, 0.0) AS s "
                f"REMOVE n:{MARK}, n.share0 RETURN collect(n.id) AS i, collect(s) AS s",
                {"ns": namespace},
            ).single()
            return (list(row["i"]), list(row["s"])) if row else ([], [])

        return store._unit(take)
    clear_marks(store, namespace)
    return None


def clear_marks(store: Neo4jSession, namespace: str) -> None:
    """Remove every ``:Rescore`` label of the namespace (a full pass recomputes them all)."""
    p = {"ns": namespace, "batch": store._batch}
    body = f"MATCH (n:{MARK}) WHERE n.ns = $ns CALL (n) {{ REMOVE n:{MARK}, n.share0 }}"
    if store._local.tx is None:
        store._autocommit(body + " IN TRANSACTIONS OF $batch ROWS", p)
    else:
        store._run(body, p)


def rescore(
    store: Neo4jSession,
    namespace: str,
    marked: tuple[list[str], list[float]],
    epoch_us: int,
    half_life_us: float,
    read_bonus: float,
    spread: float,
) -> None:
    """Re-score the labelled memories ``marked`` (ids, shares at the last pass): their bases,
    degrees and keys from their links, then their other neighbours' keys by the change of
    the labelled ones' shares; ``batch_size`` memories a statement (each its own transaction
    outside one)."""
    ids, shares = marked
    p: dict[str, Any] = {
        "ns": namespace,
        "epoch": int(epoch_us),
        "h": float(half_life_us),
        "rb": float(read_bonus),
        "spread": float(spread),
    }
    step = max(1, store._batch)
    for lo in range(0, len(ids), step):
        store._run(BASES, {**p, "ids": ids[lo : lo + step]})
    for lo in range(0, len(ids), step):
        store._run(KEYS, {**p, "ids": ids[lo : lo + step]})
    inside = dict.fromkeys(ids, True)
    for lo in range(0, len(ids), step):
        part = {"ids": ids[lo : lo + step], "s0": shares[lo : lo + step], "marked": inside}
        store._run(NEAR, {**p, **part})


def count(store: Neo4jSession, namespace: str) -> int:
    """How many memories the namespace has."""
    rows = store._read(f"MATCH (n:Memory) WHERE {IN_NS} RETURN count(n) AS c", {"ns": namespace})
    return int(rows[0]["c"])
