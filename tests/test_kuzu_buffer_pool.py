"""The embedded store's page cache: capped by default (opening is cheaper), set by an env var."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ebb_core import Brain
from ebb_core.errors import InvalidInput
from ebb_core.kuzu_store import BUFFER_POOL_CAP, buffer_pool_bytes


def kuzu_default() -> int:
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 0.8)


def test_default_is_capped_and_grows_with_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EBB_KUZU_BUFFER_POOL_MB", raising=False)
    small = tmp_path / "small.kuzu"
    small.write_bytes(b"\0" * 4096)
    expected = BUFFER_POOL_CAP if kuzu_default() > BUFFER_POOL_CAP else 0
    assert buffer_pool_bytes(str(small)) == expected
    # A store (with its log) larger than half the cap gets twice its size, up to Kùzu's own.
    big = tmp_path / "big.kuzu"
    with open(big, "wb") as f:
        f.truncate(BUFFER_POOL_CAP // 2 + (1 << 20))
    Path(str(big) + ".wal").write_bytes(b"\0" * (1 << 20))
    wanted = 2 * (BUFFER_POOL_CAP // 2 + (2 << 20))
    assert buffer_pool_bytes(str(big)) == (wanted if wanted < kuzu_default() else 0)


def test_the_env_var_sets_it_and_the_store_works_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EBB_KUZU_BUFFER_POOL_MB", "64")
    db = tmp_path / "s.kuzu"
    assert buffer_pool_bytes(str(db)) == 64 << 20
    with Brain.open(db, backend="kuzu") as brain:
        for i in range(50):
            brain.remember(f"lantern harbour note {i}", id=f"note:{i}")
        assert len(brain.recall("lantern", k=5)) == 5
    monkeypatch.setenv("EBB_KUZU_BUFFER_POOL_MB", "0")  # Kùzu's own default
    assert buffer_pool_bytes(str(db)) == 0
    with Brain.open(db, backend="kuzu") as brain:
        assert brain.stats().nodes == 50


@pytest.mark.parametrize("value", ["lots", "-5", "1.5"])
def test_a_bad_value_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("EBB_KUZU_BUFFER_POOL_MB", value)
    with pytest.raises(InvalidInput, match="EBB_KUZU_BUFFER_POOL_MB"):
        Brain.open(tmp_path / "s.kuzu", backend="kuzu")
    assert not (tmp_path / "s.kuzu").exists()  # nothing created
