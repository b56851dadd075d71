"""Optional capability: indexed reads, each with a default built on the core's reads.

A backend overrides these to answer from its indexes without reading whole namespaces (recall
must not score the whole graph); the defaults are the contract's reference answers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timezone

from ..model import Edge, Node, Tier
from .core import StoreCore
from .values import SUPERSEDES, Counts, Link, Match, RecallHint

_NEVER = datetime.min.replace(tzinfo=timezone.utc)


class IndexedReads(StoreCore):
    """Reads a backend answers from its indexes (capability ``"reads"``)."""

    def existing_ids(self, namespace: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` exist (cheap for many ids: imports check thousands at once)."""
        return set(self.get_nodes(namespace, list(dict.fromkeys(ids))))

    def get_edge(self, namespace: str, src: str, dst: str, kind: str) -> Edge | None:
        """The ``src -kind-> dst`` edge, if it exists."""
        for inc in self.incident(namespace, [src]):
            e = inc.edge
            if e.src == src and e.dst == dst and e.kind == kind:
                return e
        return None

    def strongest_links(
        self,
        namespace: str,
        ids: Sequence[str],
        now_us: int,
        half_life_us: float,
        min_decayed: float,
        limit: int,
    ) -> list[Link]:
        """Edges of ``ids`` whose decayed weight at ``now`` is at least ``min_decayed``,
        strongest first, at most ``limit`` in all."""
        from .. import scoring
        from ..clock import to_us

        found = []
        for inc in self.incident(namespace, list(dict.fromkeys(ids))):
            e = inc.edge
            t = to_us(e.reinforced_at)
            decayed = e.weight * scoring.decay(now_us - t, half_life_us)
            if decayed >= min_decayed and inc.other.tier < Tier.FROZEN:
                link = Link(inc.node_id, inc.other.id, e.kind, e.src == inc.node_id, e.weight, t)
                found.append((decayed, link))
        found.sort(key=lambda f: (-f[0], f[1].other_id, f[1].node_id, f[1].kind))
        return [link for _, link in found[:limit]]

    def matches_for(self, namespace: str, ids: Sequence[str]) -> list[Match]:
        """What recall blends on (score 0) for the memories among ``ids`` that exist: recall
        brings in memories that matched no words (spreading, replacements) this way. Backends
        override it when whole nodes are costly to produce."""
        return [
            Match(n.id, 0.0, n.key, n.pinned, int(n.tier), n.kind)
            for n in self.get_nodes(namespace, ids).values()
        ]

    def superseded_by(
        self, namespace: str, ids: Sequence[str] | None = None
    ) -> dict[str, list[str]]:
        """For each memory among ``ids`` (every memory of the namespace when None) that a live
        (not frozen) memory supersedes (an edge ``new -supersedes-> old``): the ids that
        supersede it, sorted. Memories nobody supersedes are absent.

        Recall asks this for its few best candidates on every call, so a backend answers it
        without scanning the namespace when ``ids`` is given. The default reads incident edges.
        """
        out: dict[str, set[str]] = {}
        if ids is None:
            for batch in self.scan_edges(namespace):
                for e in batch:
                    if e.kind == SUPERSEDES:
                        out.setdefault(e.dst, set()).add(e.src)
            live = self.get_nodes(namespace, sorted({x for v in out.values() for x in v}))
        else:
            incs = [
                inc
                for inc in self.incident(namespace, list(dict.fromkeys(ids)))
                if inc.edge.kind == SUPERSEDES and inc.edge.dst == inc.node_id
            ]
            for inc in incs:
                out.setdefault(inc.node_id, set()).add(inc.other.id)
            live = {inc.other.id: inc.other for inc in incs}
        result = {}
        for old, new in out.items():
            kept = sorted(n for n in new if n in live and live[n].tier < Tier.FROZEN)
            if kept:
                result[old] = kept
        return result

    def prepare_recall(self, namespace: str, hint: RecallHint) -> None:
        """Called by recall inside its transaction just before :meth:`text_matches`, with what
        it will read next (the candidates' links, nodes, replacements, the tier reference). A
        server backend may fetch that with the text matches in one statement and answer the
        following reads of the same transaction from it; the answers must be the same as
        without the call. The default does nothing."""

    def text_matches(
        self, namespace: str, query: str, max_tier: Tier, pool: int, kinds: Sequence[str] = ()
    ) -> list[Match]:
        """Like :meth:`text_candidates` but light: recall blends these and then fetches only
        the nodes it returns. Backends override it when whole nodes are costly to produce; they
        then start from the namespace's best ``max(4 × pool, 200)`` before filtering."""
        return [
            Match(n.id, score, n.key, n.pinned)
            for n, score in self.text_candidates(namespace, query, max_tier, pool, kinds)
        ]

    def top_by_key(
        self, namespace: str, max_tier: Tier, limit: int, kinds: Sequence[str] = ()
    ) -> list[Node]:
        """The most active nodes (highest stored key, then id) with tier ≤ ``max_tier``.

        The default reads the whole namespace: a backend answers it from an index."""
        chosen = [
            n
            for batch in self.scan_nodes(namespace)
            for n in batch
            if n.tier <= max_tier and (not kinds or n.kind in kinds)
        ]
        chosen.sort(key=lambda n: (-n.key, n.id))
        return chosen[:limit]

    def review_queue(self, namespace: str, limit: int) -> list[Node]:
        """Frozen nodes, oldest queued first (then by id)."""
        frozen = [n for b in self.scan_nodes(namespace) for n in b if n.tier == Tier.FROZEN]
        frozen.sort(key=lambda n: (n.queued_at is None, n.queued_at or _NEVER, n.id))
        return frozen[:limit]

    def scan_edges(self, namespace: str, batch: int = 5000) -> Iterator[list[Edge]]:
        """Every edge of the namespace, in ``(src, dst, kind)`` order, in batches.

        The default reads each batch of nodes' outgoing edges."""
        for nodes in self.scan_nodes(namespace, batch):
            ids = [n.id for n in nodes]
            out = [i.edge for i in self.incident(namespace, ids) if i.edge.src == i.node_id]
            out.sort(key=lambda e: (e.src, e.dst, e.kind))
            if out:
                yield out

    def counts(self, namespace: str) -> Counts:
        """How many nodes (by tier, pinned), edges and audit entries the namespace has."""
        by_tier: dict[int, int] = {}
        pinned = 0
        for batch in self.scan_nodes(namespace):
            for n in batch:
                by_tier[int(n.tier)] = by_tier.get(int(n.tier), 0) + 1
                pinned += n.pinned
        edges = sum(len(b) for b in self.scan_edges(namespace))
        audits = len(self.audit_log(namespace, self.last_audit_seq(namespace) + 1))
        return Counts(sum(by_tier.values()), edges, by_tier, pinned, audits)

    def last_audit_seq(self, namespace: str) -> int:
        """The highest ``seq`` recorded for the namespace (0 when none)."""
        newest = self.audit_log(namespace, 1)
        return newest[-1].seq if newest else 0
