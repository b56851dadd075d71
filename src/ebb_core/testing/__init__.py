"""The store contract as a test suite: a backend subclasses :class:`StoreContractTests`.

In the manner of ``langchain-tests``' standard tests: a new :class:`~ebb_core.store.GraphStore`
proves it keeps the contract (docs/store-contract.md) by subclassing the suite in its own tests
and saying how to open a store::

    import pytest
    from ebb_core.testing import StoreContractTests

    class TestMyStore(StoreContractTests):
        @pytest.fixture
        def open_store(self, tmp_path):
            # each call opens the same, initially empty, store
            return lambda: MyStore(tmp_path / "db")

pytest then runs every test below against it. The tests go through the public
:class:`~ebb_core.engine.Brain` and the store's own methods, with a fixed clock; no test
depends on a server or model of its own (the Kùzu reference store in one ordering test is
embedded). Needs pytest: ``pip install 'ebb-memory[testing]'``.
"""

from __future__ import annotations

from ._base import (
    NEIGHBOUR_QUERIES,
    T0,
    flat_keys,
    hub_graph,
    live_links,
    neighbour_export,
    populate,
    recalls,
    scores,
    small_graph,
    small_namespace,
)
from .capabilities import CapabilityContract
from .data import DataContract
from .grouping import GroupingContract
from .scoring import ScoringContract

__all__ = [
    "NEIGHBOUR_QUERIES",
    "T0",
    "CapabilityContract",
    "DataContract",
    "GroupingContract",
    "ScoringContract",
    "StoreContractTests",
    "flat_keys",
    "hub_graph",
    "live_links",
    "neighbour_export",
    "populate",
    "recalls",
    "scores",
    "small_graph",
    "small_namespace",
]


class StoreContractTests(ScoringContract, DataContract, GroupingContract, CapabilityContract):
    """What every :class:`~ebb_core.store.GraphStore` must do. Subclass it (the subclass's name
    starting with ``Test``) and define the ``open_store`` fixture."""
