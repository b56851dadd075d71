"""``ebb mcp --transport http``: the SDK's streamable HTTP app on uvicorn, one write a response.

The app is the SDK's own (``MCPServer.streamable_http_app``: sessions, the protocol-era routing,
the transport's security checks, JSON responses), served by uvicorn as the SDK's
``run_streamable_http_async`` serves it, with two differences in how uvicorn writes:

- **A response goes out in one write.** uvicorn writes a response's status line and headers
  when the app starts the response, and its body in a second write right after. Each write
  wakes the client, which reads the headers, finds no body yet and sleeps again: two
  wake-ups, two scheduler rounds for the client's process per call, where one does. The
  connection's transport is wrapped (:class:`CoalescingTransport`) so that what is written
  in one turn of the event loop goes out in one write at the end of that turn. Nothing waits
  longer than that turn: a streamed response (the server-sent-event stream a client may open
  with a GET) has its head and each event written as they come.
- **No access log** (the server's log level, warning, hid it already; now it is not formatted).

Everything else is uvicorn's: its protocol class (``httptools`` when installed, else ``h11``)
is subclassed only to wrap the transport it is given.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

log = logging.getLogger("ebb.mcp")

__all__ = [
    "CoalescingTransport",
    "DirectHttp",
    "direct_http_supported",
    "http_app",
    "one_write_protocol",
    "serve_http_app",
]


class CoalescingTransport:
    """A transport whose writes made in one turn of the event loop go out as one write.

    uvicorn writes a response's head and its body in two ``write`` calls, one right after the
    other (neither waits on anything), so both land here in the same turn of the loop; they are
    kept and written together at the end of the turn (``loop.call_soon``). Closing, ending
    the stream or asking for the buffer's size writes what is kept first; aborting drops it,
    as the transport would. Everything else is the wrapped transport's.
    """

    def __init__(self, transport: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._kept: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not data:
            return
        if not self._kept:
            self._loop.call_soon(self.flush)
        self._kept.append(data)

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        """Write what is kept (once the transport is closing there is nowhere to write)."""
        if not self._kept:
            return
        data = b"".join(self._kept) if len(self._kept) > 1 else self._kept[0]
        self._kept.clear()
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def get_write_buffer_size(self) -> int:
        self.flush()
        size: int = self._transport.get_write_buffer_size()
        return size

    def abort(self) -> None:
        self._kept.clear()
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def one_write_protocol(base: type[asyncio.Protocol]) -> type[asyncio.Protocol]:
    """``base`` (a uvicorn HTTP protocol class) on a :class:`CoalescingTransport`."""

    class OneWrite(base):  # type: ignore[valid-type,misc]
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            loop = asyncio.get_running_loop()
            super().connection_made(CoalescingTransport(transport, loop))

    OneWrite.__name__ = OneWrite.__qualname__ = f"OneWrite{base.__name__}"
    return OneWrite


def _uvicorn_protocol() -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol as ``http="auto"`` picks it (``httptools`` when installed)."""
    try:
        import httptools  # noqa: F401
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return one_write_protocol(H11Protocol)
    return one_write_protocol(HttpToolsProtocol)


