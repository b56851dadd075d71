"""The ``GraphStore`` seam: the narrow, semantic interface every backend implements.

The :class:`~ebb_core.engine.Brain` owns policy (what recall reinforces, when a node moves tier,
what gets audited); a store owns only how its engine keeps and finds things. Nothing above this
interface writes a query language; nothing below it decides policy. User data crosses the seam as
values and reaches the database only as query parameters.

A new backend is one module implementing this class. It proves the contract by subclassing
:class:`ebb_core.testing.StoreContractTests` (docs/store-contract.md); in this repository the
engine's own tests (every test in ``tests/`` that takes the ``store`` or ``brain`` fixture) also
run against each backend listed in ``BACKENDS`` in ``tests/conftest.py``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .errors import InvalidInput
from .model import AuditEntry, Edge, Node, Tier

#: The edge kind that marks a replacement: ``new -supersedes-> old``.
SUPERSEDES = "supersedes"

#: Node fields a partial update (:meth:`GraphStore.update_nodes`) may set.
UPDATABLE_FIELDS = frozenset(
    {
        "text",
        "props",
        "updated_at",
        "last_read_at",
        "pinned",
        "tier",
        "review_reason",
        "queued_at",
        "base_key",
        "key",
        "degree",
        "kind",
    }
)


@dataclass(frozen=True)
class Incident:
    """An edge of a node together with the node at its other end."""

    node_id: str
    edge: Edge
    other: Node


@dataclass(frozen=True)
class Adjustment:
    """An incremental change to one node's scoring state (see ``Brain`` and ``scoring``).

    ``base_delta``, ``degree_delta`` and ``key_delta`` are added to the node's own fields;
    ``push_delta`` is added to the key of the node at the other end of each of its edges (once
    per edge), which is how a change in its spreading share reaches its neighbours; ``fields``
    are set as in :meth:`GraphStore.update_nodes`.
    """

    base_delta: float = 0.0
    degree_delta: int = 0
    key_delta: float = 0.0
    push_delta: float = 0.0
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Link:
    """A light view of one edge from a node's side, for explanations."""

    node_id: str
    other_id: str
    kind: str
    outgoing: bool
    weight: float
    reinforced_us: int


@dataclass(frozen=True)
class Match:
    """A full-text candidate with just what recall blends on; the Brain fetches the winners."""

    id: str
    score: float
    key: float
    pinned: bool
    tier: int = 1  # recall's tier fall-through orders by it
    kind: str = ""  # filled by :meth:`GraphStore.matches_for`


@dataclass(frozen=True)
class TierMove:
    """A node whose tier should change, as computed by :meth:`GraphStore.tier_moves`."""

    node_id: str
    from_tier: Tier
    to_tier: Tier
    ratio: float


@dataclass(frozen=True)
class TierMoveColumns:
    """Tier moves as columns: numpy arrays of equal length, one entry per move, in id order.

    What :meth:`GraphStore.tier_move_columns` returns and :meth:`GraphStore.set_tiers` writes:
    a first ``maintain`` can move most of a million memories, and one :class:`TierMove` (with
    its Python strings and numbers) per move cost seconds and hundreds of megabytes.
    ``ids`` holds ``str`` objects; ``from_tier`` and ``to_tier`` tier numbers (int64);
    ``ratio`` each memory's activation ratio (float64).
    """

    ids: Any
    from_tier: Any
    to_tier: Any
    ratio: Any

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def of(cls, moves: Sequence[TierMove]) -> TierMoveColumns:
        """The columns of ``moves`` (in their order)."""
        import numpy as np

        ids = np.empty(len(moves), dtype=object)
        ids[:] = [m.node_id for m in moves]
        return cls(
            ids,
            np.array([int(m.from_tier) for m in moves], np.int64),
            np.array([int(m.to_tier) for m in moves], np.int64),
            np.array([m.ratio for m in moves], np.float64),
        )

    def take(self, rows: Any) -> TierMoveColumns:
        """The moves at ``rows`` (a slice, an index array or a boolean mask)."""
        return TierMoveColumns(
            self.ids[rows], self.from_tier[rows], self.to_tier[rows], self.ratio[rows]
        )

    def moves(self) -> list[TierMove]:
        """One :class:`TierMove` per entry (for small results: a preview, a test)."""
        return [
            TierMove(i, Tier(f), Tier(t), r)
            for i, f, t, r in zip(
                self.ids.tolist(),
                self.from_tier.tolist(),
                self.to_tier.tolist(),
                self.ratio.tolist(),
                strict=True,
            )
        ]


