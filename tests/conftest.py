"""Shared fixtures. ``store`` / ``brain`` are parametrised over every backend available.

Backends: ``kuzu`` always; ``neo4j`` when a test server is reachable (``make test`` starts one).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from ebb_core import Brain, FixedClock
from ebb_core.kuzu_store import KuzuStore
from ebb_core.store import GraphStore

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

BACKENDS = ["kuzu"]


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(T0)


def make_store(backend: str, tmp_path: Path) -> GraphStore:
    if backend == "kuzu":
        return KuzuStore(tmp_path / "ebb.kuzu")
    raise AssertionError(backend)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GraphStore]:
    s = make_store(request.param, tmp_path)
    yield s
    s.close()


@pytest.fixture
def brain(store: GraphStore, clock: FixedClock) -> Brain:
    return Brain(store, namespace="test", clock=clock)


@pytest.fixture
def kuzu_brain(tmp_path: Path, clock: FixedClock) -> Iterator[Brain]:
    """A Brain on embedded Kùzu only (adapter tests that don't need every backend)."""
    b = Brain(KuzuStore(tmp_path / "ebb.kuzu"), namespace="test", clock=clock)
    yield b
    b.close()
