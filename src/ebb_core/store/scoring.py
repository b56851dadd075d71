"""Optional capability: server-side scoring passes over a whole namespace.

The rules (decay, keys, the tier reference and the tier cut) are :mod:`ebb_core.scoring`'s; a
backend runs them where its data is (Kùzu in numpy over its columns, Neo4j in Cypher).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..model import Tier
from .values import TierMove, TierMoveColumns
from .writes import FastWrites


class ServerScoring(FastWrites):
    """Whole-namespace scoring passes (capability ``"scoring"``); the defaults may use the
    indexed reads and the fast writes."""

    @abstractmethod
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

    @abstractmethod
    def scale_keys(self, factor: float) -> None:
        """Multiply every key in every namespace by ``factor`` (moving the scoring epoch)."""

    @abstractmethod
    def reference_key(self, namespace: str, quantile: float) -> tuple[float, int]:
        """The key tiers are normalised against, and its 0-based rank.

        Among non-pinned nodes below the frozen tier, ranked by key (highest first), the node at
        rank ``floor(count × (1 − quantile))``: the most active one in a small graph, the top
        percentile in a large one. ``(0.0, 0)`` when there is none.
        """

    @abstractmethod
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
