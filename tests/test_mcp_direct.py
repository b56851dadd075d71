"""Short tool calls over stdio are answered where their line is read (``ebb_core.mcp_direct``),
with the answer the SDK's own path gives, in both protocol eras; anything else goes the SDK's way.

A real ``ebb mcp`` process is spoken to line by line (as ``test_mcp_wire`` does): the same
read-only call is sent once while only the SDK can answer it (before the era is known, or before
the handshake is complete) and again once it is answered directly, and both answers must be the
same. The in-process tests drive :class:`DirectCalls` on a real server and a real Kùzu store.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp_types import PROTOCOL_VERSION_META_KEY, jsonrpc_message_adapter

from ebb_core.mcp_access import StoreAccess
from ebb_core.mcp_direct import DirectCalls
from ebb_core.mcp_server import build_server
from test_mcp_wire import RawServer, raw_server, request, tool_call

MODERN = {
    PROTOCOL_VERSION_META_KEY: "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
}


def modern_call(id_: Any, name: str, arguments: Any, meta: dict[str, Any] = MODERN) -> bytes:
    params = {"name": name, "arguments": arguments, "_meta": meta}
    return json.dumps(
        {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}
    ).encode()


def test_modern_era_direct_answer_is_the_sdks(tmp_path: Path) -> None:
    server = RawServer(tmp_path / "m.kuzu")
    try:
        # The first request decides the era: only the SDK answers it.
        server.send(modern_call(1, "stats", {}))
        by_sdk = server.answer(60)
        server.send(modern_call(2, "stats", {}))
        direct = server.answer()
        assert by_sdk["id"] == 1 and direct["id"] == 2
        assert direct["result"] == by_sdk["result"]
        assert direct["result"]["resultType"] == "complete"  # shaped for 2026-07-28
        assert "io.modelcontextprotocol/serverInfo" in direct["result"]["_meta"]

        server.send(modern_call(3, "remember", {"text": "the build uses ninja", "id": "n:1"}))
        assert server.answer()["result"]["structuredContent"]["id"] == "n:1"
        server.send(modern_call(4, "recall", {"query": "ninja", "k": 3}))
        hits = server.answer()["result"]["structuredContent"]["hits"]
        assert [h["id"] for h in hits] == ["n:1"]

        # What the SDK refuses is still refused the SDK's way: an unsupported version ...
        server.send(
            modern_call(5, "stats", {}, {**MODERN, PROTOCOL_VERSION_META_KEY: "1999-01-01"})
        )
        refused = server.answer()
        assert refused["id"] == 5 and "result" not in refused
        assert refused["error"]["data"]["requested"] == "1999-01-01"
        # ... a handshake on a 2026-era connection, and bad arguments (a tool error).
        server.send(request(6, "initialize", {"protocolVersion": "2025-06-18"}))
        assert "error" in server.answer()
        server.send(modern_call(7, "recall", {"query": "ninja", "k": "many"}))
        bad = server.answer()["result"]
        assert bad["isError"] is True and "k" in bad["content"][0]["text"]
    finally:
        server.close()


def test_handshake_era_direct_answer_is_the_sdks(tmp_path: Path) -> None:
    server = RawServer(tmp_path / "l.kuzu")
    try:
        server.send(
            request(
                "init",
                "initialize",
                {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            )
        )
        assert server.answer(60)["result"]["protocolVersion"] == "2025-06-18"
        # Before `notifications/initialized` only the SDK answers.
        server.send(tool_call(1, "stats", {}))
        by_sdk = server.answer()
        server.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        server.send(tool_call(2, "stats", {}))
        direct = server.answer()
        assert direct["id"] == 2 and direct["result"] == by_sdk["result"]
        assert "resultType" not in direct["result"]  # shaped for 2025-06-18
        # A 2026 envelope on a handshake-era connection is refused, as the SDK refuses it.
        server.send(modern_call(3, "stats", {}))
        assert server.answer()["error"]["code"] == -32600
    finally:
        server.close()


def test_calls_in_a_tight_loop_answer_in_order(tmp_path: Path) -> None:
    with raw_server(tmp_path / "t.kuzu") as server:
        for i in range(40):
            server.send(tool_call(i, "remember", {"text": f"memory number {i}", "id": f"n:{i}"}))
        answers = [server.answer() for _ in range(40)]
        assert [a["id"] for a in answers] == list(range(40))
        assert all(a["result"]["structuredContent"]["id"] == f"n:{a['id']}" for a in answers)
        server.send(tool_call("s", "stats", {}))
        assert server.answer()["result"]["structuredContent"]["nodes"] == 40


def _parsed(line: bytes) -> Any:
    from mcp.shared.message import SessionMessage

    return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))


def test_direct_calls_only_when_the_sdk_would_answer_the_same(tmp_path: Path) -> None:
    access = StoreAccess(tmp_path / "d.kuzu", namespace="d", idle_release=60)
    server = build_server(access)
    lowlevel = server._lowlevel_server
    handler = lowlevel.get_request_handler("tools/call")
    assert handler is not None
    direct = DirectCalls(lowlevel, handler.handler, frozenset({"stats", "recall"}), access)
    line = modern_call(9, "stats", {}).decode()

    async def answer(text: str) -> str | None:
        return await direct.answer(text)

    try:
        assert asyncio.run(answer(line)) is None  # the era is not known yet
        direct.observe(_parsed(modern_call(1, "stats", {})))
        assert direct.era == "modern"
        assert asyncio.run(answer(line)) is None  # request 1 is still the SDK's: not overtaken
        direct.sent('{"jsonrpc":"2.0","id":1,"result":{}}')
        assert asyncio.run(answer(line)) is None  # the store is not open: it may have to wait
        access.check()
        reply = json.loads(asyncio.run(answer(line)) or "{}")
        assert reply["id"] == 9 and reply["result"]["structuredContent"]["nodes"] == 0
        assert direct.answered == 1
        # Not a short tool, not a tools/call, not clean JSON, a requestState: the SDK's.
        for other in (
            modern_call(10, "maintain", {}).decode(),
            request(11, "tools/list", {"_meta": MODERN}).decode(),
            line.replace('"id": 9', '"id": NaN'),
            line.replace('"name": "stats"', '"name": "stats", "requestState": "x"'),
        ):
            assert asyncio.run(answer(other)) is None, other
        # A request cancelled by the client is never answered: it holds nothing up.
        direct.observe(_parsed(modern_call(12, "stats", {})))
        assert asyncio.run(answer(line)) is None
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 12},
        }
        direct.observe(_parsed(json.dumps(cancel).encode()))
        assert json.loads(asyncio.run(answer(line)) or "{}")["id"] == 9
        # Tracing configured (middleware other than the request-state boundary): the SDK's.
        lowlevel.middleware.append(lambda ctx, call_next: call_next(ctx))
        assert asyncio.run(answer(line)) is None
        assert direct.answered == 2
    finally:
        access.close()


@pytest.mark.parametrize(
    "missing", ["_serialize", "_negotiate_initialize"], ids=["serialize", "negotiate"]
)
def test_an_sdk_without_the_borrowed_parts_keeps_its_own_path(
    monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    # The direct answer borrows two private parts of the SDK's runner; the installed SDK has
    # them, and an SDK release that moved either turns the direct answer off instead of
    # breaking every stdio call.
    from mcp.server.runner import ServerRunner

    assert DirectCalls.supported()
    monkeypatch.delattr(ServerRunner, missing)
    assert not DirectCalls.supported()
