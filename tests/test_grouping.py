"""Grouped reinforcement (``Brain(..., reinforcement_delay=s)``, :mod:`ebb_core.grouping`).

Recall's reinforcement is held in memory and written with the next write, at close, or after
the delay; meanwhile every read of the same Brain sees it. The tests that hold a grouped Brain
to a write-through one on every backend are in the store contract (:mod:`ebb_core.testing`,
run by tests/test_store_contract.py); these check, on Kùzu, each moment the held writes must
reach the store, including a process killed after the delay.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from conftest import T0
from ebb_core import Brain, FixedClock, InvalidInput
from ebb_core.errors import StoreFull
from ebb_core.grouping import GroupedStore
from ebb_core.kuzu_store import KuzuStore


def test_held_reinforcement_is_written_at_close(tmp_path: Path) -> None:
    db = tmp_path / "close.kuzu"
    clock = FixedClock(T0)
    with Brain(KuzuStore(db), namespace="t", clock=clock) as b:
        b.remember("harbor lantern", id="note:a")
        before = b.get("note:a").last_read_at
    clock.advance(days=3)
    b = Brain(KuzuStore(db), namespace="t", clock=clock, reinforcement_delay=600)
    b.recall("harbor")
    store = b.store
    assert isinstance(store, GroupedStore) and store.held == 1
    assert b.get("note:a").last_read_at == T0 + timedelta(days=3)  # seen at once
    b.close()
    with Brain(KuzuStore(db), namespace="t", clock=clock) as again:
        assert again.get("note:a").last_read_at == T0 + timedelta(days=3) != before


def test_held_reinforcement_survives_a_write_that_rolls_back(tmp_path: Path) -> None:
    clock = FixedClock(T0)
    b = Brain(KuzuStore(tmp_path / "rb.kuzu"), namespace="t", clock=clock, reinforcement_delay=600)
    b.remember("harbor lantern", id="note:a")
    clock.advance(days=3)
    b.recall("harbor")
    key = b.get("note:a").key
    with pytest.raises(RuntimeError), b.batch():
        b.remember("ledger", id="note:b")  # sends the held change, then the block fails
        raise RuntimeError("boom")
    grouped = b.store
    assert isinstance(grouped, GroupedStore) and grouped.held == 1
    assert b.get("note:a").key == pytest.approx(key, rel=1e-12)
    assert b.memories() and [n.id for n in b.memories()] == ["note:a"]
    b.close()
    with Brain(KuzuStore(tmp_path / "rb.kuzu"), namespace="t", clock=clock) as again:
        assert again.get("note:a").last_read_at == T0 + timedelta(days=3)


def _export(b: Brain) -> list[str]:
    out = io.StringIO()
    b.export(out)
    return out.getvalue().splitlines()


def test_a_remember_after_a_recall_takes_the_held_reinforcement_into_its_event(
    tmp_path: Path,
) -> None:
    """What recall held goes into the next new memory's own statement (one transaction), and
    the store ends exactly as written through: also when the new memory links to a memory
    whose reinforcement is held (then the held change is written first, as before)."""
    stores = {}
    for name, delay in (("through", 0.0), ("grouped", 600.0)):
        clock = FixedClock(T0)
        b = Brain(
            KuzuStore(tmp_path / f"{name}.kuzu"),
            namespace="t",
            clock=clock,
            reinforcement_delay=delay,
        )
        b.remember("harbor lantern", id="note:a")
        b.remember("ledger of the harbor", id="note:b")
        b.remember("unrelated garden", id="note:g")
        for step, (query, text, links) in enumerate(
            [("harbor", "map of the bay", []), ("ledger", "ink for the ledger", ["note:b"])]
        ):
            clock.advance(days=2)
            b.recall(query)
            store = b.store
            if isinstance(store, GroupedStore):
                flushes = store.flushes
                assert store.held >= 1
            b.remember(text, id=f"note:new{step}", links=links)
            if isinstance(store, GroupedStore):
                assert store.held == 0 and store.flushes == flushes + 1
        stores[name] = _export(b)
        b.close()
    assert stores["grouped"] == stores["through"]


def test_a_folded_event_that_fails_holds_the_reinforcement_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FixedClock(T0)
    b = Brain(KuzuStore(tmp_path / "f.kuzu"), namespace="t", clock=clock, reinforcement_delay=600)
    b.remember("harbor lantern", id="note:a")
    clock.advance(days=3)
    b.recall("harbor")
    store = b.store
    assert isinstance(store, GroupedStore) and store.held == 1

    def full(extra: int = 0) -> None:  # the disk fills up just as the event is sent
        raise StoreFull("the disk is full", path=str(tmp_path))

    with monkeypatch.context() as m:
        m.setattr(store.inner, "check_room", full)
        with pytest.raises(StoreFull):
            b.remember("ledger", id="note:b")
    assert store.held == 1 and [n.id for n in b.memories()] == ["note:a"]
    b.close()
    with Brain(KuzuStore(tmp_path / "f.kuzu"), namespace="t", clock=clock) as again:
        assert again.get("note:a").last_read_at == T0 + timedelta(days=3)
        assert [n.id for n in again.memories()] == ["note:a"]


KILLED = """
import sys, time
from datetime import datetime, timedelta, timezone
from ebb_core import Brain, FixedClock
from ebb_core.kuzu_store import KuzuStore
t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
clock = FixedClock(t0)
b = Brain(KuzuStore(sys.argv[1]), namespace="t", clock=clock, reinforcement_delay=0.2)
b.remember("harbor lantern", id="note:a")
clock.advance(days=3)
b.recall("harbor")
while b.store.held:  # the delay passes; nothing else is written
    time.sleep(0.01)
