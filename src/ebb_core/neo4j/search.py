"""Reading the Neo4j graph for recall: links, incident edges, full-text hits, rankings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..model import Node, Tier
from ..records import node_from_row
from ..store import SUPERSEDES, Incident, Link, Match
from .queries import _DECAY, _EDGE, _KINDS, _NODE, _OTHER, TEXT_INDEX, _to_edge, lucene_query
from .session import Neo4jSession


class Neo4jSearch(Neo4jSession):
    """The finding half of ``Neo4jStore``."""

    def strongest_links(
        self,
        namespace: str,
        ids: Sequence[str],
        now_us: int,
        half_life_us: float,
        min_decayed: float,
        limit: int,
    ) -> list[Link]:
        if not ids:
            return []
        rows = self._read(
            # Decay first (relationship properties only), then the other end's tier: a hub's
            # stale edges never cost a node read. scoring.decay: a link reinforced after $now
            # (clock skew) counts as reinforced at $now.
            "UNWIND $ids AS i MATCH (s:Memory {ns: $ns, id: i})-[e:LINK]-(m) "
            f"WITH s, m, e, e.weight * {_DECAY.format(t='e.reinforced_us')} AS dw "
            "WHERE dw >= $min WITH s, m, e, dw WHERE m.tier < 4 "
            "RETURN s.id AS s, m.id AS m, e.kind AS kind, startNode(e) = s AS out, "
            "e.weight AS w, e.reinforced_us AS t ORDER BY dw DESC, m, s, kind LIMIT $lim",
            {
                "ns": namespace,
                "ids": list(dict.fromkeys(ids)),
                "now": int(now_us),
                "h": float(half_life_us),
                "min": float(min_decayed),
                "lim": int(limit),
            },
        )
        return [
            Link(r["s"], r["m"], r["kind"], bool(r["out"]), float(r["w"]), int(r["t"]))
            for r in rows
        ]

    def incident(self, namespace: str, ids: Sequence[str]) -> list[Incident]:
        if not ids:
            return []
        rows = self._read(
            "UNWIND $ids AS i MATCH (a:Memory {ns: $ns, id: i})-[e:LINK]-(m:Memory) "
            f"WITH i, startNode(e) = a AS out, e, m "
            f"RETURN i, out, {_EDGE} AS e, {_OTHER} AS m ORDER BY i, out DESC, m.id, e.kind",
            {"ns": namespace, "ids": list(dict.fromkeys(ids))},
        )
        # Grouped per id in the order asked, outgoing edges first (as the Kùzu store does).
        by_id: dict[str, list[Incident]] = {i: [] for i in dict.fromkeys(ids)}
        for r in rows:
            i, other = r["i"], node_from_row(r["m"])
            src, dst = (i, other.id) if r["out"] else (other.id, i)
            by_id[i].append(Incident(i, _to_edge(namespace, src, dst, r["e"]), other))
        return [inc for group in by_id.values() for inc in group]

    # -- finding -------------------------------------------------------------------------------
    def text_candidates(
        self, namespace: str, query: str, max_tier: Tier, pool: int, kinds: Sequence[str] = ()
    ) -> list[tuple[Node, float]]:
        rows = self._text(namespace, query, max_tier, pool, pool, kinds, _NODE)
        return [(node_from_row(r["n"]), float(r["score"])) for r in rows]

    def text_matches(
        self, namespace: str, query: str, max_tier: Tier, pool: int, kinds: Sequence[str] = ()
    ) -> list[Match]:
        # As in Kùzu: the namespace's own top max(4 × pool, 200), filtered, then the best ``pool``.
        want = max(4 * pool, 200)
        rows = self._text(
            namespace, query, max_tier, want, pool, kinds, "n {.id, .key, .pinned, .tier}"
        )
        return [
            Match(
                r["n"]["id"],
                float(r["score"]),
                float(r["n"]["key"] or 0.0),
                r["n"]["pinned"],
                int(r["n"]["tier"]),
            )
            for r in rows
        ]

    def superseded_by(
        self, namespace: str, ids: Sequence[str] | None = None
    ) -> dict[str, list[str]]:
        params: dict[str, Any] = {"ns": namespace, "k": SUPERSEDES}
        if ids is None:
            # Every supersession of the namespace: seek the links of that kind in the
            # ebb_link_kind index (the planner, knowing nothing of how rare they are, would
            # otherwise seek the namespace's memories and expand every link: 2.3 s at 100k).
            query = (
                "MATCH (a:Memory)-[e:LINK]->(b:Memory) USING INDEX SEEK e:LINK(kind) "
                "WHERE e.kind = $k AND a.ns = $ns AND a.tier < 4 "
                "RETURN b.id AS old, a.id AS new ORDER BY old, new"
            )
        else:
            params["ids"] = list(dict.fromkeys(ids))
            query = (
                "UNWIND $ids AS i MATCH (b:Memory {ns: $ns, id: i})<-[e:LINK {kind: $k}]-"
                "(a:Memory) WHERE a.tier < 4 RETURN b.id AS old, a.id AS new ORDER BY old, new"
            )
        out: dict[str, list[str]] = {}
        for r in self._read(query, params):
            out.setdefault(r["old"], []).append(r["new"])
        return out

    def _text(
        self,
        namespace: str,
        query: str,
        max_tier: Tier,
        want: int,
        pool: int,
        kinds: Sequence[str],
        projection: str,
    ) -> list[Any]:
        """The namespace's ``want`` best full-text hits for ``query`` (ties by id), filtered by
        tier and kind, best ``pool`` first.

        The index is shared by every namespace and its query cannot filter by property, so its
        limit is widened until it holds ``want`` of this namespace's memories or has no more
        matches: what one namespace finds never depends on how large the others are.
        """
        lucene = lucene_query(query)
        if not lucene:
            return []
        top, size = want, None
        while True:
            rows = self._read(
                f"CALL db.index.fulltext.queryNodes('{TEXT_INDEX}', $q, {{limit: $top}}) "
                "YIELD node, score "
                "WITH node, score ORDER BY score DESC, node.id "
                "WITH count(*) AS seen, "
                "collect(CASE WHEN node.ns = $ns THEN {n: node, score: score} END) AS ours "
                # One row at least (a null sentinel) so `seen` and `found` always come back.
                "UNWIND [h IN ours[..$want] WHERE h.n.tier <= $mt AND "
                "(size($kinds) = 0 OR h.n.kind IN $kinds)][..$pool] + [null] AS h "
                "WITH seen, size(ours) AS found, h.n AS n, h.score AS score "
                f"RETURN seen, found, {projection} AS n, score",
                {
                    "q": lucene,
                    "top": int(top),
                    "want": int(want),
                    "pool": int(pool),
                    "ns": namespace,
                    "mt": int(max_tier),
                    "kinds": list(kinds),
                },
            )
            seen, found = rows[0]["seen"], rows[0]["found"]
            if found >= want or seen < top:
                break
            if size is None:
                size = self._read("MATCH (n:Memory) RETURN count(n) AS c")[0]["c"]
            if top >= size:
                break
            # Widen in proportion to this namespace's share of the hits so far (all at once
            # when it had none), so a crowded query costs two or three index calls, not many.
            top = size if found == 0 else min(size, max(2 * top, top * 2 * want // found))
        return [r for r in rows if r["n"] is not None]

    def top_by_key(
        self, namespace: str, max_tier: Tier, limit: int, kinds: Sequence[str] = ()
    ) -> list[Node]:
        # `n.key IS NOT NULL` lets the planner walk the (ns, key) index in key order.
        rows = self._read(
            "MATCH (n:Memory) WHERE n.ns = $ns AND n.key IS NOT NULL AND n.tier <= $mt AND "
            f"{_KINDS} RETURN {_NODE} AS n ORDER BY n.key DESC, n.id LIMIT $lim",
            {"ns": namespace, "mt": int(max_tier), "lim": int(limit), "kinds": list(kinds)},
        )
        return [node_from_row(r["n"]) for r in rows]

    def review_queue(self, namespace: str, limit: int) -> list[Node]:
        rows = self._read(
            f"MATCH (n:Memory) WHERE n.ns = $ns AND n.tier = 4 RETURN {_NODE} AS n "
            "ORDER BY n.queued_us, n.id LIMIT $lim",
            {"ns": namespace, "lim": int(limit)},
        )
        return [node_from_row(r["n"]) for r in rows]
