"""Optional capability: fast writes, each with a default built on the core's writes.

Speed variants of ``upsert_*`` (inserts known new, partial updates, incremental scoring
changes, one event's writes in one go, column-wise imports and audit entries); a backend
overrides them to fold writes into fewer statements.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import Any

from ..model import AuditEntry, Edge, Node
from .reads import IndexedReads
from .values import Adjustment, refuse_existing


class FastWrites(IndexedReads):
    """Writes a backend folds into fewer statements (capability ``"writes"``); the defaults
    may use the indexed reads."""

    def bulk_load(self, rows: int) -> AbstractContextManager[None]:
        """Wrap a large import of ``rows`` nodes (outside any transaction).

        A store may suspend secondary indexes for the duration and rebuild them at the end;
        by default it does nothing.
        """
        return nullcontext()

    def grouping(self) -> AbstractContextManager[None]:
        """Writes in this block may be held and written with later ones, while every read
        sees them at once (the engine's reinforcement of what recall returned; see
        :mod:`ebb_core.grouping`). A store writes them at once by default."""
        return nullcontext()

    def insert_nodes(self, nodes: Sequence[Node]) -> None:
        """Like :meth:`upsert_nodes` for nodes that must not exist yet (cheaper on some engines).

        A node whose id already exists in its namespace (or appears twice in ``nodes``) is
        refused with :class:`InvalidInput` naming it (see :func:`memory_exists`), and none of
        ``nodes`` is written."""
        refuse_existing(self, nodes)
        self.upsert_nodes(nodes)

    def insert_edges(self, edges: Sequence[Edge]) -> None:
        """Like :meth:`upsert_edges` for edges known not to exist yet (cheaper on some engines)."""
        self.upsert_edges(edges)

    @abstractmethod
    def update_nodes(self, namespace: str, changes: Mapping[str, Mapping[str, Any]]) -> None:
        """Set some fields (see :data:`UPDATABLE_FIELDS`) of existing nodes."""

    @abstractmethod
    def adjust(self, namespace: str, changes: Mapping[str, Adjustment]) -> None:
        """Apply incremental scoring changes (and field updates) to existing nodes.

        Pushes travel over the edges as they are when this runs: the Brain calls it before
        creating new edges and after deleting nodes.
        """

    def write_event(
        self,
        namespace: str,
        *,
        new_nodes: Sequence[Node] = (),
        changes: Mapping[str, Adjustment] | None = None,
        new_edges: Sequence[Edge] = (),
        final: bool = False,
    ) -> None:
        """One event's writes, atomically: create ``new_nodes`` (their scores already final),
        apply ``changes`` to existing nodes (as :meth:`adjust`, before the new edges exist),
        then create ``new_edges`` (known not to exist yet).

        ``final`` promises that the enclosing transaction reads and writes nothing after this
        call, so a backend may commit these writes on their own. The default runs the three
        steps; a backend may fold them into fewer statements.
        """
        with self.transaction():
            if new_nodes:
                self.insert_nodes(new_nodes)
            if changes:
                self.adjust(namespace, changes)
            if new_edges:
                self.insert_edges(new_edges)

    @abstractmethod
    def bulk_insert(
        self, nodes: Mapping[str, Sequence[Any]], edges: Mapping[str, Sequence[Any]]
    ) -> None:
        """Fast path for imports, as columns (see :mod:`ebb_core.records`).

        ``nodes`` are new (their ids do not exist yet); ``edges`` join nodes that exist once the
        nodes are in. Scoring fields start at zero (the Brain recomputes them afterwards) unless
        ``nodes`` carries ``base_key``, ``key`` and ``degree`` columns: then they are stored as
        given (an import into empty namespaces computes them from the file).
        """

    def append_audit_columns(
        self, namespace: str, first_seq: int, at: datetime, columns: Mapping[str, Sequence[Any]]
    ) -> None:
        """Record many entries at once, as columns (``action``, ``node_id``, ``from_tier``,
        ``to_tier``, ``actor``, ``reason``), numbered from ``first_seq``, all at ``at``.

        ``maintain`` moving tens of thousands of memories writes its entries this way; a
        backend may load them without building one model object per entry.
        """
        size = len(columns["action"])
        self.append_audit(
            [
                AuditEntry(
                    seq=first_seq + k,
                    namespace=namespace,
                    at=at,
                    **{name: values[k] for name, values in columns.items()},
                )
                for k in range(size)
            ]
        )
