"""``ebb mcp``: Ebb's agent tools over the Model Context Protocol (stdio or streamable HTTP).

Needs the ``mcp`` extra (``pip install 'ebb-memory[mcp]'``). The SDK is imported only when a
server is built, so the rest of Ebb (and ``ebb --help``) works without it.

Thirteen tools, the catalog of :mod:`ebb_core.tools` (the LangChain and LlamaIndex tools are
the same) — ``remember``, ``recall``, ``connect``, ``reinforce``, ``forget``, ``neighbors``,
``history``, ``pin``, ``maintain``, ``review_queue``, ``stats``, ``read`` (memories by id, like
the reference memory server's ``open_nodes``) and ``explore`` (a bounded view of a memory's
neighbourhood) — and two read-only resources, ``ebb://stats`` and ``ebb://review-queue``. This
module adds what only MCP has: the store hand-over, the wire checks, the output schemas and the
read-only hints. No tool deletes anything: ``forget`` and ``maintain`` only move
memories into the review queue, and approving a deletion stays with a person at the CLI.

How a person can still review and approve while the server runs
-----------------------------------------------------------------
The server keeps its store open between calls, with everything ``Brain`` keeps in memory (the recall
columns, the row snapshot, prepared statements), so a call costs about what the call itself costs.
Embedded Kùzu lets one process at a time open the store file, so on Kùzu the server lets go of it
(:class:`~ebb_core.mcp_access.StoreAccess`): after ``idle_release`` seconds without a call, and
right after the current call whenever another process asks for the store. Every ``ebb`` command asks
when it finds the store held (:mod:`ebb_core.handoff`) and says on stderr what it waits for, so
``ebb review`` / ``ebb approve`` get in within one call even while a client calls in a tight loop. A
call that finds the store held by someone else waits up to ``wait`` seconds for it, then answers
with a "busy" tool error. Calls within one server run one at a time: right on the event loop when
the store is open and free (a few milliseconds), on a worker thread when they may have to wait for
it or for a database server (see :func:`_on_loop_when_free`). Neo4j serves many clients at once, so
on Neo4j the server keeps one connection open for its lifetime.

>>> serve("stdio", path="./ebb_db", namespace="alice")     # doctest: +SKIP
"""

from __future__ import annotations

import functools
import gc
import inspect
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click
from pydantic import ValidationError

from .cli import store_options
from .engine import Brain
from .errors import BackendUnavailable, EbbError, InvalidInput, StoreLocked
from .grouping import DEFAULT_DELAY as DEFAULT_REINFORCEMENT_DELAY
from .mcp_access import DEFAULT_IDLE_RELEASE, DEFAULT_WAIT, StoreAccess, busy_message
from .mcp_options import holding_options, transport_options
from .mcp_tools import add_tools, check_arguments, explain_invalid
from .tools import INSTRUCTIONS
from .validation import MAX_LIST

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = [
    "DEFAULT_IDLE_RELEASE",
    "DEFAULT_WAIT",
    "HTTP_PATH",
    "TOOL_NAMES",
    "StoreAccess",
    "build_server",
    "direct_calls",
    "mcp_command",
    "serve",
]

STARTUP_WAIT = 1.0
"""Seconds ``ebb mcp`` waits for a busy store at start before serving without it."""

HTTP_PATH = "/mcp"
"""Where the streamable HTTP transport listens: ``http://HOST:PORT/mcp``."""

TOOL_NAMES = (
    "remember",
    "recall",
    "connect",
    "reinforce",
    "forget",
    "neighbors",
    "history",
    "pin",
    "maintain",
    "review_queue",
    "stats",
    "read",
    "explore",
)


log = logging.getLogger("ebb.mcp")

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

# -- the server ----------------------------------------------------------------------------------


def _runner(access: StoreAccess, tool_error: type[Exception]) -> Callable[..., Any]:
    """``run(what, work, error)``: one store session; Ebb's errors become clear tool errors.

    ``tool_error`` is the SDK's ``ToolError`` (imported lazily by ``build_server``)."""

    def run(what: str, work: Callable[[Brain], T], error: type[Exception] = tool_error) -> T:
        """Do ``work`` in one store session; Ebb's errors become clear tool errors."""
        try:
            with access.brain() as brain:
                return work(brain)
        except StoreLocked:
            raise error(busy_message(access.location, access.wait)) from None
        except EbbError as exc:
            raise error(str(exc)) from None
        except Exception as exc:
            log.exception("%s failed unexpectedly", what)
            raise error(
                f"unexpected {type(exc).__name__} in {what}: {exc}. This is a bug in Ebb. Each "
                "call is one transaction: the store has all of this call's change or none of it."
            ) from None

    return run


