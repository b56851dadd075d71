"""Optional capability: fast writes, each with a default built on the core's writes.

Speed variants of ``upsert_*`` (inserts known new, partial updates, incremental scoring
changes, one event's writes in one go, column-wise imports and audit entries); a backend
overrides them to fold writes into fewer statements.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..model import AuditEntry, Edge, Node
from .reads import IndexedReads
from .values import Adjustment, refuse_existing


class FastWrites(IndexedReads):
    """Writes a backend folds into fewer statements (capability ``"writes"``); the defaults
    may use the indexed reads."""

    if TYPE_CHECKING:  # VectorStore's, beside it in GraphStore

        def put_vectors(
            self, namespace: str, ids: Sequence[str], vectors: Any, *, new: bool = False
        ) -> None: ...

    bulk_rollback_safe: bool = False
    """Whether an import's bulk writes (``bulk_insert`` inside ``bulk_load`` and the caller's
    transaction) are undone cleanly when that transaction rolls back or raises, at any point
    after the first row. A store that says so lets a Ctrl-C during an import roll it back; by
    default (not known to be safe) the import holds a Ctrl-C from its first row written until
    its commit, then reports the import as committed (``CommittedInterrupt``)."""

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

    def update_nodes(self, namespace: str, changes: Mapping[str, Mapping[str, Any]]) -> None:
        """Set some fields (see :data:`UPDATABLE_FIELDS`) of existing nodes.

        The default reads the nodes and writes them back whole."""
        nodes = self.get_nodes(namespace, list(changes))
        updated = [n.model_copy(update=dict(changes[i])) for i, n in nodes.items()]
        if updated:
            self.upsert_nodes(updated)

    def adjust(self, namespace: str, changes: Mapping[str, Adjustment]) -> None:
        """Apply incremental scoring changes (and field updates) to existing nodes.

        Pushes travel over the edges as they are when this runs: the Brain calls it before
        creating new edges and after deleting nodes. The default reads the nodes (and, for
        pushes, their edges) and writes them back whole.
        """
        nodes = self.get_nodes(namespace, list(changes))
        pushed: dict[str, float] = {}
        pushing = [i for i, a in changes.items() if a.push_delta and i in nodes]
        for inc in self.incident(namespace, pushing) if pushing else ():
            delta = changes[inc.node_id].push_delta
            pushed[inc.other.id] = pushed.get(inc.other.id, 0.0) + delta
            nodes.setdefault(inc.other.id, inc.other)
        out = []
        for i, n in nodes.items():
            adj = changes.get(i, Adjustment())
            update: dict[str, Any] = dict(adj.fields)
            if adj.base_delta:
                update["base_key"] = n.base_key + adj.base_delta
            if adj.key_delta or i in pushed:
                update["key"] = n.key + adj.key_delta + pushed.get(i, 0.0)
            if adj.degree_delta:
                update["degree"] = n.degree + adj.degree_delta
            out.append(n.model_copy(update=update))
        if out:
            self.upsert_nodes(out)

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
        """One event's writes, atomically: create ``new_nodes`` (their scores already final),
        apply ``changes`` to existing nodes (as :meth:`adjust`, before the new edges exist),
        then create ``new_edges`` (known not to exist yet), and store ``vectors`` (one unit
        vector per new node, in their order; the tables made beforehand by
        :meth:`prepare_vectors`) as :meth:`put_vectors` with ``new=True`` would.

        ``final`` promises that the enclosing transaction reads and writes nothing after this
        call, so a backend may commit these writes on their own. The default runs the four
        steps; a backend may fold them into fewer statements.
        """
        with self.transaction():
            if new_nodes:
                self.insert_nodes(new_nodes)
            if changes:
                self.adjust(namespace, changes)
            if new_edges:
                self.insert_edges(new_edges)
            if vectors is not None and new_nodes:
                self.put_vectors(namespace, [n.id for n in new_nodes], vectors, new=True)

    def bulk_insert(
        self,
        nodes: Mapping[str, Sequence[Any]],
        edges: Mapping[str, Sequence[Any]],
        *,
        ends: tuple[Any, Any] | None = None,
    ) -> None:
        """Fast path for imports, as columns (see :mod:`ebb_core.records`).

        ``nodes`` are new (their ids do not exist yet); ``edges`` join nodes that exist once the
        nodes are in. Scoring fields start at zero (the Brain recomputes them afterwards) unless
        ``nodes`` carries ``base_key``, ``key`` and ``degree`` columns: then they are stored as
        given (an import into empty namespaces computes them from the file). ``ends``, when the
        caller has matched them already: each edge's ``src`` and ``dst`` row among ``nodes``
        (two Arrow integer arrays, null where the end is not among them), which a store may take
        instead of matching the ends again (five million ends cost ~1 s each at 1M memories).
        The default builds one node and one edge object per row (and needs no ``ends``).
        """
        import json

        from ..clock import from_us
        from ..records import node_from_row

        def rows(cols: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
            lists = {
                k: v.to_pylist() if hasattr(v, "to_pylist") else list(v) for k, v in cols.items()
            }
            size = len(next(iter(lists.values()), []))
            return [{k: v[r] for k, v in lists.items()} for r in range(size)]

        new = [
            node_from_row({"base_key": 0.0, "key": 0.0, "degree": 0, **r, "ns": r["namespace"]})
            for r in rows(nodes)
        ]
        links = [
            Edge(
                namespace=r["namespace"],
                src=r["src"],
                dst=r["dst"],
                kind=r["kind"],
                weight=float(r["weight"]),
                created_at=from_us(int(r["created_us"])),
                reinforced_at=from_us(int(r["reinforced_us"])),
                props=json.loads(r["props"]) if r.get("props") else {},
            )
            for r in rows(edges)
        ]
        with self.transaction():
            if new:
                self.insert_nodes(new)
            if links:
                self.insert_edges(links)

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
