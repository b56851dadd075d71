"""``ebb mcp`` end to end: the SDK's own clients against the real server process.

Every test runs over stdio (the client spawns ``ebb mcp``) and over streamable HTTP (``ebb mcp
--transport http`` started as a subprocess). A person's ``ebb review`` / ``ebb approve`` run as
separate processes against the same store while the server is serving it.
"""

from __future__ import annotations

import io
import json
import os
import queue
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters

from ebb_core import Brain
from ebb_core.mcp_server import HTTP_PATH, TOOL_NAMES

NS = "e2e"
ROOT = Path(__file__).resolve().parents[1]
TRANSPORTS = ["stdio", "http"]
EBB_SCRIPT = Path(sys.executable).with_name("ebb")
PASSED_THROUGH = ("EBB_KUZU_MODULE", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def ebb_argv(*args: str) -> list[str]:
    """The installed ``ebb`` script when there is one (as ``make test`` installs it)."""
    if EBB_SCRIPT.exists():
        return [str(EBB_SCRIPT), *args]
    return [sys.executable, "-m", "ebb_core.cli", *args]


def store_env(db: Path, **extra: str) -> dict[str, str]:
    env = {"EBB_DB_PATH": str(db), "EBB_NAMESPACE": NS, "EBB_BACKEND": "kuzu", **extra}
    # The SDK's stdio client passes only a few variables (PATH, HOME...) to the server.
    for name in PASSED_THROUGH:
        if name in os.environ:
            env.setdefault(name, os.environ[name])
    return env


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A person at the terminal: ``ebb ARGS`` on the same store."""
    return subprocess.run(
        ebb_argv(*args),
        env={**os.environ, **store_env(db)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def snapshot(db: Path) -> str:
    """Everything in the store as text (the server holds nothing between calls)."""
    out = io.StringIO()
    with Brain.open(db, backend="kuzu", namespace=NS, wait=10) as brain:
        brain.export(out, all_namespaces=True)
    return out.getvalue()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def http_server(db: Path, argv: list[str] | None = None, **env: str) -> Iterator[str]:
    """``ebb mcp --transport http`` on a free loopback port; yields its URL."""
    port = free_port()
    log = db.with_suffix(".server.log")
    cmd = [*(argv or ebb_argv()), "mcp", "--transport", "http", "--port", str(port)]
    with open(log, "w") as err:
        proc = subprocess.Popen(
            cmd,
            env={**os.environ, **store_env(db, **env)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"ebb mcp exited with {proc.returncode}: {log.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"ebb mcp did not listen on {port}: {log.read_text()}")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}{HTTP_PATH}"
        assert proc.poll() is None, f"the server died: {log.read_text()}"
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@asynccontextmanager
async def connect(
    transport: str, db: Path, argv: list[str] | None = None, **env: str
) -> AsyncIterator[Client]:
    """An MCP client session with ``ebb mcp`` serving ``db``."""
    if transport == "stdio":
        cmd = [*(argv or ebb_argv()), "mcp"]
        params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=store_env(db, **env))
        async with Client(params) as client:
            yield client
    else:
        with http_server(db, argv, **env) as url:
            async with Client(url) as client:
                yield client


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, (tool, result.content)
    out: dict[str, Any] | None = result.structured_content
    assert out is not None
    return out


async def error_of(client: Client, tool: str, args: dict[str, Any]) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error, (tool, args, result.structured_content)
    first = result.content[0]
    assert first.type == "text"
    return first.text


# -- every tool, and a person approving while the server runs --------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_every_tool_and_a_person_approves_while_serving(
    transport: str, tmp_path: Path
) -> None:
    db = tmp_path / "store.kuzu"
    async with connect(transport, db) as c:
        assert sorted(t.name for t in (await c.list_tools()).tools) == sorted(TOOL_NAMES)

        await call(
            c,
            "remember",
            text="We price by outcome now",
            kind="decision",
            id="decision:outcome-pricing",
        )
        await call(
            c,
            "remember",
            text="Seats were priced per user",
            kind="decision",
            id="decision:seat-pricing",
        )
        await call(
            c,
            "remember",
            text="Acme signed on outcome pricing",
            kind="fact",
            id="fact:acme",
            links=["decision:outcome-pricing"],
            link_kind="about",
        )
        await call(
            c,
            "remember",
            text="Ravi runs the Acme account",
            kind="person",
            id="person:ravi",
            links=["fact:acme"],
            props={"team": "sales"},
        )
        link = await call(
            c,
            "connect",
            src="decision:outcome-pricing",
            dst="decision:seat-pricing",
            kind="supersedes",
        )
        assert link["kind"] == "supersedes"
        assert (await call(c, "reinforce", id="fact:acme", with_id="person:ravi"))["id"] == (
            "fact:acme"
        )
        nb = await call(c, "neighbors", id="fact:acme")
        assert {n["id"] for n in nb["neighbors"]} == {"decision:outcome-pricing", "person:ravi"}
        assert (await call(c, "pin", id="decision:outcome-pricing"))["pinned"] is True

        found = await call(c, "recall", query="Acme pricing", k=3, explain=True)
        top = found["hits"][0]
        assert top["id"] == "fact:acme"
        assert {"acme", "pricing"} <= set(top["why"]["matched_terms"])
        assert top["why"]["live_links"] and "matched" in top["why"]["summary"]

        queued = await call(c, "forget", id="decision:seat-pricing", reason="superseded")
        assert queued["in_review_queue"] is True
        review = await call(c, "review_queue")
        assert [i["id"] for i in review["items"]] == ["decision:seat-pricing"]
        assert (await call(c, "maintain"))["scanned"] == 4
        stats = await call(c, "stats")
        assert stats["nodes"] == 4 and stats["review_queue"] == 1 and stats["pinned"] == 1
        resource = await c.read_resource("ebb://review-queue")
        assert "decision:seat-pricing" in resource.contents[0].text  # type: ignore[union-attr]

        # A person, at the command line, while this session is still connected:
        shown = cli(db, "review", "--json")
        assert shown.returncode == 0, shown.stderr
        assert [i["id"] for i in json.loads(shown.stdout)] == ["decision:seat-pricing"]
        approved = cli(db, "approve", "decision:seat-pricing", "--by", "dana", "--json")
        assert approved.returncode == 0, approved.stderr
        assert json.loads(approved.stdout) == {"deleted": ["decision:seat-pricing"]}
        counted = cli(db, "stats", "--json")
        assert counted.returncode == 0 and json.loads(counted.stdout)["nodes"] == 3

        # ...and the agent's session goes on, seeing the person's decision.
        assert (await call(c, "review_queue"))["items"] == []
        assert (await call(c, "stats"))["nodes"] == 3
        again = await call(c, "recall", query="pricing")
        assert "decision:seat-pricing" not in {h["id"] for h in again["hits"]}

    log = cli(db, "log", "--json")
    assert log.returncode == 0, log.stderr
    deletes = [e for e in json.loads(log.stdout) if e["action"] == "delete"]
    assert [(e["node_id"], e["actor"]) for e in deletes] == [("decision:seat-pricing", "dana")]


# -- bad input -------------------------------------------------------------------------------

WIRE_BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("remember", {}, "text is required"),
    ("remember", {"text": ["not", "a", "string"]}, "text: Input should be a valid string"),
    ("remember", {"text": "x" * 1_000_000}, "the limit is 200,000"),
    ("remember", {"text": "ok", "links": ["nope:missing"]}, "no memory 'nope:missing'"),
    ("remember", {"text": "ok", "kind": "DROP TABLE"}, "must be lowercase letters"),
    ("recall", {"query": "x", "k": "ten"}, "k: Input should be a valid integer"),
    ("recall", {"query": {"$ne": None}}, "query: Input should be a valid string"),
    ("connect", {"src": "fact:a", "dst": "nope:x"}, "no memory 'nope:x'"),
    ("reinforce", {"id": "MATCH (n) DETACH DELETE n"}, "no memory 'MATCH (n) DETACH DELETE n'"),
    ("forget", {"id": "x'}) MATCH (n) DELETE n //"}, "no memory"),
    ("forget", {"id": "x'})-MATCH-(n)-DELETE-n-//"}, "no memory"),
    ("neighbors", {"id": "🙂" * 300}, "at most 200 characters"),
    ("pin", {}, "id is required"),
    ("review_queue", {"limit": 0}, "limit: Input should be greater than or equal to 1"),
    ("stats", {"verbose": True}, "unknown argument 'verbose'"),
    ("purge", {}, "Unknown tool: purge"),
]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_malformed_calls_get_tool_errors_and_the_server_keeps_serving(
    transport: str, tmp_path: Path
) -> None:
    db = tmp_path / "store.kuzu"
    async with connect(transport, db) as c:
        await call(c, "remember", text="alpha fact", id="fact:a")
        odd = "Ω≈ç√ ∫˜µ 𝕳𝖊𝖑𝖑𝖔 \u202edesrever\u202c e\u0301 \u200d🧑‍🚀 ﷽"
        assert (await call(c, "remember", text=odd, id="note:odd"))["text"] == odd
        before = snapshot(db)
        for tool, args, expected in WIRE_BAD_CALLS:
            message = await error_of(c, tool, args)
            assert expected in message, (tool, message)
        assert snapshot(db) == before
        assert (await call(c, "stats"))["nodes"] == 2
        assert (await call(c, "recall", query="alpha"))["hits"][0]["id"] == "fact:a"


#: The first request of a raw MCP session (no SDK client), as a test writes it on the wire.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


def post(url: str, body: bytes, **headers: str) -> urllib.request.Request:
    """A raw POST of ``body`` to the streamable HTTP endpoint, with the headers a client sends
    (``headers`` add to or replace them)."""
    sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    return urllib.request.Request(url, data=body, method="POST", headers={**sent, **headers})


def test_garbage_on_the_stdio_wire_does_not_stop_the_server(tmp_path: Path) -> None:
    """Lines that are not JSON-RPC at all (the SDK's transport drops those it cannot parse,
    lone surrogates included, or answers them with a protocol error); valid calls still work."""
    db = tmp_path / "store.kuzu"
    proc = subprocess.Popen(
        [*ebb_argv(), "mcp"],
        env={**os.environ, **store_env(db)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        encoding="utf-8",
    )
    assert proc.stdin is not None and proc.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    out = proc.stdout
    threading.Thread(target=lambda: list(map(lines.put, out)), daemon=True).start()

    def send(raw: str) -> None:
        assert proc.stdin is not None
        proc.stdin.write(raw + "\n")
        proc.stdin.flush()

    def answer(id_: int) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                msg: dict[str, Any] = json.loads(lines.get(timeout=1))
            except queue.Empty:
                continue
            if msg.get("id") == id_:
                return msg
        pytest.fail(f"no answer to request {id_}")

    try:
        send(json.dumps(INITIALIZE))
        assert "result" in answer(1)
        send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        send("this is not json")
        send(
            '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"remember",'
            '"arguments":{"text":"lone \\ud800 surrogate"}}}'
        )
        send('{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"remember"')
        send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 4,
                    "method": "tools/call",
                    "params": {"name": "remember", "arguments": "not an object"},
                }
            )
        )
        assert answer(4)["error"]["code"] == -32602
        send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 5,
                    "method": "tools/call",
                    "params": {"name": "remember", "arguments": {"text": "still here"}},
                }
            )
        )
        assert answer(5)["result"]["structuredContent"]["text"] == "still here"
        send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 6,
                    "method": "tools/call",
                    "params": {"name": "stats", "arguments": {}},
                }
            )
        )
        assert answer(6)["result"]["structuredContent"]["nodes"] == 1
    finally:
        proc.stdin.close()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0


def test_garbage_over_http_does_not_stop_the_server(tmp_path: Path) -> None:
    db = tmp_path / "store.kuzu"
    with http_server(db) as url:
        for body in (b"this is not json", b'{"jsonrpc":"2.0","id":1,"method":', b"\xff\xfe"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(post(url, body), timeout=30)
            assert 400 <= refused.value.code < 500

        # A page in a browser cannot reach it under another name (DNS rebinding).
        foreign = post(url, b"{}", Host="attacker.example")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(foreign, timeout=30)
        assert 400 <= refused.value.code < 500

        async def still_serving() -> None:
            async with Client(url) as c:
                assert (await call(c, "stats"))["nodes"] == 0

        anyio.run(still_serving)


def test_http_answers_each_request_with_plain_json(tmp_path: Path) -> None:
    """Streamable HTTP replies as one JSON body per request (``json_response``), not an SSE
    stream per request: less work on both sides, and every client must take either."""
    with http_server(tmp_path / "store.kuzu") as url:
        with urllib.request.urlopen(
            post(url, json.dumps(INITIALIZE).encode()), timeout=30
        ) as response:
            assert response.headers["Content-Type"].startswith("application/json")
            body = json.loads(response.read())
        assert body["id"] == 1 and body["result"]["serverInfo"]["name"] == "ebb"


# -- a client that goes away mid-call --------------------------------------------------------

# Runs ``ebb`` with the store's event writer slowed down: a ``remember`` with links writes its
# memory and links inside an open transaction (not as a final write that commits on its own, so
# the call stands for any multi-statement write), then stalls there (and drops a marker file)
# before the rest of the call and the commit.
STALLED = textwrap.dedent(
    """
    import os, sys, time
    from ebb_core import kuzu_store
    real = kuzu_store.KuzuStore.write_event
    stalled = []
    def write_event(self, namespace, **parts):
        real(self, namespace, **{**parts, "final": False})
        if not stalled:
            stalled.append(1)
            open(os.environ["EBB_TEST_STALL_MARK"], "w").close()
            time.sleep(float(os.environ["EBB_TEST_STALL_SECONDS"]))
    kuzu_store.KuzuStore.write_event = write_event
    from ebb_core.cli import main
    sys.argv[0] = "ebb"
    main()
    """
)


async def wait_for(path: Path, timeout: float = 60) -> None:
    with anyio.fail_after(timeout):
        while not path.exists():
            await anyio.sleep(0.05)


def seed_one(db: Path) -> None:
    done = cli(db, "remember", "Acme renews in March", "--kind", "fact", "--id", "fact:acme")
    assert done.returncode == 0, done.stderr


def assert_whole_or_absent(db: Path, id_: str, linked_to: str) -> bool:
    """The memory is either entirely there (with its link) or not at all; returns which."""
    with Brain.open(db, backend="kuzu", namespace=NS, wait=10) as brain:
        present = id_ in brain.store.existing_ids(NS, [id_])
        edges = brain.stats().edges
        if present:
            assert [n.node.id for n in brain.neighbors(id_)] == [linked_to]
            assert edges == 1
        else:
            assert edges == 0 and brain.neighbors(linked_to) == []
        # the full-text index agrees with the table (hits by text; a linked memory may come
        # up through spreading, with no matched word)
        hits = brain.recall("Acme renews", reinforce=False)
        assert [h.id for h in hits if h.why.matched_terms] == ["fact:acme"]
        return present


async def test_stdio_client_gone_mid_call_leaves_no_half_written_state(tmp_path: Path) -> None:
    """The client disconnects while the server is inside the call's transaction; the SDK then
    stops the server process (it cannot finish the stalled call), so the transaction dies with
    it. The store opens cleanly afterwards, without the memory or its link."""
    db = tmp_path / "store.kuzu"
    mark = tmp_path / "stalled"
    seed_one(db)
    argv = [sys.executable, "-c", STALLED]
    async with (
        connect(
            "stdio", db, argv, EBB_TEST_STALL_MARK=str(mark), EBB_TEST_STALL_SECONDS="120"
        ) as c,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(
            c.call_tool,
            "remember",
            {"text": "half written", "id": "note:half", "links": ["fact:acme"]},
        )
        await wait_for(mark)
        tg.cancel_scope.cancel()
    assert assert_whole_or_absent(db, "note:half", "fact:acme") is False
    shown = cli(db, "stats", "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["nodes"] == 1


async def test_http_client_gone_mid_call_the_server_finishes_it_and_keeps_serving(
    tmp_path: Path,
) -> None:
    """Over HTTP the server outlives the client: the call in flight runs to its commit (all of
    it), other clients are served, and the person's CLI gets in as soon as the call is done."""
    db = tmp_path / "store.kuzu"
    mark = tmp_path / "stalled"
    seed_one(db)
    argv = [sys.executable, "-c", STALLED]
    with http_server(db, argv, EBB_TEST_STALL_MARK=str(mark), EBB_TEST_STALL_SECONDS="3") as url:
        async with Client(url) as gone, anyio.create_task_group() as tg:
            tg.start_soon(
                gone.call_tool,
                "remember",
                {"text": "half written", "id": "note:half", "links": ["fact:acme"]},
            )
            await wait_for(mark)
            tg.cancel_scope.cancel()
        async with Client(url) as other:
            stats = await call(other, "stats")
            assert stats["nodes"] in (1, 2)
            shown = cli(db, "review", "--json")
            assert shown.returncode == 0, shown.stderr
            await call(other, "remember", text="after the disconnect", id="note:after")
        assert_whole_or_absent(db, "note:half", "fact:acme")


async def test_the_cli_waits_out_a_call_in_flight(tmp_path: Path) -> None:
    """A person's command that arrives during a (short) call retries until the call is done."""
    db = tmp_path / "store.kuzu"
    mark = tmp_path / "stalled"
    seed_one(db)
    argv = [sys.executable, "-c", STALLED]
    async with connect(
        "stdio", db, argv, EBB_TEST_STALL_MARK=str(mark), EBB_TEST_STALL_SECONDS="1.5"
    ) as c:
        async with anyio.create_task_group() as tg:

            async def slow_call() -> None:
                await call(c, "remember", text="linked", id="note:linked", links=["fact:acme"])

            tg.start_soon(slow_call)
            await wait_for(mark)
            shown = await anyio.to_thread.run_sync(lambda: cli(db, "stats", "--json"))
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["nodes"] == 2


async def test_the_example_client_config_starts_the_server(tmp_path: Path) -> None:
    """claude_desktop_config.example.json, with its placeholder paths filled in, works."""
    config = json.loads((ROOT / "claude_desktop_config.example.json").read_text())
    entry = config["mcpServers"]["ebb"]
    assert entry["command"].endswith("/.venv/bin/ebb") and entry["args"] == ["mcp"]
    assert sorted(entry["env"]) == ["EBB_DB_PATH", "EBB_NAMESPACE"]
    db = tmp_path / "desktop.kuzu"
    command = ebb_argv()
    params = StdioServerParameters(
        command=command[0],
        args=[*command[1:], *entry["args"]],
        env={**store_env(db), **entry["env"], "EBB_DB_PATH": str(db)},
    )
    async with Client(params) as c:
        await call(c, "remember", text="The user prefers short answers", kind="preference")
        hits = (await call(c, "recall", query="short answers"))["hits"]
        assert hits[0]["kind"] == "preference"
    with Brain.open(db, backend="kuzu", namespace=entry["env"]["EBB_NAMESPACE"]) as brain:
        assert brain.stats().nodes == 1
