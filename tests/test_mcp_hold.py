"""``ebb mcp`` keeps its store open between calls and lets go when idle or when asked.

A person's ``ebb`` command that finds the store held asks the holder to let go
(``ebb_core.handoff``) and says what it waits for; the server lets go after its current call,
so approval works even while a client calls in a tight loop.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client

from ebb_core import Brain
from ebb_core.handoff import RequestFile, request_path
from ebb_core.mcp_access import StoreAccess
from ebb_core.mcp_server import build_server
from test_mcp_e2e import NS, TRANSPORTS, call, cli, connect


async def wait_until(check: Any, timeout: float = 20) -> None:
    with anyio.fail_after(timeout):
        while not check():
            await anyio.sleep(0.02)


async def test_the_store_stays_open_between_calls_and_is_let_go_when_idle(tmp_path: Path) -> None:
    db = tmp_path / "held.kuzu"
    access = StoreAccess(db, backend="kuzu", namespace=NS, idle_release=0.5)
    try:
        async with Client(build_server(access)) as c:
            for i in range(10):
                await call(c, "remember", text=f"harbor lantern {i}", id=f"note:{i}")
                hits = (await call(c, "recall", query="lantern", k=3))["hits"]
                assert len(hits) == min(i + 1, 3)
            assert access.opens == 1 and access.is_open
            await wait_until(lambda: not access.is_open)
            assert access.releases["idle"] == 1
            # Let go of for real: this process can open the file now.
            with Brain.open(db, backend="kuzu", namespace=NS) as brain:
                assert brain.stats().nodes == 10
            assert (await call(c, "stats"))["nodes"] == 10
            assert access.opens == 2
    finally:
        access.close()
    assert not access.is_open


async def test_held_reinforcement_is_written_when_the_idle_store_is_let_go_of(
    tmp_path: Path,
) -> None:
    db = tmp_path / "idle.kuzu"
    access = StoreAccess(
        db, backend="kuzu", namespace=NS, idle_release=0.5, reinforcement_delay=600
    )
    try:
        async with Client(build_server(access)) as c:
            made = await call(c, "remember", text="harbor lantern", id="note:a")
            hits = (await call(c, "recall", query="lantern", k=3))["hits"]
            assert [h["id"] for h in hits] == ["note:a"]
            await wait_until(lambda: not access.is_open)
            assert access.releases["idle"] == 1
            with Brain.open(db, backend="kuzu", namespace=NS) as brain:
                read = brain.get("note:a").last_read_at
            assert read is not None
            assert read > datetime.fromisoformat(made["last_read_at"])
    finally:
        access.close()


async def test_an_ebb_command_asks_a_holding_server_to_let_go(tmp_path: Path) -> None:
    db = tmp_path / "asked.kuzu"
    access = StoreAccess(db, backend="kuzu", namespace=NS, idle_release=600)
    try:
        async with Client(build_server(access)) as c:
            await call(c, "remember", text="We price by outcome now", id="decision:pricing")
            assert access.is_open
            shown = await anyio.to_thread.run_sync(lambda: cli(db, "stats", "--json"))
            assert shown.returncode == 0, shown.stderr
            assert json.loads(shown.stdout)["nodes"] == 1
            assert f"waiting up to 15 s for the store at {db}" in shown.stderr
            assert "a running `ebb mcp` lets go after its current call" in shown.stderr
            assert access.releases["asked"] == 1 and not access.is_open
            path = request_path(db)
            assert path is not None and not path.exists()  # withdrawn once the CLI got in
            await call(c, "remember", text="after the person looked", id="note:after")
            assert access.opens == 2
    finally:
        access.close()


def test_a_claimed_call_keeps_the_store_when_asked_after_the_claim(tmp_path: Path) -> None:
    """A call claimed for the event loop does not let go and open again (waiting for the file
    on the loop) when a request comes in between the claim and the call: it uses the open
    store, and the watcher thread lets go for the asker after it."""
    db = tmp_path / "claimed.kuzu"
    access = StoreAccess(db, backend="kuzu", namespace=NS, idle_release=600, wait=2)
    other = subprocess.Popen(["sleep", "60"])  # a live process other than this one
    try:
        access.check()
        assert access.claim()
        path = request_path(db)
        assert path is not None
        path.write_text(str(other.pid))  # it asks for the store now, after the claim
        try:
            with access.brain() as brain:
                brain.remember("written on the loop", id="note:loop")
        finally:
            access.unclaim()
        assert access.opens == 1 and access.releases["asked"] == 0
        deadline = time.monotonic() + 20
        while access.is_open and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not access.is_open and access.releases["asked"] == 1
    finally:
        other.kill()
        other.wait()
        access.close()


class CountingLock:
    """The access's lock, counting how often each thread takes it."""

    def __init__(self, lock: Any) -> None:
        self.lock, self.taken = lock, Counter[str]()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got: bool = self.lock.acquire(blocking, timeout)
        if got:
            self.taken[threading.current_thread().name] += 1
        return got

    def release(self) -> None:
        self.lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def test_the_idle_watcher_takes_the_lock_only_to_let_go(tmp_path: Path) -> None:
    """Checking whether to let go takes no lock (a call on the event loop that met it taken
    would go to a worker thread); letting go does."""
    db = tmp_path / "watched.kuzu"
    access = StoreAccess(db, backend="kuzu", namespace=NS, idle_release=600)
    other = subprocess.Popen(["sleep", "60"])
    try:
        access.check()
        counting = CountingLock(access._lock)
        access._lock = counting  # type: ignore[assignment]
        time.sleep(0.6)  # a dozen of the watcher's checks: open, not idle, not wanted
        assert counting.taken["ebb-idle"] == 0 and access.is_open
        path = request_path(db)
        assert path is not None
        path.write_text(str(other.pid))  # another process asks
        deadline = time.monotonic() + 20
        while access.is_open and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not access.is_open and access.releases["asked"] == 1
        assert counting.taken["ebb-idle"] >= 1
    finally:
        other.kill()
        other.wait()
        access.close()


