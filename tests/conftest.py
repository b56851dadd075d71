"""Shared fixtures. ``store`` / ``brain`` are parametrised over every backend.

Backends: ``kuzu`` always; ``neo4j`` against a real server: the URI in ``EBB_TEST_NEO4J_URI``, or
the one ``scripts/neo4j-test-server start`` wrote to ``.neo4j-test/uri`` (``make test`` starts a
server of its own and sets the variable). Without a server the neo4j cases are skipped with the
reason; under ``CI=true`` every skipped neo4j test fails the run instead. Each neo4j test starts
from an empty database, so a server holding more than ``WIPE_GUARD`` nodes (someone's data) is
refused, with the reason, unless ``EBB_TEST_NEO4J_WIPE=1``. A new backend is one more entry in
``BACKENDS`` and ``make_store``.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Generator, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pluggy
import pytest

from ebb_core import Brain, FixedClock
from ebb_core.kuzu_store import KuzuStore
from ebb_core.store import GraphStore

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
ROOT = Path(__file__).resolve().parent.parent

# The Ctrl-C tests raise SIGINT and expect Python's KeyboardInterrupt. A test run started in the
# background by a shell without job control (`cmd &` in a script, nohup) inherits SIGINT
# ignored, and then no Ctrl-C reaches Python at all; give the run Python's own handler back (it
# also makes the child processes the tests start get the default disposition again).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

BACKENDS = ["kuzu", pytest.param("neo4j", marks=pytest.mark.neo4j)]
#: more nodes than any test leaves behind: a server holding more is not emptied (see _Neo4jServer)
WIPE_GUARD = 100_000


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(T0)


# -- the Neo4j test server ---------------------------------------------------------------------
class _Neo4jServer:
    """The test server for this session: found once, then reset before each test."""

    def __init__(self) -> None:
        self.uri: str | None = None
        self.problem: str | None = None
        self._driver: Any = None
        self._checked = False

    def find(self) -> str:
        """The server's URI, or skip (with the reason) when there is none."""
        if not self._checked:
            self._checked = True
            self._connect()
        if self.problem:
            pytest.skip(self.problem)
        assert self.uri is not None
        return self.uri

    def _connect(self) -> None:
        uri = os.environ.get("EBB_TEST_NEO4J_URI", "").strip()
        source = "EBB_TEST_NEO4J_URI"
        state = Path(os.environ.get("EBB_NEO4J_STATE_DIR") or ROOT / ".neo4j-test") / "uri"
        if not uri and state.is_file():
            uri, source = state.read_text().strip(), str(state)
        if not uri:
            self.problem = (
                "no Neo4j test server: run `scripts/neo4j-test-server start` (or `make test`), "
                "or set EBB_TEST_NEO4J_URI"
            )
            return
        try:
            import neo4j
        except ImportError:
            self.problem = "the neo4j driver is not installed: pip install -e '.[neo4j]'"
            return
        self._driver = neo4j.GraphDatabase.driver(
            uri, auth=None, connection_timeout=5.0, max_transaction_retry_time=5.0
        )
        try:
            self._driver.verify_connectivity()
        except Exception as exc:
            self._driver.close()
            self._driver = None
            self.problem = f"the Neo4j test server at {uri} (from {source}) does not answer: {exc}"
            return
        self.problem = self._refuse_to_wipe(uri, source)
        self.uri = uri

    def _refuse_to_wipe(self, uri: str, source: str) -> str | None:
        """Each neo4j test empties the database first: a server holding more than a test run
        leaves behind (``WIPE_GUARD`` nodes) is someone's data, not a test server, and is left
        alone unless ``EBB_TEST_NEO4J_WIPE=1`` says to erase it."""
        if os.environ.get("EBB_TEST_NEO4J_WIPE", "").strip() == "1":
            return None
        with self._driver.session(database="neo4j") as s:
            held = s.run("MATCH (n) RETURN count(n) AS c").single()["c"]
        if held <= WIPE_GUARD:
            return None
        return (
            f"the Neo4j server at {uri} (from {source}) holds {held:,} nodes, and every neo4j "
            "test empties the database: refusing to touch it. Point EBB_TEST_NEO4J_URI at a "
            "server for tests (`scripts/neo4j-test-server start`), or set "
            "EBB_TEST_NEO4J_WIPE=1 to let the tests erase this one"
        )

    def reset(self) -> None:
        """Empty the database (schema stays: stores create it idempotently) and GDS graphs."""
        from ebb_core.errors import BackendUnavailable

        try:
            with self._driver.session(database="neo4j") as s:
                s.run("MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS")
                gds = s.run("SHOW PROCEDURES YIELD name WHERE name = 'gds.graph.list' RETURN name")
                if gds.single():
                    s.run(
                        "CALL gds.graph.list() YIELD graphName "
                        "CALL gds.graph.drop(graphName, false) YIELD graphName AS dropped "
                        "RETURN count(*)"
                    ).consume()
        except Exception as exc:
            # A server that went away mid-suite: every later neo4j test fails at once, clearly.
            self.problem = f"the Neo4j test server at {self.uri} went away: {exc}"
            raise BackendUnavailable(self.problem) from None

    def close(self) -> None:
        if self._driver is not None:
            self._driver.close()


@pytest.fixture(scope="session")
def neo4j_server() -> Iterator[_Neo4jServer]:
    server = _Neo4jServer()
    yield server
    server.close()


@pytest.fixture
def neo4j_uri(neo4j_server: _Neo4jServer) -> str:
    """The URI of an emptied Neo4j test server (skips without one)."""
    uri = neo4j_server.find()
    neo4j_server.reset()
    return uri


def make_store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> GraphStore:
    if backend == "kuzu":
        return KuzuStore(tmp_path / "ebb.kuzu")
    if backend == "neo4j":
        from ebb_core.neo4j import Neo4jStore

        return Neo4jStore(request.getfixturevalue("neo4j_uri"), retry_seconds=5.0)
    raise AssertionError(backend)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GraphStore]:
    s = make_store(request.param, tmp_path, request)
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


# -- under CI, a skipped Neo4j test is a failure ------------------------------------------------
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    outcome = yield
    report = outcome.get_result()
    if report.skipped and in_ci() and item.get_closest_marker("neo4j") is not None:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"CI=true: a Neo4j test must run, but it was skipped: {reason}"
