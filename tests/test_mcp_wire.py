"""Every request to ``ebb mcp`` gets an answer, and a busy store does not stop it from starting.

Raw JSON-RPC lines are written to a real ``ebb mcp`` process over stdio (what the SDK's own
transport would drop unanswered: see ``ebb_core.mcp_wire``); the official SDK client checks the
same refusals through normal calls.
"""

from __future__ import annotations

import json
import os
import queue
import random
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters

from ebb_core import Brain
from ebb_core.errors import InvalidInput, NotFound
from ebb_core.mcp_wire import (
    _SURROGATE,
    INVALID_REQUEST,
    MAX_DEPTH,
    PARSE_ERROR,
    WIRE_ERROR_KEY,
    answer_for,
)
from ebb_core.validation import has_visible_chars, validate_id, validate_namespace, validate_text
from test_mcp_e2e import NS, call, cli, ebb_argv, error_of, store_env

INIT = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


def request(id_: Any, method: str, params: Any = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def tool_call(id_: Any, name: str, arguments: Any) -> bytes:
    return request(id_, "tools/call", {"name": name, "arguments": arguments})


def spliced(id_: int, name: str, raw_arguments: str) -> bytes:
    """A tools/call whose arguments are written by hand (what json.dumps cannot produce)."""
    head = f'{{"jsonrpc":"2.0","id":{id_},"method":"tools/call","params":{{"name":"{name}",'
    return (head + f'"arguments":{raw_arguments}}}}}').encode()


HUGE = "7" * 5000
DEEP = "[" * 300 + "]" * 300

# (raw line, the id the answer must carry, what the answer is, a phrase it must contain)
# kinds: "parse" (-32700), "invalid" (-32600), "tool" (a tool error), "method" (-32601), "ok"
RAW_CASES: list[tuple[bytes, Any, str, str]] = [
    (b"this is not json", None, "parse", "not valid JSON"),
    (
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"remember"',
        None,
        "parse",
        "not valid JSON",
    ),
    (b'{"jsonrpc":"2.0","id":', None, "parse", "not valid JSON"),
    (b"\xff\xfe not utf-8", None, "parse", "not valid UTF-8"),
    (b"[" * 100_000, None, "parse", "nested deeper"),
    (spliced(4, "recall", '{"query":"x","k":NaN}'), 4, "tool", "finite number"),
    (
        spliced(5, "remember", '{"text":"lone \\ud800 surrogate"}'),
        5,
        "tool",
        "text contains an unpaired UTF-16 surrogate",
    ),
    (spliced(6, "recall", '{"query":"\\udfff"}'), 6, "tool", "query contains an unpaired"),
    (spliced(7, "remember", '{"text":"ok","props":{"\\ud800":1}}'), 7, "tool", "unpaired"),
    (
        b'{"jsonrpc":"2.0","id":8,"method":"pi\\ud800ng"}',
        8,
        "invalid",
        "method contains an unpaired",
    ),
    (
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}',
        None,
        "invalid",
        "id contains an unpaired",
    ),
    (
        f'{{"jsonrpc":"2.0","id":{HUGE},"method":"ping"}}'.encode(),
        None,
        "invalid",
        "integer of 5,000 digits",
    ),
    (spliced(9, "recall", f'{{"query":"x","k":{HUGE}}}'), 9, "tool", "k is an integer of 5,000"),
    (
        spliced(10, "remember", f'{{"text":"x","props":{{"n":{HUGE}}}}}'),
        10,
        "tool",
        "props.n is an integer of 5,000",
    ),
    (
        spliced(11, "remember", f'{{"text":"x","props":{{"a":{DEEP}}}}}'),
        11,
        "tool",
        f"nested deeper than {MAX_DEPTH}",
    ),
    (
        f'{{"jsonrpc":"2.0","id":12,"method":"ping","params":{{"a":{DEEP}}}}}'.encode(),
        12,
        "invalid",
        f"nested deeper than {MAX_DEPTH}",
    ),
    (b'[{"jsonrpc":"2.0","id":13,"method":"ping"}]', None, "invalid", "batches"),
    (b"{}", None, "invalid", "not a JSON-RPC 2.0 request"),
    (b"123", None, "invalid", "not a JSON-RPC 2.0 request"),
    (b'"ping"', None, "invalid", "not a JSON-RPC 2.0 request"),
    (b'{"jsonrpc":"2.0","id":14}', 14, "invalid", '"method" string'),
    (b'{"jsonrpc":"1.0","id":15,"method":"ping"}', 15, "invalid", '"jsonrpc": "2.0"'),
    (b'{"jsonrpc":"2.0","id":16,"method":"ping","params":"x"}', 16, "invalid", '"params"'),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', None, "invalid", "string or an integer"),
    (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', None, "invalid", "string or an integer"),
    (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', None, "invalid", "string or an integer"),
    (b'{"jsonrpc":"2.0","id":[1],"method":"ping"}', None, "invalid", "string or an integer"),
    (b'{"jsonrpc":"2.0","id":17,"method":"no/such/method"}', 17, "method", "Method not found"),
    (
        tool_call(18, "remember", {"text": "hello", "id": "\u200b"}),
        18,
        "tool",
        "memory id has no visible characters",
    ),
    (
        tool_call(19, "remember", {"text": "\ufeff\u200b\u2060"}),
        19,
        "tool",
        "text has no visible characters",
    ),
    (
        tool_call(20, "remember", {"text": "ok", "id": "\uffff\ufffe"}),
        20,
        "tool",
        "memory id has no visible characters",
    ),
    (tool_call(21, "remember", {"text": "ok", "id": "note:\u200b"}), 21, "ok", ""),
    (tool_call(22, "remember", {"text": "x" * 300_000}), 22, "tool", "the limit is 200,000"),
    (request(23, "ping"), 23, "ok", ""),
]


class RawServer:
    """``ebb mcp`` as a subprocess, spoken to line by line."""

    def __init__(self, db: Path, **env: str) -> None:
        self.proc = subprocess.Popen(
            [*ebb_argv(), "mcp"],
            env={**os.environ, **store_env(db, **env)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        assert self.proc.stdout is not None
        out = self.proc.stdout
        threading.Thread(target=lambda: list(map(self.lines.put, out)), daemon=True).start()

    def send(self, raw: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def answer(self, timeout: float = 30) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail("no answer")
        message: dict[str, Any] = json.loads(line)
        return message

    def close(self) -> tuple[int, str]:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode, self.proc.stderr.read().decode()


@contextmanager
def raw_server(db: Path, **env: str) -> Iterator[RawServer]:
    server = RawServer(db, **env)
    try:
        server.send(json.dumps(INIT).encode())
        assert "result" in server.answer(60)
        server.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        yield server
    finally:
        if server.proc.poll() is None:
            server.close()


def check_answer(reply: dict[str, Any], id_: Any, kind: str, phrase: str) -> None:
    assert reply["jsonrpc"] == "2.0" and reply["id"] == id_, reply
    if kind in ("parse", "invalid", "method"):
        code = {"parse": PARSE_ERROR, "invalid": INVALID_REQUEST, "method": -32601}[kind]
        assert reply["error"]["code"] == code, reply
        assert phrase in reply["error"]["message"], reply
    elif kind == "tool":
        assert reply["result"]["isError"] is True, reply
        assert phrase in reply["result"]["content"][0]["text"], reply
    else:
        assert "result" in reply and not reply["result"].get("isError"), reply


def test_every_raw_request_gets_an_answer_with_its_id(tmp_path: Path) -> None:
    db = tmp_path / "store.kuzu"
    with raw_server(db) as server:
        server.send(tool_call(1, "remember", {"text": "harbor lantern", "id": "fact:harbor"}))
        assert server.answer()["result"]["structuredContent"]["id"] == "fact:harbor"
        for raw, id_, kind, phrase in RAW_CASES:
            server.send(raw)
            reply = server.answer()
            try:
                check_answer(reply, id_, kind, phrase)
            except AssertionError:
                pytest.fail(f"{raw[:80]!r} got {json.dumps(reply)[:300]}")
        # An empty line is not a request and gets nothing; a client's garbled response gets
        # nothing either (JSON-RPC never answers a response); the next request is answered.
        server.send(b"   ")
        server.send(b'{"jsonrpc":"2.0","id":99,"result":"\\ud800"}')
        server.send(tool_call(100, "stats", {}))
        reply = server.answer()
        assert reply["id"] == 100 and reply["result"]["structuredContent"]["nodes"] == 2
        assert server.lines.empty()
        code, err = server.close()
    assert code == 0, err
    assert "Traceback" not in err
    with Brain.open(db, backend="kuzu", namespace=NS) as brain:
        assert brain.stats().nodes == 2 and brain.get("note:\u200b").text == "ok"


def test_pipelined_requests_are_answered_in_full(tmp_path: Path) -> None:
    """All the bad lines at once, without waiting: one answer each, every id accounted for."""
    with raw_server(tmp_path / "store.kuzu") as server:
        for raw, _, _, _ in RAW_CASES:
            server.send(raw)
        replies = [server.answer() for _ in RAW_CASES]
        ids = sorted((str(r["id"]) for r in replies), key=str)
        assert ids == sorted((str(c[1]) for c in RAW_CASES), key=str)
        server.send(request("last", "ping"))
        assert server.answer()["id"] == "last"


# -- the reply logic on its own ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("", (None, PARSE_ERROR)),
        ("{", (None, PARSE_ERROR)),
        ('{"jsonrpc":"2.0","id":"a\\ud800","method":"x"}', (None, INVALID_REQUEST)),
        ('{"jsonrpc":"2.0","id":"a","method":"x\\ud800"}', ("a", INVALID_REQUEST)),
        (
            '{"jsonrpc":"2.0","id":-7,"method":"ping","params":{"a":' + DEEP + "}}",
            (-7, INVALID_REQUEST),
        ),
        (
            '{"jsonrpc":"2.0","method":"notifications/x","params":{"\\ud800":1}}',
            (None, INVALID_REQUEST),
        ),
        (
            '{"jsonrpc":"2.0","id":'
            + HUGE
            + ',"method":"tools/call","params":{"name":"x","arguments":{"a":"\\ud800"}}}',
            (None, INVALID_REQUEST),
        ),
    ],
)
def test_answer_for(line: str, expected: tuple[Any, int]) -> None:
    reply = answer_for(line)
    assert reply is not None
    assert (reply["id"], reply["error"]["code"]) == expected


def test_a_call_with_bad_arguments_is_passed_on_to_be_refused() -> None:
    line = '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"recall","arguments":'
    passed = answer_for(line + '{"query":"\\ud800","k":3}}}')
    assert passed is not None and "error" not in passed
    assert passed["id"] == 3 and passed["params"]["name"] == "recall"
    assert passed["params"]["arguments"] == {
        WIRE_ERROR_KEY: "invalid arguments for recall: query " + _SURROGATE
    }


def test_a_broken_response_from_the_client_is_not_answered() -> None:
    assert answer_for('{"jsonrpc":"2.0","id":1,"result":{"x":"\\udc00"}}') is None
    assert answer_for('{"jsonrpc":"2.0","id":1,"error":' + "[" * 200 + "]" * 200 + "}") is None


# -- invisible ids and texts, in the engine and through every interface ------------------------

INVISIBLE = [
    "\u200b",
    "\ufeff",
    "\uffff",
    "\u200b\u200c\u200d\u2060",
    "\u00a0\u200b\u3000",
    "\u202e",
    "\ufe0f",
    "\U0010ffff",
    "\ufdd0",
    "\u3164",
    "\u2800\u2800",
    "\u0301",
]
VISIBLE = ["a", "\u200bx", "日本", "🙂", "\ufeffnote:x", "\u0915\u093f", "ﷺ", "\ue000"]


@pytest.mark.parametrize("value", INVISIBLE)
def test_invisible_ids_texts_and_namespaces_are_refused(value: str) -> None:
    assert not has_visible_chars(value)
    with pytest.raises(InvalidInput, match="no visible characters") as refused:
        validate_id(value)
    assert refused.value.field == "id" and "U+" in str(refused.value)
    with pytest.raises(InvalidInput, match="text has no visible characters"):
        validate_text(value)
    with pytest.raises(InvalidInput, match="namespace has no visible characters"):
        validate_namespace(value)


@pytest.mark.parametrize("value", VISIBLE)
def test_visible_ids_and_texts_pass(value: str) -> None:
    assert has_visible_chars(value)
    assert validate_id(value) == value and validate_text(value) == value


def test_brain_refuses_invisible_ids_but_still_finds_old_ones(tmp_path: Path) -> None:
    with Brain.open(tmp_path / "b.kuzu", backend="kuzu", namespace="n") as brain:
        with pytest.raises(InvalidInput, match="memory id has no visible characters"):
            brain.remember("hello", id="\u200b")
        with pytest.raises(InvalidInput, match="text has no visible characters"):
            brain.remember("\ufeff\u200b")
        with pytest.raises(InvalidInput, match="no visible"):
            brain.remember("hello", links=["\u200b"])
        assert brain.stats().nodes == 0
        # Looking one up is a lookup, not a new id: it is simply not there.
        with pytest.raises(NotFound):
            brain.get("\u200b")


def test_cli_refuses_an_invisible_id_with_exit_2(tmp_path: Path) -> None:
    done = cli(tmp_path / "c.kuzu", "remember", "hello", "--id", "\u200b\u200b")
    assert done.returncode == 2
    assert "memory id has no visible characters (only U+200B U+200B" in done.stderr
    assert "Traceback" not in done.stderr


# -- the official SDK client over stdio -------------------------------------------------------


async def test_sdk_client_gets_tool_errors_for_what_cannot_be_stored(tmp_path: Path) -> None:
    db = tmp_path / "sdk.kuzu"
    command = ebb_argv("mcp")
    params = StdioServerParameters(command=command[0], args=command[1:], env=store_env(db))
    async with Client(params) as c:
        await call(c, "remember", text="first", id="note:first")
        # (Nesting too deep cannot be sent this way: the SDK client refuses to serialise it;
        # the raw test above sends it.)
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("remember", {"text": "x", "id": "\u200b"}, "memory id has no visible characters"),
            ("remember", {"text": "\u200b\ufeff"}, "text has no visible characters"),
            ("remember", {"text": "x", "props": {"n": 10**4500}}, "props.n is an integer of"),
            ("recall", {"query": "x", "k": 10**4400}, "k is an integer of"),
            ("connect", {"src": "note:first", "dst": "\ufeff"}, "no memory"),
        ]
        for tool, args, expected in cases:
            message = await error_of(c, tool, args)
            assert expected in message, (tool, message)
        assert (await call(c, "stats"))["nodes"] == 1


# -- starting while another process holds the store -------------------------------------------

HOLDER = textwrap.dedent(
    """
    import sys
    from ebb_core import Brain
    brain = Brain.open(sys.argv[1], backend="kuzu", namespace=sys.argv[2])
    brain.remember("held by a person", id="note:held")
    print("holding", flush=True)
    sys.stdin.readline()
    brain.close()
    """
)


async def test_the_server_starts_while_another_process_holds_the_store(tmp_path: Path) -> None:
    db = tmp_path / "busy.kuzu"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db), NS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    errlog = tmp_path / "server.err"
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        # The server's stderr goes to a file, to read what it said at start.
        wrapped = ["-c", 'exec "$@" 2>"$EBB_TEST_ERRLOG"', "sh", *ebb_argv("mcp", "--wait", "0.5")]
        env = store_env(db, EBB_TEST_ERRLOG=str(errlog))
        params = StdioServerParameters(command="/bin/sh", args=wrapped, env=env)
        if True:
            async with Client(params) as c:
                tools = await c.list_tools()
                assert "recall" in {t.name for t in tools.tools}
                message = await error_of(c, "stats", {})
                assert "is busy" in message and "within 0.5 s" in message
                assert str(db) in message
                assert holder.stdin is not None
                holder.stdin.write("\n")
                holder.stdin.flush()
                assert holder.wait(30) == 0
                assert (await call(c, "stats"))["nodes"] == 1
                await call(c, "remember", text="after the person let go")
                assert (await call(c, "stats"))["nodes"] == 2
        said = errlog.read_text()
        assert f"the store at {db} is busy" in said and "serving anyway" in said
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


# -- a fuzz campaign: mutated requests, each answered exactly once ------------------------------

TEMPLATES = [
    tool_call(1, "stats", {}),
    tool_call(2, "recall", {"query": "harbor lantern", "k": 3}),
    tool_call(3, "remember", {"text": "fuzzed note", "kind": "note", "props": {"a": [1, 2]}}),
    tool_call(4, "read", {"ids": ["fact:harbor"]}),
    request(5, "tools/list"),
    request("six", "ping"),
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
]
SPLICES = [
    b"\\",
    b'"',
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\\u",
    b"\\ud800",
    b"\\udfff\\ud800",
    b"\\u0000",
    b"\xff",
    b"\xc3",
    b"9" * 5000,
    b"[" * 400,
    b"NaN",
    b"-",
    b"1e999",
    b"null",
    b"\t",
]


def mutate(rng: random.Random, line: bytes) -> bytes:
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(line) + 1)
        choice = rng.random()
        if choice < 0.25:
            line = line[:at]  # truncated
        elif choice < 0.45 and line:
            line = line[:at] + line[at + 1 :]  # a byte lost
        else:
            line = line[:at] + rng.choice(SPLICES) + line[at:]
    return line.replace(b"\n", b" ").replace(b"\r", b" ")


