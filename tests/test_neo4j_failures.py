"""Failure behaviour on Neo4j: unreachable at start, wrong credentials, no GDS, and a server that
stops mid-run. Each case gets a clear error naming the URI (one line from the CLI), never a hang.

The unreachable cases need no server. The others start throwaway servers of their own with
``scripts/neo4j-test-server`` (authentication on or GDS off, as each case needs); they are
skipped when Java or Maven is missing, which fails the run under ``CI=true``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ebb_core import Brain, FixedClock, InvalidInput
from ebb_core.errors import BackendUnavailable
from ebb_core.neo4j import Neo4jStore

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "neo4j-test-server"
PASSWORD = "ebb-test-password"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bounded(fn: Callable[[], Any], seconds: float = 120.0) -> Any:
    """Run ``fn`` in a thread; fail (instead of hanging the suite) if it takes too long.
    Returns its result, or the exception it raised."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["value"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still waiting after {seconds:.0f} s: a hang"
    return out["value"]


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The real ``ebb`` command in a subprocess, so stderr is exactly what a person sees."""
    return subprocess.run(
        [sys.executable, "-c", "from ebb_core.cli import main; main()", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


class Throwaway:
    """A Neo4j test server of a test's own, in its own state directory."""

    def __init__(self, state: Path, **env: str) -> None:
        self.env = {
            **os.environ,
            "EBB_NEO4J_STATE_DIR": str(state),
            "EBB_NEO4J_HEAP": "512m",
            "EBB_NEO4J_GDS": "0",
            **env,
        }
        self.uri = ""

    def _script(self, command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(SCRIPT), command], env=self.env, capture_output=True, text=True
        )

    def start(self) -> str:
        done = self._script("start")
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or ["(no output)"]
            pytest.skip(f"cannot start a throwaway Neo4j test server: {lines[-1]}")
        self.uri = done.stdout.strip().splitlines()[-1]
        return self.uri

    def stop(self) -> None:
        self._script("stop")


# -- no server at all ----------------------------------------------------------------------
def test_unreachable_server_names_the_uri() -> None:
    uri = f"bolt://127.0.0.1:{free_port()}"
    error = bounded(lambda: Neo4jStore(uri), 60)
    assert isinstance(error, BackendUnavailable)
    assert str(error).startswith(f"cannot reach Neo4j at {uri} (")
    assert "start the server or fix NEO4J_URI" in str(error)


def test_cli_prints_one_line_when_neo4j_is_unreachable() -> None:
    uri = f"bolt://127.0.0.1:{free_port()}"
    done = run_cli("stats", env={"EBB_BACKEND": "neo4j", "NEO4J_URI": uri})
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: cannot reach Neo4j at {uri}")


def test_a_uri_that_is_not_bolt_is_refused() -> None:
    with pytest.raises(InvalidInput, match="not a Bolt URI"):
        Neo4jStore("http://127.0.0.1:7474")
    with pytest.raises(InvalidInput, match="not a Bolt URI"):
        Neo4jStore("localhost:7687")


# -- a server with authentication on and no GDS --------------------------------------------
@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    server = Throwaway(tmp_path_factory.mktemp("neo4j-auth"), EBB_NEO4J_AUTH="1")
    uri = server.start()
    try:
        # The built-in user must change its initial password before anything else.
        expired = bounded(lambda: Neo4jStore(uri, auth=("neo4j", "neo4j")), 60)
        import neo4j

        with neo4j.GraphDatabase.driver(uri, auth=("neo4j", "neo4j")) as driver:
            driver.execute_query(
                f"ALTER CURRENT USER SET PASSWORD FROM 'neo4j' TO '{PASSWORD}'",
                database_="system",
            )
        yield {"uri": uri, "expired": str(expired)}
    finally:
        server.stop()


