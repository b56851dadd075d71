"""The ``GraphStore`` seam: the narrow, semantic interface every backend implements.

The :class:`~ebb_core.engine.Brain` owns policy (what recall reinforces, when a node moves tier,
what gets audited); a store owns only how its engine keeps and finds things. Nothing above this
interface writes a query language; nothing below it decides policy. User data crosses the seam as
values and reaches the database only as query parameters.

The contract is a core of 14 methods (:class:`~ebb_core.store.core.StoreCore`: lifecycle,
metadata, reading, writing, the audit log) plus optional capabilities, each a mixin whose
methods have defaults a backend overrides to be faster or to offer the feature (layered: each
capability's defaults may use those of the ones before it):
:class:`IndexedReads` (``"reads"``), :class:`FastWrites` (``"writes"``),
:class:`ServerScoring` (``"scoring"``) and :class:`VectorStore` (``"vectors"``).
:attr:`GraphStore.capabilities` names the ones a backend provides itself. docs/store-contract.md
is the map.

A new backend is one class subclassing :class:`GraphStore`. It proves the contract by
subclassing :class:`ebb_core.testing.StoreContractTests` (docs/store-contract.md); in this
repository the engine's own tests (every test in ``tests/`` that takes the ``store`` or
``brain`` fixture) also run against each backend listed in ``BACKENDS`` in ``tests/conftest.py``.
"""

from __future__ import annotations

import inspect

from .core import StoreCore
from .reads import IndexedReads
from .scoring import ServerScoring
from .values import (
    SUPERSEDES,
    UPDATABLE_FIELDS,
    Adjustment,
    Counts,
    Incident,
    Link,
    Match,
    RecallHint,
    TierMove,
    TierMoveColumns,
    memory_exists,
    refuse_existing,
)
from .vectors import VectorStore
from .writes import FastWrites

#: The optional capabilities, by the name :attr:`GraphStore.capabilities` uses.
CAPABILITIES: dict[str, type] = {
    "reads": IndexedReads,
    "writes": FastWrites,
    "scoring": ServerScoring,
    "vectors": VectorStore,
}


class GraphStore(ServerScoring, VectorStore):
    """A store: the core contract plus every optional capability, defaults included."""

    @property
    def capabilities(self) -> frozenset[str]:
        """The optional capabilities this backend provides itself: those with a method its
        class overrides (``"vectors"``: ``supports_vectors``). The others run on defaults."""
        return capabilities_of(type(self))


def capabilities_of(cls: type) -> frozenset[str]:
    """:attr:`GraphStore.capabilities` of a store class."""
    found = set()
    for name, mixin in CAPABILITIES.items():
        if name == "vectors":
            if getattr(cls, "supports_vectors", False):
                found.add(name)
            continue
        own = [m for m, v in vars(mixin).items() if inspect.isfunction(v)]
        if any(inspect.getattr_static(cls, m) is not vars(mixin)[m] for m in own):
            found.add(name)
    return frozenset(found)


__all__ = [
    "CAPABILITIES",
    "SUPERSEDES",
    "UPDATABLE_FIELDS",
    "Adjustment",
    "Counts",
    "FastWrites",
    "GraphStore",
    "Incident",
    "IndexedReads",
    "Link",
    "Match",
    "RecallHint",
    "ServerScoring",
    "StoreCore",
    "TierMove",
    "TierMoveColumns",
    "VectorStore",
    "capabilities_of",
    "memory_exists",
    "refuse_existing",
]