def build_server(access: StoreAccess) -> MCPServer[Any]:
    """The MCP server with Ebb's tools and two resources, on ``access``'s store."""
    try:
        from mcp.server.mcpserver import Context, MCPServer
        from mcp.server.mcpserver.exceptions import ResourceError, ToolError
        from mcp.types import CallToolResult, InputRequiredResult
    except ImportError as exc:
        raise BackendUnavailable(
            f"the MCP server needs its extra: pip install 'ebb-memory[mcp]' ({exc})"
        ) from None
    from . import __version__

    run = _runner(access, ToolError)

    class EbbServer(MCPServer[Any]):
        direct_parts: tuple[Callable[..., Any], frozenset[str], StoreAccess] | None = None

        async def call_tool(
            self,
            name: str,
            arguments: dict[str, Any],
            context: Context[Any, Any] | None = None,
        ) -> CallToolResult | InputRequiredResult:
            check_arguments(name, arguments, allowed.get(name))
            try:
                result = await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if isinstance(exc.__cause__, ValidationError):
                    raise ToolError(explain_invalid(name, exc.__cause__)) from exc.__cause__
                raise
            return result

        async def run_stdio_async(self) -> None:
            """The SDK's stdio transport, with Ebb's reader in front of it (see mcp_wire)."""
            from mcp.server.stdio import stdio_server

            from .mcp_wire import GuardedStdin, PipeStdout

            stdin = GuardedStdin()
            stdout = await PipeStdout.open()  # None: the SDK's own writer
            try:
                async with stdio_server(stdin=stdin, stdout=stdout) as (  # type: ignore[arg-type]
                    read_stream,
                    write_stream,
                ):
                    stdin.attach(write_stream)
                    lowlevel = self._lowlevel_server
                    direct = direct_calls(self)
                    if stdout is not None and direct is not None:
                        stdin.direct, stdin.out, stdout.on_write = direct, stdout, direct.sent
                    await lowlevel.run(
                        stdin.messages(read_stream),
                        write_stream,
                        lowlevel.create_initialization_options(),
                    )
            finally:
                if stdout is not None:
                    await stdout.close()

    server = EbbServer(
        "ebb",
        title="Ebb memory",
        description="Long-term graph memory: recency-weighted relevance, decay, human-approved "
        "deletion.",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
    )

    tools = add_tools(server, run, lambda fn: _on_loop_when_free(fn, access))
    allowed = {name: names for name, (names, _) in tools.items()}
    direct_handler = _answer_calls_directly(server, tools)
    short_tools = frozenset(n for n, (_, fn) in tools.items() if inspect.iscoroutinefunction(fn))
    if direct_handler is not None:
        server.direct_parts = (direct_handler, short_tools, access)
    _no_header_walk(server)
    _add_resources(server, run, ResourceError)
    without_idle_tracing(server)
    return server


