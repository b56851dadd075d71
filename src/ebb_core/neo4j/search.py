"""Reading the Neo4j graph for recall: links, incident edges, full-text hits, rankings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..model import Node, Tier
from ..records import node_from_row
from ..store import SUPERSEDES, Incident, Link, Match, RecallHint
from .hubs import HUB_OK, LINK_ROWS, SUP_OF_S, SUP_OK
from .queries import (
    _DECAY,
    _EDGE,
    _KINDS,
    _NODE,
    _NODE_FIELDS,
    _OTHER,
    TEXT_INDEX,
    _projection,
    _to_edge,
    lucene_query,
)
from .session import Neo4jSession


def _top_links(keep: str, least: str, limit: str, sort: str) -> str:
    """After :data:`~.hubs.LINK_ROWS` (rows ``e, m``; ``s`` and the variables ``keep`` in
    scope): the first ``limit`` of the links with a decayed weight at ``$now`` of at least
    ``least`` whose other end is not frozen, ordered by decayed weight and then ``sort``, as
    rows ``f = [s, m, e, dw, w, t, keep…]`` (``w``, ``t``: the link's weight and reinforced
    time). A recall's server time goes on property reads: each is read once here, and the
    other end's tier (in decayed order) and the tie-breaks (ids, kind) only for the links
    that can make the first ``limit``: when there are more, the ``limit``-th strongest live
    link's decayed weight is found first and the links below it are left unread (a second
    hop's relays have ~700 links at 100k, of which it keeps 160). The answer is the plain
    top ``limit``'s: every link in it is at least as strong as that one. (scoring.decay: a
    link reinforced after ``$now``, clock skew, counts as reinforced at ``$now``.)"""
    return (
        f"WITH s, {keep}m, e, e.weight AS w, e.reinforced_us AS t "
        f"WITH s, {keep}m, e, w, t, w * {_DECAY.format(t='t')} AS dw WHERE dw >= {least} "
        f"WITH collect([s, m, e, dw, w, t, {keep}null]) AS found "
        f"OPTIONAL CALL (found) {{ WITH found WHERE size(found) > {limit} "
        "UNWIND found AS f WITH f ORDER BY f[3] DESC WITH f WHERE f[1].tier < 4 "
        f"WITH f LIMIT {limit} RETURN min(f[3]) AS last }} "
        # (a CASE: the planner would read every tier before comparing the weights)
        "UNWIND found AS f WITH f, CASE WHEN last IS NULL OR f[3] >= last THEN f[1].tier END "
        "AS tier WHERE tier < 4 "
        f"WITH f, tier, f[1].id AS mid, f[2].kind AS kind ORDER BY f[3] DESC, {sort} "
        f"LIMIT {limit} "
    )


#: The strongest links of ``s`` (decayed weight at least ``$lmin``, other end not frozen, at
#: most ``$per``, in ``strongest_links``'s order), each with what ``matches_for`` answers for
#: its other end, as one list ``links`` (a subquery's body; ``s`` and ``hub`` in scope: a hub
#: whose list holds is read from its list, see :mod:`.hubs`).
_LINKS_OF_S = (
    LINK_ROWS
    + _top_links("", "$lmin", "$per", "mid, kind")
    + "WITH f, f[1] AS m, tier, mid, kind RETURN collect([mid, kind, startNode(f[2]) = f[0], "
    "f[4], f[5], f[3], m.key, m.pinned, tier, m.kind]) AS links"
)

#: ``s``'s links and superseders (``links``, ``sup``), ``s`` in scope.
_AHEAD_OF_S = (
    f"WITH s, {HUB_OK} AS hub CALL (s, hub) {{ {_LINKS_OF_S} }} CALL (s, hub) {{ {SUP_OF_S} }} "
)


_S_NODE = _projection("s", _NODE_FIELDS)


class _Reads:
    """What a recall fetched ahead (:meth:`Neo4jSearch.prepare_recall`), valid until the
    transaction writes or ends: memories' strongest links (each memory's first ``cap[id]`` at
    or above ``hint.link_min``, all of them when ``complete``), nodes, what ``matches_for``
    and ``superseded_by`` answer."""

    def __init__(self, namespace: str, hint: RecallHint) -> None:
        self.ns, self.hint = namespace, hint
        self.links: dict[str, list[tuple[float, Link]]] = {}
        self.cap: dict[str, int] = {}
        self.complete: set[str] = set()
        self.nodes: dict[str, Node] = {}
        self.matches: dict[str, Match] = {}
        self.sup: dict[str, list[str]] = {}

    def add_links(self, node_id: str, rows: Sequence[Sequence[Any]], cap: int) -> None:
        found = []
        for m, kind, out, w, t, dw, key, pinned, tier, mkind in rows:
            found.append((float(dw), Link(node_id, m, kind, bool(out), float(w), int(t))))
            self.keep_match(m, key, pinned, tier, mkind)
        self.links[node_id], self.cap[node_id] = found, cap
        if len(found) < cap:
            self.complete.add(node_id)

    def keep_match(self, m: str, key: Any, pinned: Any, tier: Any, kind: Any) -> None:
        """Keep the ``matches_for`` answer of ``m`` (a link's other end, read with the link:
        spreading admits it next) unless one is kept already."""
        if m not in self.matches:
            self.matches[m] = Match(m, 0.0, float(key or 0.0), bool(pinned), int(tier), kind)

    def add_node(self, row: Mapping[str, Any], sup: Sequence[str]) -> None:
        node = node_from_row(row)
        self.nodes[node.id] = node
        self.sup[node.id] = list(sup)

    def answers(self, now_us: int, half_life_us: float, min_decayed: float) -> bool:
        h = self.hint
        return now_us == h.now_us and half_life_us == h.half_life_us and min_decayed >= h.link_min

    def covers(self, node_id: str, limit: int) -> bool:
        return node_id in self.links and (node_id in self.complete or self.cap[node_id] >= limit)


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
        ids = list(dict.fromkeys(ids))
        reads = self._ahead(namespace)
        if reads is not None and reads.answers(now_us, half_life_us, min_decayed):
            # Each memory's own strongest `limit` hold the strongest `limit` of them all.
            # The others' strongest `limit` together (the plain query) hold the rest.
            missing = [i for i in ids if not reads.covers(i, limit)]
            found = [f for i in ids if i not in missing for f in reads.links[i]]
            found = [f for f in found if f[0] >= min_decayed]
            if missing:
                found += self._strongest(
                    namespace, missing, now_us, half_life_us, min_decayed, limit, reads
                )
            found.sort(key=lambda f: (-f[0], f[1].other_id, f[1].node_id, f[1].kind))
            return [link for _, link in found[:limit]]
        got = self._strongest(namespace, ids, now_us, half_life_us, min_decayed, limit)
        return [link for _, link in got]

    def _strongest(
        self,
        namespace: str,
        ids: Sequence[str],
        now_us: int,
        half_life_us: float,
        min_decayed: float,
        limit: int,
        reads: _Reads | None = None,
    ) -> list[tuple[float, Link]]:
        """:meth:`strongest_links` by one query, each link with its decayed weight; with
        ``reads``, the other ends' ``matches_for`` answers are kept there too
        (:meth:`_Reads.keep_match`)."""
        rows = self._read(
            # Decay first (relationship properties only), then the other end's tier: a hub's
            # stale edges never cost a node read.
            # a hub's links from its list (see .hubs)
            f"UNWIND $ids AS i MATCH (s:Memory {{ns: $ns, id: i}}) WITH i, s, {HUB_OK} AS hub "
            + LINK_ROWS
            + _top_links("i, ", "$min", "$lim", "mid, f[6], kind")
            + "WITH f, f[1] AS o, tier, mid, kind "
            # one record of rows: the driver's cost is per record (a second hop reads 160)
            "RETURN collect([f[6], mid, kind, startNode(f[2]) = f[0], f[4], f[5], f[3], o.key, "
            "o.pinned, tier, o.kind]) AS rows",
            {
                "ns": namespace,
                "ids": ids,
                "now": int(now_us),
                "h": float(half_life_us),
                "min": float(min_decayed),
                "lim": int(limit),
            },
        )
        found = []
        for s, m, kind, out, w, t, dw, key, pinned, tier, mkind in rows[0]["rows"] if rows else []:
            found.append((float(dw), Link(s, m, kind, bool(out), float(w), int(t))))
            if reads is not None:
                reads.keep_match(m, key, pinned, tier, mkind)
        return found

    # -- reads fetched ahead for a recall --------------------------------------------------------
    def prepare_recall(self, namespace: str, hint: RecallHint) -> None:
        """Recall's next :meth:`text_matches` (in this transaction) also fetches, in the same
        statement, the settings ``hint.meta_keys``, every match's node and what
        ``superseded_by`` says of it, and the strongest links of the best ``hint.linked``
        matches with their other ends' ``matches_for`` and ``superseded_by`` answers. The
        reads that follow (spreading's links, replacements, the winners' nodes and live links)
        are answered from that until the transaction writes; what is not there (a second
        hop's relays) is read the same way, by memory. The answers are those of the plain
        queries: each memory keeps its own strongest links, of which the strongest of several
        memories are the strongest overall."""
        if self._local.tx is not None:
            self._local.hint = (namespace, hint)

    def _ahead(self, namespace: str) -> _Reads | None:
        reads: _Reads | None = self._local.reads
        return reads if reads is not None and reads.ns == namespace else None

    def _read_ahead(self, reads: _Reads, ids: Sequence[str], per: int) -> None:
        """The nodes, replacements and strongest links of ``ids``, into ``reads``."""
        h = reads.hint
        rows = self._read(
            "UNWIND $ids AS i MATCH (s:Memory {ns: $ns, id: i}) "
            + _AHEAD_OF_S
            + f"RETURN {_S_NODE} AS n, sup, links",
            {
                "ns": reads.ns,
                "ids": list(ids),
                "now": int(h.now_us),
                "h": float(h.half_life_us),
                "lmin": float(h.link_min),
                "per": int(per),
                "sk": SUPERSEDES,
            },
        )
        for i in ids:  # a memory that does not exist has no links
            reads.links.setdefault(i, [])
            reads.complete.add(i)
        for r in rows:
            reads.add_node(r["n"], r["sup"])
            reads.complete.discard(r["n"]["id"])
            reads.add_links(r["n"]["id"], r["links"], per)

    def get_nodes(self, namespace: str, ids: Sequence[str]) -> dict[str, Node]:
        if not ids:
            return {}
        ids = list(dict.fromkeys(ids))
        reads = self._ahead(namespace)
        known = reads.nodes if reads is not None else {}
        rest = [i for i in ids if i not in known]
        found: dict[str, Node] = {}
        if rest and reads is not None:  # recall's winners: their live links come next
            self._read_ahead(reads, rest, reads.hint.links_per_node)
        elif rest:
            rows = self._read(
                f"UNWIND $ids AS i MATCH (n:Memory {{ns: $ns, id: i}}) RETURN {_NODE} AS n",
                {"ns": namespace, "ids": rest},
            )
            found = {r["n"]["id"]: node_from_row(r["n"]) for r in rows}
        return {i: known[i] if i in known else found[i] for i in ids if i in known or i in found}

    def matches_for(self, namespace: str, ids: Sequence[str]) -> list[Match]:
        ids = list(dict.fromkeys(ids))
        reads = self._ahead(namespace)
        known = reads.matches if reads is not None else {}
        nodes = self.get_nodes(namespace, [i for i in ids if i not in known])
        out = []
        for i in ids:
            if i in known:
                out.append(known[i])
            elif i in nodes:
                n = nodes[i]
                out.append(Match(n.id, 0.0, n.key, n.pinned, int(n.tier), n.kind))
        return out

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
        hint, self._local.hint = self._local.hint, None
        reads = None
        if hint is not None and hint[0] == namespace and self._local.tx is not None:
            reads = _Reads(namespace, hint[1])
        light = "n {.id, .key, .pinned, .tier}"
        rows = self._text(namespace, query, max_tier, want, pool, kinds, light, reads)
        if reads is not None:
            self._keep_ahead(reads, rows)
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

    def _keep_ahead(self, reads: _Reads, rows: Sequence[Any]) -> None:
        """What :meth:`_text` fetched ahead, kept for the rest of this transaction."""
        for r in rows:
            if r["ahead"] is not None:
                links, sup, node = r["ahead"]
                reads.add_node(node, sup)
                reads.add_links(node["id"], links, reads.hint.links_per_node)
            elif r["sup"] is not None:
                reads.sup[r["n"]["id"]] = list(r["sup"])
        meta = self._local.meta
        if meta is not None and rows:
            got = dict(rows[0]["meta"])
            for key in reads.hint.meta_keys:
                meta[key] = got.get(key)
        self._local.reads = reads

    def superseded_by(
        self, namespace: str, ids: Sequence[str] | None = None
    ) -> dict[str, list[str]]:
        params: dict[str, Any] = {"ns": namespace, "k": SUPERSEDES}
        out: dict[str, list[str]] = {}
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
            ids = list(dict.fromkeys(ids))
            reads = self._ahead(namespace)
            if reads is not None:
                # Answered ahead (by recall's text matches), or read now with the memories'
                # nodes and links: recall's winners come from these, and then need no read.
                rest = [i for i in ids if i not in reads.sup]
                if rest:
                    self._read_ahead(reads, rest, reads.hint.links_per_node)
                out = {i: reads.sup[i] for i in ids if reads.sup.get(i)}
                return {i: out[i] for i in sorted(out)}
            params.update(ids=ids, sk=SUPERSEDES)
            query = (  # a hub's from its list (see .hubs)
                f"UNWIND $ids AS i MATCH (s:Memory {{ns: $ns, id: i}}) WITH s, {SUP_OK} AS hub "
                f"CALL (s, hub) {{ {SUP_OF_S} }} UNWIND sup AS a "
                "RETURN s.id AS old, a AS new ORDER BY old, new"
            )
        for r in self._read(query, params):
            out.setdefault(r["old"], []).append(r["new"])
        return {i: out[i] for i in sorted(out)}

    def _text(
        self,
        namespace: str,
        query: str,
        max_tier: Tier,
        want: int,
        pool: int,
        kinds: Sequence[str],
        projection: str,
        reads: _Reads | None = None,
    ) -> list[Any]:
        """The namespace's ``want`` best full-text hits for ``query`` (ties by id), filtered by
        tier and kind, best ``pool`` first.

        The index is shared by every namespace and its query cannot filter by property, so its
        limit is widened until it holds ``want`` of this namespace's memories or has no more
        matches: what one namespace finds never depends on how large the others are.

        With ``reads`` (a recall's hint), each row also brings what ``superseded_by`` says of
        its memory (``sup``), the first ``hint.linked`` rows their strongest links
        (``links``), and the first row the settings ``hint.meta_keys`` (``meta``).
        """
        lucene = lucene_query(query)
        if not lucene:
            return []
        params: dict[str, Any] = {
            "q": lucene,
            "want": int(want),
            "pool": int(pool),
            "ns": namespace,
            "mt": int(max_tier),
            "kinds": list(kinds),
        }
        extra, meta, more = _ahead_clauses(reads, params) if reads is not None else ("", "", "")
        keep = ", meta: meta, ahead: ahead, sup: sup" if more else ""
        top, size = want, None
        while True:
            rows = self._read(
                f"CALL db.index.fulltext.queryNodes('{TEXT_INDEX}', $q, {{limit: $top}}) "
                "YIELD node, score "
                "WITH node, score ORDER BY score DESC, node.id "
                "WITH count(*) AS seen, "
                "collect(CASE WHEN node.ns = $ns THEN {n: node, score: score} END) AS ours "
                + meta
                + "WITH seen, ours, [h IN ours[..$want] WHERE h.n.tier <= $mt AND "
                "(size($kinds) = 0 OR h.n.kind IN $kinds)][..$pool] AS hits"
                + (", meta " if meta else " ")
                # One row at least (a null sentinel past the end) so `seen` and `found` always
                # come back.
                + "UNWIND range(0, size(hits)) AS idx "
                "WITH seen, size(ours) AS found, idx, hits[idx].n AS n, hits[idx].score AS score"
                + (", meta " if meta else " ")
                + extra
                + f"WITH seen, found, {projection} AS n, score{more} "
                # one record of rows: the driver's cost is per record
                + f"RETURN collect({{seen: seen, found: found, n: n, score: score{keep}}}) AS r",
                {**params, "top": int(top)},
            )[0]["r"]
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


def _ahead_clauses(reads: _Reads, params: dict[str, Any]) -> tuple[str, str, str]:
    """What ``Neo4jSearch._text`` adds to its statement for a recall's hint (``reads``): the
    clauses bringing the first ``linked`` rows' node, replacements and links (``extra``; only
    those rows: a hub's replacements and links cost thousands of link reads, so the other
    candidates' wait until asked for), the settings (``meta``) and what it returns more
    (``more``); their parameters go into ``params``."""
    h = reads.hint
    params.update(
        now=int(h.now_us),
        h=float(h.half_life_us),
        lmin=float(h.link_min),
        per=int(h.links_per_node),
        linked=int(h.linked),
        sk=SUPERSEDES,
        mk=list(h.meta_keys),
    )
    meta = (
        "CALL () { MATCH (mt:Meta) WHERE mt.key IN $mk "
        "RETURN collect([mt.key, mt.value]) AS meta } "
    )
    extra = (
        "WITH seen, found, idx, n, score, meta, n AS s "
        "OPTIONAL CALL (s, idx) { WITH s, idx WHERE idx < $linked "
        + _AHEAD_OF_S
        + f"RETURN [links, sup, {_S_NODE}] AS ahead }} "
        # the other rows' superseders (supersession asks for the best 30 candidates')
        "OPTIONAL CALL (s, idx) { WITH s, idx WHERE idx >= $linked AND s IS NOT NULL "
        f"WITH s, {SUP_OK} AS hub CALL (s, hub) {{ {SUP_OF_S} }} RETURN sup }} "
    )
    return extra, meta, ", CASE idx WHEN 0 THEN meta END AS meta, ahead, sup"
