"""The reads of :class:`~ebb_core.grouping.GroupedStore`: each shows what is held, or writes it
first when it reads a whole namespace (see :mod:`ebb_core.grouping`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from .grouping_base import Forward, GroupedBase, _node
from .model import Node, Tier
from .store import GraphStore, Incident, Match


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

    def matches_for(self, namespace: str, ids: Sequence[str]) -> list[Match]:
        with self._lock:
            return self._over_matches(namespace, self.inner.matches_for(namespace, ids))

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

    # -- reads that what is held cannot change: the backend's answer as it is ------------------
    existing_ids = Forward(GraphStore.existing_ids)
    get_edge = Forward(GraphStore.get_edge)
    strongest_links = Forward(GraphStore.strongest_links)  # links: reinforcement holds none
    superseded_by = Forward(GraphStore.superseded_by)
    prepare_recall = Forward(GraphStore.prepare_recall)  # a hint: nothing held changes it
    namespaces = Forward(GraphStore.namespaces)
    counts = Forward(GraphStore.counts)  # reinforcement changes no tier or count
    audit_log = Forward(GraphStore.audit_log)
    last_audit_seq = Forward(GraphStore.last_audit_seq)
    vectors_of = Forward(GraphStore.vectors_of)
    without_vectors = Forward(GraphStore.without_vectors)
    vector_count = Forward(GraphStore.vector_count)
    ensure_vectors = Forward(GraphStore.ensure_vectors)  # schema, outside transactions
    prepare_vectors = Forward(GraphStore.prepare_vectors)  # schema, outside transactions
    scan_edges = Forward(GraphStore.scan_edges)

    # -- whole-namespace reads and passes: what is held is written first ----------------------
    scan_nodes = Forward(GraphStore.scan_nodes, before="flush")
    reference_key = Forward(GraphStore.reference_key, before="flush")
    tier_moves = Forward(GraphStore.tier_moves, before="flush")
    tier_move_columns = Forward(GraphStore.tier_move_columns, before="flush")
