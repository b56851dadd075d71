"""Tier maintenance of a :class:`~ebb_core.engine.Brain`: ``maintain`` and its dry run.

:class:`MaintenanceMixin` holds ``Brain.maintain`` (re-score exactly, then re-tier) and
``Brain.maintain_preview``, with the replacement policy (``_policy_moves``) and the columnar
write of the moves and their audit entries (``_write_moves``).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import closing
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

from .brain_base import BrainBase
from .clock import from_us
from .model import MaintainReport, Tier
from .store import TierMove, TierMoveColumns

_MOVES_PER_WRITE = 1_000_000
"""Tier moves written (with their audit entries) at a time, in one transaction. Each write costs
Kùzu about as much as the rows it matches in the Memory table: 100k at a time, the first
maintain at 1M memories (809k moves) sent 9 statements per target tier and 9 audit COPYs."""


_MoveColumns = tuple[dict[str, str], list[str], list[tuple[str, int]], dict[str, Sequence[Any]]]
"""What ``MaintenanceMixin._move_columns`` makes of a batch of moves."""

_T = TypeVar("_T")
_R = TypeVar("_R")


def _prepared(parts: Sequence[_T], prepare: Callable[[_T], _R]) -> Generator[tuple[_T, _R]]:
    """Each of ``parts`` with ``prepare(part)``, the next part's made in a thread while the
    caller writes this one: the Python work of a batch of tier moves (reasons, audit columns,
    ~0.1 s per 100k moves) then runs beside the store's write of the previous batch, which
    releases the GIL (Kùzu's statements, a server's round trips). One part: no thread."""
    if len(parts) <= 1:
        for part in parts:
            yield part, prepare(part)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ebb-maintain") as pool:
        ahead = pool.submit(prepare, parts[0])
        for i, part in enumerate(parts):
            ready = ahead.result()
            if i + 1 < len(parts):
                ahead = pool.submit(prepare, parts[i + 1])
            yield part, ready


class MaintenanceMixin(BrainBase):
    """``Brain.maintain`` and ``Brain.maintain_preview`` (on :class:`BrainBase`)."""

    # -- maintenance -----------------------------------------------------------------------------
    def maintain(self, *, spreading: str = "default") -> MaintainReport:
        """Re-score every memory exactly, then re-tier: archive what decayed, queue what was
        replaced.

        Nodes below the cold cut-off move to cold; they are frozen and queued for review (nothing
        is deleted) only when they were superseded, or everything they link to was
        (``Config.decay_alone_freezes`` queues every memory below the cut-off, as before).
        Every move is audited. ``spreading`` other than ``"default"`` asks the backend for
        another spreading pass (e.g. ``"pagerank"`` on Neo4j with GDS).
        """
        cfg, store = self._s.config, self._s.store
        with self._s.lock:
            now_us = self._now_us()
            with self._tx():
                rebased = self._maybe_rebase(now_us)
            # Keys are derived state: the store recomputes them in its own transaction(s)
            # (batched on a server), so a large graph never needs one giant transaction.
            scanned = store.recompute_keys(
                self._ns,
                self._s.epoch_us,
                cfg.half_life_us,
                cfg.read_bonus,
                cfg.spread,
                spreading=spreading,
            )
            if store.supports_vectors:  # new vectors wait unindexed (see kuzu/vectors)
                store.index_vectors(self._ns)
            return self._retier(now_us, scanned, rebased, spreading)

    def maintain_preview(self) -> list[TierMove]:
        """What :meth:`maintain` would move between tiers now, changing nothing (a dry run).

        Computed from the stored scores against a freshly computed tier reference. Scores are
        exact for every memory an event touched; a neighbour's one-hop share arrives at
        ``maintain``, so the real pass can differ at the margins. Tier ratios do not change
        as time passes by itself (every term decays alike): what moves is what was used, or
        not, relative to the rest.
        """
        cfg, store = self._s.config, self._s.store
        with self._tx():
            reference, _ = store.reference_key(self._ns, cfg.reference_quantile)
            moves = store.tier_move_columns(
                self._ns, reference, cfg.hot_ratio, cfg.warm_ratio, cfg.cold_ratio
            )
            # the same replacement policy maintain applies (decay alone archives, never queues)
            return self._policy_moves(moves, self._now_us())[0].moves()

    def _retier(self, now_us: int, scanned: int, rebased: bool, spreading: str) -> MaintainReport:
        cfg, store = self._s.config, self._s.store
        per_tx = store.tier_moves_per_transaction
        moved: dict[str, int] = {}
        queued: list[str] = []
        now = from_us(now_us)
        with self._tx():
            self._refresh_reference()
            mx = self._ref_key()
            # As columns: a first maintain can move most of a million memories, and one
            # object (and audit entry) per move took seconds and gigabytes.
            moves = store.tier_move_columns(
                self._ns, mx, cfg.hot_ratio, cfg.warm_ratio, cfg.cold_ratio
            )
            moves, why_moved = self._policy_moves(moves, now_us)
            if per_tx is None:  # every move in this one transaction
                first = store.last_audit_seq(self._ns) + 1 if len(moves) else 0
                for lo in range(0, len(moves), _MOVES_PER_WRITE):
                    part = moves.take(slice(lo, lo + _MOVES_PER_WRITE))
                    self._write_moves(part, why_moved, now, first + lo, moved, queued)
                return self._report(now_us, scanned, rebased, spreading, moved, queued)
        if per_tx is not None:
            # Bounded transactions (a server's memory limit): each batch's moves and their
            # audit entries commit together, so a failure or a crash between batches leaves
            # every memory moved and audited or untouched; the next maintain finishes.
            step = max(1, per_tx)
            parts = [moves.take(slice(lo, lo + step)) for lo in range(0, len(moves), step)]
            prepare = partial(self._move_columns, why_moved=why_moved)
            with closing(_prepared(parts, prepare)) as batches:
                for part, columns in batches:
                    with self._tx():
                        first = store.last_audit_seq(self._ns) + 1
                        self._store_moves(part, columns, now, first, moved, queued)
        with self._tx():
            return self._report(now_us, scanned, rebased, spreading, moved, queued)

    def _report(
        self,
        now_us: int,
        scanned: int,
        rebased: bool,
        spreading: str,
        moved: dict[str, int],
        queued: list[str],
    ) -> MaintainReport:
        if queued:
            self._refresh_reference()  # the frozen no longer count
        return MaintainReport(
            namespace=self._ns,
            scanned=scanned,
            moved=moved,
            newly_queued=queued,
            reference_activation=self._activation(self._ref_key(), now_us),
            rebased=rebased,
            spreading=spreading,
        )

    def _write_moves(
        self,
        moves: TierMoveColumns,
        why_moved: Mapping[str, str],
        now: datetime,
        first: int,
        moved: dict[str, int],
        queued: list[str],
    ) -> None:
        """Store ``moves`` (one write per target tier on Kùzu) and their audit entries (one
        columnar write, numbered from ``first``), counting them in ``moved`` and the newly
        frozen in ``queued``."""
        if len(moves):
            self._store_moves(
                moves, self._move_columns(moves, why_moved), now, first, moved, queued
            )

    def _store_moves(
        self,
        moves: TierMoveColumns,
        columns: _MoveColumns,
        now: datetime,
        first: int,
        moved: dict[str, int],
        queued: list[str],
    ) -> None:
        """Write ``moves`` with what :meth:`_move_columns` made of them (see _write_moves)."""
        review, freezing, pairs, audit = columns
        if not len(moves):
            return
        queued.extend(freezing)
        for key, count in pairs:
            moved[key] = moved.get(key, 0) + count
        self._s.store.set_tiers(self._ns, moves, review, now)
        self._s.store.append_audit_columns(self._ns, first, now, audit)

    def _move_columns(self, moves: TierMoveColumns, why_moved: Mapping[str, str]) -> _MoveColumns:
        """What the write of ``moves`` needs, computed from them alone (no store, so a thread
        can make the next batch's while this one is written): the review reasons of those
        moving to frozen, their ids, the move counts per (from, to) in the order the moves
        first meet them, and the audit columns."""
        import numpy as np

        cfg, frozen = self._s.config, int(Tier.FROZEN)
        ids, src, dst = moves.ids, moves.from_tier, moves.to_tier
        review: dict[str, str] = {}
        freezing_ids: list[str] = []
        freezing = np.flatnonzero(dst == frozen)
        for i, r in zip(ids[freezing].tolist(), moves.ratio[freezing].tolist(), strict=True):
            review[i] = (
                f"decayed: activation is {r:.2%} of the most active memory, "
                f"below the {cfg.cold_ratio:.0%} cut-off"
                + (f"; {why_moved[i]}" if i in why_moved else "")
            )
            freezing_ids.append(i)
        # counted per (from, to), keys in the order the moves first meet them
        pairs, at, counts = np.unique(src * 8 + dst, return_index=True, return_counts=True)
        pair_counts = []
        for k in np.argsort(at, kind="stable").tolist():
            p = int(pairs[k])
            pair_counts.append((f"{Tier(p // 8).label}->{Tier(p % 8).label}", int(counts[k])))
        action = np.where(dst == frozen, "freeze", np.where(dst > src, "demote", "promote"))
        node_ids = ids.tolist()
        ratios = moves.ratio.tolist()
        if why_moved:
            reasons = [
                why_moved.get(i) or f"activation ratio {r:.4f}"
                for i, r in zip(node_ids, ratios, strict=True)
            ]
        else:
            reasons = [f"activation ratio {r:.4f}" for r in ratios]
        audit: dict[str, Sequence[Any]] = {
            "action": action.tolist(),
            "node_id": node_ids,
            "from_tier": src.tolist(),
            "to_tier": dst.tolist(),
            "actor": ["maintain"] * len(moves),
            "reason": reasons,
        }
        return review, freezing_ids, pair_counts, audit

    def _policy_moves(
        self, moves: TierMoveColumns, now_us: int
    ) -> tuple[TierMoveColumns, dict[str, str]]:
        """``moves`` as the replacement policy has them, and the reason for each move it changed
        or added.

        - A superseded, unpinned memory is kept out of hot (at least warm): it was replaced.
        - Decay alone archives but never queues for deletion: a memory whose activation fell
          below the cold cut-off is frozen only when it was superseded, or when every memory
          it is linked to was (the support of a replaced decision); otherwise it stays cold,
          findable when nothing fresher matches. ``Config.decay_alone_freezes`` restores
          freezing by decay alone.

        Only the moves the policy can change are looked at one by one: those to frozen, and
        those of superseded memories; a memory's links are read only when something is
        superseded at all (otherwise none can have only superseded links).
        """
        import numpy as np

        cfg, store = self._s.config, self._s.store
        replaced = store.superseded_by(self._ns, None)
        frozen, cold = int(Tier.FROZEN), int(Tier.COLD)
        to = moves.to_tier.copy()
        freezing = (
            np.flatnonzero(to == frozen) if not cfg.decay_alone_freezes else np.zeros(0, np.int64)
        )
        if not replaced and not len(freezing):
            return moves, {}
        ids = moves.ids
        keep = np.ones(len(moves), np.bool_)
        reasons: dict[str, str] = {}
        frozen_ids = ids[freezing].tolist()
        context: dict[str, list[str]] = {}
        if replaced and frozen_ids:
            unreplaced = [i for i in frozen_ids if i not in replaced]
            for link in store.strongest_links(
                self._ns, unreplaced, now_us, cfg.half_life_us, 0.0, 16 * len(unreplaced)
            ):
                context.setdefault(link.node_id, []).append(link.other_id)
        for k, i in zip(freezing.tolist(), frozen_ids, strict=True):
            if i in replaced:
                reasons[i] = f"superseded by {', '.join(replaced[i])}"
                continue
            linked = context.get(i, [])
            if linked and all(x in replaced for x in linked):
                reasons[i] = (
                    f"everything it links to was superseded ({', '.join(sorted(set(linked))[:3])})"
                )
            elif moves.from_tier[k] != cold:  # archived, not queued for deletion
                to[k] = cold
            else:
                keep[k] = False
        extra: list[str] = []
        if replaced:
            extra = self._replaced_leave_hot(moves, to, keep, replaced, set(frozen_ids), reasons)
        out = TierMoveColumns(ids, moves.from_tier, to, moves.ratio).take(keep)
        return _with_hot_to_warm(out, extra), reasons

    def _replaced_leave_hot(
        self,
        moves: TierMoveColumns,
        to: Any,
        keep: Any,
        replaced: Mapping[str, list[str]],
        handled: set[str],
        reasons: dict[str, str],
    ) -> list[str]:
        """What was replaced leaves hot and never rises: ``to`` and ``keep`` are changed in
        place for the superseded memories among ``moves`` (those not ``handled`` already), and
        the ids of the superseded hot memories with no move yet are returned."""
        nodes = self._s.store.get_nodes(self._ns, list(replaced))
        planned: set[str] = set()
        for k, i in enumerate(moves.ids.tolist()):
            if i not in replaced:
                continue
            planned.add(i)
            n = nodes.get(i)
            if i in handled or n is None or n.pinned or to[k] > moves.from_tier[k]:
                continue  # handled above, not replaced, or a demotion
            if moves.from_tier[k] == int(Tier.HOT):  # what was replaced leaves hot
                to[k] = int(Tier.WARM)
                reasons[i] = f"superseded by {', '.join(replaced[i])}"
            else:  # and never rises
                keep[k] = False
        extra = []
        for i, n in nodes.items():
            if i not in planned and n.tier == Tier.HOT and not n.pinned:
                extra.append(i)
                reasons[i] = f"superseded by {', '.join(replaced[i])}"
        return extra


def _with_hot_to_warm(out: TierMoveColumns, extra: list[str]) -> TierMoveColumns:
    """``out`` with a hot-to-warm move added for each id of ``extra``."""
    if not extra:
        return out
    import numpy as np

    more = np.empty(len(extra), dtype=object)
    more[:] = extra
    return TierMoveColumns(
        np.concatenate([out.ids, more]),
        np.concatenate([out.from_tier, np.full(len(extra), int(Tier.HOT), np.int64)]),
        np.concatenate([out.to_tier, np.full(len(extra), int(Tier.WARM), np.int64)]),
        np.concatenate([out.ratio, np.ones(len(extra))]),
    )