def test_a_dead_or_own_request_is_ignored(tmp_path: Path) -> None:
    db = tmp_path / "x.kuzu"
    mine = RequestFile(db)
    mine.post()
    assert not mine.wanted_by_other()  # one's own request never makes one let go
    path = request_path(db)
    assert path is not None and path.read_text() == str(os.getpid())
    gone = subprocess.Popen(["true"])
    gone.wait()
    path.write_text(str(gone.pid))  # a process that has exited
    assert not mine.wanted_by_other()
    mine.post()  # a dead request is replaced
    assert path.read_text() == str(os.getpid())
    mine.withdraw()
    assert not path.exists()
    assert request_path(":memory:") is None


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_person_approves_while_a_client_calls_in_a_tight_loop(
    transport: str, tmp_path: Path
) -> None:
    """The idle release is 10 minutes here: only asking lets the person in."""
    db = tmp_path / "loop.kuzu"
    async with connect(transport, db, EBB_MCP_IDLE_RELEASE="600") as c:
        await call(c, "remember", text="Seats were priced per user", id="decision:seats")
        await call(c, "remember", text="We price by outcome now", id="decision:outcome")
        await call(c, "forget", id="decision:seats", reason="superseded")
        calls = 0
        stop = anyio.Event()
        took: list[float] = []

        async def tight_loop() -> None:
            nonlocal calls
            while not stop.is_set():
                if calls % 2:
                    await call(c, "remember", text=f"loop note {calls} about pricing")
                else:
                    await call(c, "recall", query="pricing", k=5)
                calls += 1

        def person() -> subprocess.CompletedProcess[str]:
            started = time.monotonic()
            done = cli(db, "approve", "decision:seats", "--by", "dana", "--json")
            took.append(time.monotonic() - started)
            return done

        async with anyio.create_task_group() as tg:
            tg.start_soon(tight_loop)
            await wait_until(lambda: calls >= 10)
            before = calls
            approved = await anyio.to_thread.run_sync(person)
            await wait_until(lambda: calls >= before + 10)
            stop.set()
        assert approved.returncode == 0, approved.stderr
        assert json.loads(approved.stdout) == {"deleted": ["decision:seats"]}
        assert "waiting up to 15 s for the store" in approved.stderr
        stats = await call(c, "stats")
        assert stats["review_queue"] == 0
        assert stats["nodes"] == 1 + calls // 2  # the loop's memories, none lost
        print(f"{transport}: approved in {took[0]:.2f} s during a loop of {calls} calls")


