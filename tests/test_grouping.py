"""Grouped reinforcement (``Brain(..., reinforcement_delay=s)``, :mod:`ebb_core.grouping`).

Recall's reinforcement is held in memory and written with the next write, at close, or after
the delay; meanwhile every read of the same Brain sees it. These tests hold a grouped Brain to
a write-through one on the same sequence of calls (both backends), and check each moment the
held writes must reach the store, including a process killed after the delay.
"""

from __future__ import annotations

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
from ebb_core.grouping import GroupedStore
from ebb_core.kuzu_store import KuzuStore
from ebb_core.store import GraphStore

WORDS = [
    "harbor",
    "lantern",
    "pricing",
    "outcome",
    "coffee",
    "roast",
    "invoice",
    "ledger",
    "meeting",
    "budget",
]


def populate(brain: Brain) -> None:
    """The same small graph in any namespace: links, a replacement, archived memories."""
    with brain.batch():
        for i in range(40):
            text = " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7)) + f" item{i}"
            brain.remember(text, kind="fact" if i % 3 else "note", id=f"fact:{i}")
        for i in range(0, 40, 4):
            brain.connect(f"fact:{i}", f"fact:{(i + 5) % 40}", kind="related")
        brain.remember("pricing outcome decided anew", kind="decision", id="decision:new")
        brain.supersede("fact:1", "decision:new")
    brain.clock.advance(days=90)  # type: ignore[attr-defined]
    for i in range(0, 40, 9):
        brain.reinforce(f"fact:{i}")
    brain.maintain()  # the others sink to warm or cold: use promotes them again


def ranking(brain: Brain, query: str, **kw: object) -> list[tuple[str, float]]:
    return [(h.id, h.score) for h in brain.recall(query, k=6, **kw)]  # type: ignore[arg-type]


def same(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> None:
    assert [i for i, _ in a] == [i for i, _ in b]
    assert [s for _, s in a] == pytest.approx([s for _, s in b], rel=1e-9, abs=1e-12)


def state(brain: Brain) -> dict[str, tuple[float, float, object, int]]:
    return {
        n.id: (n.key, n.base_key, n.last_read_at, int(n.tier))
        for batch in brain.store.scan_nodes(brain.namespace)
        for n in batch
    }


def test_grouped_ranks_every_recall_as_write_through_does(store: GraphStore) -> None:
    clock = FixedClock(T0)
    plain = Brain(store, namespace="plain", clock=clock)
    grouped = Brain(store, namespace="grouped", clock=clock, reinforcement_delay=600)
    populate(plain)
    clock.set(T0)
    populate(grouped)
    assert isinstance(grouped.store, GroupedStore)
    queries = ["pricing", "harbor lantern", "coffee", "pricing outcome", "", "ledger budget"]
    for step in range(36):
        clock.advance(minutes=17)
        q = queries[step % len(queries)]
        kw: dict[str, object] = {}
        if step % 5 == 4:
            kw["kinds"] = ["fact"]
        if step % 7 == 6:
            kw["depth"] = 2
        same(ranking(plain, q, **kw), ranking(grouped, q, **kw))
        if step == 20:  # a write in between: the held reinforcement goes with it
            held = grouped.store.held  # type: ignore[attr-defined]
            assert held > 0
            for b in (plain, grouped):
                b.remember("harbor ledger reopened", id="fact:late")
            assert grouped.store.held == 0  # type: ignore[attr-defined]
        if step == 27:
            for b in (plain, grouped):
                assert [n.id for n in b.read(["fact:3", "fact:8"])] == ["fact:3", "fact:8"]
    assert grouped.store.held > 0  # type: ignore[attr-defined]
    # held reads look the same as stored ones, before and after they are written
    assert grouped.get("fact:0").key == pytest.approx(plain.get("fact:0").key, rel=1e-9)
    assert [n.id for n in grouped.top(8)] == [n.id for n in plain.top(8)]
    grouped.store.flush()  # type: ignore[attr-defined]
    a, b = state(plain), state(grouped)
    assert a.keys() == b.keys()
    for i in a:
        assert a[i][2:] == b[i][2:], i
        assert a[i][:2] == pytest.approx(b[i][:2], rel=1e-9), i
    strip = [(e.action, e.node_id, e.from_tier, e.to_tier) for e in plain.audit_log(limit=500)]
    assert strip == [
        (e.action, e.node_id, e.from_tier, e.to_tier) for e in grouped.audit_log(limit=500)
    ]
    assert any(e.action == "promote" for e in grouped.audit_log(limit=500))


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


def test_held_reinforcement_is_written_with_the_next_write(store: GraphStore) -> None:
    clock = FixedClock(T0)
    b = Brain(store, namespace="t", clock=clock, reinforcement_delay=600)
    b.remember("harbor lantern", id="note:a")
    clock.advance(days=3)
    b.recall("harbor")
    grouped = b.store
    assert isinstance(grouped, GroupedStore)
    assert grouped.held == 1 and grouped.flushes == 0
    # what the inner store holds is still the old read clock
    assert grouped.inner.get_nodes("t", ["note:a"])["note:a"].last_read_at == T0
    b.remember("ledger", id="note:b")
    assert grouped.held == 0 and grouped.flushes == 1
    assert grouped.inner.get_nodes("t", ["note:a"])["note:a"].last_read_at == T0 + timedelta(days=3)


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


def test_held_reinforcement_is_written_after_the_delay(store: GraphStore) -> None:
    clock = FixedClock(T0)
    b = Brain(store, namespace="t", clock=clock, reinforcement_delay=0.2)
    b.remember("harbor lantern", id="note:a")
    clock.advance(days=3)
    b.recall("harbor")
    grouped = b.store
    assert isinstance(grouped, GroupedStore)
    deadline = time.monotonic() + 30
    while grouped.held and time.monotonic() < deadline:
        time.sleep(0.02)
    assert grouped.held == 0 and grouped.flushes == 1
    assert grouped.inner.get_nodes("t", ["note:a"])["note:a"].last_read_at == T0 + timedelta(days=3)


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