def _answer_calls_directly(
    server: MCPServer[Any], tools: dict[str, tuple[frozenset[str], Callable[..., Any]]]
) -> Callable[..., Any] | None:
    """Answer ``tools/call`` with Ebb's own handler, registered on the SDK's low-level server
    (its public ``add_request_handler``), instead of the ``MCPServer`` one.

    The ``MCPServer`` handler builds a request ``Context`` (a pydantic model) and goes through
    its tool manager, the tool's ``run`` (argument resolvers, context injection) and its result
    conversion on every call; Ebb's tools use none of these (they take no context, have no
    resolvers and return a finished ``CallToolResult``). This handler does the same checks in
    the same order with the same messages: Ebb's own checks (:func:`check_arguments`), the
    arguments validated by the very model the SDK built from the tool's signature (so a string
    holding JSON for a list is still parsed as the SDK parses it), a failed validation
    explained in one line, any error a tool error (``isError: true``). Everything around it is
    still the SDK's (the protocol checks, the initialisation gate, middleware, the result's
    validation against the protocol version). Returns the handler (``None``: the SDK's kept),
    which :mod:`ebb_core.mcp_direct` also calls for the short tools over stdio.
    """
    import anyio.to_thread
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.shared.exceptions import MCPError
    from mcp.types import CallToolRequestParams, CallToolResult, TextContent

    manager = server._tool_manager
    lowlevel = server._lowlevel_server
    if lowlevel.get_request_handler("tools/call") is None or server._extensions:
        return None  # not the handler layout this was written for: keep the SDK's
    validators = {}
    for name in tools:
        registered = manager.get_tool(name)
        if registered is None:
            return None
        validators[name] = registered.fn_metadata.validate_arguments
    short = {name for name, (_, fn) in tools.items() if inspect.iscoroutinefunction(fn)}

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        name, arguments = params.name, params.arguments or {}
        try:
            entry = tools.get(name)
            if entry is None:
                raise ToolError(f"Unknown tool: {name}")
            allowed, fn = entry
            check_arguments(name, arguments, allowed)
            try:
                kwargs = validators[name](arguments)
            except ValidationError as exc:
                raise ToolError(explain_invalid(name, exc)) from exc
            if name in short:  # on the loop when the store is free (see _on_loop_when_free)
                result = await fn(**kwargs)
            else:  # a long tool (maintain): on a worker thread, as the SDK runs it
                result = await anyio.to_thread.run_sync(functools.partial(fn, **kwargs))
            return cast("CallToolResult", result)
        except MCPError:
            raise
        except ToolError as exc:
            log.info("tool %r failed: %r", name, str(exc))
            return CallToolResult(content=[TextContent(type="text", text=str(exc))], is_error=True)
        except Exception:
            log.exception("tool %r raised an unexpected exception", name)
            return CallToolResult(
                content=[TextContent(type="text", text=f"Error executing tool {name}")],
                is_error=True,
            )

    lowlevel.add_request_handler("tools/call", CallToolRequestParams, call_tool)
    return call_tool


def direct_calls(server: MCPServer[Any]) -> Any:
    """A :class:`~ebb_core.mcp_direct.DirectCalls` answering short calls for ``server`` (built
    by :func:`build_server`), or ``None`` (the SDK lacks what it borrows, or the ``tools/call``
    handler is the SDK's)."""
    from .mcp_direct import DirectCalls

    parts = getattr(server, "direct_parts", None)
    if parts is None or not DirectCalls.supported():
        return None
    handler, short, access = parts
    return DirectCalls(server._lowlevel_server, handler, short, access)


def _no_header_walk(server: MCPServer[Any]) -> None:
    """Spare streamable HTTP a walk of the tool's input schema on every call.

    Over HTTP, the SDK checks each ``tools/call``'s ``Mcp-Param-*`` headers against the
    ``x-mcp-header`` annotations of the tool's input schema, which it gets from the low-level
    server's ``get_tool_input_schema`` and walks twice per call (about thirty schema positions for
    Ebb's tools). None of Ebb's schemas has such an annotation, so that check can never reject
    anything: the lookup answers ``None`` (which the SDK documents as "nothing to validate") for
    every tool whose schema has none, decided once here, and the schema for any that has one.
    """
    lowlevel = server._lowlevel_server
    lookup = lowlevel.get_tool_input_schema
    if lookup is None:
        return
    annotated = {
        tool.name
        for tool in server._tool_manager.list_tools()
        if "x-mcp-header" in json.dumps(tool.parameters)
    }

    def input_schema(name: str) -> Any:
        return lookup(name) if name in annotated else None

    lowlevel.get_tool_input_schema = input_schema


def without_idle_tracing(server: MCPServer[Any]) -> bool:
    """Leave out the SDK's OpenTelemetry layer when no tracer provider is configured.

    The SDK wraps every message in an OpenTelemetry span (its ``OpenTelemetryMiddleware``, first
    in the server's ``middleware`` list, whose documented opt-out is to drop it from that list).
    With no tracer provider set, the spans go nowhere but are still made: about 26 Python calls
    a request. So the layer is dropped when OpenTelemetry's global provider is still the API's
    default proxy, and kept when a program configured tracing before the server was built
    (``opentelemetry-instrument``, ``OTEL_PYTHON_TRACER_PROVIDER``, or
    ``trace.set_tracer_provider`` before :func:`build_server`). Returns whether it was dropped.
    """
    try:
        from opentelemetry import trace
    except ImportError:  # the SDK needs it today; without it there is no layer to drop
        return False
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return False
    middleware = server.middleware
    kept = [m for m in middleware if type(m).__name__ != "OpenTelemetryMiddleware"]
    if len(kept) == len(middleware):
        return False
    middleware[:] = kept
    return True


