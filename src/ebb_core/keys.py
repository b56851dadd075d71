"""The incremental scoring of a :class:`~ebb_core.engine.Brain`: keys, the tier reference, events.

:class:`KeysMixin` holds the scoring state the Brain keeps between calls (the epoch and its
rebase, each namespace's tier reference) and the algebra that turns one write event into the
changed keys and tiers (``_plan``, ``_adjust``, ``_new_keys``, ``_promote``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from . import scoring
from .brain_base import BrainBase
from .clock import from_us, to_us
from .model import Edge, Node, Tier
from .store import Adjustment


class KeysMixin(BrainBase):
    """The Brain's incremental scoring (on :class:`BrainBase`)."""

    def _init_scoring(self) -> None:
        """Load the scoring epoch; recompute every key if the scoring parameters changed."""
        s = self._s
        signature = json.dumps(s.config.scoring_signature(), sort_keys=True)
        with self._tx():
            epoch = s.store.get_meta("epoch_us")
            if epoch is None:
                s.epoch_us = self._now_us()
                s.store.set_meta("epoch_us", str(s.epoch_us))
                s.store.set_meta("scoring", signature)
                return
            s.epoch_us = int(epoch)
            if s.store.get_meta("scoring") != signature:
                for ns in s.store.namespaces():
                    self._recompute(ns)
                s.store.set_meta("scoring", signature)

    def _recompute(self, namespace: str) -> int:
        s, cfg = self._s, self._s.config
        n = s.store.recompute_keys(
            namespace, s.epoch_us, cfg.half_life_us, cfg.read_bonus, cfg.spread, spreading="default"
        )
        self._refresh_reference(namespace)
        return n

    def _maybe_rebase(self, now_us: int) -> bool:
        """Move the epoch to ``now`` once keys have grown large, so they can never overflow."""
        s = self._s
        if not scoring.needs_rebase(now_us, s.epoch_us, s.config):
            return False
        factor = scoring.rebase_factor(s.epoch_us, now_us, s.config)
        s.store.scale_keys(factor)
        for ns in s.store.namespaces():
            key, rank = self._reference(ns)
            s.store.set_meta(f"reference:{ns}", f"{key * factor!r} {rank}")
        s.epoch_us = now_us
        s.store.set_meta("epoch_us", str(now_us))
        return True

    def _reference(self, namespace: str | None = None) -> tuple[float, int]:
        """The stored reference key tiers are cut against, and its rank (0: the maximum)."""
        raw = self._s.store.get_meta(f"reference:{namespace or self._ns}")
        if not raw:
            return 0.0, 0
        key, rank = raw.split()
        return float(key), int(rank)

    def _ref_key(self) -> float:
        return self._reference()[0]

    def _refresh_reference(self, namespace: str | None = None) -> None:
        ns = namespace or self._ns
        key, rank = self._s.store.reference_key(ns, self._s.config.reference_quantile)
        self._s.store.set_meta(f"reference:{ns}", f"{key!r} {rank}")

    def _bump_reference(self, keys: Iterable[float]) -> None:
        """While the reference is the maximum, a new maximum replaces it at once; a percentile
        reference is only recomputed by ``maintain``."""
        current, rank = self._reference()
        if rank != 0:
            return
        best = max(keys, default=current)
        if best > current:
            self._s.store.set_meta(f"reference:{self._ns}", f"{best!r} 0")

    def _plan(
        self,
        nodes: Mapping[str, Node],
        *,
        read: Mapping[str, int] | None = None,
        new_edges: Sequence[Edge] = (),
        changed: Sequence[tuple[Edge, Edge]] = (),
        removed: Sequence[Edge] = (),
        gone: Collection[str] = (),
        fields: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> dict[str, Adjustment]:
        """One event's change to the stored scores, computed incrementally, without rescoring.

        ``nodes`` holds the state before the event of every node whose base changes. The event:
        read clocks set to new times (``read``), edges created (``new_edges``), edges whose
        weight or clock changed (``changed``: old, new) and edges removed with the ``gone``
        (deleted) nodes. Per node x, with ``Δb`` its change of base and ``share = base/degree``:
        its own base and key grow by ``Δb``; ``spread × Δshare(x)`` is pushed along its existing
        edges to its neighbours; a new edge adds the other end's new share to x's key and a
        removed one takes the old share away. Call it before creating ``new_edges`` and after
        deleting ``gone``. ``maintain`` recomputes everything exactly; tests hold the two equal.
        Pushes happen only with ``Config.eager_spreading`` and from nodes with at most
        ``max_push_degree`` edges: updating every neighbour on every event costs a graph query
        per touched node, more than recall can afford at scale. Without them a touched node's own
        base, degree and key are exact at once and its neighbours' spreading share of the change
        arrives at the next ``maintain``.
        Returns the change per node, for the store to apply (see :meth:`_adjust`).
        """
        cfg = self._s.config
        db, dd = self._base_deltas(nodes, read, new_edges, changed, removed, gone)
        old_share = {x: scoring.share(n.base_key, n.degree) for x, n in nodes.items()}
        new_share = {
            x: scoring.share(n.base_key + db[x], n.degree + dd[x]) for x, n in nodes.items()
        }
        dk = dict(db)
        for e in new_edges:
            dk[e.src] += cfg.spread * new_share[e.dst]
            dk[e.dst] += cfg.spread * new_share[e.src]
        for e in removed:
            for x, y in ((e.src, e.dst), (e.dst, e.src)):
                if x not in gone:
                    dk[x] -= cfg.spread * old_share[y]
        changes: dict[str, Adjustment] = {}
        for x in nodes:
            if x in gone:
                continue
            extra = dict(fields.get(x, {})) if fields else {}
            if read and x in read:
                extra["last_read_at"] = from_us(read[x])
            push = cfg.spread * (new_share[x] - old_share[x])
            if not cfg.eager_spreading or nodes[x].degree > cfg.max_push_degree:
                push = 0.0  # the neighbours' share of this change arrives at maintain
            changes[x] = Adjustment(
                base_delta=db[x],
                degree_delta=dd[x],
                key_delta=dk[x],
                push_delta=push,
                fields=extra,
            )
        return changes

    def _base_deltas(
        self,
        nodes: Mapping[str, Node],
        read: Mapping[str, int] | None,
        new_edges: Sequence[Edge],
        changed: Sequence[tuple[Edge, Edge]],
        removed: Sequence[Edge],
        gone: Collection[str],
    ) -> tuple[dict[str, float], dict[str, int]]:
        """Each node's change of base and of degree in one event (see :meth:`_plan`)."""
        cfg, epoch, h = self._s.config, self._s.epoch_us, self._s.config.half_life_us

        def term(weight: float, when: datetime | int | None) -> float:
            if when is None:
                return 0.0
            at = when if isinstance(when, int) else to_us(when)
            return float(scoring.term_key(weight, at, epoch, h))

        db = dict.fromkeys(nodes, 0.0)
        dd = dict.fromkeys(nodes, 0)
        for x, at in (read or {}).items():
            db[x] += term(cfg.read_bonus, at) - term(cfg.read_bonus, nodes[x].last_read_at)
        for e in new_edges:
            for x in (e.src, e.dst):
                db[x] += term(e.weight, e.reinforced_at)
                dd[x] += 1
        for old, new in changed:
            delta = term(new.weight, new.reinforced_at) - term(old.weight, old.reinforced_at)
            for x in (new.src, new.dst):
                db[x] += delta
        for e in removed:
            for x in (e.src, e.dst):
                if x not in gone:
                    db[x] -= term(e.weight, e.reinforced_at)
                    dd[x] -= 1
        return db, dd

    def _adjust(self, nodes: Mapping[str, Node], **event: Any) -> dict[str, float]:
        """Plan one event's score changes (:meth:`_plan`, same arguments) and apply them to
        the store. Returns each node's new key as far as this event alone determines it.
        """
        changes = self._plan(nodes, **event)
        self._s.store.adjust(self._ns, changes)
        return self._new_keys(nodes, changes)

    def _new_keys(
        self, nodes: Mapping[str, Node], changes: Mapping[str, Adjustment]
    ) -> dict[str, float]:
        """Each changed node's new key; a new maximum moves a max-based tier reference."""
        keys = {x: nodes[x].key + changes[x].key_delta for x in changes}
        self._bump_reference(
            keys[x]
            for x in changes
            if not nodes[x].pinned
            and int(changes[x].fields.get("tier", nodes[x].tier)) < Tier.FROZEN
        )
        return keys

    def _promote(
        self,
        nodes: Mapping[str, Node],
        keys: Mapping[str, float],
        caps: Mapping[str, Tier] | None = None,
    ) -> None:
        """Use lifts a node out of warm or cold at once (never above its tier in ``caps``);
        demotion waits for ``maintain``."""
        cfg, mx = self._s.config, self._ref_key()
        changes: dict[str, dict[str, Any]] = {}
        audits = []
        for i, n in nodes.items():
            if n.tier in (Tier.WARM, Tier.COLD):
                target = scoring.tier_for(scoring.ratio(keys[i], mx), n.pinned, cfg)
                if caps and i in caps:
                    target = max(target, caps[i])
                if target < n.tier:
                    changes[i] = {"tier": target}
                    audits.append(
                        {
                            "action": "promote",
                            "node_id": i,
                            "from_tier": n.tier,
                            "to_tier": target,
                            "reason": "used",
                        }
                    )
        if changes:
            self._s.store.update_nodes(self._ns, changes)
            self._audit(audits)

    def _activation(self, key: float, now_us: int) -> float:
        return key * float(scoring.scale(now_us, self._s.epoch_us, self._s.config.half_life_us))
