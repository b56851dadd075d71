"""Ebb's own stdin reader in front of the ``mcp`` SDK's stdio transport.

Why it exists: the SDK's stdio transport (``mcp.server.stdio.stdio_server``, SDK 2.x) parses each
line with pydantic's JSON parser and, when that fails, hands the exception to the session, which
logs it and sends nothing back. A client that wrote such a line waits for its own timeout. That
happens for lines that are not JSON (truncated, not UTF-8), for JSON that pydantic's parser
refuses although it is valid JSON (an escaped lone surrogate ``"\\ud800"``, nesting deeper than
its recursion limit, ``NaN``), and for JSON that is not a JSON-RPC message (a batch, a missing
``method``, an id that is neither a string nor an integer).

:class:`GuardedStdin` reads stdin itself and hands the SDK each line; the SDK parses it (once) and
:meth:`GuardedStdin.messages` passes on what the server should see, pairing each parsed message or
parse error with its line. Every line the SDK could not parse, or parsed into something it would
not answer, is answered here, so every request gets a response:

- not JSON at all → ``-32700`` *parse error* with ``"id": null`` (the id cannot be known);
- JSON, but not a request the server can take → ``-32600`` *invalid request*, with the request's
  id when it has a usable one, else ``null``;
- a ``tools/call`` whose only fault lies inside its ``arguments`` (an unpaired surrogate, a
  5,000-digit integer, nesting too deep) → a *tool error* (``isError: true``) naming the
  argument, like any other bad argument: the call is passed on with its arguments replaced by
  one the server refuses with that message (:data:`WIRE_ERROR_KEY`).

Responses from a client (``result``/``error`` without ``method``) that cannot be parsed are
logged on stderr and dropped: JSON-RPC never answers a response.

When stdin and stdout are pipes (as every client that starts the server makes them), both are
read and written on the event loop (:class:`PipeStdout`, and the reader here), where the SDK
would hand every line read, every message written and every flush to a worker thread: three
thread switches a call, a good part of what a call costs beyond its own work on a busy machine.
Anything else (a terminal, a file) keeps the SDK's threaded way.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import stat
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, BinaryIO

import anyio
import anyio.to_thread

if TYPE_CHECKING:
    from .mcp_direct import DirectCalls

__all__ = [
    "MAX_DEPTH",
    "MAX_LINE_BYTES",
    "WIRE_ERROR_KEY",
    "GuardedStdin",
    "PipeStdout",
    "answer_for",
]

log = logging.getLogger("ebb.mcp")

MAX_LINE_BYTES = 32 * 1024 * 1024
"""Longest message line read from stdin (32 MiB); a longer one is discarded and answered."""

MAX_DEPTH = 128
"""Deepest nesting of arrays and objects accepted in a message."""

MAX_DIGITS = 4300
"""Longest integer accepted (Python's own limit for converting digits to an int)."""

WIRE_ERROR_KEY = "\x00ebb-wire-error"
"""The one argument of a call this reader passes on only to be refused with its value."""

PARSE_ERROR = -32700
INVALID_REQUEST = -32600

_NOT_A_REQUEST = (
    'not a JSON-RPC 2.0 request: it needs "jsonrpc": "2.0", a "method" string, an object of '
    '"params" (or none) and, to get a result, an "id" that is a string or an integer'
)


class _Huge(str):
    """An integer literal too long to convert, kept as its digits so the walk can report it."""


def _parse_int(digits: str) -> int | _Huge:
    if len(digits.lstrip("-")) > MAX_DIGITS:
        return _Huge(digits)
    return int(digits)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _has_surrogate(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _problems(value: Any) -> list[tuple[tuple[str, ...], str]]:
    """What in a parsed message cannot be served: ``(path, what is wrong there)``, in order.

    Walks without recursion, so any depth Python's parser produced is safe to inspect. Reports
    the first too-deep place and the first huge integer, and every lone surrogate.
    """
    found: list[tuple[tuple[str, ...], str]] = []
    too_deep = huge = False
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if len(path) > MAX_DEPTH:
            if not too_deep:
                too_deep = True
                found.append((path, f"is nested deeper than {MAX_DEPTH} levels"))
            continue
        if isinstance(item, _Huge):
            if not huge:
                huge = True
                digits = len(item.lstrip("-"))
                found.append((path, f"is an integer of {digits:,} digits (at most {MAX_DIGITS:,})"))
        elif isinstance(item, str):
            if _has_surrogate(item):
                found.append((path, _SURROGATE))
        elif isinstance(item, Mapping):
            for k, v in reversed(list(item.items())):
                if _has_surrogate(k):
                    found.append(((*path, "<a key>"), _SURROGATE))
                    continue
                stack.append((v, (*path, str(k))))
        elif isinstance(item, list):
            stack.extend((v, (*path, str(i))) for i, v in reversed(list(enumerate(item))))
    return found


_SURROGATE = (
    "contains an unpaired UTF-16 surrogate (\\ud800-\\udfff escaped alone), which is not valid "
    "Unicode text; send valid UTF-8"
)


def _usable_id(message: Mapping[str, Any]) -> int | str | None:
    id_ = message.get("id")
    if isinstance(id_, (bool, _Huge)):
        return None
    if isinstance(id_, int):
        return id_
    if isinstance(id_, str) and not _has_surrogate(id_) and len(id_) <= 1000:
        return id_
    return None


def _error(id_: int | str | None, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


def _where(path: tuple[str, ...]) -> str:
    parts = [p if p.isidentifier() or p.isdigit() else repr(p)[:40] for p in path[:6]]
    shown = ".".join(parts) + (".…" if len(path) > 6 else "")
    return shown or "the message"


def answer_for(line: str) -> dict[str, Any] | None:
    """What to do with a stdin line the SDK cannot take (a plain dict), or ``None``.

    A JSON-RPC error reply; or, for a ``tools/call`` whose only fault is in its arguments, the
    same call with the arguments replaced by ``{WIRE_ERROR_KEY: reason}``, to pass on to the
    server, which answers it with a tool error; or ``None`` when no reply is due (a client's
    malformed *response*). Never raises.
    """
    try:
        message = json.loads(line.strip(), parse_int=_parse_int, parse_constant=_no_constants)
    except RecursionError:
        return _error(
            None, PARSE_ERROR, f"Parse error: the message is nested deeper than {MAX_DEPTH} levels"
        )
    except ValueError as exc:  # json.JSONDecodeError, and NaN/Infinity
        if isinstance(exc, json.JSONDecodeError):
            detail = f"{exc.msg} (line {exc.lineno}, column {exc.colno})"
        else:
            detail = str(exc)
        return _error(None, PARSE_ERROR, f"Parse error: not valid JSON: {detail}")
    if isinstance(message, list):
        return _error(None, INVALID_REQUEST, "Invalid request: JSON-RPC batches are not supported")
    if not isinstance(message, dict):
        return _error(None, INVALID_REQUEST, f"Invalid request: {_NOT_A_REQUEST}")
    if "method" not in message and ("result" in message or "error" in message):
        log.warning("ebb mcp: dropped a response from the client that could not be parsed")
        return None
    id_ = _usable_id(message)
    problems = _problems(message)
    params = message.get("params")
    arguments = params.get("arguments") if isinstance(params, dict) else None
    if (
        problems
        and all(path[:2] == ("params", "arguments") for path, _ in problems)
        and message.get("method") == "tools/call"
        and message.get("jsonrpc") == "2.0"
        and id_ is not None
        and isinstance(arguments, dict)
    ):
        assert isinstance(params, dict)
        name = params.get("name")
        tool = name[:80] if isinstance(name, str) and not _has_surrogate(name) else "the tool"
        path, what = problems[0]
        text = f"invalid arguments for {tool}: {_where(path[2:])} {what}"
        # Handed to the server as a call it refuses with this text, so the tool error is
        # shaped for whichever protocol version the session speaks.
        return {**message, "params": {**params, "arguments": {WIRE_ERROR_KEY: text}}}
    if problems:
        path, what = problems[0]
        return _error(id_, INVALID_REQUEST, f"Invalid request: {_where(path)} {what}")
    if "id" in message and id_ is None:
        return _error(
            None, INVALID_REQUEST, 'Invalid request: its "id" must be a string or an integer'
        )
    return _error(id_, INVALID_REQUEST, f"Invalid request: {_NOT_A_REQUEST}")


def _has_id(line: str) -> bool:
    try:
        message = json.loads(line, parse_int=_parse_int)
    except (ValueError, RecursionError):
        return False
    return isinstance(message, dict) and "id" in message


class GuardedStdin:
    """Lines from stdin for the SDK's stdio transport, and what the server gets of each.

    Pass it as ``stdio_server(stdin=...)``; call :meth:`attach` with the transport's write stream
    before the first line is read, and give the server :meth:`messages` of the transport's read
    stream instead of the stream itself: the SDK parses each line once, and a line it could not
    parse, or parsed into a notification although it has an id, is answered here instead of
    reaching the server. Reads bytes (never replacing invalid UTF-8 the way the SDK's text wrapper
    does), so a line that is not UTF-8 is answered as a parse error without reaching the SDK.
    """

    def __init__(self, stream: BinaryIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stdin.buffer
        self.direct: DirectCalls | None = None
        """Answers short ``tools/call`` lines here (see :mod:`ebb_core.mcp_direct`)."""
        self.out: PipeStdout | None = None  # where direct answers are written
        self._write: Any = None
        self._ready: anyio.Event | None = None
        self._pipe: _PipeLines | None = None
        self._tried_pipe = False
        self._lines: collections.deque[str] = collections.deque()  # handed to the SDK, unpaired

    async def _readline(self, limit: int) -> bytes:
        """The next line (with its newline), at most ``limit`` bytes of it; ``b""`` at the end."""
        if not self._tried_pipe:
            self._tried_pipe = True
            self._pipe = await _PipeLines.open(self._stream)
        if self._pipe is not None:
            return await self._pipe.readline(limit)
        return await anyio.to_thread.run_sync(self._stream.readline, limit, abandon_on_cancel=True)

    def attach(self, write_stream: Any) -> None:
        self._write = write_stream
        if self._ready is not None:
            self._ready.set()

    def __aiter__(self) -> GuardedStdin:
        return self

    async def __anext__(self) -> str:
        if self._write is None:
            self._ready = self._ready or anyio.Event()
            await self._ready.wait()
        while True:
            raw = await self._readline(MAX_LINE_BYTES + 1)
            if not raw:
                if self._pipe is not None:
                    self._pipe.close()
                raise StopAsyncIteration
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                await self._discard_rest()
                await self._reply(
                    _error(
                        None,
                        INVALID_REQUEST,
                        f"Invalid request: the message is longer than {MAX_LINE_BYTES:,} bytes",
                    )
                )
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                await self._reply(
                    _error(
                        None,
                        PARSE_ERROR,
                        f"Parse error: the message is not valid UTF-8 (byte {exc.start})",
                    )
                )
                continue
            if not line.strip():
                continue
            if self.direct is not None and self.out is not None:
                reply = await self.direct.answer(line)
                if reply is not None:
                    self.out.write_direct(reply + "\n")
                    await self.out.flush()
                    continue
            # The SDK parses it once and hands the result (or its parse error) on exactly once
            # per line, in order: :meth:`messages` pairs each with this line.
            self._lines.append(line)
            return line

    def messages(self, read_stream: Any) -> _GuardedMessages:
        """The SDK transport's read stream as the server should see it: every message the SDK
        parsed, minus the lines answered here (see the module docstring)."""
        return _GuardedMessages(read_stream, self)

    async def settle(self, line: str, item: Any) -> Any:
        """What the server gets for ``line``, which the SDK parsed into ``item`` (a message, or
        the exception its parser raised): the message itself, a replacement call refused with a
        tool error, or ``None`` once the line is answered here."""
        from mcp.shared.message import SessionMessage
        from mcp_types import JSONRPCNotification, jsonrpc_message_adapter

        if not isinstance(item, Exception):
            message = getattr(item, "message", None)
            if isinstance(message, JSONRPCNotification) and '"id"' in line and _has_id(line):
                # A request whose id is neither a string nor an integer parses as a
                # notification (the SDK ignores unknown fields) and would go unanswered.
                reply = answer_for(line)
                if reply is not None:
                    await self._reply(reply)
                return None
            return item
        try:
            reply = answer_for(line)
            if reply is not None and "error" not in reply:  # a call to be refused as a tool error
                call = jsonrpc_message_adapter.validate_json(json.dumps(reply), by_name=False)
                return SessionMessage(call)
            if reply is not None:
                await self._reply(reply)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise
        except Exception:  # never let one bad line stop the server
            log.exception("ebb mcp: could not answer a line it could not parse")
        return None

    async def _discard_rest(self) -> None:
        while True:
            chunk = await self._readline(MAX_LINE_BYTES)
            if not chunk or chunk.endswith(b"\n"):
                return

    async def _reply(self, reply: dict[str, Any]) -> None:
        from mcp.shared.message import SessionMessage
        from mcp_types import jsonrpc_message_adapter

        message = jsonrpc_message_adapter.validate_python(reply)
        await self._write.send(SessionMessage(message))


class _GuardedMessages:
    """The SDK's read stream, with each item paired with the stdin line it came from and
    settled by :meth:`GuardedStdin.settle` (lines answered here are not passed on)."""

    def __init__(self, inner: Any, stdin: GuardedStdin) -> None:
        self._inner = inner
        self._stdin = stdin

    @property
    def last_context(self) -> Any:  # the sender's context, which the SDK's dispatcher reads
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            lines = self._stdin._lines
            if not lines:  # not from a line of ours: pass it on as it is
                return item
            try:
                settled = await self._stdin.settle(lines.popleft(), item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                raise anyio.EndOfStream from None  # the server is shutting down
            if settled is not None:
                if self._stdin.direct is not None:
                    self._stdin.direct.observe(settled)
                return settled

    def __aiter__(self) -> _GuardedMessages:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _GuardedMessages:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _on_asyncio() -> bool:
    import sniffio

    try:
        return sniffio.current_async_library() == "asyncio"
    except sniffio.AsyncLibraryNotFoundError:
        return False


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _PipeLines:
    """Lines of a pipe, read on the event loop (asyncio's pipe transport) instead of a thread."""

    def __init__(
        self, reader: asyncio.StreamReader, transport: asyncio.BaseTransport, fd: int
    ) -> None:
        self._fd = fd
        self._reader = reader
        self._transport = transport
        self._buf = bytearray()
        self._scanned = 0  # no newline in _buf[:_scanned]

    @classmethod
    async def open(cls, stream: BinaryIO) -> _PipeLines | None:
        """Read ``stream`` this way if it is a pipe and the loop is asyncio's, else ``None``."""
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            return None
        if not _on_asyncio() or not _is_pipe(fd):
            return None
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        # A duplicate, so that closing the transport leaves the process's stdin alone.
        pipe = os.fdopen(os.dup(fd), "rb", buffering=0)
        try:
            transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), pipe
            )
        except (OSError, ValueError):
            pipe.close()
            return None
        return cls(reader, transport, fd)

    async def readline(self, limit: int) -> bytes:
        """Like ``BinaryIO.readline(limit)``: up to and including the next newline, or the
        first ``limit`` bytes of a longer line, or what is left at the end (``b""``: nothing)."""
        buf = self._buf
        while True:
            at = buf.find(b"\n", self._scanned, limit)
            if at >= 0:
                return self._take(at + 1)
            if len(buf) >= limit:
                return self._take(limit)
            self._scanned = len(buf)
            chunk = await self._reader.read(1 << 16)
            if not chunk:
                return self._take(len(buf))
            buf += chunk

    def _take(self, n: int) -> bytes:
        line = bytes(self._buf[:n])
        del self._buf[:n]
        self._scanned = 0
        return line

    def close(self) -> None:
        self._transport.close()
        with contextlib.suppress(OSError):  # the transport made the shared pipe non-blocking
            os.set_blocking(self._fd, True)


class _WriteProtocol(asyncio.streams.FlowControlMixin):
    """Flow control for a ``StreamWriter`` on a pipe, and a future that is done once the pipe
    is closed (its buffer written out, or the reader gone)."""

    def __init__(self) -> None:
        super().__init__()
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self._closed.done():
            self._closed.set_result(None)

    def _get_close_waiter(self, stream: asyncio.StreamWriter) -> asyncio.Future[None]:
        return self._closed


class PipeStdout:
    """The SDK stdio transport's stdout, written on the event loop when stdout is a pipe.

    Pass it as ``stdio_server(stdout=...)`` (from :meth:`open`, which gives ``None`` where the
    SDK's own threaded writer should stay). Like the SDK, it keeps the protocol on a private
    duplicate of file descriptor 1 and points descriptor 1 at stderr while serving, so that
    anything else printing to stdout (a library, a stray ``print``) cannot corrupt the
    protocol; :meth:`close` puts it back.
    """

    def __init__(self, writer: asyncio.StreamWriter, private_fd: int, saved_fd: int | None) -> None:
        self._writer = writer
        self._private_fd = private_fd
        self._saved_fd = saved_fd
        self.on_write: Callable[[str], None] | None = None

    @classmethod
    async def open(cls) -> PipeStdout | None:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        if not _on_asyncio() or not _is_pipe(1):
            return None
        import fcntl

        private = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
        loop = asyncio.get_running_loop()
        pipe = os.fdopen(private, "wb", buffering=0)
        try:
            transport, protocol = await loop.connect_write_pipe(_WriteProtocol, pipe)
        except (OSError, ValueError):
            pipe.close()
            return None
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        saved = None
        try:
            saved = os.dup(1)  # the pipe, put back on descriptor 1 at the end
            os.dup2(2, 1)
        except OSError:
            pass  # serve anyway: only the protection against stray prints is missing
        return cls(writer, private, saved)

    async def write(self, data: str) -> None:
        """What the SDK's writer writes (each message, a line), seen by ``on_write`` first."""
        if self.on_write is not None:
            self.on_write(data)
        self._writer.write(data.encode("utf-8"))

    def write_direct(self, line: str) -> None:
        """An answer given in the reader (:mod:`ebb_core.mcp_direct`), in the same byte stream."""
        self._writer.write(line.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()  # waits only while the client is not reading

    async def close(self, timeout: float = 5.0) -> None:
        """Write out what is still buffered (for up to ``timeout`` seconds: a client that went
        away reads nothing more) and give descriptor 1 back its pipe."""
        self._writer.close()
        with contextlib.suppress(ConnectionError, OSError, TimeoutError):
            await asyncio.wait_for(self._writer.wait_closed(), timeout)
        if self._saved_fd is not None:
            with contextlib.suppress(OSError):
                os.set_blocking(self._saved_fd, True)
                os.dup2(self._saved_fd, 1)
            os.close(self._saved_fd)
            self._saved_fd = None