def _add_resources(server: MCPServer[Any], run: Callable[..., str], error: type[Exception]) -> None:
    """The two read-only resources: the store's counts and the review queue, as JSON."""

    @server.resource(
        "ebb://stats",
        name="stats",
        title="Memory statistics",
        description="Counts per tier, links, pinned, review queue size (JSON, read-only).",
        mime_type="application/json",
    )
    def stats_resource() -> str:
        return run("stats", lambda b: b.stats().model_dump_json(indent=2), error)

    @server.resource(
        "ebb://review-queue",
        name="review-queue",
        title="Review queue",
        description="Memories waiting for a person to approve deletion or restore them (JSON, "
        "read-only; approve with `ebb approve ID --by NAME`).",
        mime_type="application/json",
    )
    def review_queue_resource() -> str:
        def work(b: Brain) -> str:
            items = [i.model_dump(mode="json") for i in b.review_queue(MAX_LIST)]
            return json.dumps({"count": len(items), "items": items}, indent=2, ensure_ascii=False)

        return run("review queue", work, error)


def _on_loop_when_free(fn: Callable[..., T], access: StoreAccess) -> Callable[..., Any]:
    """``fn`` as a coroutine that runs it right on the event loop when the store is open and
    free, and on a worker thread (as the SDK runs a plain function) when it may have to wait.

    A call on an open store takes a few milliseconds; handing it to a worker thread and back
    costs two thread switches, which on a busy machine are a good part of a call's overhead.
    A call that has to open the store, or wait for another call or for another process, still
    goes to a thread, so the event loop never waits on the store. Only for short tools: a long
    one (``maintain``) always runs on a thread.
    """
    import anyio.to_thread

    @functools.wraps(fn)
    async def call(**kwargs: Any) -> T:
        if access.claim():
            try:
                return fn(**kwargs)
            finally:
                access.unclaim()
        return await anyio.to_thread.run_sync(functools.partial(fn, **kwargs))

    return call


def serve(
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str | os.PathLike[str] | None = None,
    backend: str | None = None,
    namespace: str | None = None,
    *,
    wait: float = DEFAULT_WAIT,
    idle_release: float = DEFAULT_IDLE_RELEASE,
    reinforcement_delay: float = DEFAULT_REINFORCEMENT_DELAY,
) -> None:
    """Serve Ebb's tools until the client goes away (stdio) or the process is stopped (HTTP).

    ``transport`` is ``"stdio"`` or ``"http"`` (streamable HTTP at ``http://HOST:PORT/mcp``).
    ``path``, ``backend`` and ``namespace`` default to ``EBB_DB_PATH``, ``EBB_BACKEND`` and
    ``EBB_NAMESPACE`` like the CLI. The store is opened now (so a bad path fails here) and
    kept open between calls; on Kùzu it is let go of after ``idle_release`` idle seconds, or as
    soon as another process asks for it (see :class:`~ebb_core.mcp_access.StoreAccess`). What
    recall reinforces is written within ``reinforcement_delay`` seconds (0: with each recall).
    """
    if transport not in ("stdio", "http", "streamable-http"):
        raise InvalidInput(
            f"unknown transport {transport!r}: choose 'stdio' or 'http'", field="transport"
        )
    access = StoreAccess(
        path,
        backend=backend,
        namespace=namespace,
        wait=wait,
        idle_release=idle_release,
        reinforcement_delay=reinforcement_delay,
    )
    server = build_server(access)
    mode = _holding_mode(access)
    where = _check_store(access)
    # What is loaded by now (the SDK, pydantic's validators, the open store) lives as long as
    # the server: kept out of the collector's full passes, which otherwise walk all of it now
    # and then in the middle of a call (measured: 170 ms, against a 5 ms recall).
    gc.collect()
    gc.freeze()
    if transport == "stdio":
        _note(f"ebb mcp: serving {where} (namespace {access.namespace!r}) over stdio; {mode}")
        try:
            _run(server.run_stdio_async)
        finally:
            access.close()
        return
    _serve_http(server, access, host, port, where, mode)