def replies_due(line: bytes) -> int:
    """How many answers JSON-RPC owes this line (0 for blanks, notifications and responses)."""
    from mcp_types import JSONRPCNotification, JSONRPCRequest, jsonrpc_message_adapter

    if not line.strip():
        return 0
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return 1
    try:
        message = jsonrpc_message_adapter.validate_json(text, by_name=False)
    except Exception:
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):
            return 1
        if isinstance(parsed, dict) and "method" not in parsed:
            return 0 if ("result" in parsed or "error" in parsed) else 1
        return 1
    if isinstance(message, JSONRPCRequest):
        return 1
    if isinstance(message, JSONRPCNotification):
        parsed = json.loads(text)
        return 1 if "id" in parsed else 0
    return 0  # a response to nothing: dropped


def test_mutated_requests_are_each_answered_exactly_once(tmp_path: Path) -> None:
    rng = random.Random(20261201)
    cases = [mutate(rng, rng.choice(TEMPLATES)) for _ in range(300)]
    due = answered = 0
    with raw_server(tmp_path / "fuzz.kuzu") as server:
        server.send(tool_call(0, "remember", {"text": "harbor lantern", "id": "fact:harbor"}))
        assert "result" in server.answer()
        for n, raw in enumerate(cases):
            server.send(raw)
            sentinel = f"sentinel-{n}"
            server.send(tool_call(sentinel, "stats", {}))
            got = []
            while True:
                reply = server.answer()
                if reply.get("id") == sentinel:
                    assert reply["result"]["structuredContent"]["nodes"] >= 1
                    break
                got.append(reply)
            expected = replies_due(raw)
            # The server runs requests concurrently: a write may answer after the sentinel.
            while len(got) < expected:
                got.append(server.answer())
            assert len(got) == expected, (raw[:200], got)
            for reply in got:
                assert reply["jsonrpc"] == "2.0" and ("result" in reply or "error" in reply)
            due += expected
            answered += len(got)
        code, err = server.close()
    assert code == 0 and "Traceback" not in err, err[-2000:]
    assert due == answered and due > 150  # most mutations leave a request that needs an answer


