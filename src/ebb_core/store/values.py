"""The values that cross the store seam: what a store returns and accepts besides nodes and edges.

Plain frozen dataclasses (and numpy columns for the whole-namespace passes), with the two helpers
every backend's inserts share (:func:`memory_exists`, :func:`refuse_existing`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput
from ..model import Edge, Node, Tier

if TYPE_CHECKING:
    from .reads import IndexedReads

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
class RecallHint:
    """What a recall is about to read after its text candidates (see
    :meth:`IndexedReads.prepare_recall`): a server backend may fetch it with them in one round
    trip. ``linked``: how many of the best text matches recall will likely ask the links of
    (spreading's sources, then the hits); ``links_per_node``: the most links it asks of one
    memory at a time (spreading's ``16 × spread_sources``, the hits' ``10 × k``);
    ``link_min``: the lowest decayed weight it asks for; ``meta_keys``: settings it reads (the
    tier reference)."""

    now_us: int
    half_life_us: float
    link_min: float
    linked: int
    links_per_node: int
    meta_keys: tuple[str, ...] = ()


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


def refuse_existing(store: IndexedReads, nodes: Sequence[Node]) -> None:
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