print("flushed", flush=True)
time.sleep(600)
"""


def test_a_kill_after_the_delay_loses_no_reinforcement(tmp_path: Path) -> None:
    db = tmp_path / "killed.kuzu"
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(KILLED), str(db)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "flushed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(30)
    with Brain(KuzuStore(db), namespace="t", clock=FixedClock(T0)) as b:
        assert b.get("note:a").last_read_at == T0 + timedelta(days=3)


def test_the_timer_and_calls_take_turns(tmp_path: Path) -> None:
    """A timer write never interleaves with a call: recalls from two threads and the timer
    leave the same store as the same recalls in one thread, written through."""
    clock = FixedClock(T0)
    b = Brain(KuzuStore(tmp_path / "t.kuzu"), namespace="t", clock=clock, reinforcement_delay=0.01)
    tokens = [f"tok{chr(97 + i)}x" for i in range(20)]
    for i, token in enumerate(tokens):
        b.remember(f"harbor lantern {token}", id=f"note:{i}")
    clock.advance(days=2)

    wrong: list[object] = []

    def loop() -> None:
        for i in range(60):
            got = [h.id for h in b.recall(tokens[i % 20], k=1)]
            if got != [f"note:{i % 20}"]:
                wrong.append(got)

    threads = [threading.Thread(target=loop) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong
    b.close()
    with Brain(KuzuStore(tmp_path / "t.kuzu"), namespace="t", clock=clock) as again:
        assert {n.last_read_at for n in again.memories()} == {T0 + timedelta(days=2)}


def test_the_delay_is_checked() -> None:
    for bad in (-1, float("nan"), True, "1", 10_000):
        with pytest.raises(InvalidInput, match="reinforcement_delay"):
            Brain.open(":memory:", reinforcement_delay=bad)  # type: ignore[arg-type]


def test_the_delay_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EBB_REINFORCEMENT_DELAY", "soon")
    with pytest.raises(InvalidInput, match="EBB_REINFORCEMENT_DELAY"):
        Brain.open(tmp_path / "env.kuzu", backend="kuzu")
    monkeypatch.setenv("EBB_REINFORCEMENT_DELAY", "0.5")
    with Brain.open(tmp_path / "env.kuzu", backend="kuzu") as b:
        assert isinstance(b.store, GroupedStore) and b.store.delay == 0.5
    monkeypatch.delenv("EBB_REINFORCEMENT_DELAY")
    with Brain.open(tmp_path / "env.kuzu", backend="kuzu") as b:
        assert not isinstance(b.store, GroupedStore)


def test_the_delayed_writes_share_one_thread_started_once(tmp_path: Path) -> None:
    """Each delay's write runs on the same thread (a thread started per delay made the recall
    that scheduled it wait for the thread to start); closing ends it."""
    clock = FixedClock(T0)
    b = Brain(
        KuzuStore(tmp_path / "one.kuzu"), namespace="t", clock=clock, reinforcement_delay=0.05
    )
    b.remember("harbor lantern", id="note:a")
    store = b.store
    assert isinstance(store, GroupedStore)
    # Stores of earlier tests that were never closed keep their own thread for up to a minute:
    # count only the threads this test's store starts.
    before = {t.ident for t in threading.enumerate() if t.name == "ebb-reinforcement"}
    threads = []
    for round_ in range(4):
        clock.advance(hours=1)
        b.recall("harbor")
        assert store.held == 1
        deadline = time.monotonic() + 10
        while store.held and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.held == 0 and store.flushes == round_ + 1  # written after the delay
        threads.append(
            {t.ident for t in threading.enumerate() if t.name == "ebb-reinforcement"} - before
        )
    assert len(threads[0]) == 1 and all(t == threads[0] for t in threads)
    b.close()
    deadline = time.monotonic() + 10
    while any(t.ident in threads[0] for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the delayed-write thread outlived the store"
        time.sleep(0.01)


def test_a_delayed_call_thread_ends_when_idle_and_starts_again() -> None:
    from ebb_core.grouping_base import DelayedCall

    ran: list[int | None] = []
    call = DelayedCall(0.01, lambda: ran.append(threading.get_ident()), "ebb-test-delayed")
    call.IDLE_EXIT = 0.1
    call.schedule()
    call.schedule()  # pending already: one run
    deadline = time.monotonic() + 10
    while not any(t.name == "ebb-test-delayed" for t in threading.enumerate()) or ran == []:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    while any(t.name == "ebb-test-delayed" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "an idle thread should end"
        time.sleep(0.01)
    assert len(ran) == 1
    call.schedule()
    while len(ran) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    call.stop()
    call.schedule()  # stopped: nothing more runs
    time.sleep(0.1)
    assert len(ran) == 2