async def test_held_reinforcement_reaches_a_person_who_takes_the_store_mid_loop(
    tmp_path: Path,
) -> None:
    """`ebb mcp` holds what recall reinforces (here for up to 10 minutes): a person's command
    that takes the store while a client recalls in a tight loop still gets in, and finds the
    loop's reinforcement written (the server writes it as it lets go)."""
    db = tmp_path / "grouped.kuzu"
    async with connect("stdio", db, EBB_MCP_IDLE_RELEASE="600", EBB_REINFORCEMENT_DELAY="600") as c:
        await call(c, "remember", text="Seats were priced per user", id="decision:seats")
        made = await call(c, "remember", text="We price by outcome now", id="decision:outcome")
        await call(c, "forget", id="decision:seats", reason="superseded")
        calls = 0
        stop = anyio.Event()

        async def tight_loop() -> None:
            nonlocal calls
            while not stop.is_set():
                hits = (await call(c, "recall", query="outcome", k=3))["hits"]
                assert [h["id"] for h in hits] == ["decision:outcome"]
                calls += 1

        def person() -> tuple[subprocess.CompletedProcess[str], ...]:
            return (
                cli(db, "approve", "decision:seats", "--by", "dana", "--json"),
                cli(db, "get", "decision:outcome", "--json"),
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(tight_loop)
            await wait_until(lambda: calls >= 10)
            approved, shown = await anyio.to_thread.run_sync(person)
            before = calls
            await wait_until(lambda: calls >= before + 5)  # the server carries on
            stop.set()
    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout) == {"deleted": ["decision:seats"]}
    assert shown.returncode == 0, shown.stderr
    # created (and counted as read) by remember, read again by the loop's recalls
    created = datetime.fromisoformat(made["created_at"])
    assert datetime.fromisoformat(made["last_read_at"]) == created
    assert datetime.fromisoformat(json.loads(shown.stdout)["last_read_at"]) > created


def test_every_name_of_a_store_finds_the_same_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "real.kuzu"
    db.write_bytes(b"")
    link = tmp_path / "link.kuzu"
    link.symlink_to(db)
    monkeypatch.chdir(tmp_path)
    assert request_path(db) == request_path("real.kuzu") == request_path("./link.kuzu")


async def test_an_idle_holder_looks_for_requests_a_few_times_a_second(tmp_path: Path) -> None:
    """While it holds the store between calls, the watcher looks for another process's request
    every WANTED_POLL seconds (it looked every 50 ms: 20 wake-ups a second), still lets go
    within that when one comes, and lets go when idle at the idle deadline."""
    from ebb_core.mcp_access import WANTED_POLL

    db = tmp_path / "looks.kuzu"
    access = StoreAccess(db, backend="kuzu", namespace=NS, idle_release=600)
    requests = access._requests
    assert requests is not None
    looks = Counter[str]()
    wanted = requests.wanted_by_other

    def counted() -> bool:
        looks["looks"] += 1
        return wanted()

    requests.wanted_by_other = counted  # type: ignore[method-assign]
    try:
        async with Client(build_server(access)) as c:
            await call(c, "stats")
            looks.clear()
            await anyio.sleep(2.0)
            assert 2 <= looks["looks"] <= 2.0 / WANTED_POLL + 2  # was about 40
            other = RequestFile(db)
            other.pid = os.getppid()  # a live process other than this one asks
            other.post()
            t0 = time.monotonic()
            await wait_until(lambda: not access.is_open, timeout=10)
            assert time.monotonic() - t0 < WANTED_POLL + 1.0
            assert access.releases["asked"] == 1
            other.withdraw()
    finally:
        access.close()


async def test_an_idle_store_is_let_go_at_its_deadline(tmp_path: Path) -> None:
    access = StoreAccess(tmp_path / "deadline.kuzu", backend="kuzu", namespace=NS, idle_release=1.2)
    try:
        async with Client(build_server(access)) as c:
            await call(c, "stats")
            t0 = time.monotonic()
            await wait_until(lambda: not access.is_open, timeout=10)
            assert 1.1 <= time.monotonic() - t0 < 1.2 + 0.6
            assert access.releases["idle"] == 1
    finally:
        access.close()
