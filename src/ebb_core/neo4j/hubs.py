"""Hubs on Neo4j: each memory with more than :data:`HUB_LINKS` links keeps a bounded list of its
strongest ones, and recall reads a hub's links from that list instead of expanding all of them.

Expanding a memory's links costs Neo4j one relationship (and its other end) per link: at 1M
memories the synthetic graph's largest hubs hold tens of thousands, and recall's second hop,
which goes through the memories that received the most (hubs, mostly), spent 300-750 ms in
one statement (docs/neo4j.md). The rule *recall must not score the whole graph* holds per
memory too: a hub's recall reads at most its list.

What a hub keeps (node properties, written only here and by the edge writes of
``Neo4jStore``):

* ``hub_links``: the element ids of its links whose *order key* is above ``hub_min``, at least
  its strongest :data:`HUB_LINKS` when made. The order key of a link is ``log2(weight) +
  reinforced_us / h``: its decayed weight at any time is ``2^(key - now / h)``, so the order
  by key is the order of ``strongest_links`` at every ``now`` (``scoring.decay``; a link
  reinforced after ``now``, clock skew, is the one exception).
* ``hub_min``: every link of the hub whose key is above it is in the list.
* ``hub_h``: the half-life (µs) the keys were taken with; a recall with another half-life
  expands the hub as before.
* ``hub_deg``: the number of links when the list was last known complete. A write that adds or
  removes links by another path (a bulk import, deleting a memory) changes the count: the list
  is then stale and recall expands the hub as before (exact, slow) until it is made again:
  by :meth:`refresh_hubs` (at open when the store predates the lists), at an import's end
  (:meth:`refresh_hubs_of` the memories its links end at), or by the next write touching it.
* ``hub_sup``: the ids of the memories that supersede it (its incoming ``supersedes`` links),
  so ``superseded_by`` need not expand it either.

Where the list answers, recall's answers are those of the full expansion whenever the links it
asks for lie above ``hub_min`` (its strongest ``HUB_LINKS``: a spreading source asks for 160 at
most, the default recall for 100): the bound is hit only by a hub asked for more, or whose
strongest links lead mostly to frozen memories (filtered after the list).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..store import SUPERSEDES
from .session import Neo4jSession

#: A memory with more links than this is a hub: its links are read from its stored list.
HUB_LINKS = 256
#: ``Meta`` key of the lists' format; a store without it has its hubs' lists made at open.
HUB_META = "hub_links"
HUB_VERSION = "1"


def order_key(e: str, h: str) -> str:
    """A link's order key in Cypher (see the module's docstring)."""
    return (
        f"(CASE WHEN {e}.weight > 0 THEN log({e}.weight) / log(2.0) ELSE -1.0e300 END "
        f"+ toFloat({e}.reinforced_us) / {h})"
    )


#: Whether ``s``'s list answers a recall taking keys at half-life ``$h`` (a memory with no
#: list is not counted: its degree costs reads, and most memories a recall meets are no hubs).
HUB_OK = (
    "CASE WHEN s.hub_deg IS NULL THEN false "
    "ELSE coalesce(s.hub_h = $h AND s.hub_deg = COUNT { (s)-[:LINK]-() }, false) END"
)
#: Whether ``s``'s list of superseders is complete (the half-life does not matter).
SUP_OK = (
    "CASE WHEN s.hub_deg IS NULL THEN false "
    "ELSE coalesce(s.hub_deg = COUNT { (s)-[:LINK]-() }, false) END"
)

#: The links of ``s`` as rows ``e, m`` (the link, its other end): every link, or for a hub
#: (``hub``) those of its list. A subquery call; ``s`` and ``hub`` in scope.
LINK_ROWS = (
    "CALL (s, hub) { WITH s WHERE NOT hub MATCH (s)-[e:LINK]-(m) RETURN e, m "
    "UNION ALL WITH s WHERE hub UNWIND s.hub_links AS r "
    "MATCH ()-[e:LINK]->() WHERE elementId(e) = r "
    "WITH s, e WHERE startNode(e) = s OR endNode(e) = s "
    "RETURN e, CASE WHEN startNode(e) = s THEN endNode(e) ELSE startNode(e) END AS m } "
)

#: The live memories that supersede ``s`` (tier below frozen), by id, as ``sup`` (a subquery
#: body; ``s`` and ``hub`` in scope, ``$sk`` the kind).
SUP_OF_S = (
    "CALL (s, hub) { WITH s WHERE NOT hub MATCH (s)<-[:LINK {kind: $sk}]-(a:Memory) RETURN a "
    "UNION ALL WITH s WHERE hub UNWIND s.hub_sup AS x "
    "MATCH (a:Memory {ns: s.ns, id: x}) RETURN a } "
    "WITH a WHERE a.tier < 4 WITH a.id AS a ORDER BY a RETURN collect(a) AS sup"
)

#: Make the list of the hub ``s`` (``deg`` links) at half-life ``$h``: a subquery body.
_MAKE = (
    # ties in key broken as recall breaks them (the other end's id, the kind): the list is
    # recall's first `top`, whichever store made it
    "CALL (s) { MATCH (s)-[e:LINK]-(m) "
    f"WITH e, m, {order_key('e', '$h')} AS k ORDER BY k DESC, m.id, e.kind LIMIT $top "
    "RETURN collect(elementId(e)) AS top, min(k) AS low } "
    "CALL (s) { OPTIONAL MATCH (s)<-[:LINK {kind: $sk}]-(a:Memory) "
    "RETURN collect(a.id) AS sup } "
    "SET s.hub_links = top, s.hub_min = low, s.hub_h = $h, s.hub_deg = deg, s.hub_sup = sup"
)

#: Which memories should have a list and have none that holds (or have one they no longer
#: need): ``_STALE`` of namespace ``$ns`` or of all, ``_STALE_IDS`` among ``$ids`` of ``$ns``.
_STALE_IF = (
    "WITH s, COUNT { (s)-[:LINK]-() } AS deg "
    "WITH s, deg WHERE (deg > $top AND NOT coalesce(s.hub_h = $h AND s.hub_deg = deg, false)) "
    "OR (deg <= $top AND s.hub_deg IS NOT NULL) "
)
_STALE = "MATCH (s:Memory) WHERE ($ns IS NULL OR s.ns = $ns) " + _STALE_IF
_STALE_IDS = "UNWIND $ids AS i MATCH (s:Memory {ns: $ns, id: i}) " + _STALE_IF
#: Make (or drop) the list of each ``s, deg`` row.
_FIX = (
    "CALL (s, deg) { CALL (s, deg) { WITH s, deg WHERE deg > $top " + _MAKE + " } "
    "CALL (s, deg) { WITH s WHERE deg <= $top "
    "REMOVE s.hub_links, s.hub_min, s.hub_h, s.hub_deg, s.hub_sup } }"
)
_REFRESH = _STALE + _FIX

#: After edge writes (``$rows``: ``src, dst, kind``), each end among ``$hubs`` (hubs whose list
#: held before the write) gets the written links whose key is above its ``hub_min``, its
#: superseders, and its new link count; a list grown past twice ``$top`` is cut back to its
#: strongest ``$top``.
_NOTE = (
    "UNWIND $rows AS r "
    "MATCH (a:Memory {ns: $ns, id: r.src})-[e:LINK {kind: r.kind}]->"
    "(b:Memory {ns: $ns, id: r.dst}) "
    "UNWIND [[a, false], [b, true]] AS end WITH end[0] AS s, end[1] AS incoming, e "
    "WHERE s.id IN $hubs AND s.hub_links IS NOT NULL "
    f"WITH s, incoming, e, {order_key('e', 's.hub_h')} AS k "
    "WITH s, collect(CASE WHEN k > s.hub_min THEN elementId(e) END) AS add, "
    "collect(CASE WHEN incoming AND e.kind = $sk THEN startNode(e).id END) AS sup "
    "WITH s, [x IN add WHERE NOT x IN s.hub_links] AS add, "
    "[x IN sup WHERE NOT x IN s.hub_sup] AS sup "
    "SET s.hub_deg = COUNT { (s)-[:LINK]-() } "
    # the lists are rewritten only when they change (a hub's is ~10 KB)
    "FOREACH (x IN CASE WHEN size(add) > 0 THEN [1] ELSE [] END | "
    "SET s.hub_links = s.hub_links + add) "
    "FOREACH (x IN CASE WHEN size(sup) > 0 THEN [1] ELSE [] END | "
    "SET s.hub_sup = s.hub_sup + sup) "
    "WITH s WHERE size(s.hub_links) > 2 * $top "
    "CALL (s) { UNWIND s.hub_links AS r MATCH ()-[e:LINK]->() WHERE elementId(e) = r "
    "WITH e, CASE WHEN startNode(e) = s THEN endNode(e) ELSE startNode(e) END AS m "
    f"WITH e, m, {order_key('e', 's.hub_h')} AS k ORDER BY k DESC, m.id, e.kind LIMIT $top "
    "RETURN collect(elementId(e)) AS top, min(k) AS low } "
    "SET s.hub_links = top, s.hub_min = low"
)


class Neo4jHubs(Neo4jSession):
    """Hubs' link lists (mixed into ``Neo4jStore``)."""

    def _ensure_schema(self) -> None:
        super()._ensure_schema()
        # A store from before the lists (or a fresh bulk load) gets them at its first open.
        if self.get_meta(HUB_META) != HUB_VERSION:
            self.refresh_hubs()
            self.set_meta(HUB_META, HUB_VERSION)

    def refresh_hubs(self, namespace: str | None = None, half_life_us: float | None = None) -> int:
        """Make the link list of every hub (of ``namespace``, or of every namespace) that has
        none, or one that no longer holds (links added or removed by a bulk import or a
        deletion; another half-life); drop those of memories that are no longer hubs.
        Returns how many were made or dropped. Outside a transaction, in batches of their
        own (at 1M memories about a thousand hubs, a million links read)."""
        from ..scoring import Config

        h = float(half_life_us if half_life_us is not None else Config().half_life_us)
        params: dict[str, Any] = {"ns": namespace, "h": h, "top": HUB_LINKS, "sk": SUPERSEDES}
        count = _STALE + "RETURN count(s) AS c"
        found = int(self._read(count, params)[0]["c"])
        if not found:
            return 0
        if self._local.tx is None:
            self._autocommit(_REFRESH + " IN TRANSACTIONS OF 50 ROWS", params)
        else:
            self._run(_REFRESH, params)
        return found

    def refresh_hubs_of(self, ends: Mapping[str, Sequence[str]]) -> None:
        """:meth:`refresh_hubs` for the memories ``ends`` (by namespace) only: those whose
        links an import wrote (a pass over them instead of over every memory's link count),
        each batch of ids in a transaction of its own."""
        for ns, ids in ends.items():
            for lo in range(0, len(ids), 10_000):
                self._unit(_fixing(ns, list(ids[lo : lo + 10_000])))


