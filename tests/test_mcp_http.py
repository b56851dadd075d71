"""Streamable HTTP: short calls answered by ``ebb_core.mcp_http.DirectHttp`` in front of the
SDK's app, with the answer the SDK's own entry gives; uvicorn's writes coalesced per loop turn.

The app is built as ``ebb mcp --transport http`` builds it, on a real Kùzu store, and spoken to
through httpx's ASGI transport: each request is sent once to the SDK's app alone and once to the
app behind ``DirectHttp``, and both answers (HTTP status and JSON body) must be the same. The
real SDK client over real HTTP is ``test_mcp_e2e``'s (its HTTP tests go through this path).
"""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("httpx")

import httpx
from mcp_types import PROTOCOL_VERSION_META_KEY

from ebb_core.mcp_access import StoreAccess
from ebb_core.mcp_http import CoalescingTransport, DirectHttp, http_app
from ebb_core.mcp_server import HTTP_PATH, build_server, direct_calls

VERSION = "2026-07-28"
META = {
    PROTOCOL_VERSION_META_KEY: VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
}
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": VERSION,
}


def call(id_: Any, name: str, arguments: Any, meta: dict[str, Any] = META) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments, "_meta": meta}
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}


async def _both(tmp_path: Path, check: Any) -> None:
    access = StoreAccess(tmp_path / "h.kuzu", namespace="t")
    access.check()
    server = build_server(access)
    app = http_app(server, "127.0.0.1", HTTP_PATH, direct_calls(server))
    assert isinstance(app, DirectHttp)
    manager = server._lowlevel_server._session_manager
    assert manager is not None  # made by http_app
    try:
        async with manager.run():
            clients = [
                httpx.AsyncClient(
                    transport=httpx.ASGITransport(app=a), base_url="http://127.0.0.1:8000"
                )
                for a in (app.app, app)
            ]
            try:
                await check(app, *clients)
            finally:
                for c in clients:
                    await c.aclose()
    finally:
        access.close()


async def _post(client: Any, body: Any, **headers: str) -> tuple[int, Any]:
    """POST ``body`` with the headers the SDK's client sends for it (the routing headers
    ``Mcp-Method`` and ``Mcp-Name`` from the body), ``headers`` over them."""
    routing = {}
    if isinstance(body, dict):
        routing["mcp-method"] = body["method"]
        if isinstance(body["params"].get("name"), str):
            routing["mcp-name"] = body["params"]["name"]
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = await client.post(
        HTTP_PATH, content=content, headers={**HEADERS, **routing, **headers}
    )
    try:
        return response.status_code, response.json()
    except ValueError:  # the transport's plain-text refusals (Host, Content-Type)
        return response.status_code, response.text


def test_direct_http_answer_is_the_sdks(tmp_path: Path) -> None:
    async def check(app: DirectHttp, sdk: Any, direct: Any) -> None:
        answered = app.direct.answered
        status, by_sdk = await _post(sdk, call(1, "stats", {}))
        assert app.direct.answered == answered  # the SDK's app alone answered that one
        status2, by_direct = await _post(direct, call(1, "stats", {}))
        assert app.direct.answered == answered + 1
        assert (status, by_sdk) == (status2, by_direct) == (200, by_sdk)
        assert by_direct["result"]["resultType"] == "complete"
        assert "io.modelcontextprotocol/serverInfo" in by_direct["result"]["_meta"]

        # A write answered directly, seen by a read answered by the SDK.
        _, made = await _post(direct, call(2, "remember", {"text": "ninja builds", "id": "n:1"}))
        assert made["result"]["structuredContent"]["id"] == "n:1"
        _, hits = await _post(sdk, call(3, "recall", {"query": "ninja", "k": 3}))
        assert [h["id"] for h in hits["result"]["structuredContent"]["hits"]] == ["n:1"]

        # Bad arguments: the same tool error either way (answered directly: a tool error).
        before = app.direct.answered
        bad = call(4, "recall", {"query": "ninja", "k": "many"})
        assert await _post(sdk, bad) == await _post(direct, bad)
        assert app.direct.answered == before + 1
        _, tool_error = await _post(direct, bad)
        assert tool_error["result"]["isError"] is True

        # What the SDK's entry refuses is refused by it, with the same status and body.
        refused = [
            (call(5, "stats", {}, {**META, PROTOCOL_VERSION_META_KEY: "1999-01-01"}), {}),
            (call(6, "stats", {}), {"mcp-protocol-version": "2027-01-01"}),  # header mismatch
            (call(6, "stats", {}), {"mcp-method": "tools/list"}),
            (call(6, "stats", {}), {"mcp-name": "recall"}),
            (call(7, "stats", {}), {"host": "evil.example:80"}),  # DNS rebinding protection
            (call(8, "stats", {}), {"accept": "text/event-stream"}),  # no JSON accepted
            (call(9, "stats", {}), {"content-type": "text/plain"}),
            (call(10, "nope", {}), {}),  # unknown tool
            (call(11, "stats", "not an object"), {}),
            ({"jsonrpc": "2.0", "id": 12, "method": "tools/list", "params": {"_meta": META}}, {}),
            (b'{"jsonrpc": "2.0", "id": 13, "method": "tools/call", "params": {', {}),
            (
                b'{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"stats","a":NaN}}',
                {},
            ),
        ]
        for body, headers in refused:
            before = app.direct.answered
            assert await _post(sdk, body, **headers) == await _post(direct, body, **headers), body
            assert app.direct.answered == before, body

    asyncio.run(_both(tmp_path, check))


