"""Optional capability: server-side scoring passes over a whole namespace.

The rules (decay, keys, the tier reference and the tier cut) are :mod:`ebb_core.scoring`'s; a
backend runs them where its data is (Kùzu in numpy over its columns, Neo4j in Cypher).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .. import scoring
from ..model import Tier
from .values import TierMove, TierMoveColumns
from .writes import FastWrites


class ServerScoring(FastWrites):
    """Whole-namespace scoring passes (capability ``"scoring"``); the defaults may use the
    indexed reads and the fast writes."""

    #: How many tier moves (with their audit entries) ``Brain.maintain`` commits per
    #: transaction; ``None`` (the default) writes them all in one. A backend with a
    #: per-transaction memory limit (a server's; Kùzu's buffer pool, which holds a
    #: transaction's new rows) sets it, so a first ``maintain`` over a million memories
    #: commits in bounded batches: each memory's move and its audit entry share a
    #: transaction, so a run cut short leaves each memory moved and audited or untouched,
    #: and the next ``maintain`` finishes the job.
    tier_moves_per_transaction: int | None = None

    def recompute_keys(
        self,
        namespace: str,
        epoch_us: int,
        half_life_us: float,
        read_bonus: float,
        spread: float,
        *,
        spreading: str = "default",
    ) -> int:
        """Recompute every node's ``base_key``, ``key`` and ``degree`` from scratch (see
        ``scoring``), in the store's own transaction(s). Returns the number of nodes scored.

        ``spreading`` names the spreading pass: ``"default"`` is the one damped hop every
        backend has; a backend may offer others (e.g. ``"pagerank"``) and must raise
        ``InvalidInput`` naming the ones it has for any other value.
        """
        import numpy as np

        from ..clock import to_us
        from ..errors import InvalidInput

        if spreading != "default":
            raise InvalidInput(
                f"spreading {spreading!r} is not available on the {self.backend} backend: "
                "choose 'default'",
                field="spreading",
            )
        nodes = [n for batch in self.scan_nodes(namespace) for n in batch]
        at = {n.id: k for k, n in enumerate(nodes)}
        edges = [e for batch in self.scan_edges(namespace) for e in batch]
        read = [n.last_read_at for n in nodes]
        base, key, degree = scoring.graph_keys(
            len(nodes),
            np.array([at[e.src] for e in edges], np.int64),
            np.array([at[e.dst] for e in edges], np.int64),
            np.array([e.weight for e in edges], np.float64),
            np.array([to_us(e.reinforced_at) for e in edges], np.int64),
            np.array([0 if r is None else to_us(r) for r in read], np.int64),
            np.array([r is not None for r in read], np.bool_),
            epoch_us,
            half_life_us,
            read_bonus,
            spread,
        )
        changes = {
            n.id: {"base_key": float(b), "key": float(k), "degree": int(d)}
            for n, b, k, d in zip(nodes, base.tolist(), key.tolist(), degree.tolist(), strict=True)
        }
        with self.transaction():
            self.update_nodes(namespace, changes)
        return len(nodes)

    def scale_keys(self, factor: float) -> None:
        """Multiply every key in every namespace by ``factor`` (moving the scoring epoch)."""
        with self.transaction():
            for ns in self.namespaces():
                changes = {
                    n.id: {"key": n.key * factor, "base_key": n.base_key * factor}
                    for batch in self.scan_nodes(ns)
                    for n in batch
                }
                self.update_nodes(ns, changes)

    def reference_key(self, namespace: str, quantile: float) -> tuple[float, int]:
        """The key tiers are normalised against, and its 0-based rank.

        Among non-pinned nodes below the frozen tier, ranked by key (highest first), the node at
        rank ``floor(count × (1 − quantile))``: the most active one in a small graph, the top
        percentile in a large one. ``(0.0, 0)`` when there is none.
        """
        live = [
            n.key
            for batch in self.scan_nodes(namespace)
            for n in batch
            if not n.pinned and n.tier < Tier.FROZEN
        ]
        return scoring.reference_of(live, quantile)

    def tier_moves(
        self,
        namespace: str,
        reference: float,
        hot_ratio: float,
        warm_ratio: float,
        cold_ratio: float,
    ) -> list[TierMove]:
        """Nodes whose tier differs from what ``key / reference`` says.

        Rules: pinned nodes belong in hot; frozen nodes never leave frozen here (only a human's
        restore does that); otherwise the cut-offs of :func:`ebb_core.scoring.tier_for` apply.
        """
        import numpy as np

        nodes = [n for b in self.scan_nodes(namespace) for n in b if n.tier < Tier.FROZEN]
        keys = np.array([n.key for n in nodes], np.float64)
        ratios = keys / reference if reference > 0 else np.ones(len(nodes))
        pinned = np.array([n.pinned for n in nodes], np.bool_)
        target = scoring.tiers_for(ratios, pinned, hot_ratio, warm_ratio, cold_ratio)
        return [
            TierMove(n.id, n.tier, Tier(int(t)), float(r))
            for n, t, r in zip(nodes, target.tolist(), ratios.tolist(), strict=True)
            if t != n.tier
        ]

    def tier_move_columns(
        self,
        namespace: str,
        reference: float,
        hot_ratio: float,
        warm_ratio: float,
        cold_ratio: float,
    ) -> TierMoveColumns:
        """:meth:`tier_moves` as columns, in id order. The default converts ``tier_moves``'s
        list; a backend that has the columns at hand builds them without one object per move.
        """
        moves = self.tier_moves(namespace, reference, hot_ratio, warm_ratio, cold_ratio)
        return TierMoveColumns.of(sorted(moves, key=lambda m: m.node_id))

    def set_tiers(
        self,
        namespace: str,
        moves: TierMoveColumns,
        review_reasons: Mapping[str, str],
        queued_at: datetime,
    ) -> None:
        """Give each memory of ``moves`` its ``to_tier``. Every one moving to frozen also gets
        ``review_reasons[id]`` as its review reason and ``queued_at`` (it joins the review
        queue). The default is one :meth:`update_nodes` call; a backend may write each target
        tier's memories with one statement.
        """
        changes: dict[str, dict[str, Any]] = {}
        for i, t in zip(moves.ids.tolist(), moves.to_tier.tolist(), strict=True):
            fields: dict[str, Any] = {"tier": Tier(t)}
            if t == Tier.FROZEN:
                fields["review_reason"] = review_reasons[i]
                fields["queued_at"] = queued_at
            changes[i] = fields
        if changes:
            self.update_nodes(namespace, changes)