@dataclass(frozen=True)
class Counts:
    nodes: int
    edges: int
    by_tier: Mapping[int, int]
    pinned: int
    audit_entries: int


def memory_exists(
    namespace: str, id: str, *, twice: bool = False, detail: str = ""
) -> InvalidInput:
    """The error for creating a memory whose id is taken: bad input, not a broken store.
    ``detail`` (e.g. " (created meanwhile by another writer)") follows the namespace."""
    where = "is twice among the memories to create in" if twice else "already exists in"
    return InvalidInput(
        f"memory {id!r} {where} namespace {namespace!r}{detail}: to change it, revise it (remember "
        "under that id keeps the old text as a version) or update its fields; to keep both, "
        "use another id. Nothing was written",
        field="id",
    )


class GraphStore(ABC):
    """Where memories live. Every method is scoped to one namespace unless it says otherwise."""

    #: short backend name, e.g. ``"kuzu"``
    backend: str = "abstract"

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the data lives (a path or a URI), for messages and stats."""

    # -- lifecycle and atomicity -------------------------------------------------------------
    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """One atomic unit of work: everything inside commits together or not at all.

        Re-entrant: a nested ``transaction()`` joins the outer one.
        """

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

    # -- nodes -------------------------------------------------------------------------------
    @abstractmethod
    def get_nodes(self, namespace: str, ids: Sequence[str]) -> dict[str, Node]:
        """The nodes among ``ids`` that exist (missing ids are simply absent)."""

    @abstractmethod
    def existing_ids(self, namespace: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` exist (cheap for many ids: imports check thousands at once)."""

    @abstractmethod
    def upsert_nodes(self, nodes: Sequence[Node]) -> None:
        """Insert or wholly replace nodes (keyed by namespace and id)."""

    def insert_nodes(self, nodes: Sequence[Node]) -> None:
        """Like :meth:`upsert_nodes` for nodes that must not exist yet (cheaper on some engines).

        A node whose id already exists in its namespace (or appears twice in ``nodes``) is
        refused with :class:`InvalidInput` naming it (see :func:`memory_exists`), and none of
        ``nodes`` is written."""
        refuse_existing(self, nodes)
        self.upsert_nodes(nodes)

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
    def delete_nodes(self, namespace: str, ids: Sequence[str]) -> None:
        """Remove nodes and their edges. Only the Brain's human-approved deletion calls this."""

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

    # -- edges -------------------------------------------------------------------------------
    @abstractmethod
    def upsert_edges(self, edges: Sequence[Edge]) -> None:
        """Insert or replace edges, unique per ``(src, dst, kind)``; both ends must exist."""

    def insert_edges(self, edges: Sequence[Edge]) -> None:
        """Like :meth:`upsert_edges` for edges known not to exist yet (cheaper on some engines)."""
        self.upsert_edges(edges)

    @abstractmethod
    def incident(self, namespace: str, ids: Sequence[str]) -> list[Incident]:
        """Every edge touching any of ``ids``, with the node at its other end.

        Per id, in the order given: its outgoing edges, then its incoming ones, each by the other
        end's id and the edge kind (deletion audits record them in this order, so every backend
        writes the same log)."""

    @abstractmethod
    def get_edge(self, namespace: str, src: str, dst: str, kind: str) -> Edge | None:
        """The ``src -kind-> dst`` edge, if it exists."""

    @abstractmethod
    def strongest_links(
        self,
        namespace: str,
        ids: Sequence[str],
        now_us: int,
        half_life_us: float,
        min_decayed: float,
        limit: int,
    ) -> list[Link]:
        """Edges of ``ids`` whose decayed weight at ``now`` is at least ``min_decayed``,
        strongest first, at most ``limit`` in all."""

    def matches_for(self, namespace: str, ids: Sequence[str]) -> list[Match]:
        """What recall blends on (score 0) for the memories among ``ids`` that exist: recall
        brings in memories that matched no words (spreading, replacements) this way. Backends
        override it when whole nodes are costly to produce."""
        return [
            Match(n.id, 0.0, n.key, n.pinned, int(n.tier), n.kind)
            for n in self.get_nodes(namespace, ids).values()
        ]

    def superseded_by(
        self, namespace: str, ids: Sequence[str] | None = None
    ) -> dict[str, list[str]]:
        """For each memory among ``ids`` (every memory of the namespace when None) that a live
        (not frozen) memory supersedes (an edge ``new -supersedes-> old``): the ids that
        supersede it, sorted. Memories nobody supersedes are absent.

        Recall asks this for its few best candidates on every call, so a backend answers it
        without scanning the namespace when ``ids`` is given. The default reads incident edges.
        """
        out: dict[str, set[str]] = {}
        if ids is None:
            for batch in self.scan_edges(namespace):
                for e in batch:
                    if e.kind == SUPERSEDES:
                        out.setdefault(e.dst, set()).add(e.src)
            live = self.get_nodes(namespace, sorted({x for v in out.values() for x in v}))
        else:
            incs = [
                inc
                for inc in self.incident(namespace, list(dict.fromkeys(ids)))
                if inc.edge.kind == SUPERSEDES and inc.edge.dst == inc.node_id
            ]
            for inc in incs:
                out.setdefault(inc.node_id, set()).add(inc.other.id)
            live = {inc.other.id: inc.other for inc in incs}
        result = {}
        for old, new in out.items():
            kept = sorted(n for n in new if n in live and live[n].tier < Tier.FROZEN)
            if kept:
                result[old] = kept
        return result

    # -- finding -----------------------------------------------------------------------------
    @abstractmethod
    def text_candidates(
        self, namespace: str, query: str, max_tier: Tier, pool: int, kinds: Sequence[str] = ()
    ) -> list[tuple[Node, float]]:
        """Full-text matches (engine index, BM25-like score): ``namespace``'s own best ``pool``,
        then those with tier ≤ ``max_tier`` (and a kind in ``kinds``), best first.

        Another namespace's memories never take a place among them, however many share the
        query's words (an index shared by namespaces is searched deeper until it yields enough
        of this one's, or has no more)."""

    def text_matches(
        self, namespace: str, query: str, max_tier: Tier, pool: int, kinds: Sequence[str] = ()
    ) -> list[Match]:
        """Like :meth:`text_candidates` but light: recall blends these and then fetches only
        the nodes it returns. Backends override it when whole nodes are costly to produce; they
        then start from the namespace's best ``max(4 × pool, 200)`` before filtering."""
        return [
            Match(n.id, score, n.key, n.pinned)
            for n, score in self.text_candidates(namespace, query, max_tier, pool, kinds)
        ]

    # -- vectors (optional: meaning-based recall, see ebb_core.embeddings) -------------------
    #: whether this backend keeps vectors; the others' recall works on text alone
    supports_vectors: bool = False

    def ensure_vectors(self, dim: int) -> None:
        """Make the store ready for ``dim``-dimensional vectors (called outside transactions)."""
        raise NotImplementedError(f"the {self.backend} backend keeps no vectors")

    def put_vectors(
        self, namespace: str, ids: Sequence[str], vectors: Any, *, new: bool = False
    ) -> None:
        """Store (replace) the unit vectors of existing memories ``ids`` (a float32 matrix, one
        row per id, every row of the store's one dimension); ``new``: none of them has one yet
        (imports, ``embed``), so there is nothing to replace."""
        raise NotImplementedError(f"the {self.backend} backend keeps no vectors")

    def delete_vectors(self, namespace: str, ids: Sequence[str]) -> None:
        """Drop the vectors of ``ids`` (their text changed with no embedder at hand)."""
        return None

    def vectors_of(self, namespace: str, ids: Sequence[str]) -> dict[str, Any]:
        """The stored vectors of the memories among ``ids`` that have one (float32 arrays)."""
        return {}

    def vector_matches(
        self, namespace: str, vector: Any, pool: int, max_tier: Tier, kinds: Sequence[str] = ()
    ) -> list[tuple[Match, float]]:
        """The namespace's ``pool`` memories nearest to ``vector`` (from the engine's vector
        index, never a scan), with their cosine similarity, best first; then those with tier ≤
        ``max_tier`` (and a kind in ``kinds``). Another namespace's vectors never take a place
        among them (a shared index is searched deeper until it yields enough of this one's)."""
        return []

    def without_vectors(
        self, namespace: str, after: str = "", limit: int = 256
    ) -> list[tuple[str, str]]:
        """Up to ``limit`` memories (id, text) that have no vector, in id order after ``after``
        (frozen ones included: they keep their vector if restored)."""
        return []

    def vector_count(self, namespace: str) -> int:
        """How many of the namespace's memories have a vector."""
        return 0

    def drop_vectors(self) -> None:
        """Remove every vector of every namespace (re-embedding with another model)."""
        return None

    def index_vectors(self, namespace: str, *, limit: int | None = None) -> int:
        """Move vectors the store keeps outside its vector index into it, if it keeps any
        (Kùzu's unindexed tail, see ``kuzu_vectors``), at most ``limit`` once the index
        exists (0: only a first build; None: the store's batch); returns how many moved."""
        return 0

    @abstractmethod
    def top_by_key(
        self, namespace: str, max_tier: Tier, limit: int, kinds: Sequence[str] = ()
    ) -> list[Node]:
        """The most active nodes (highest stored key) with tier ≤ ``max_tier``."""

    @abstractmethod
    def review_queue(self, namespace: str, limit: int) -> list[Node]:
        """Frozen nodes, oldest queued first."""

    @abstractmethod
    def scan_nodes(self, namespace: str, batch: int = 5000) -> Iterator[list[Node]]:
        """Every node of the namespace, in id order, in batches."""

    @abstractmethod
    def scan_edges(self, namespace: str, batch: int = 5000) -> Iterator[list[Edge]]:
        """Every edge of the namespace, in ``(src, dst, kind)`` order, in batches."""

    @abstractmethod
    def namespaces(self) -> list[str]:
        """Every namespace that has at least one node or audit entry."""

    @abstractmethod
    def counts(self, namespace: str) -> Counts: ...

    # -- scoring passes (values in, the engine computes) --------------------------------------
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

    # -- audit log ---------------------------------------------------------------------------
    @abstractmethod
    def append_audit(self, entries: Sequence[AuditEntry]) -> None:
        """Record audit entries (their ``seq`` is assigned by the Brain)."""

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

    @abstractmethod
    def last_audit_seq(self, namespace: str) -> int:
        """The highest ``seq`` recorded for the namespace (0 when none)."""


def refuse_existing(store: GraphStore, nodes: Sequence[Node]) -> None:
    """Raise :func:`memory_exists` for the first of ``nodes`` whose id is already stored in
    its namespace or comes twice among ``nodes``: a check made before a write."""
    by_ns: dict[str, list[str]] = {}
    for n in nodes:
        ids = by_ns.setdefault(n.namespace, [])
        if n.id in ids:
            raise memory_exists(n.namespace, n.id, twice=True)
        ids.append(n.id)
    for ns, ids in by_ns.items():
        clash = store.existing_ids(ns, ids)
        if clash:
            raise memory_exists(ns, next(i for i in ids if i in clash))