def test_a_store_let_go_of_goes_the_sdks_way(tmp_path: Path) -> None:
    async def check(app: DirectHttp, sdk: Any, direct: Any) -> None:
        access: StoreAccess = app.direct._access
        with access._lock:
            access._release("idle")  # as the idle watcher lets go of it
        assert not access.is_open
        before = app.direct.answered
        status, answer = await _post(direct, call(1, "stats", {}))
        assert status == 200 and answer["result"]["structuredContent"]["nodes"] == 0
        assert app.direct.answered == before  # it had to open the store: the SDK's path
        assert access.is_open
        await _post(direct, call(2, "stats", {}))
        assert app.direct.answered == before + 1

    asyncio.run(_both(tmp_path, check))


def test_writes_in_one_loop_turn_go_out_as_one() -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        ours, peer = socket.socketpair()
        peer.setblocking(False)
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
        wrapped = CoalescingTransport(transport, loop)
        try:
            wrapped.write(b"HTTP/1.1 200 OK\r\n\r\n")
            wrapped.write(b"")
            wrapped.write(b'{"body": 1}')
            with pytest.raises(BlockingIOError):
                peer.recv(1024)  # nothing is written within the turn
            await asyncio.sleep(0)
            await asyncio.sleep(0.05)
            assert peer.recv(1024) == b'HTTP/1.1 200 OK\r\n\r\n{"body": 1}'
            wrapped.write(b"kept until closed")
            wrapped.close()  # writes what is kept first
            await asyncio.sleep(0.05)
            assert peer.recv(1024) == b"kept until closed"
        finally:
            peer.close()

    asyncio.run(run())


def test_an_aborted_transport_drops_what_is_kept() -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        ours, peer = socket.socketpair()
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
        wrapped = CoalescingTransport(transport, loop)
        wrapped.write(b"never sent")
        wrapped.abort()
        await asyncio.sleep(0.05)
        assert wrapped.is_closing()
        assert peer.recv(1024) == b""  # closed, nothing written
        peer.close()

    asyncio.run(run())


def test_a_check_that_fails_unexpectedly_leaves_the_call_to_the_sdk(tmp_path: Path) -> None:
    async def check(app: DirectHttp, sdk: Any, direct: Any) -> None:
        lowlevel = app.direct.lowlevel

        def broken(name: str) -> Any:
            raise RuntimeError("a schema lookup that breaks")

        lowlevel.get_tool_input_schema = broken  # the SDK's entry logs it and serves the call
        before = app.direct.answered
        status, answer = await _post(direct, call(1, "stats", {}))
        assert status == 200 and answer["result"]["structuredContent"]["nodes"] == 0
        assert app.direct.answered == before

    asyncio.run(_both(tmp_path, check))
