"""The reads of :class:`~ebb_core.grouping.GroupedStore`: each shows what is held, or writes it
first when it reads a whole namespace (see :mod:`ebb_core.grouping`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from .grouping_base import GroupedBase, _node
from .model import AuditEntry, Edge, Node, Tier
from .store import Counts, Incident, Link, Match, TierMove, TierMoveColumns


class GroupedReads(GroupedBase):
    """What a grouped store reads: the backend's answer with what is held applied."""

    # -- reads: what is held shows --------------------------------------------------------------
    def _over_nodes(self, namespace: str, nodes: Mapping[str, Node]) -> dict[str, Node]:
        held = self._held.get(namespace)
        if not held:
            return dict(nodes)
        return {i: _node(n, held[i]) if i in held else n for i, n in nodes.items()}

    def _over_matches(self, namespace: str, found: list[Match]) -> list[Match]:
        held = self._held.get(namespace)
        if not held:
            return found
        out = []
        for m in found:
            adj = held.get(m.id)
            if adj is not None and adj.key_delta:
                m = Match(m.id, m.score, m.key + adj.key_delta, m.pinned, m.tier, m.kind)
            out.append(m)
        return out

    def get_nodes(self, namespace: str, ids: Sequence[str]) -> dict[str, Node]:
        with self._lock:
            return self._over_nodes(namespace, self.inner.get_nodes(namespace, ids))

    def existing_ids(self, namespace: str, ids: Sequence[str]) -> set[str]:
        return self.inner.existing_ids(namespace, ids)

    def incident(self, namespace: str, ids: Sequence[str]) -> list[Incident]:
        with self._lock:
            found = self.inner.incident(namespace, ids)
            held = self._held.get(namespace)
            if not held:
                return found
            return [
                replace(inc, other=_node(inc.other, held[inc.other.id]))
                if inc.other.id in held
                else inc
                for inc in found
            ]

    def get_edge(self, namespace: str, src: str, dst: str, kind: str) -> Edge | None:
        return self.inner.get_edge(namespace, src, dst, kind)

    def strongest_links(
        self,
        namespace: str,
        ids: Sequence[str],
        now_us: int,
        half_life_us: float,
        min_decayed: float,
        limit: int,
    ) -> list[Link]:
        return self.inner.strongest_links(namespace, ids, now_us, half_life_us, min_decayed, limit)

    def matches_for(self, namespace: str, ids: Sequence[str]) -> list[Match]:
        with self._lock:
            return self._over_matches(namespace, self.inner.matches_for(namespace, ids))

    def superseded_by(
        self, namespace: str, ids: Sequence[str] | None = None
    ) -> dict[str, list[str]]:
        return self.inner.superseded_by(namespace, ids)

    def text_candidates(
        self, namespace: str, query: str, max_tier: Tier, pool: int, kinds: Sequence[str] = ()
    ) -> list[tuple[Node, float]]:
        with self._lock:
            found = self.inner.text_candidates(namespace, query, max_tier, pool, kinds)
            held = self._held.get(namespace)
            if not held:
                return found
            return [(_node(n, held[n.id]) if n.id in held else n, s) for n, s in found]

    def text_matches(
        self, namespace: str, query: str, max_tier: Tier, pool: int, kinds: Sequence[str] = ()
    ) -> list[Match]:
        with self._lock:
            found = self.inner.text_matches(namespace, query, max_tier, pool, kinds)
            return self._over_matches(namespace, found)

    def vector_matches(
        self, namespace: str, vector: Any, pool: int, max_tier: Tier, kinds: Sequence[str] = ()
    ) -> list[tuple[Match, float]]:
        with self._lock:
            found = self.inner.vector_matches(namespace, vector, pool, max_tier, kinds)
            if not self._held.get(namespace):
                return found
            over = self._over_matches(namespace, [m for m, _ in found])
            return [(m, sim) for m, (_, sim) in zip(over, found, strict=True)]

    def top_by_key(
        self, namespace: str, max_tier: Tier, limit: int, kinds: Sequence[str] = ()
    ) -> list[Node]:
        with self._lock:
            held = self._held.get(namespace)
            if not held:
                return self.inner.top_by_key(namespace, max_tier, limit, kinds)
            # A held change can lift a memory past at most len(held) others: ask for that
            # many more, and add the held ones themselves, with their held keys.
            found = self._over_nodes(
                namespace,
                {
                    n.id: n
                    for n in self.inner.top_by_key(namespace, max_tier, limit + len(held), kinds)
                },
            )
            for i, n in self._over_nodes(
                namespace, self.inner.get_nodes(namespace, list(held))
            ).items():
                if n.tier <= max_tier:
                    found[i] = n
            chosen = [n for n in found.values() if not kinds or n.kind in kinds]
            chosen.sort(key=lambda n: (-n.key, n.id))
            return chosen[:limit]

    def review_queue(self, namespace: str, limit: int) -> list[Node]:
        with self._lock:
            nodes = self.inner.review_queue(namespace, limit)
            over = self._over_nodes(namespace, {n.id: n for n in nodes})
            return [over[n.id] for n in nodes]

    def namespaces(self) -> list[str]:
        return self.inner.namespaces()

    def counts(self, namespace: str) -> Counts:
        return self.inner.counts(namespace)  # reinforcement changes no tier or count

    def audit_log(
        self,
        namespace: str,
        limit: int,
        node_id: str | None = None,
        action: str | None = None,
        after_seq: int | None = None,
    ) -> list[AuditEntry]:
        return self.inner.audit_log(namespace, limit, node_id, action, after_seq)

    def last_audit_seq(self, namespace: str) -> int:
        return self.inner.last_audit_seq(namespace)

    def vectors_of(self, namespace: str, ids: Sequence[str]) -> dict[str, Any]:
        return self.inner.vectors_of(namespace, ids)

    def without_vectors(
        self, namespace: str, after: str = "", limit: int = 256
    ) -> list[tuple[str, str]]:
        return self.inner.without_vectors(namespace, after, limit)

    def vector_count(self, namespace: str) -> int:
        return self.inner.vector_count(namespace)

    def ensure_vectors(self, dim: int) -> None:
        self.inner.ensure_vectors(dim)  # outside transactions (schema); touches no memory

    # -- whole-namespace reads and passes: what is held is written first --------------------------
    def scan_nodes(self, namespace: str, batch: int = 5000) -> Iterator[list[Node]]:
        self.flush()
        return self.inner.scan_nodes(namespace, batch)

    def scan_edges(self, namespace: str, batch: int = 5000) -> Iterator[list[Edge]]:
        return self.inner.scan_edges(namespace, batch)

    def reference_key(self, namespace: str, quantile: float) -> tuple[float, int]:
        self.flush()
        return self.inner.reference_key(namespace, quantile)

    def tier_moves(
        self,
        namespace: str,
        reference: float,
        hot_ratio: float,
        warm_ratio: float,
        cold_ratio: float,
    ) -> list[TierMove]:
        self.flush()
        return self.inner.tier_moves(namespace, reference, hot_ratio, warm_ratio, cold_ratio)

    # Defined on GraphStore (as a default), so __getattr__ would never pass it on: without
    # it a grouped Brain would take the default per-row path, not the backend's own.
    def tier_move_columns(
        self,
        namespace: str,
        reference: float,
        hot_ratio: float,
        warm_ratio: float,
        cold_ratio: float,
    ) -> TierMoveColumns:
        self.flush()
        return self.inner.tier_move_columns(namespace, reference, hot_ratio, warm_ratio, cold_ratio)
