"""Grouped reinforcement: what recall reinforces counts at once and is written a little later.

Every recall reinforces what it returns (its read clocks move, so their keys grow). Written
through, that is a write transaction per recall: on embedded Kùzu about half of a recall's time
at 1k memories. :class:`GroupedStore` wraps a :class:`~ebb_core.store.GraphStore` so that
these writes, and only these, are kept in memory and written together:

- at the next write of anything else (in that write's transaction, before it), so what is
  stored is always what write-through would have stored, in the same order;
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
from datetime import datetime
from typing import Any

from .grouping_base import (
    DEFAULT_DELAY,
    MAX_DELAY,
    GroupedBase,
    merge,
    parse_delay,
    validate_delay,
)
from .grouping_reads import GroupedReads
from .model import AuditEntry, Edge, Node
from .store import Adjustment, TierMoveColumns

__all__ = [
    "DEFAULT_DELAY",
    "MAX_DELAY",
    "GroupedBase",
    "GroupedReads",
    "GroupedStore",
    "merge",
    "parse_delay",
    "validate_delay",
]


class GroupedStore(GroupedReads):
    """``inner`` with recall's reinforcement grouped (see the module's docstring).

    Writes made inside :meth:`grouping` (the engine's reinforcement of what it returned) are
    held; every other write first writes what is held, in its own transaction. ``lock`` is the
    engine's (the timer's write takes it like any call). Attributes this class does not define
    are the inner store's. The holding is :class:`~ebb_core.grouping_base.GroupedBase`'s, the
    reads :class:`~ebb_core.grouping_reads.GroupedReads`'; the writes are below.
    """

    def set_tiers(
        self,
        namespace: str,
        moves: TierMoveColumns,
        review_reasons: Mapping[str, str],
        queued_at: datetime,
    ) -> None:
        with self._writing():
            self.inner.set_tiers(namespace, moves, review_reasons, queued_at)

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

    def upsert_nodes(self, nodes: Sequence[Node]) -> None:
        with self._writing():
            self.inner.upsert_nodes(nodes)

    def insert_nodes(self, nodes: Sequence[Node]) -> None:
        with self._writing():
            self.inner.insert_nodes(nodes)

    def update_nodes(self, namespace: str, changes: Mapping[str, Mapping[str, Any]]) -> None:
        with self._writing():
            self.inner.update_nodes(namespace, changes)

    def write_event(
        self,
        namespace: str,
        *,
        new_nodes: Sequence[Node] = (),
        changes: Mapping[str, Adjustment] | None = None,
        new_edges: Sequence[Edge] = (),
        final: bool = False,
    ) -> None:
        with self._writing():
            self.inner.write_event(
                namespace, new_nodes=new_nodes, changes=changes, new_edges=new_edges, final=final
            )

    def delete_nodes(self, namespace: str, ids: Sequence[str]) -> None:
        with self._writing():
            self.inner.delete_nodes(namespace, ids)

    def bulk_insert(
        self, nodes: Mapping[str, Sequence[Any]], edges: Mapping[str, Sequence[Any]]
    ) -> None:
        with self._writing():
            self.inner.bulk_insert(nodes, edges)

    def upsert_edges(self, edges: Sequence[Edge]) -> None:
        with self._writing():
            self.inner.upsert_edges(edges)

    def insert_edges(self, edges: Sequence[Edge]) -> None:
        with self._writing():
            self.inner.insert_edges(edges)

    def put_vectors(
        self, namespace: str, ids: Sequence[str], vectors: Any, *, new: bool = False
    ) -> None:
        with self._writing():
            self.inner.put_vectors(namespace, ids, vectors, new=new)

    def delete_vectors(self, namespace: str, ids: Sequence[str]) -> None:
        with self._writing():
            self.inner.delete_vectors(namespace, ids)

    def drop_vectors(self) -> None:
        self.flush()
        self.inner.drop_vectors()

    def index_vectors(self, namespace: str, *, limit: int | None = None, **kw: Any) -> int:
        # Defined on GraphStore (a no-op there), so __getattr__ would never pass it on: a
        # grouped Brain's maintain would leave Kùzu's vector tail unindexed for ever.
        self.flush()
        return self.inner.index_vectors(namespace, limit=limit, **kw)

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
        self.flush()
        return self.inner.recompute_keys(
            namespace, epoch_us, half_life_us, read_bonus, spread, spreading=spreading
        )

    def scale_keys(self, factor: float) -> None:
        with self._writing():
            self.inner.scale_keys(factor)

    def append_audit(self, entries: Sequence[AuditEntry]) -> None:
        with self._writing():
            self.inner.append_audit(entries)

    def append_audit_columns(
        self, namespace: str, first_seq: int, at: datetime, columns: Mapping[str, Sequence[Any]]
    ) -> None:
        with self._writing():
            self.inner.append_audit_columns(namespace, first_seq, at, columns)
