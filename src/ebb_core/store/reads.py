"""Optional capability: indexed reads, each with a default built on the core's reads.

A backend overrides these to answer from its indexes without reading whole namespaces (recall
must not score the whole graph); the defaults are the contract's reference answers.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Sequence

from ..model import Edge, Node, Tier
from .core import StoreCore
from .values import SUPERSEDES, Counts, Link, Match


class IndexedReads(StoreCore):
    """Reads a backend answers from its indexes (capability ``"reads"``)."""

    @abstractmethod
    def existing_ids(self, namespace: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` exist (cheap for many ids: imports check thousands at once)."""

    @abstractmethod
    def get_edge(self, namespace: str, src: str, dst: str, kind: str) -> Edge | None:
        """The ``src -kind-> dst`` edge, if it exists."""

    @abstractmethod
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

    @abstractmethod
    def top_by_key(
        self, namespace: str, max_tier: Tier, limit: int, kinds: Sequence[str] = ()
    ) -> list[Node]:
        """The most active nodes (highest stored key) with tier ≤ ``max_tier``."""

    @abstractmethod
    def review_queue(self, namespace: str, limit: int) -> list[Node]:
        """Frozen nodes, oldest queued first."""

    @abstractmethod
    def scan_edges(self, namespace: str, batch: int = 5000) -> Iterator[list[Edge]]:
        """Every edge of the namespace, in ``(src, dst, kind)`` order, in batches."""

    @abstractmethod
    def counts(self, namespace: str) -> Counts: ...

    @abstractmethod
    def last_audit_seq(self, namespace: str) -> int:
        """The highest ``seq`` recorded for the namespace (0 when none)."""
