"""Both backends through the published store contract (:mod:`ebb_core.testing`).

Each class below only says how to open its store; the tests are
:class:`ebb_core.testing.StoreContractTests`, the suite a new backend subclasses in the same way.
The Neo4j class needs the test server (``make test`` starts one); skipped without it, failed under
CI.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from ebb_core.grouping import Forward, GroupedStore
from ebb_core.kuzu_store import KuzuStore
from ebb_core.store import GraphStore
from ebb_core.testing import StoreContractTests


class TestKuzuStoreContract(StoreContractTests):
    @pytest.fixture
    def open_store(self, tmp_path: Path) -> Callable[[], GraphStore]:
        return lambda: KuzuStore(tmp_path / "contract.kuzu")


@pytest.mark.neo4j
class TestNeo4jStoreContract(StoreContractTests):
    @pytest.fixture
    def open_store(self, neo4j_uri: str) -> Callable[[], GraphStore]:
        from ebb_core.neo4j import Neo4jStore

        return lambda: Neo4jStore(neo4j_uri, retry_seconds=5.0)


def _contract_methods() -> list[str]:
    """Every method of the contract: the core's and each capability's (GraphStore's bases)."""
    return sorted(
        {
            name
            for cls in GraphStore.__mro__
            if cls is not object
            for name, value in vars(cls).items()
            if not name.startswith("_")
            and (inspect.isfunction(value) or isinstance(value, property))
        }
    )


def test_the_grouped_store_defines_every_store_method_itself(tmp_path: Path) -> None:
    """GroupedStore passes unknown names to its backend through ``__getattr__``, which Python
    calls only for names the class lacks: a GraphStore method it does not define itself is
    GraphStore's default (often a no-op), silently not the backend's. That once left Kùzu's
    vector tail unindexed under `ebb mcp` (index_vectors)."""
    methods = _contract_methods()
    assert len(methods) > 30  # the whole contract was seen, not an empty list
    # GroupedStore is split by concern (grouping_base, grouping_reads, grouping): its own
    # classes are those of its bases that are not GraphStore's
    own = [c for c in GroupedStore.__mro__ if c not in GraphStore.__mro__]
    missing = [name for name in methods if not any(name in vars(c) for c in own)]
    assert missing == [], f"GroupedStore must pass these on explicitly: {missing}"
    inner = KuzuStore(tmp_path / "grouped.kuzu")
    grouped = GroupedStore(inner, delay=600, lock=threading.RLock())
    try:
        for attr in ("backend", "location", "supports_vectors", "bulk_rollback_safe"):
            assert getattr(grouped, attr) == getattr(inner, attr), attr
    finally:
        grouped.close()


def test_both_backends_say_their_bulk_writes_roll_back_cleanly(tmp_path: Path) -> None:
    # the contract's default is the cautious one (an import then holds Ctrl-C until its commit);
    # Kùzu says it per bulk load: True outside a unit of work (its COPYs commit behind a marker
    # that undoes them), and inside one while the rows fit in the pool (LOAD FROM); past it,
    # inside a unit of work, they are COPYed into the caller's transaction: False
    from ebb_core.neo4j import Neo4jStore

    assert not GraphStore.bulk_rollback_safe
    assert Neo4jStore.bulk_rollback_safe is True
    store = KuzuStore(tmp_path / "safe.kuzu", memory_budget=128 << 20)  # a 77 MiB pool
    try:
        assert store.bulk_rollback_safe is True
        with store.bulk_load(1_000):
            assert store.bulk_rollback_safe is True
        with store.bulk_load(100_000):  # ~400 MB of rows: COPYs committed behind a marker
            assert store.bulk_rollback_safe is True
        with store.transaction(), store.bulk_load(100_000):  # in a unit of work: COPY
            assert store.bulk_rollback_safe is False
        assert store.bulk_rollback_safe is True
    finally:
        store.close()


def test_a_forward_kept_under_another_name_is_refused() -> None:
    """A ``Forward`` passes on the method it was made from, by name: one bound to another
    attribute name would call a different backend method than the one it stands for."""
    with pytest.raises((TypeError, RuntimeError)) as raised:

        class Wrong(GroupedStore):
            counts = Forward(GraphStore.existing_ids)  # type: ignore[assignment]

    # Python before 3.12 wraps an error of __set_name__ in a RuntimeError
    error = raised.value.__cause__ if isinstance(raised.value, RuntimeError) else raised.value
    assert isinstance(error, TypeError)
    assert "Wrong.counts forwards existing_ids" in str(error)
