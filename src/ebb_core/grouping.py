"""Grouped reinforcement: what recall reinforces counts at once and is written a little later.

Every recall reinforces what it returns (its read clocks move, so their keys grow). Written
through, that is a write transaction per recall: on embedded Kùzu about half of a recall's time
at 1k memories. :class:`GroupedStore` wraps a :class:`~ebb_core.store.GraphStore` so that
these writes, and only these, are kept in memory and written together:

- at the next write of anything else (in that write's transaction, before it), so what is
  stored is always what write-through would have stored, in the same order; a new memory's
  event (``write_event``, what ``remember`` writes) takes it into its own changes when they
  touch other memories, so that a remember after a recall is still one statement on stores
  that fold an event into one (Kùzu);
- when the store is closed (an idle ``ebb mcp`` letting go of the store, a hand-over to an
  ``ebb`` command, the end of a program that closes its ``Brain``);
- at the latest ``delay`` seconds after the first of them (a background timer).

Until then every read through this store sees them (the keys and read clocks recall ranks on
are the reinforced ones), so the next recall in this process ranks exactly as if each had been
written at once. What a crash or a kill can lose is at most the last ``delay`` seconds of
reinforcement: never a memory, a link, an edit or an audit entry, which are written as before.

Turned on by ``Brain(..., reinforcement_delay=seconds)`` (``ebb mcp`` does, with 1 s); the
library's default writes every reinforcement with its recall.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from typing import Any

from .grouping_base import (
    DEFAULT_DELAY,
    MAX_DELAY,
    Forward,
    GroupedBase,
    merge,
    parse_delay,
    validate_delay,
)
from .grouping_reads import GroupedReads
from .model import Edge, Node
from .store import Adjustment, GraphStore

__all__ = [
    "DEFAULT_DELAY",
    "FOLD_MAX",
    "MAX_DELAY",
    "Forward",
    "GroupedBase",
    "GroupedReads",
    "GroupedStore",
    "merge",
    "parse_delay",
    "validate_delay",
]


FOLD_MAX = 32
"""Most memories (held and the event's) a new memory's event takes in one statement."""


class GroupedStore(GroupedReads):
    """``inner`` with recall's reinforcement grouped (see the module's docstring).

    Writes made inside :meth:`grouping` (the engine's reinforcement of what it returned) are
    held; every other write first writes what is held, in its own transaction. ``lock`` is the
    engine's (the timer's write takes it like any call). Attributes this class does not define
    are the inner store's. The holding is :class:`~ebb_core.grouping_base.GroupedBase`'s, the
    reads :class:`~ebb_core.grouping_reads.GroupedReads`'; the writes are below.
    """

    # -- writes --------------------------------------------------------------------------------
    def adjust(self, namespace: str, changes: Mapping[str, Adjustment]) -> None:
        with self._lock:
            if (
                self._grouping
                and self._sent is None
                and not any(a.push_delta for a in changes.values())
            ):
                self._hold(namespace, changes)
                return
            with self._writing():
                self.inner.adjust(namespace, changes)

    # a write takes what is held into its own transaction, first
    set_tiers = Forward(GraphStore.set_tiers, before="write")
    upsert_nodes = Forward(GraphStore.upsert_nodes, before="write")
    insert_nodes = Forward(GraphStore.insert_nodes, before="write")
    update_nodes = Forward(GraphStore.update_nodes, before="write")

    def write_event(
        self,
        namespace: str,
        *,
        new_nodes: Sequence[Node] = (),
        changes: Mapping[str, Adjustment] | None = None,
        new_edges: Sequence[Edge] = (),
        final: bool = False,
        vectors: Any = None,
    ) -> None:
        """The event, with what is held for ``namespace`` taken into its ``changes`` when that
        is all that is held, it concerns other memories than the event's own changes (so each
        memory gets the same additions, in the same order, as written first) and it is small
        (:data:`FOLD_MAX`); otherwise what is held is written first, in the same transaction.
        Either way one transaction: a rollback holds it again."""
        event = dict(changes or {})
        with self._lock:
            held = self._held.get(namespace)
            if (
                not held
                or self._sent is not None
                or self._held_meta
                or len(self._held) != 1
                or len(held) + len(event) > FOLD_MAX
                or not held.keys().isdisjoint(event)
            ):
                with self._writing():
                    self.inner.write_event(
                        namespace,
                        new_nodes=new_nodes,
                        changes=changes,
                        new_edges=new_edges,
                        final=final,
                        vectors=vectors,
                    )
                return
            del self._held[namespace]
            # In the caller's transaction if there is one (a nested one would keep a final
            # event from committing on its own); held again if the transaction fails.
            with nullcontext() if self._depth else self.transaction():
                self._sent = ({namespace: held}, {})
                self.inner.write_event(
                    namespace,
                    new_nodes=new_nodes,
                    changes={**held, **event},
                    new_edges=new_edges,
                    final=final,
                    vectors=vectors,
                )

    delete_nodes = Forward(GraphStore.delete_nodes, before="write")
    bulk_insert = Forward(GraphStore.bulk_insert, before="write")
    upsert_edges = Forward(GraphStore.upsert_edges, before="write")
    insert_edges = Forward(GraphStore.insert_edges, before="write")
    put_vectors = Forward(GraphStore.put_vectors, before="write")
    delete_vectors = Forward(GraphStore.delete_vectors, before="write")
    scale_keys = Forward(GraphStore.scale_keys, before="write")
    append_audit = Forward(GraphStore.append_audit, before="write")
    append_audit_columns = Forward(GraphStore.append_audit_columns, before="write")

    # passes over a whole namespace (or every one): what is held is written first
    drop_vectors = Forward(GraphStore.drop_vectors, before="flush")
    index_vectors = Forward(GraphStore.index_vectors, before="flush")
    recompute_keys = Forward(GraphStore.recompute_keys, before="flush")
