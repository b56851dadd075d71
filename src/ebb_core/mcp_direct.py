"""Answer a stdio ``tools/call`` right where its line is read, when nothing can make it wait.

Over stdio every request goes through the SDK's layers before Ebb's handler sees it: the line
parsed into a message model, a memory stream to a replay task (which decides the protocol era),
another to the dispatcher, a task spawned per request with its cancel scope, a fresh connection,
runner and session per request (2026-07-28 era), the middleware chain, and the answer through
one more memory stream to the writer task. Measured at 1k memories, that was about as much
server CPU as the recall itself.

:class:`DirectCalls` answers the one request that matters for speed, a ``tools/call`` of a short
tool (``recall``, ``remember``, …), in the reader itself, with the same checks and the same
answer the SDK would give, built by the SDK's own functions: the per-request envelope checked
by the SDK's ``classify_inbound_request`` (2026-07-28 era), the params checked against the
protocol version's surface and parsed by the handler's own model, Ebb's ``tools/call`` handler
(:func:`ebb_core.mcp_server._answer_calls_directly`), the result shaped for the wire by the
SDK runner's ``_serialize`` and written as the SDK's dispatcher writes it (a ``JSONRPCResponse``
dumped by alias, unset fields left out). Anything else, or anything the SDK would answer
differently, goes the SDK's way unchanged:

- every line until the SDK has seen the client's first request (which decides the era), and,
  in the handshake era, until ``initialize`` and ``notifications/initialized`` have gone through;
- every line while a request the SDK was given is still unanswered (a pipelining client's calls
  keep their order: a direct answer never overtakes one the SDK is working on);
- a line that is not a clean JSON-RPC request (anything :mod:`ebb_core.mcp_wire` answers itself:
  not JSON, a lone surrogate, a huge integer, deep nesting), any other method, a tool that is
  not short (``maintain``), params or an envelope the SDK would refuse;
- whenever the store is not open and free this moment (closed, let go of, another process asked
  for it): the call may have to wait, and waiting belongs on a worker thread, not in the reader;
- a call carrying a ``requestState``, and any call when the server has middleware other than
  the SDK's request-state boundary (tracing configured: the spans stay whole).

A direct call runs on the event loop between two reads, like the SDK's own on-the-loop calls
(``_on_loop_when_free``); calls still take turns on the store (:class:`StoreAccess`), and a
client that sends several calls without waiting gets them run, and answered, in order.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .mcp_access import StoreAccess

__all__ = ["DirectCalls"]

log = logging.getLogger("ebb.mcp")

Handler = Callable[[Any, Any], Awaitable[Any]]


class DirectCalls:
    """The direct answer to short ``tools/call`` requests over stdio (see the module docstring).

    ``lowlevel`` is the SDK's low-level server, ``handler`` Ebb's ``tools/call`` handler
    registered on it, ``short`` the tools that may run on the event loop.
    """

    def __init__(
        self, lowlevel: Any, handler: Handler, short: frozenset[str], access: StoreAccess
    ) -> None:
        from mcp.server.runner import ServerRunner

        self._lowlevel = lowlevel
        self._handler = handler
        self._short = short
        self._access = access
        # Only `_serialize` is used: it reads the server (cache hints, the serverInfo stamp),
        # never the connection, which a per-request runner would get.
        self._runner = ServerRunner(lowlevel, None, None)  # type: ignore[arg-type]
        self.era: str | None = None
        """``"modern"`` (2026-07-28, an envelope on every request) or ``"legacy"``
        (the ``initialize`` handshake), once the SDK has seen the client's first request."""
        self._version: str | None = None  # legacy: the negotiated protocol version
        self._initialized = False  # legacy: `notifications/initialized` went through
        self._pending: set[Any] = set()  # ids of requests the SDK has not answered yet
        self.answered = 0
        """How many calls were answered here (the rest went through the SDK)."""

    @property
    def lowlevel(self) -> Any:
        """The SDK's low-level server this answers for."""
        return self._lowlevel

    @staticmethod
    def supported() -> bool:
        """Whether the installed SDK has every part the direct answer borrows. Some are private
        (the runner's ``_serialize`` and ``_negotiate_initialize``) and may move in a minor
        release of the SDK: without them stdio keeps the SDK's own path, only slower."""
        try:
            from mcp.server.request_state import RequestStateBoundary  # noqa: F401
            from mcp.server.runner import ServerRunner
            from mcp.shared.inbound import (  # noqa: F401
                InboundModernRoute,
                classify_inbound_request,
            )
            from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data  # noqa: F401
            from mcp_types import (  # noqa: F401
                PROTOCOL_VERSION_META_KEY,
                ErrorData,
                JSONRPCError,
                JSONRPCNotification,
                JSONRPCRequest,
                JSONRPCResponse,
            )
            from mcp_types import methods as surface
        except ImportError:
            return False
        return all(
            callable(getattr(owner, name, None))
            for owner, name in (
                (ServerRunner, "_serialize"),
                (ServerRunner, "_negotiate_initialize"),
                (surface, "validate_client_request"),
            )
        )

    # -- what the SDK saw ---------------------------------------------------------------------

    def observe(self, item: Any) -> None:
        """Follow the session from each message the SDK passes on to the server, in order:
        the era (decided by the first request, as the SDK decides it), and in the handshake
        era the negotiated version and the ``initialized`` notification."""
        from mcp.server.runner import ServerRunner
        from mcp_types import JSONRPCNotification, JSONRPCRequest

        message = getattr(item, "message", None)
        if isinstance(message, JSONRPCRequest):
            self._pending.add(message.id)
            if self.era is None:
                modern = message.method != "initialize" and _enveloped(message.params)
                self.era = "modern" if modern else "legacy"
            if self.era == "legacy" and message.method == "initialize":
                try:
                    _, self._version = ServerRunner._negotiate_initialize(message.params)
                except Exception:  # refused by the SDK too: no direct calls on this session
                    self._version = None
        elif isinstance(message, JSONRPCNotification):
            if message.method == "notifications/initialized" and self.era == "legacy":
                self._initialized = self._version is not None
            elif message.method == "notifications/cancelled" and self._pending:
                # A request the client cancelled is never answered (the SDK drops it).
                self._pending.discard((message.params or {}).get("requestId"))

    def sent(self, line: str) -> None:
        """Note a message the SDK wrote to stdout: an answer settles its request."""
        if not self._pending:
            return
        try:
            message = json.loads(line)
        except ValueError:
            return
        if isinstance(message, dict) and "method" not in message and "id" in message:
            self._pending.discard(message["id"])

    # -- answering ------------------------------------------------------------------------------

    async def answer(self, line: str) -> str | None:
        """The response line for ``line`` if it is answered here, else ``None`` (pass it on)."""
        if self.era is None or self._pending or not self._plain_middleware():
            return None  # the era unknown, or a request in the SDK's hands it must not overtake
        request = self._request(line)
        if request is None:
            return None
        id_, params = request
        version = self._version_for(params)
        if version is None or not self._store_free():
            return None
        typed = self._typed(version, params)
        if typed is None:
            return None
        from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
        from mcp_types import ErrorData, JSONRPCError, JSONRPCResponse

        try:
            result = await self._handler(None, typed)
            wire = self._runner._serialize("tools/call", version, result)
        except Exception as exc:  # as the SDK's dispatcher answers a handler's exception
            error = handler_exception_to_error_data(exc)
            if error is None:
                log.exception("handler for 'tools/call' raised")
                error = ErrorData(code=0, message=str(exc))
            reply: Any = JSONRPCError(jsonrpc="2.0", id=id_, error=error)
        else:
            reply = JSONRPCResponse(jsonrpc="2.0", id=id_, result=wire)
        self.answered += 1
        text: str = reply.model_dump_json(by_alias=True, exclude_unset=True)
        return text

    def _request(self, line: str) -> tuple[int | str, dict[str, Any]] | None:
        """``(id, params)`` of a clean ``tools/call`` of a short tool, else ``None``."""
        message = self.parse(line)
        return None if message is None else (message["id"], message["params"])

    def parse(self, line: str) -> dict[str, Any] | None:
        """The message if ``line`` is a clean ``tools/call`` of a short tool, else ``None``."""
        if '"tools/call"' not in line:
            return None
        from .mcp_wire import _no_constants, _problems

        try:
            message = json.loads(line, parse_constant=_no_constants)
        except (ValueError, RecursionError):
            return None
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return None
        id_, params = message.get("id"), message.get("params")
        if message.get("jsonrpc") != "2.0" or not isinstance(params, dict):
            return None
        if isinstance(id_, bool) or not isinstance(id_, (int, str)):
            return None
        if params.get("name") not in self._short or params.get("requestState") is not None:
            return None
        if _problems(message):
            return None
        return message

    def typed(self, version: str, params: dict[str, Any]) -> Any:
        """The params, checked and parsed as the SDK would for ``version``, when the call can
        be answered here now (the middleware plain, the store free), else ``None``."""
        if not self._plain_middleware() or not self._store_free():
            return None
        return self._typed(version, params)

    async def result(self, version: str, typed: Any) -> dict[str, Any]:
        """The call's result shaped for the wire at ``version``, as the SDK's runner shapes it
        (an exception propagates: the caller answers it as the SDK's entry would)."""
        result = await self._handler(None, typed)
        wire: dict[str, Any] = self._runner._serialize("tools/call", version, result)
        self.answered += 1
        return wire

    def _plain_middleware(self) -> bool:
        """Whether the server's middleware would pass a call through untouched: none, or only
        the SDK's ``RequestStateBoundary``, which acts on a call only when it carries a
        ``requestState`` (left to the SDK, see :meth:`_request`) or returns ``input_required``
        (no Ebb tool does). Any other (tracing configured, say): every call goes the SDK's way."""
        from mcp.server.request_state import RequestStateBoundary

        return all(isinstance(m, RequestStateBoundary) for m in self._lowlevel.middleware)

    def _version_for(self, params: Mapping[str, Any]) -> str | None:
        """The protocol version this call is served at, or ``None`` to leave it to the SDK."""
        if self.era == "legacy":
            if not self._initialized or _enveloped(params):
                return None  # not yet accepted, or an envelope the legacy era refuses
            return self._version
        from mcp.shared.inbound import InboundModernRoute, classify_inbound_request

        route = classify_inbound_request({"method": "tools/call", "params": params})
        return route.protocol_version if isinstance(route, InboundModernRoute) else None

    def _store_free(self) -> bool:
        """Whether the call can run now without waiting (the handler takes the store itself)."""
        if not self._access.claim():
            return False
        self._access.unclaim()
        return True

    def _typed(self, version: str, params: dict[str, Any]) -> Any:
        """The params as the SDK checks and parses them for this version, or ``None``."""
        from mcp_types import methods as surface

        entry = self._lowlevel.get_request_handler("tools/call")
        if entry is None or entry.handler is not self._handler:
            return None  # someone replaced the handler since: the SDK serves it
        try:
            surface.validate_client_request("tools/call", version, params)
            return entry.params_type.model_validate(params, by_name=False)
        except Exception:  # the SDK answers it (invalid params, unknown version)
            return None


def _enveloped(params: Any) -> bool:
    """Whether ``params._meta`` carries the 2026-07-28 protocol-version key (as the SDK asks)."""
    from mcp_types import PROTOCOL_VERSION_META_KEY

    meta = params.get("_meta") if isinstance(params, Mapping) else None
    return isinstance(meta, Mapping) and PROTOCOL_VERSION_META_KEY in meta