def _holding_mode(access: StoreAccess) -> str:
    """How the server holds the store between calls, as its start-up line says it."""
    if access.hold:
        mode = "holding the connection"
    elif access.idle_release > 0:
        mode = (
            f"keeping the store open between calls; it lets go after {access.idle_release:g} s "
            "without a call, or at once when an `ebb` command asks for the store"
        )
    else:
        mode = "opening the store only during each call"
    if access.reinforcement_delay > 0:
        mode += (
            f"; what recall reinforces is written within {access.reinforcement_delay:g} s, grouped"
        )
    return mode


def _check_store(access: StoreAccess) -> str:
    """Where the store is, once opened (a bad path fails here). A store another process holds
    is served anyway: each call waits for it, and says so if it stays busy."""
    try:
        return access.check(wait=STARTUP_WAIT)
    except StoreLocked:
        # Another process (a person's `ebb` command, another server) holds the embedded store.
        where = access.location.removeprefix("at ")
        _note(
            f"ebb mcp: the store at {where} is busy (another process holds it); serving "
            f"anyway: each call waits up to {access.wait:g} s for it and answers with a "
            "'busy' tool error if it is still held"
        )
        return where


def _serve_http(
    server: MCPServer[Any], access: StoreAccess, host: str, port: int, where: str, mode: str
) -> None:
    """Serve over streamable HTTP at ``http://HOST:PORT/mcp`` until the process is stopped
    (warning when the address is not loopback: the server has no authentication). Each request
    is answered with one JSON body (``json_response``), not an event stream: no tool sends
    anything while it runs, and the stream cost both sides work on every call. uvicorn writes
    each such answer in one piece (:mod:`ebb_core.mcp_http`)."""
    if host not in ("127.0.0.1", "localhost", "::1"):
        _note(
            f"ebb mcp: warning: listening on {host}; the server has no authentication, so "
            "anyone who can reach this address can read and write these memories"
        )
    from .mcp_http import serve_http_app

    shown = f"[{host}]" if ":" in host else host
    _note(
        f"ebb mcp: serving {where} (namespace {access.namespace!r}) over streamable HTTP at "
        f"http://{shown}:{port}{HTTP_PATH}; {mode}"
    )
    try:
        direct = direct_calls(server)
        _run(functools.partial(serve_http_app, server, host, port, HTTP_PATH, direct))
    finally:
        access.close()


def _run(main: Callable[[], Any]) -> None:
    """Run the server's event loop: uvloop's when it is installed, else asyncio's own.

    What a call costs the server beyond Ebb's own work is mostly event-loop turns, stream
    hand-offs and, over HTTP, parsing the request: uvloop runs the loop in C, and uvicorn picks
    the ``httptools`` parser by itself when that is installed (both come with the ``mcp``
    extra). Without them the server works the same, on asyncio's loop and uvicorn's ``h11``.
    """
    import anyio

    try:
        import uvloop  # noqa: F401
    except ImportError:
        options: dict[str, Any] = {}
    else:
        options = {"use_uvloop": True}
    anyio.run(main, backend="asyncio", backend_options=options)


def _note(message: str) -> None:
    # stdout belongs to the protocol on stdio: everything for people goes to stderr.
    print(message, file=sys.stderr, flush=True)


@click.command("mcp")
@transport_options
@store_options
@holding_options
@click.pass_context
def mcp_command(
    ctx: click.Context,
    transport: str,
    host: str,
    port: int,
    db: str | None,
    backend: str | None,
    namespace: str | None,
    wait: float,
    idle_release: float,
    reinforcement_delay: float,
) -> None:
    """Serve Ebb's memory tools to an MCP client (stdio by default, or streamable HTTP).

    The server keeps the store open between calls. On the embedded store it lets go when idle
    or when an `ebb` command asks for it, so `ebb review` and `ebb approve` work while it runs.
    """
    parent = ctx.find_root().obj if ctx.parent is not None else None
    db = db or getattr(parent, "db", None)
    backend = backend or getattr(parent, "backend", None)
    namespace = namespace or getattr(parent, "namespace", None)
    try:
        serve(
            transport,
            host,
            port,
            db,
            backend,
            namespace,
            wait=wait,
            idle_release=idle_release,
            reinforcement_delay=reinforcement_delay,
        )
    except EbbError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        pass
