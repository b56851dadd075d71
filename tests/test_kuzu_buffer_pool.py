"""The embedded store's page cache: a share of the memory budget, not Kùzu's 80% of the machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ebb_core import Brain
from ebb_core.errors import InvalidInput
from ebb_core.kuzu_store import DEFAULT_MEMORY_BUDGET, _buffer_pool, memory_budget_from_env


def test_the_pool_is_a_share_of_the_budget_below_kuzus_own_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("EBB_MEMORY_BUDGET", raising=False)
    pool = _buffer_pool(memory_budget_from_env())
    assert pool == DEFAULT_MEMORY_BUDGET * 3 // 5
    kuzu_default = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 0.8)
    assert pool < kuzu_default


def test_the_budget_sets_it_and_the_store_works_with_a_small_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EBB_MEMORY_BUDGET", "128M")
    assert _buffer_pool(memory_budget_from_env()) == (128 << 20) * 3 // 5
    db = tmp_path / "s.kuzu"
    with Brain.open(db, backend="kuzu") as brain:
        for i in range(50):
            brain.remember(f"lantern harbour note {i}", id=f"note:{i}")
        assert len(brain.recall("lantern", k=5)) == 5
    monkeypatch.setenv("EBB_MEMORY_BUDGET", "4G")
    with Brain.open(db, backend="kuzu") as brain:
        assert brain.stats().nodes == 50


@pytest.mark.parametrize("value", ["lots", "-5", "1M"])
def test_a_bad_value_is_refused_by_name_and_nothing_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("EBB_MEMORY_BUDGET", value)
    with pytest.raises(InvalidInput, match="EBB_MEMORY_BUDGET"):
        Brain.open(tmp_path / "s.kuzu", backend="kuzu")
    assert not (tmp_path / "s.kuzu").exists()