class DirectHttp:
    """An ASGI app in front of the SDK's: a short ``tools/call`` POSTed in the 2026-07-28 era
    is answered right here, when the SDK's own entry would answer it the same way.

    The SDK's entry for such a POST (``handle_modern_request``) checks the transport's security
    settings (the Host and Origin headers, the content type), the ``Accept`` header, the JSON
    body, the JSON-RPC envelope, duplicated routing headers, the request's protocol envelope
    against its headers (``classify_inbound_request``) and the ``Mcp-Param-*`` headers; then it
    builds a connection, a runner, a request context and a session for the one call and runs
    the middleware chain around Ebb's handler. Here the same checks are made by the same
    functions, Ebb's handler is called as on stdio (:class:`~ebb_core.mcp_direct.DirectCalls`:
    the params checked against the version's surface and parsed by the handler's model, the
    result shaped by the SDK runner's ``_serialize``), and the answer, or the JSON-RPC error for
    an exception, is written by the entry's own functions (``_to_jsonrpc_response``,
    ``_write``: same body, same HTTP status). Anything else goes to the SDK's app with its body
    replayed: another path or method, a body of unknown length or over the size limit, the
    handshake era (sessions), a check that fails (the SDK answers it), another method or tool,
    a tool whose schema declares ``Mcp-Param`` headers, a check that raises instead of
    answering, and any call while the store is not open and free (it may have to wait: the
    SDK's path puts it on a worker thread).
    """

    def __init__(self, app: Any, direct: Any, path: str, manager: Any) -> None:
        from mcp.server.transport_security import TransportSecurityMiddleware

        self.app = app
        self.direct = direct
        self._path = path
        self._limit: int = manager.max_request_body_size
        self._json: bool = manager.json_response
        self._security = TransportSecurityMiddleware(manager.security_settings)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or scope["path"] != self._path
            or not self._json
        ):
            await self.app(scope, receive, send)
            return
        length = _content_length(scope["headers"])
        if length is None or length > self._limit:
            await self.app(scope, receive, send)
            return
        kept: list[Any] = []
        body = b""
        while True:
            message = await receive()
            kept.append(message)
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            if len(body) > self._limit or not message.get("more_body", False):
                break
        if len(body) > self._limit or not await self._answer(scope, body, receive, send):
            await self.app(scope, _replay(kept, receive), send)

    async def _answer(self, scope: Any, body: bytes, receive: Any, send: Any) -> bool:
        """Answer the POST here if the SDK would answer it the same way; ``False``: not done."""
        from mcp.server._streamable_http_modern import _to_jsonrpc_response, _write

        try:
            checked = await self._checked(scope, body)
        except Exception:  # whatever a check trips on, the SDK's entry answers it
            log.debug("direct HTTP answer declined", exc_info=True)
            return False
        if checked is None:
            return False
        id_, version, typed = checked
        reply = await _to_jsonrpc_response(id_, self.direct.result(version, typed))
        await _write(reply, scope, receive, send)
        return True

    async def _checked(self, scope: Any, body: bytes) -> tuple[Any, str, Any] | None:
        """``(id, version, params)`` when every check the SDK's entry makes passes and the call
        can run now, else ``None``."""
        from mcp.server.streamable_http import check_accept_headers
        from mcp.shared.inbound import (
            MCP_PROTOCOL_VERSION_HEADER,
            InboundModernRoute,
            classify_inbound_request,
            find_duplicated_routing_header,
        )
        from mcp_types import JSONRPCRequest
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
        from pydantic import ValidationError
        from starlette.requests import Request

        request = Request(scope)
        version_header = request.headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if version_header is None or version_header in HANDSHAKE_PROTOCOL_VERSIONS:
            return None  # the handshake era: sessions, the SDK's transport
        if await self._security.validate_request(request, is_post=True) is not None:
            return None
        if not check_accept_headers(request)[0]:
            return None
        try:
            message = self.direct.parse(body.decode("utf-8"))
        except UnicodeDecodeError:
            return None
        if message is None or find_duplicated_routing_header(request.headers.items()):
            return None
        try:
            req = JSONRPCRequest.model_validate(message)
        except ValidationError:
            return None
        verdict = classify_inbound_request(message, headers=dict(request.headers))
        if not isinstance(verdict, InboundModernRoute) or self._declares_headers(message):
            return None
        version = verdict.protocol_version
        typed = self.direct.typed(version, message["params"])
        return None if typed is None else (req.id, version, typed)

    def _declares_headers(self, message: dict[str, Any]) -> bool:
        """Whether the tool's input schema declares ``Mcp-Param`` headers (the SDK checks those)."""
        lookup = self.direct.lowlevel.get_tool_input_schema
        return lookup is None or lookup(message["params"]["name"]) is not None


def _content_length(headers: Any) -> int | None:
    for name, value in headers:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(kept: list[Any], receive: Any) -> Any:
    """``receive`` giving back the messages already read first."""
    pending = list(kept)

    async def replayed() -> Any:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


def direct_http_supported(server: MCPServer[Any]) -> bool:
    """Whether the installed SDK has every part :class:`DirectHttp` borrows (some are private:
    the modern entry's ``_to_jsonrpc_response`` and ``_write``), and the app is laid out as it
    expects (no authentication, the session manager's settings where it reads them)."""
    try:
        from mcp.server import _streamable_http_modern as modern
        from mcp.server.streamable_http import check_accept_headers  # noqa: F401
        from mcp.server.transport_security import TransportSecurityMiddleware  # noqa: F401
        from mcp.shared.inbound import (  # noqa: F401
            MCP_PROTOCOL_VERSION_HEADER,
            find_duplicated_routing_header,
        )
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS  # noqa: F401
    except ImportError:
        return False
    manager = getattr(server._lowlevel_server, "_session_manager", None)
    return (
        callable(getattr(modern, "_to_jsonrpc_response", None))
        and callable(getattr(modern, "_write", None))
        and server.settings.auth is None
        and all(
            hasattr(manager, name)
            for name in ("max_request_body_size", "json_response", "security_settings")
        )
    )


def http_app(server: MCPServer[Any], host: str, path: str, direct: Any = None) -> Any:
    """``server``'s streamable HTTP app (JSON responses) at ``path``, behind
    :class:`DirectHttp` when ``direct`` (a :class:`~ebb_core.mcp_direct.DirectCalls`) is given
    and the SDK has what it borrows."""
    app: Any = server.streamable_http_app(streamable_http_path=path, json_response=True, host=host)
    if direct is not None and direct_http_supported(server):
        app = DirectHttp(app, direct, path, server._lowlevel_server._session_manager)
    return app


async def serve_http_app(
    server: MCPServer[Any],
    host: str,
    port: int,
    path: str,
    direct: Any = None,
) -> None:
    """Serve :func:`http_app` at ``http://HOST:PORT/PATH`` until the process is stopped: the
    SDK's ``run_streamable_http_async`` with the writes described in the module's docstring."""
    import uvicorn

    config = uvicorn.Config(
        http_app(server, host, path, direct),
        host=host,
        port=port,
        log_level=server.settings.log_level.lower(),
        access_log=False,
        http=_uvicorn_protocol(),
    )
    await uvicorn.Server(config).serve()
