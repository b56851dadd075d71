"""The Kùzu scoring watermark (``ebb_core.kuzu.rescored``): ``maintain`` skips its read of the
namespace only while the stored scores are exactly those a full pass computes.

Each check compares the stores' scores after the watermark's path (a skipped or a full pass,
whichever the watermark chose) with a full pass forced on the same store right after it: they
must be equal. With the session's clearing switched off (a write path that forgets the
watermark), the same comparison fails: the check can see a stale skip."""

from __future__ import annotations

import random
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ebb_core import Brain, FixedClock
from ebb_core.kuzu import rescored
from ebb_core.kuzu_store import KuzuStore

NS = "w"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _export(tmp_path: Path) -> Path:
    """An export of 120 memories with ~300 links (random, seeded)."""
    rng = random.Random(7)
    clock = FixedClock(T0)
    brain = Brain(KuzuStore(str(tmp_path / "src")), namespace=NS, clock=clock)
    try:
        for i in range(120):
            earlier = [f"m{j}" for j in rng.sample(range(i), min(i, rng.randint(0, 4)))]
            brain.remember(f"memory {i} about topic {i % 7}", id=f"m{i}", links=earlier)
            clock.advance(hours=rng.randint(1, 30))
        out = tmp_path / "export.jsonl"
        brain.export(out)
    finally:
        brain.close()
    return out


def _imported(tmp_path: Path, clock: FixedClock) -> Brain:
    brain = Brain(KuzuStore(str(tmp_path / "db")), namespace=NS, clock=clock)
    brain.import_(_export(tmp_path), namespace=NS)
    return brain


def _sig(brain: Brain) -> str:
    s, cfg = brain._s, brain.config
    return rescored.signature(s.epoch_us, cfg.half_life_us, cfg.read_bonus, cfg.spread)


def _scores(store: Any) -> dict[str, tuple[Any, ...]]:
    rows = store._q(
        "MATCH (n:Memory) WHERE n.ns = $ns RETURN n.uid, n.base_key, n.key, n.degree, "
        "n.recent_links",
        {"ns": NS},
    )
    return {r[0]: tuple(r[1:]) for r in rows}


def _full_pass(brain: Brain) -> int:
    """A full pass on the store, whatever its watermark says."""
    s, cfg = brain._s, brain.config
    store: Any = brain.store
    return int(
        store._recompute_keys(
            NS, s.epoch_us, cfg.half_life_us, cfg.read_bonus, cfg.spread, sig=_sig(brain)
        )
    )


def _same(a: dict[str, tuple[Any, ...]], b: dict[str, tuple[Any, ...]]) -> bool:
    if a.keys() != b.keys():
        return False
    for u in a:
        (b0, k0, d0, l0), (b1, k1, d1, l1) = a[u], b[u]
        if d0 != d1 or l0 != l1:
            return False
        if not np.allclose([b0, k0], [b1, k1], rtol=1e-9, atol=1e-300):
            return False
    return True


def _writes(brain: Brain, clock: FixedClock) -> None:
    """A mix of the writes that change scores: remember with links, a new version, a link,
    a reinforcement, a read, a recall, a forgotten memory deleted."""
    clock.advance(days=2)
    brain.remember("a new one", id="new1", links=["m3", "m40"])
    clock.advance(hours=3)
    brain.remember("memory 5 rewritten", id="m5")
    brain.connect("m10", "m90")
    brain.reinforce("m20")
    brain.read(["m60"])
    brain.recall("topic 3")
    brain.forget("m77", "test")
    brain.approve_deletion("m77", approved_by="test")
    clock.advance(hours=1)


def _skip_equals_full(tmp_path: Path) -> bool:
    """Import, the mix of writes, maintain: equal to a full pass right after?"""
    clock = FixedClock(T0)
    brain = _imported(tmp_path, clock)
    try:
        clock.advance(days=1)
        _writes(brain, clock)
        brain.maintain()
        after = _scores(brain.store)
        _full_pass(brain)
        return _same(after, _scores(brain.store))
    finally:
        brain.close()