# -- stdin and stdout on the event loop (pipes) ---------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
async def test_pipe_lines_read_what_readline_reads(seed: int) -> None:
    """Read from a pipe on the event loop, lines come out exactly as ``readline(limit)`` gives
    them: split anywhere by the writer, longer than the limit, unterminated at the end."""
    import io

    from ebb_core.mcp_wire import _PipeLines

    rng = random.Random(seed)
    parts = [
        json.dumps({"n": i, "pad": "é" * rng.randrange(0, 300)}).encode() + b"\n" for i in range(40)
    ]
    parts.insert(rng.randrange(40), b"x" * 5000 + b"\n")  # longer than every limit below
    data = b"".join(parts) + b'{"unterminated": true}'
    limits = [rng.choice([64, 700, 4096, 1 << 20]) for _ in range(400)]
    expected, plain = [], io.BytesIO(data)
    for limit in limits:
        expected.append(plain.readline(limit))

    r, w = os.pipe()

    def write() -> None:
        at = 0
        with os.fdopen(w, "wb", buffering=0) as out:
            while at < len(data):
                step = rng.randrange(1, 3000)
                out.write(data[at : at + step])
                at += step

    writer = threading.Thread(target=write)
    writer.start()
    with os.fdopen(r, "rb", buffering=0) as stream:
        lines = await _PipeLines.open(stream)
        assert lines is not None  # a pipe on asyncio's loop: read there, not on a thread
        got = [await lines.readline(limit) for limit in limits]
        lines.close()
    writer.join()
    assert got == expected
    assert got[-1] == b""  # the end


def test_pipe_stdout_keeps_stray_output_off_the_protocol(tmp_path: Path) -> None:
    """While PipeStdout serves, writes to descriptor 1 by anything else go to stderr; the
    protocol's own lines arrive whole and in order, and stdout is back afterwards."""
    script = tmp_path / "serve.py"
    script.write_text(
        textwrap.dedent(
            """
            import asyncio, os
            from ebb_core.mcp_wire import PipeStdout

            async def main():
                out = await PipeStdout.open()
                assert out is not None
                for i in range(200):
                    await out.write('{"line": %d, "pad": "%s"}\\n' % (i, "z" * 2000))
                    await out.flush()
                    if i == 50:
                        os.write(1, b"stray bytes\\n")
                        print("stray print", flush=True)
                await out.close()

            asyncio.run(main())
            print("after", flush=True)
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [json.loads(x)["line"] for x in lines[:-1]] == list(range(200))
    assert lines[-1] == "after"
    assert "stray bytes" in done.stderr and "stray print" in done.stderr
