"""The core store contract: the 14 methods every backend must implement.

Split by concern: lifecycle (``transaction``, ``close``), metadata (``get_meta``, ``set_meta``),
reading (``get_nodes``, ``incident``, ``scan_nodes``, ``namespaces``, ``text_candidates``),
writing (``upsert_nodes``, ``upsert_edges``, ``delete_nodes``) and the audit log
(``append_audit``, ``audit_log``). Everything else a store offers is an optional capability
(:mod:`ebb_core.store.reads`, ``writes``, ``scoring``, ``vectors``) with a default built on
these; docs/store-contract.md is the map.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager

from ..model import AuditEntry, Edge, Node, Tier
from .values import Incident


class StoreCore(ABC):
    """Where memories live. Every method is scoped to one namespace unless it says otherwise."""

    #: short backend name, e.g. ``"kuzu"``
    backend: str = "abstract"

    @property
    def location(self) -> str:
        """Where the data lives (a path or a URI), for messages and stats; by default the
        backend's name (both backends here override it)."""
        return self.backend

    # -- lifecycle and atomicity -------------------------------------------------------------
    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """One atomic unit of work: everything inside commits together or not at all.

        Re-entrant: a nested ``transaction()`` joins the outer one.
        """

    @abstractmethod
    def close(self) -> None:
        """Release the engine (file locks, connections). Safe to call twice."""

    # -- metadata ----------------------------------------------------------------------------
    @abstractmethod
    def get_meta(self, key: str) -> str | None:
        """A store-wide setting (schema version, scoring epoch...), or None.

        ``key`` here is the setting's name; it has nothing to do with a node's scoring ``key``.
        """

    @abstractmethod
    def set_meta(self, key: str, value: str) -> None:
        """Set the store-wide setting named ``key`` to ``value``."""

    # -- reading -----------------------------------------------------------------------------
    @abstractmethod
    def get_nodes(self, namespace: str, ids: Sequence[str]) -> dict[str, Node]:
        """The nodes among ``ids`` that exist (missing ids are simply absent)."""

    @abstractmethod
    def incident(self, namespace: str, ids: Sequence[str]) -> list[Incident]:
        """Every edge touching any of ``ids``, with the node at its other end.

        Per id, in the order given: its outgoing edges, then its incoming ones, each by the other
        end's id and the edge kind (deletion audits record them in this order, so every backend
        writes the same log)."""

    @abstractmethod
    def scan_nodes(self, namespace: str, batch: int = 5000) -> Iterator[list[Node]]:
        """Every node of the namespace, in id order, in batches."""

    @abstractmethod
    def namespaces(self) -> list[str]:
        """Every namespace that has at least one node or audit entry."""

    @abstractmethod
    def text_candidates(
        self, namespace: str, query: str, max_tier: Tier, pool: int, kinds: Sequence[str] = ()
    ) -> list[tuple[Node, float]]:
        """Full-text matches (engine index, BM25-like score): ``namespace``'s own best ``pool``,
        then those with tier ≤ ``max_tier`` (and a kind in ``kinds``), best first.

        Another namespace's memories never take a place among them, however many share the
        query's words (an index shared by namespaces is searched deeper until it yields enough
        of this one's, or has no more)."""

    # -- writing -----------------------------------------------------------------------------
    @abstractmethod
    def upsert_nodes(self, nodes: Sequence[Node]) -> None:
        """Insert or wholly replace nodes (keyed by namespace and id)."""

    @abstractmethod
    def upsert_edges(self, edges: Sequence[Edge]) -> None:
        """Insert or replace edges, unique per ``(src, dst, kind)``; both ends must exist."""

    @abstractmethod
    def delete_nodes(self, namespace: str, ids: Sequence[str]) -> None:
        """Remove nodes and their edges. Only the Brain's human-approved deletion calls this."""

    # -- audit log ---------------------------------------------------------------------------
    @abstractmethod
    def append_audit(self, entries: Sequence[AuditEntry]) -> None:
        """Record audit entries (their ``seq`` is assigned by the Brain)."""

    @abstractmethod
    def audit_log(
        self,
        namespace: str,
        limit: int,
        node_id: str | None = None,
        action: str | None = None,
        after_seq: int | None = None,
    ) -> list[AuditEntry]:
        """Audit entries in ``seq`` order (newest last), filtered as asked.

        Without ``after_seq``: the newest ``limit`` entries. With it: the oldest ``limit``
        entries whose ``seq`` is above it, so that ``after_seq=0`` and then the last ``seq``
        of each page walks the whole log, page by page (as ``Brain.export`` does).
        """