@pytest.mark.neo4j
def test_wrong_credentials_get_a_clear_message(auth_server: dict[str, str]) -> None:
    uri = auth_server["uri"]
    assert auth_server["expired"].startswith(f"Neo4j at {uri} requires a new password")
    for auth, who in ((("neo4j", "not-the-password"), "user 'neo4j'"), (None, "no credentials")):
        error = bounded(lambda auth=auth: Neo4jStore(uri, auth=auth), 60)  # type: ignore[misc]
        assert isinstance(error, BackendUnavailable)
        assert str(error) == (
            f"Neo4j at {uri} refused the credentials ({who}): check NEO4J_USER and NEO4J_PASSWORD"
        )
        assert "not-the-password" not in str(error)
    env = {"EBB_BACKEND": "neo4j", "NEO4J_URI": uri, "NEO4J_PASSWORD": "wrong"}
    done = run_cli("stats", env=env)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"error: Neo4j at {uri} refused the credentials (user 'neo4j'): check NEO4J_USER and "
        "NEO4J_PASSWORD"
    ]
    done = run_cli("--namespace", "cli", "stats", "--json", env={**env, "NEO4J_PASSWORD": PASSWORD})
    assert done.returncode == 0, done.stderr
    assert '"backend": "neo4j"' in done.stdout


@pytest.mark.neo4j
def test_pagerank_without_gds_says_so(auth_server: dict[str, str], clock: FixedClock) -> None:
    store = Neo4jStore(auth_server["uri"], auth=("neo4j", PASSWORD))
    with Brain(store, namespace="gds", clock=clock) as brain:
        brain.remember("a memory", id="note:a")
        assert not store.has_gds()
        with pytest.raises(InvalidInput, match="needs the Graph Data Science plugin") as info:
            brain.maintain(spreading="pagerank")
        assert auth_server["uri"] in str(info.value) and "spreading 'default'" in str(info.value)
        assert brain.maintain().spreading == "default"


# -- a server that stops mid-run -----------------------------------------------------------
@pytest.mark.neo4j
def test_server_stopped_mid_run_gives_a_clear_error_then_recovers(
    tmp_path: Path, clock: FixedClock
) -> None:
    # The store is kept across the restart (EBB_NEO4J_KEEP_DATA=1, as benchmarks keep a 1M import).
    server = Throwaway(tmp_path / "state", EBB_NEO4J_PORT=str(free_port()), EBB_NEO4J_KEEP_DATA="1")
    uri = server.start()
    try:
        store = Neo4jStore(uri, retry_seconds=2.0)
        patient = Neo4jStore(uri, retry_seconds=150.0)
        brain = Brain(store, namespace="t", clock=clock)
        brain.remember("written before the outage", id="note:a")

        # The server goes away in the middle of an operation (an open transaction).
        def interrupted() -> None:
            with store.transaction():
                brain.remember("inside the interrupted operation", id="note:b")
                server.stop()
                brain.remember("after the server stopped", id="note:c", links=["note:b"])

        error = bounded(interrupted)
        assert isinstance(error, BackendUnavailable), error
        assert str(error).startswith(f"lost the connection to Neo4j at {uri} during an operation")

        # Later calls retry for retry_seconds, then say what happened.
        for call in (
            lambda: brain.recall("outage"),
            lambda: brain.remember("while the server is down", id="note:d"),
            brain.maintain,
        ):
            started = time.monotonic()
            error = bounded(call)
            assert isinstance(error, BackendUnavailable), error
            assert uri in str(error) and "check the server, then retry" in str(error)
            assert time.monotonic() - started >= 1.5  # it did retry for retry_seconds first
        error = bounded(lambda: Neo4jStore(uri))
        assert isinstance(error, BackendUnavailable) and "cannot reach" in str(error)
        done = run_cli("stats", env={"EBB_BACKEND": "neo4j", "NEO4J_URI": uri})
        assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
        assert f"cannot reach Neo4j at {uri}" in done.stderr

        # A call made while the server is away gets through once it is back (retries).
        result: dict[str, Any] = {}
        waiting = threading.Thread(
            target=lambda: result.update(value=bounded(lambda: patient.set_meta("k", "v"), 300))
        )
        waiting.start()
        time.sleep(1.0)
        assert server.start() == uri
        waiting.join(320)
        assert not waiting.is_alive() and result["value"] is None, result
        assert patient.get_meta("k") == "v"
        # What committed before the outage is still there; the interrupted operation is not.
        back = Brain(patient, namespace="t", clock=clock)
        assert back.get("note:a").text == "written before the outage"
        assert patient.counts("t").nodes == 1
        store.close()
        patient.close()
    finally:
        server.stop()