@pytest.mark.parametrize("via_file", [False, True], ids=["small", "links-file-ahead"])
def test_an_import_marks_its_scores_exact_and_the_first_maintain_skips_the_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, via_file: bool
) -> None:
    if via_file:
        # A large import (200k links and up) writes its links' Parquet file in a thread and
        # COPYs it last (kuzu.bulk._insert): that path must mark the scores exact too.
        from ebb_core.kuzu import session

        monkeypatch.setattr(session, "_COPY_VIA_FILE", 1)
    clock = FixedClock(T0)
    brain = _imported(tmp_path, clock)
    store: Any = brain.store
    try:
        assert store.rescored(NS, _sig(brain))
        before = _scores(store)
        reads: list[str] = []
        real = store._arrow

        def arrow(query: str, *args: Any, **kw: Any) -> Any:
            reads.append(query)
            return real(query, *args, **kw)

        store._arrow = arrow
        clock.advance(hours=1)
        report = brain.maintain()
        del store._arrow
        assert not any("Link" in q for q in reads)  # the pass's read of the links was skipped
        assert report.scanned == 120
        assert _scores(store) == before
        assert _full_pass(brain) == 120  # a full pass counts the same memories...
        assert _same(_scores(store), before)  # ...and finds the import's scores exact
        assert store.rescored(NS, _sig(brain))  # the tier moves and audit entries kept it
    finally:
        brain.close()


def test_maintain_after_a_mix_of_writes_equals_a_full_pass(tmp_path: Path) -> None:
    assert _skip_equals_full(tmp_path)


def test_a_write_that_does_not_clear_the_watermark_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The mutation: a write path that leaves the watermark as it is.
    monkeypatch.setattr(KuzuStore, "_clear_rescored", lambda self: None)
    assert not _skip_equals_full(tmp_path)


def test_every_write_clears_it_and_a_full_pass_sets_it_again(tmp_path: Path) -> None:
    clock = FixedClock(T0)
    brain = _imported(tmp_path, clock)
    store: Any = brain.store
    try:
        sig = _sig(brain)
        brain.remember("linked", id="x", links=["m1"])
        assert not store.rescored(NS, sig)
        store._rescored = rescored.UNKNOWN  # read from the store, not the process's copy
        assert not store.rescored(NS, sig)
        clock.advance(hours=1)
        brain.maintain()  # a full pass
        assert store.rescored(NS, sig)
        assert not store.rescored(NS, rescored.signature(1, 2.0, 3.0, 4.0))  # other settings
        brain.reinforce("m2")
        assert not store.rescored(NS, sig)
    finally:
        brain.close()


def test_a_rolled_back_write_leaves_the_watermark(tmp_path: Path) -> None:
    clock = FixedClock(T0)
    brain = _imported(tmp_path, clock)
    store: Any = brain.store
    try:
        sig = _sig(brain)
        with pytest.raises(RuntimeError), store.transaction():
            store._q("MATCH (n:Memory {uid: $u}) SET n.degree = 99", {"u": f"{NS}:m1"})
            assert not store.rescored(NS, sig)
            raise RuntimeError("rolled back")
        assert store.rescored(NS, sig)  # read again: the delete was rolled back too
    finally:
        brain.close()


def test_the_watermark_survives_a_reopen(tmp_path: Path) -> None:
    clock = FixedClock(T0)
    brain = _imported(tmp_path, clock)
    sig = _sig(brain)
    brain.close()
    store: Any = KuzuStore(str(tmp_path / "db"))
    try:
        assert store.rescored(NS, sig)
    finally:
        store.close()


def test_a_salvaged_store_does_not_carry_it(tmp_path: Path) -> None:
    # What a salvage copies may lack rows the source's scores counted: its next pass is full.
    from ebb_core.salvage import salvage

    clock = FixedClock(T0)
    brain = _imported(tmp_path, clock)
    sig = _sig(brain)
    assert brain.store.get_meta(rescored.WATERMARK) is not None
    brain.close()
    salvage(tmp_path / "db", tmp_path / "saved")
    store: Any = KuzuStore(str(tmp_path / "saved"))
    try:
        assert store.get_meta("epoch_us") is not None  # the other Meta rows came along
        assert not store.rescored(NS, sig)
    finally:
        store.close()
