"""The review side of a :class:`~ebb_core.engine.Brain`: pins, forgetting, restoring, deleting.

:class:`ReviewMixin` holds ``pin``, ``unpin``, ``forget``, ``restore``, ``approve_deletion``
(the one place anything is deleted, on a human's approval), ``review_queue`` and ``history``
(every version of a memory's text).
"""

from __future__ import annotations

from collections.abc import Sequence

from .brain_base import BrainBase
from .errors import InvalidInput
from .model import Edge, Node, ReviewItem, Tier, Version
from .transfer import _node_record
from .validation import MAX_K, validate_k, validate_reason


class ReviewMixin(BrainBase):
    """The Brain's review calls (on :class:`BrainBase`)."""

    def pin(self, id: str, *, actor: str = "user") -> Node:
        """Pin a memory: it stays hot and never archives until unpinned."""
        with self._tx():
            node = self._require([id])[id]
            if node.tier == Tier.FROZEN:
                raise InvalidInput(
                    f"memory {id!r} is in the review queue: restore it before pinning", field="id"
                )
            if not node.pinned:
                self._s.store.update_nodes(self._ns, {id: {"pinned": True, "tier": Tier.HOT}})
                self._audit(
                    [
                        {
                            "action": "pin",
                            "node_id": id,
                            "from_tier": node.tier,
                            "to_tier": Tier.HOT,
                            "actor": actor,
                        }
                    ]
                )
            return self._s.store.get_nodes(self._ns, [id])[id]

    def unpin(self, id: str, *, actor: str = "user") -> Node:
        """Unpin a memory: from now on it ages like any other (``maintain`` may archive it)."""
        with self._tx():
            node = self._require([id])[id]
            if node.pinned:
                self._s.store.update_nodes(self._ns, {id: {"pinned": False}})
                self._audit(
                    [
                        {
                            "action": "unpin",
                            "node_id": id,
                            "from_tier": node.tier,
                            "to_tier": node.tier,
                            "actor": actor,
                        }
                    ]
                )
            return self._s.store.get_nodes(self._ns, [id])[id]

    def forget(self, id: str, reason: str = "", *, actor: str = "agent") -> ReviewItem:
        """Ask for a memory to be deleted: it moves to frozen and into the review queue.

        Nothing is deleted: it is hidden from recall until a human approves the deletion
        (:meth:`approve_deletion`) or restores it (:meth:`restore`).
        """
        reason = validate_reason(reason)
        with self._tx():
            node = self._require([id])[id]
            if node.pinned:
                raise InvalidInput(
                    f"memory {id!r} is pinned; a person must unpin it before it can be forgotten",
                    field="id",
                )
            if node.tier != Tier.FROZEN:
                now = self._s.clock.now()
                why = f"forgotten: {reason}" if reason else "forgotten"
                self._s.store.update_nodes(
                    self._ns, {id: {"tier": Tier.FROZEN, "review_reason": why, "queued_at": now}}
                )
                self._audit(
                    [
                        {
                            "action": "forget",
                            "node_id": id,
                            "from_tier": node.tier,
                            "to_tier": Tier.FROZEN,
                            "actor": actor,
                            "reason": reason,
                        }
                    ]
                )
                if node.key >= self._ref_key():
                    self._refresh_reference()
            node = self._s.store.get_nodes(self._ns, [id])[id]
            return self._review_item(node, self._now_us())

    def restore(self, id: str, *, actor: str = "user") -> Node:
        """Bring a memory back to hot (out of the review queue or an archive tier); mark it read."""
        with self._tx():
            now_us = self._now_us()
            self._maybe_rebase(now_us)
            node = self._require([id])[id]
            self._adjust(
                {id: node},
                read={id: now_us},
                fields={id: {"tier": Tier.HOT, "review_reason": None, "queued_at": None}},
            )
            if node.tier != Tier.HOT:
                self._audit(
                    [
                        {
                            "action": "restore",
                            "node_id": id,
                            "from_tier": node.tier,
                            "to_tier": Tier.HOT,
                            "actor": actor,
                        }
                    ]
                )
            return self._s.store.get_nodes(self._ns, [id])[id]

    def approve_deletion(
        self, ids: Sequence[str] | str, *, approved_by: str, note: str = ""
    ) -> list[str]:
        """Delete memories a human has reviewed. Only memories in the review queue can go.

        Each deletion is audited with the deleted memory and its edges as JSON, so it could be
        re-imported. Returns the deleted ids.
        """
        if isinstance(ids, str):
            ids = [ids]
        ids = list(dict.fromkeys(ids))
        if not ids:
            raise InvalidInput("no ids given to approve", field="ids")
        if not isinstance(approved_by, str) or not approved_by.strip():
            raise InvalidInput("approved_by must name the person approving", field="approved_by")
        note = validate_reason(note)
        with self._tx():
            nodes = self._require(ids)
            not_queued = [i for i in ids if nodes[i].tier != Tier.FROZEN]
            if not_queued:
                t = nodes[not_queued[0]].tier.label
                raise InvalidInput(
                    f"memory {not_queued[0]!r} is not in the review queue (tier {t}): "
                    "only forgotten or decayed memories can be deleted",
                    field="ids",
                )
            incident = self._s.store.incident(self._ns, ids)
            gone = set(ids)
            audits = []
            for i in ids:
                edges = [inc.edge.model_dump(mode="json") for inc in incident if inc.node_id == i]
                payload = {"node": _node_record(nodes[i]), "edges": edges}
                audits.append(
                    {
                        "action": "delete",
                        "node_id": i,
                        "from_tier": Tier.FROZEN,
                        "to_tier": None,
                        "actor": approved_by.strip(),
                        "reason": note,
                        "payload": payload,
                    }
                )
            affected = dict(nodes)
            removed: dict[tuple[str, str, str], Edge] = {}
            for inc in incident:
                affected.setdefault(inc.other.id, inc.other)
                removed[(inc.edge.src, inc.edge.dst, inc.edge.kind)] = inc.edge
            self._s.store.delete_nodes(self._ns, ids)
            self._adjust(affected, removed=list(removed.values()), gone=gone)
            self._refresh_reference()
            self._audit(audits)
            return ids

    def review_queue(self, limit: int = 100) -> list[ReviewItem]:
        """Memories waiting for a human: approve their deletion or restore them."""
        validate_k(limit, "limit", MAX_K * 100)
        now_us = self._now_us()
        return [self._review_item(n, now_us) for n in self._s.store.review_queue(self._ns, limit)]

    def _review_item(self, n: Node, now_us: int) -> ReviewItem:
        return ReviewItem(
            id=n.id,
            namespace=n.namespace,
            kind=n.kind,
            text=n.text,
            reason=n.review_reason or "",
            queued_at=n.queued_at,
            activation=self._activation(n.key, now_us),
            pinned=n.pinned,
        )

    def history(self, id: str) -> list[Version]:
        """Every version of a memory's text, oldest first; the last one is the current text.

        Remembering new text under an existing id keeps the old text here (each old version
        is an audited ``revise`` entry), so an update never loses what was there before.
        """
        with self._tx():
            node = self._require([id])[id]
            entries = self._s.store.audit_log(self._ns, MAX_K * 100, node_id=id, action="revise")
        out = []
        for n, e in enumerate(entries, 1):
            p = e.payload or {}
            out.append(
                Version(
                    id=id,
                    version=n,
                    text=str(p.get("text", "")),
                    kind=str(p.get("kind", node.kind)),
                    props=p.get("props") or {},
                    at=p.get("at") or e.at,
                    current=False,
                    replaced_at=e.at,
                    actor=e.actor,
                )
            )
        out.append(
            Version(
                id=id,
                version=len(entries) + 1,
                text=node.text,
                kind=node.kind,
                props=node.props,
                at=node.updated_at,
                current=True,
            )
        )
        return out
