"""Optional capability: vectors, for meaning-based recall (see :mod:`ebb_core.embeddings`).

A backend without it keeps ``supports_vectors = False`` and recalls on text alone; the
defaults below keep nothing and find nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..model import Tier
from .core import StoreCore
from .values import Match


class VectorStore(StoreCore):
    """Vectors kept beside the memories (capability ``"vectors"``)."""

    #: whether this backend keeps vectors; the others' recall works on text alone
    supports_vectors: bool = False

    def ensure_vectors(self, dim: int) -> None:
        """Make the store ready for ``dim``-dimensional vectors (called outside transactions)."""
        raise NotImplementedError(f"the {self.backend} backend keeps no vectors")

    def prepare_vectors(self, namespace: str, dim: int) -> None:
        """Make the store ready to take ``namespace``'s ``dim``-dimensional vectors inside a
        transaction (called outside transactions: schema changes commit on their own), so that
        a memory and its vector are written in one transaction. By default ``ensure_vectors``.
        """
        self.ensure_vectors(dim)

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
        (Kùzu's unindexed tail, see ``ebb_core.kuzu.vectors``), at most ``limit`` once the index
        exists (0: only a first build; None: the store's batch); returns how many moved."""
        return 0