def hubs_among(
    tx: Any, namespace: str, rows: Sequence[dict[str, Any]]
) -> tuple[list[str], list[str]]:
    """Before edge writes ``rows`` (``src, dst, kind``): the ends that are hubs whose list
    holds, and those that may need a list made after them (past or near the bound without one
    that holds, or with one they may no longer need)."""
    ids = list(dict.fromkeys(x for r in rows for x in (r["src"], r["dst"])))
    found = tx.run(
        "UNWIND $ids AS i MATCH (s:Memory {ns: $ns, id: i}) "
        "WITH s, COUNT { (s)-[:LINK]-() } AS deg "
        "WHERE deg + $n > $top OR s.hub_deg IS NOT NULL "
        "RETURN s.id AS id, coalesce(s.hub_deg = deg, false) AS holds",
        {"ns": namespace, "ids": ids, "n": len(rows), "top": HUB_LINKS},
    )
    holds: list[str] = []
    fix: list[str] = []
    for r in found:
        (holds if r["holds"] else fix).append(r["id"])
    return holds, fix


def note_hub_links(
    tx: Any, namespace: str, rows: Sequence[dict[str, Any]], hubs: tuple[list[str], list[str]]
) -> None:
    """After edge writes ``rows``, in the same transaction: the hubs whose list held (from
    :func:`hubs_among`) keep it holding; the others among them get theirs made."""
    holds, fix = hubs
    if holds:
        slim = [{"src": r["src"], "dst": r["dst"], "kind": r["kind"]} for r in rows]
        params = {"ns": namespace, "hubs": holds, "top": HUB_LINKS, "sk": SUPERSEDES}
        for lo in range(0, len(slim), 10_000):
            tx.run(_NOTE, {**params, "rows": slim[lo : lo + 10_000]}).consume()
    if fix:
        fix_hubs(tx, namespace, fix)


