"""A store that implements only the 14 core methods keeps the whole contract.

``CoreOnlyStore`` passes the core methods (and ``location``, which has a default) to a real
Kùzu store and nothing else, so every capability method (indexed reads, fast writes, the
scoring passes) runs on its default over the core. The published suite,
:class:`ebb_core.testing.StoreContractTests`, then runs against it as against any backend: what
a new backend that writes only the core gets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from ebb_core.kuzu_store import KuzuStore
from ebb_core.model import AuditEntry, Edge, Node, Tier
from ebb_core.store import GraphStore, Incident, StoreCore
from ebb_core.testing import StoreContractTests


class CoreOnlyStore(GraphStore):
    """The core of a Kùzu store, and nothing more: every capability is the default's."""

    backend = "core-only"

    def __init__(self, path: Path) -> None:
        self._inner = KuzuStore(path)

    @property
    def location(self) -> str:
        return self._inner.location

    def transaction(self) -> AbstractContextManager[None]:
        return self._inner.transaction()

    def close(self) -> None:
        self._inner.close()

    def get_meta(self, key: str) -> str | None:
        return self._inner.get_meta(key)

    def set_meta(self, key: str, value: str) -> None:
        self._inner.set_meta(key, value)

    def get_nodes(self, namespace: str, ids: Sequence[str]) -> dict[str, Node]:
        return self._inner.get_nodes(namespace, ids)

    def incident(self, namespace: str, ids: Sequence[str]) -> list[Incident]:
        return self._inner.incident(namespace, ids)

    def scan_nodes(self, namespace: str, batch: int = 5000) -> Iterator[list[Node]]:
        return self._inner.scan_nodes(namespace, batch)

    def namespaces(self) -> list[str]:
        return self._inner.namespaces()

    def text_candidates(
        self, namespace: str, query: str, max_tier: Tier, pool: int, kinds: Sequence[str] = ()
    ) -> list[tuple[Node, float]]:
        return self._inner.text_candidates(namespace, query, max_tier, pool, kinds)

    def upsert_nodes(self, nodes: Sequence[Node]) -> None:
        self._inner.upsert_nodes(nodes)

    def upsert_edges(self, edges: Sequence[Edge]) -> None:
        self._inner.upsert_edges(edges)

    def delete_nodes(self, namespace: str, ids: Sequence[str]) -> None:
        self._inner.delete_nodes(namespace, ids)

    def append_audit(self, entries: Sequence[AuditEntry]) -> None:
        self._inner.append_audit(entries)

    def audit_log(
        self,
        namespace: str,
        limit: int,
        node_id: str | None = None,
        action: str | None = None,
        after_seq: int | None = None,
    ) -> list[AuditEntry]:
        return self._inner.audit_log(namespace, limit, node_id, action, after_seq)


def test_the_core_only_store_defines_the_core_and_nothing_else() -> None:
    core = {n for n in StoreCore.__abstractmethods__}
    assert len(core) == 14  # issue 14: under 15 (location has a default, the backend's name)
    own = {n for n in vars(CoreOnlyStore) if not n.startswith("_") and n != "backend"}
    assert own == core | {"location"}


class TestCoreOnlyStoreContract(StoreContractTests):
    @pytest.fixture
    def open_store(self, tmp_path: Path) -> Callable[[], GraphStore]:
        return lambda: CoreOnlyStore(tmp_path / "core-only.kuzu")