def fix_hubs(tx: Any, namespace: str, ids: Sequence[str]) -> None:
    """Make the lists of the hubs among ``ids`` that have none that holds (a memory that just
    became a hub, one whose list a bulk import or a deletion made stale: its links are read
    once, here), and drop those of memories no longer hubs."""
    from ..scoring import Config

    params = {"ns": namespace, "top": HUB_LINKS, "sk": SUPERSEDES, "h": Config().half_life_us}
    ids = list(dict.fromkeys(ids))
    for lo in range(0, len(ids), 10_000):
        tx.run(_STALE_IDS + _FIX, {**params, "ids": ids[lo : lo + 10_000]}).consume()


def _fixing(namespace: str, ids: list[str]) -> Callable[[Any], None]:
    def work(tx: Any) -> None:
        fix_hubs(tx, namespace, ids)

    return work


def ends_of_links(edges: Mapping[str, Sequence[Any]], hubs: bool = False) -> dict[str, list[str]]:
    """The memories that links ``edges`` (``namespace``, ``src``, ``dst`` columns) end at, by
    namespace; with ``hubs``, only those they end at more than ``HUB_LINKS`` times (of an
    import into empty namespaces, the hubs; a link from a memory to itself counts twice)."""
    if not len(edges.get("src", ())):
        return {}
    import pyarrow as pa
    import pyarrow.compute as pc

    from .bulk import _keys

    ends = pa.concat_arrays(
        [_keys(edges["namespace"], edges["src"]), _keys(edges["namespace"], edges["dst"])]
    )
    counted = pc.value_counts(ends)
    keys = counted.field("values")
    if hubs:
        keys = pc.filter(keys, pc.greater(counted.field("counts"), HUB_LINKS))
    out: dict[str, list[str]] = {}
    for key in keys.to_pylist():
        ns, node_id = key.split("\x1f", 1)
        out.setdefault(ns, []).append(node_id)
    return out
