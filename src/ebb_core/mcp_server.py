"""``ebb mcp``: Ebb's agent tools over the Model Context Protocol (stdio or streamable HTTP).

Needs the ``mcp`` extra (``pip install 'ebb-memory[mcp]'``). The SDK is imported only when a
server is built, so the rest of Ebb (and ``ebb --help``) works without it.

Twelve tools — ``remember``, ``recall``, ``connect``, ``reinforce``, ``forget``, ``neighbors``,
``pin``, ``maintain``, ``review_queue``, ``stats``, ``read`` (memories by id, like the reference
memory server's ``open_nodes``) and ``explore`` (a bounded view of a memory's neighbourhood) —
and two read-only resources, ``ebb://stats``
and ``ebb://review-queue``. No tool deletes anything: ``forget`` and ``maintain`` only move
memories into the review queue, and approving a deletion stays with a person at the CLI.

How a person can still review and approve while the server runs
-----------------------------------------------------------------
The server keeps its store open between calls, with everything ``Brain`` keeps in memory (the
recall columns, the row snapshot, prepared statements), so a call costs about what the call
itself costs. Embedded Kùzu lets one process at a time open the store file, so on Kùzu the server
lets go of it (:class:`StoreAccess`): after ``idle_release`` seconds without a call, and right
after the current call whenever another process asks for the store. Every ``ebb`` command asks
when it finds the store held (:mod:`ebb_core.handoff`) and says on stderr what it waits for, so
``ebb review`` / ``ebb approve`` get in within one call even while a client calls in a tight
loop. A call that finds the store held by someone else waits up to ``wait`` seconds for it, then
answers with a "busy" tool error. Calls within one server run one at a time: right on the event
loop when the store is open and free (a few milliseconds), on a worker thread when they may have
to wait for it or for a database server (see :func:`_on_loop_when_free`). Neo4j serves many
clients at once, so on Neo4j the server keeps one connection open for its lifetime.

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
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import click
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .cli import store_options
from .engine import DEFAULT_NAMESPACE, Brain, validate_namespace
from .errors import BackendUnavailable, EbbError, InvalidInput, StoreLocked
from .grouping import DEFAULT_DELAY as DEFAULT_REINFORCEMENT_DELAY
from .grouping import validate_delay
from .handoff import RequestFile
from .model import Edge, LiveLink, MaintainReport, Node, ReviewItem, Stats, Tier

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = [
    "DEFAULT_IDLE_RELEASE",
    "DEFAULT_WAIT",
    "HTTP_PATH",
    "TOOL_NAMES",
    "StoreAccess",
    "build_server",
    "mcp_command",
    "serve",
]

DEFAULT_WAIT = 10.0
"""Seconds a tool call waits for the store while a person's ``ebb`` command holds it."""

DEFAULT_IDLE_RELEASE = 5.0
"""Seconds without a call after which ``ebb mcp`` lets go of the embedded store."""

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

MAX_RECALL_K = 50
MAX_LIST = 200
MAX_READ = 50
MAX_EXPLORE = 100

log = logging.getLogger("ebb.mcp")

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

INSTRUCTIONS = """\
Ebb is your long-term memory, kept as a graph. Each memory (a fact, decision, preference, person,
meeting, note) is a node; links between memories are typed, weighted and timestamped.
Relevance is recency-weighted connection strength: memories you use and link stay alive, unused
ones fade into archive tiers (hot → warm → cold) by themselves.

- Before answering anything that may depend on earlier sessions, call `recall`; each hit says
  why it surfaced.
- When you learn something durable, `remember` it (one idea per memory) and link it to the
  memories it refers to (`links`, or `connect`).
- When a recalled memory actually helped, `reinforce` it.
- To read memories whose ids you know, `read` them; to see the context around one (linked
  decisions, people, meetings), `explore` it. Both only look unless you ask them to reinforce.
- When a fact or decision changed, `remember` the new one with `supersedes` naming the old one:
  the old memory is kept but ranks below its replacement.
- If a memory is wrong or obsolete, `forget` it: that only queues it for a person to review.
  You cannot delete anything; a person approves deletions with the `ebb` command line.
"""

BUSY = "Nothing was changed; try again in a few seconds."
"""The end of the tool error a call gets when another process kept the store past its wait."""


def busy_message(where: str, wait: float) -> str:
    """The tool error for a store another process held for longer than ``wait`` seconds."""
    return (
        f"the memory store {where} is busy: another process holds it (a person's `ebb` "
        f"command, or another program on the same store) and did not let go within {wait:g} "
        f"s. {BUSY}"
    )


# -- what the tools return ---------------------------------------------------------------------

TierLabel = Literal["hot", "warm", "cold", "frozen"]


def _label(tier: Tier) -> TierLabel:
    labels: dict[Tier, TierLabel] = {
        Tier.HOT: "hot",
        Tier.WARM: "warm",
        Tier.COLD: "cold",
        Tier.FROZEN: "frozen",
    }
    return labels[Tier(tier)]


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class Memory(_Out):
    """One memory as an agent sees it."""

    id: str = Field(description="Stable id like 'decision:outcome-pricing'; use it in other tools.")
    kind: str = Field(description="What it is: note, decision, fact, person, meeting, ...")
    text: str
    props: dict[str, Any] = Field(description="Metadata stored with the memory.")
    tier: TierLabel = Field(
        description="hot: searched first; warm and cold: archived, found when nothing hotter "
        "matches as well (or with depth 2 / 3); frozen: waiting in the review queue for a "
        "person, never recalled."
    )
    pinned: bool = Field(description="Pinned memories stay hot and never archive.")
    created_at: datetime
    updated_at: datetime
    last_read_at: datetime | None

    @classmethod
    def of(cls, node: Node) -> Memory:
        return cls(
            id=node.id,
            kind=node.kind,
            text=node.text,
            props=node.props,
            tier=_label(node.tier),
            pinned=node.pinned,
            created_at=node.created_at,
            updated_at=node.updated_at,
            last_read_at=node.last_read_at,
        )


def _absent(value: Any) -> bool:
    return value is None


def _detail(default: Any = None, **kw: Any) -> Any:
    """A part of the full explanation: present only with ``explain=true``."""
    return Field(default, exclude_if=_absent, **kw)


class Why(_Out):
    """Why a memory surfaced. Always: ``summary`` (every reason in one line) and, when newer
    memories replaced it, ``superseded_by``. With ``explain=true`` also each part on its own:
    its text match, the parts of its activation, its live links, how recall reached it."""

    summary: str = Field(
        description="The reasons in one line: matched terms, activation and its parts, live "
        "links, when last reinforced, tier, similarity, what it spread from, what superseded it."
    )
    superseded_by: list[str] = _detail(
        description="Memories that replaced this one: it ranks below them; prefer them. "
        "Present when there are any."
    )
    matched_terms: list[str] = _detail()
    text_score: float = _detail()
    text_norm: float = _detail(description="Text match relative to the best hit, 0..1.")
    activation: float = _detail(description="Recency-weighted connection strength now.")
    activation_norm: float = _detail(description="Activation relative to the most active memory.")
    edges_part: float = _detail(description="Activation from its own links, after decay.")
    read_part: float = _detail(description="Activation from having been read recently.")
    spread_part: float = _detail(description="Activation flowing in from its neighbours.")
    live_links: list[LiveLink] = _detail(description="Links that still count, strongest first.")
    last_reinforced_at: datetime = _detail(
        description="When it or one of its live links was last used (absent: never)."
    )
    tier: TierLabel = _detail()
    reached: str = _detail(
        description="Which tier it came from, and why recall went deeper than hot."
    )
    spread_text: float = _detail(
        description="Text score passed on by linked strong matches (spreading)."
    )
    spread_from: list[str] = _detail(description="The strong matches linked to it that passed it.")
    similarity: float = _detail(
        description="Cosine similarity to the query by meaning (absent: no embedder)."
    )
    match: float = _detail(description="Text match and similarity fused, 0..1.")
    found_by: list[str] = _detail(description="How recall found it: text, vector, link, replaces.")

    @classmethod
    def of(cls, why: Any, explain: bool) -> Why:
        """The tool's view of the engine's explanation: brief, or in full."""
        if not explain:
            if why.superseded_by:
                return cls(summary=why.summary, superseded_by=why.superseded_by)
            return cls(summary=why.summary)
        parts = {
            "summary": why.summary,
            "superseded_by": why.superseded_by,
            "matched_terms": why.matched_terms,
            "text_score": why.text_score,
            "text_norm": why.text_norm,
            "activation": why.activation,
            "activation_norm": why.activation_norm,
            "edges_part": why.edges_part,
            "read_part": why.read_part,
            "spread_part": why.spread_part,
            "live_links": why.live_links,
            "last_reinforced_at": why.last_reinforced_at,
            "tier": _label(why.tier),
            "reached": why.reached,
            "spread_text": why.spread_text,
            "spread_from": why.spread_from,
            "similarity": why.similarity,
            "match": why.match,
            "found_by": why.found_by,
        }
        return cls(**{k: v for k, v in parts.items() if v is not None})


class Hit(_Out):
    """One recall result."""

    id: str
    kind: str
    text: str
    props: dict[str, Any]
    tier: TierLabel
    pinned: bool
    score: float = Field(description="Blend of normalised text match and activation.")
    why: Why


class RecallResult(_Out):
    """The memories most relevant to a query, best first, each with why it surfaced."""

    query: str
    hits: list[Hit]
    hint: str | None = Field(None, description="What to try when nothing matched.")


class VersionOut(_Out):
    """One version of a memory's text."""

    version: int = Field(description="1 is the oldest.")
    text: str
    kind: str
    props: dict[str, Any]
    at: datetime = Field(description="When this version was written.")
    current: bool = Field(description="Whether this is the memory's text now.")
    replaced_at: datetime | None = Field(None, description="When a newer version replaced it.")


class History(_Out):
    """Every version of one memory, oldest first."""

    id: str
    versions: list[VersionOut]


class Link(_Out):
    """A typed, weighted, timestamped link between two memories."""

    src: str
    dst: str
    kind: str
    weight: float
    created_at: datetime
    reinforced_at: datetime = Field(
        description="When the link was last used; decay counts from here."
    )

    @classmethod
    def of(cls, edge: Edge) -> Link:
        return cls(
            src=edge.src,
            dst=edge.dst,
            kind=edge.kind,
            weight=edge.weight,
            created_at=edge.created_at,
            reinforced_at=edge.reinforced_at,
        )


class Forgotten(_Out):
    """A memory queued for a person's review (nothing was deleted)."""

    id: str
    tier: TierLabel
    in_review_queue: bool
    reason: str
    queued_at: datetime | None
    message: str


class NeighborOut(_Out):
    """A memory linked to another, with the link between them."""

    id: str
    kind: str
    text: str
    tier: TierLabel
    pinned: bool
    link_kind: str
    direction: Literal["out", "in"] = Field(
        description="out: the asked-about memory links to this one; in: this one links to it."
    )
    weight: float
    decayed_weight: float = Field(description="What the link counts for now, after decay.")
    reinforced_at: datetime


class Neighbors(_Out):
    """The memories linked to ``id``, strongest decayed link first."""

    id: str
    neighbors: list[NeighborOut]


class ReadResult(_Out):
    """Memories read by id, in the order asked."""

    memories: list[Memory]
    missing: list[str] = Field(
        description="Ids asked for that are not there (never stored, deleted, or waiting in the "
        "review queue)."
    )
    reinforced: bool = Field(description="Whether reading them counted as using them.")


class NearMemory(_Out):
    """A memory in a neighbourhood, and how many links away from the centre it is."""

    id: str
    kind: str
    text: str
    tier: TierLabel
    pinned: bool
    hops: int = Field(description="Links between it and the centre (0 for the centre).")


class NearLink(_Out):
    """A link in a neighbourhood, with what it counts for now."""

    src: str
    dst: str
    kind: str
    weight: float
    decayed_weight: float = Field(description="What the link counts for now, after decay.")
    reinforced_at: datetime


class Neighbourhood(_Out):
    """The memories within ``depth`` links of ``id`` (strongest links first) and the links
    that reach them."""

    id: str
    memories: list[NearMemory]
    links: list[NearLink]
    truncated: bool = Field(
        description="True when per_node or max_memories left some linked memories out."
    )
    reinforced: bool


class ReviewQueue(_Out):
    """Memories waiting for a person: forgotten, or decayed below the archive cut-off."""

    count: int
    items: list[ReviewItem]
    message: str


# -- reaching the store ------------------------------------------------------------------------


class StoreAccess:
    """How the server reaches the store: one ``Brain`` kept open between calls.

    Embedded Kùzu lets one process at a time open a store, so on Kùzu the server lets go of it
    (closes it; the next call opens it again):

    - right after a call, when another process has asked for the store (see
      :mod:`ebb_core.handoff`: every ``ebb`` command asks when it finds the store held), and
      then gives that process up to ``wait`` seconds to get in before opening again;
    - when no call came for ``idle_release`` seconds (``0``: after every call, as before);
    - after a call that failed unexpectedly (the next call starts from a fresh open).

    On other backends (``hold``, the default off Kùzu) the connection is kept for the server's
    lifetime. What recall reinforces is written grouped (``reinforcement_delay`` seconds at
    most later, at the next write, or when the store is let go of; see
    :mod:`ebb_core.grouping`). ``opener`` replaces ``Brain.open`` (tests pass one with a fixed
    clock). Calls within one server take turns.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        backend: str | None = None,
        namespace: str | None = None,
        wait: float = DEFAULT_WAIT,
        idle_release: float = DEFAULT_IDLE_RELEASE,
        hold: bool | None = None,
        opener: Callable[[], Brain] | None = None,
        reinforcement_delay: float = DEFAULT_REINFORCEMENT_DELAY,
    ) -> None:
        self.path = path
        self.reinforcement_delay = validate_delay(reinforcement_delay)
        self.backend = (backend or os.environ.get("EBB_BACKEND") or "kuzu").strip().lower()
        self.namespace = validate_namespace(
            namespace or os.environ.get("EBB_NAMESPACE") or DEFAULT_NAMESPACE
        )
        for name, value in (("wait", wait), ("idle_release", idle_release)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise InvalidInput(
                    f"{name} must be a number of seconds >= 0, got {value!r}", field=name
                )
        self.wait = float(wait)
        self.idle_release = float(idle_release)
        self.hold = self.backend != "kuzu" if hold is None else hold
        self._opener = opener
        # Reentrant: a call run on the event loop's thread takes it first (see ``claim``).
        self._lock = threading.RLock()
        self._held: Brain | None = None
        self._last = 0.0
        self._watcher: threading.Thread | None = None
        self._closed = threading.Event()
        self._requests: RequestFile | None = None
        if self.backend == "kuzu":
            from .backends import DEFAULT_PATH

            where = self.path or os.environ.get("EBB_DB_PATH") or DEFAULT_PATH
            self._requests = RequestFile(where)
        self.opens = 0
        """How many times the store was opened (it stays open between calls)."""
        self.releases: dict[str, int] = {"asked": 0, "idle": 0, "error": 0}
        """How many times it was let go of, by reason."""

    @property
    def location(self) -> str:
        """Where the store is, for messages: the embedded store's path, or the backend."""
        if self.backend == "kuzu":
            from .backends import DEFAULT_PATH

            where = self.path or os.environ.get("EBB_DB_PATH") or DEFAULT_PATH
            return f"at {os.fspath(where)}"
        return f"on {self.backend}"

    @property
    def is_open(self) -> bool:
        return self._held is not None

    def _open(self, wait: float) -> Brain:
        if self._opener is not None:
            return self._opener()
        return Brain.open(
            self.path,
            backend=self.backend,
            namespace=self.namespace,
            wait=wait,
            reinforcement_delay=self.reinforcement_delay,
        )

    def _wanted(self) -> bool:
        return self._requests is not None and self._requests.wanted_by_other()

    def _open_when_free(self) -> Brain:
        deadline = time.monotonic() + self.wait
        while self._wanted() and time.monotonic() < deadline:
            time.sleep(0.02)  # another process asked for the store: let it in first
        brain = self._open(max(0.0, deadline - time.monotonic()))
        self.opens += 1
        return brain

    def _release(self, reason: str) -> None:
        brain, self._held = self._held, None
        if brain is not None:
            self.releases[reason] += 1
            brain.close()

    def claim(self) -> bool:
        """Take the store for a call on this thread if that cannot wait: it is open, no other call
        (or release) has it, and no other process asked for it. Then :meth:`brain` does not wait
        either; :meth:`unclaim` after the call. ``False``: run the call where it may wait
        (always off the embedded store: a database server answers over the network)."""
        if self.backend != "kuzu" or self._held is None or not self._lock.acquire(blocking=False):
            return False
        if self._held is None or (not self.hold and self._wanted()):
            self._lock.release()
            return False
        return True

    def unclaim(self) -> None:
        self._lock.release()

    @contextmanager
    def brain(self) -> Iterator[Brain]:
        """The store for one call; calls within this process take turns."""
        with self._lock:
            if self._held is not None and not self.hold and self._wanted():
                self._release("asked")
            if self._held is None:
                self._held = self._open_when_free()
            try:
                yield self._held
            except EbbError:
                raise
            except BaseException:
                if not self.hold:
                    self._release("error")
                raise
            finally:
                self._last = time.monotonic()
                if self._held is not None and not self.hold:
                    if self.idle_release <= 0:
                        self._release("idle")
                    elif self._wanted():
                        self._release("asked")
                    else:
                        self._watch()

    def _watch(self) -> None:
        """Start the thread that lets go of an idle or wanted store (under ``_lock``)."""
        if self._watcher is not None and self._watcher.is_alive():
            return
        self._watcher = threading.Thread(target=self._watching, name="ebb-idle", daemon=True)
        self._watcher.start()

    def _watching(self) -> None:
        interval = min(0.05, self.idle_release / 4)
        while not self._closed.wait(interval):
            if not self._lock.acquire(blocking=False):
                continue  # a call is in flight: it checks when it ends
            try:
                if self._held is None:
                    self._watcher = None
                    return
                if time.monotonic() - self._last >= self.idle_release:
                    self._release("idle")
                elif self._wanted():
                    self._release("asked")
            finally:
                self._lock.release()

    def check(self, wait: float | None = None) -> str:
        """Open the store once (creating it if needed) and say where it is.

        ``wait`` (default: the calls' wait) bounds how long another process may hold it.
        """
        saved = self.wait
        if wait is not None:
            self.wait = min(wait, saved)
        try:
            with self.brain() as brain:
                return brain.store.location
        finally:
            self.wait = saved

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            self._release("idle")


# -- the server ----------------------------------------------------------------------------------


def build_server(access: StoreAccess) -> MCPServer[Any]:
    """The MCP server with Ebb's tools and two resources, on ``access``'s store."""
    try:
        from mcp.server.mcpserver import Context, MCPServer
        from mcp.server.mcpserver.exceptions import ResourceError, ToolError
        from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations
    except ImportError as exc:
        raise BackendUnavailable(
            f"the MCP server needs its extra: pip install 'ebb-memory[mcp]' ({exc})"
        ) from None
    from . import __version__

    def run(what: str, work: Callable[[Brain], T], error: type[Exception] = ToolError) -> T:
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

    params: dict[str, frozenset[str]] = {}

    class EbbServer(MCPServer[Any]):
        async def call_tool(
            self,
            name: str,
            arguments: dict[str, Any],
            context: Context[Any, Any] | None = None,
        ) -> CallToolResult | InputRequiredResult:
            check_arguments(name, arguments, params.get(name))
            try:
                result = await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if isinstance(exc.__cause__, ValidationError):
                    raise ToolError(explain_invalid(name, exc.__cause__)) from exc.__cause__
                raise
            return _compact(result)

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
                    await lowlevel.run(
                        read_stream, write_stream, lowlevel.create_initialization_options()
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

    def tool(
        *, read_only: bool = False, idempotent: bool = False, title: str, short: bool = True
    ) -> Callable[[F], F]:
        def register(fn: F) -> F:
            params[fn.__name__] = frozenset(inspect.signature(fn).parameters)
            server.add_tool(
                _on_loop_when_free(fn, access) if short else fn,
                title=title,
                description=_description(fn.__doc__),
                annotations=ToolAnnotations(
                    title=title,
                    read_only_hint=read_only,
                    destructive_hint=False,
                    idempotent_hint=idempotent,
                    open_world_hint=False,
                ),
                structured_output=True,
            )
            _inline_output_schema(server, fn.__name__)
            return fn

        return register

    @tool(title="Remember")
    def remember(
        text: Annotated[
            str,
            Field(
                description="The memory itself, in plain words (one idea; up to 200,000 "
                "characters)."
            ),
        ],
        kind: Annotated[
            str | None,
            Field(
                description="What it is: note, decision, fact, preference, person, client, "
                "meeting... (lowercase letters, digits, '-' or '_'). Left out: 'note' for a "
                "new memory, the existing kind for an existing one."
            ),
        ] = None,
        id: Annotated[
            str | None,
            Field(
                description="Optional stable id like 'person:ana'. Leave it out to get one "
                "made from kind and text; pass an existing id to store a new version of that "
                "memory (the old text is kept: see the history tool)."
            ),
        ] = None,
        links: Annotated[
            list[str] | None,
            Field(description="Ids of existing memories this one refers to; each gets a link."),
        ] = None,
        link_kind: Annotated[
            str, Field(description="Kind of those links, e.g. related, about, supersedes.")
        ] = "related",
        props: Annotated[
            dict[str, Any] | None,
            Field(description="Optional JSON metadata (source, url, author...)."),
        ] = None,
        supersedes: Annotated[
            list[str] | None,
            Field(
                description="Ids of memories this one replaces (an old decision, an outdated "
                "fact): they rank below it from now on and fade from hot memory."
            ),
        ] = None,
    ) -> Memory:
        """Store something worth keeping across sessions — a fact, decision, preference,
        person, meeting or note — as one memory, linked to the memories it refers to.

        Use it whenever you learn something durable. Keep one idea per memory and link related
        ones (here with `links`, or later with `connect`): links keep memories relevant to each
        other. When something changed, remember the new statement with `supersedes` naming the
        old memory (or pass the old `id` to store a new version of it): the old one is kept but
        ranks below its replacement. Returns the stored memory with its id (use that id with
        the other tools)."""
        return run(
            "remember",
            lambda b: Memory.of(
                b.remember(
                    text,
                    kind=kind,
                    id=id,
                    links=links or (),
                    link_kind=link_kind,
                    props=props,
                    supersedes=supersedes or (),
                )
            ),
        )

    @tool(title="Recall")
    def recall(
        query: Annotated[
            str, Field(description="What you want to remember: a few keywords or a question.")
        ],
        k: Annotated[
            int, Field(ge=1, le=MAX_RECALL_K, description="How many memories to return.")
        ] = 5,
        depth: Annotated[
            Literal[1, 2, 3] | None,
            Field(
                description="Leave it out to search every live tier, hot first (warm and cold "
                "memories come up when nothing hot matches as well). A limit: 1 hot memories "
                "only; 2 also warm; 3 also cold (archived)."
            ),
        ] = None,
        include_archived: Annotated[
            bool, Field(description="Also search cold (archived) memories.")
        ] = False,
        kinds: Annotated[
            list[str] | None,
            Field(description="Only these kinds of memory, e.g. ['decision', 'fact']."),
        ] = None,
        reinforce: Annotated[
            bool,
            Field(description="Count the returned memories as used (resets their decay)."),
        ] = True,
        explain: Annotated[
            bool,
            Field(
                description="Give each hit's `why` in full (each score part, live links, "
                "how it was found) besides its one-line summary."
            ),
        ] = False,
    ) -> RecallResult:
        """Find what you remember about a topic. Call it before answering anything that may
        depend on earlier sessions: people, decisions, preferences, past work.

        Memories are ranked by text match blended with recency-weighted connection strength
        (memories that are used and well linked rank higher; stale ones sink). Each hit comes
        with `why` it surfaced, in one line: the terms it matched, the parts of its activation,
        its live links, when it was last reinforced, its tier, what linked match it came through
        and what superseded it (`superseded_by` lists the replacements); explain=true gives
        each part as its own field too. Searches hot memories first and falls through to warm
        and cold when they match better; depth=1 or 2 limits the search. Memories replaced by
        newer ones rank below their replacements. Returned memories count as used (the top hit
        most) unless reinforce=false."""

        def work(b: Brain) -> RecallResult:
            hits = b.recall(
                query,
                k,
                depth=depth,
                include_archived=include_archived,
                kinds=kinds or (),
                reinforce=reinforce,
            )
            out = [
                Hit(
                    id=h.node.id,
                    kind=h.node.kind,
                    text=h.node.text,
                    props=h.node.props,
                    tier=_label(h.node.tier),
                    pinned=h.node.pinned,
                    score=h.score,
                    why=Why.of(h.why, explain),
                )
                for h in hits
            ]
            hint = None
            if not out:
                hint = (
                    f"nothing matched down to depth {depth}: try other words, or leave depth "
                    "out to search every tier"
                    if depth in (1, 2) and not include_archived
                    else "nothing matched: try other words"
                )
            return RecallResult(query=query, hits=out, hint=hint)

        return run("recall", work)

    @tool(title="Connect")
    def connect(
        src: Annotated[str, Field(description="Id of the memory the link starts from.")],
        dst: Annotated[str, Field(description="Id of the memory it points to.")],
        kind: Annotated[
            str,
            Field(
                description="Kind of link: related, about, attended, ... 'supersedes' says "
                "src replaces dst (dst then ranks below src and fades from hot memory)."
            ),
        ] = "related",
        weight: Annotated[
            float | None,
            Field(
                gt=0,
                le=1000,
                description="Strength of the link (default 1.0 for a new link; an existing "
                "link keeps its weight).",
            ),
        ] = None,
    ) -> Link:
        """Link two memories (src -kind-> dst), or refresh the link if it already exists.

        Linked memories keep each other relevant; a link fades unless it is used again. Use it
        when you notice that two memories belong together (a decision and the meeting that made
        it, a person and their client). Returns the link."""
        return run("connect", lambda b: Link.of(b.connect(src, dst, kind=kind, weight=weight)))

    @tool(title="Reinforce")
    def reinforce(
        id: Annotated[str, Field(description="Id of the memory that was useful.")],
        with_id: Annotated[
            str | None,
            Field(description="Optional: reinforce only the link between `id` and this memory."),
        ] = None,
    ) -> Memory:
        """Mark a memory as used, so it stays relevant: resets its decay clock and the clocks
        of its links.

        Call it when a memory actually helped (you acted on a recalled decision, a fact proved
        right). Returns the memory as it is now."""
        return run("reinforce", lambda b: Memory.of(b.reinforce(id, with_id=with_id)))

    @tool(title="Forget", idempotent=True)
    def forget(
        id: Annotated[str, Field(description="Id of the memory that is wrong or obsolete.")],
        reason: Annotated[
            str, Field(description="Why it should go, for the person who reviews it.")
        ] = "",
    ) -> Forgotten:
        """Ask for a memory to be removed because it is wrong, obsolete or unwanted.

        Nothing is deleted: the memory is frozen, hidden from recall and put in the review
        queue, where a person approves its deletion or restores it. Pinned memories cannot be
        forgotten (a person must unpin them first). Returns the review-queue entry."""

        def work(b: Brain) -> Forgotten:
            item = b.forget(id, reason, actor="agent")
            return Forgotten(
                id=item.id,
                tier="frozen",
                in_review_queue=True,
                reason=item.reason,
                queued_at=item.queued_at,
                message="Nothing was deleted: the memory waits in the review queue. A person "
                "approves its deletion with `ebb approve` or keeps it with `ebb restore`.",
            )

        return run("forget", work)

    @tool(title="Neighbors", read_only=True, idempotent=True)
    def neighbors(
        id: Annotated[str, Field(description="Id of the memory whose links you want.")],
        limit: Annotated[
            int, Field(ge=1, le=MAX_LIST, description="At most this many neighbours.")
        ] = 20,
    ) -> Neighbors:
        """List the memories linked to a memory, strongest link first (after decay), with
        each link's kind, direction, weight and when it was last used.

        Use it to explore around a recalled memory. Read-only: nothing is reinforced."""

        def work(b: Brain) -> Neighbors:
            out = [
                NeighborOut(
                    id=n.node.id,
                    kind=n.node.kind,
                    text=n.node.text,
                    tier=_label(n.node.tier),
                    pinned=n.node.pinned,
                    link_kind=n.edge.kind,
                    direction="out" if n.edge.src == id else "in",
                    weight=n.edge.weight,
                    decayed_weight=n.decayed_weight,
                    reinforced_at=n.edge.reinforced_at,
                )
                for n in b.neighbors(id, limit=limit)
            ]
            return Neighbors(id=id, neighbors=out)

        return run("neighbors", work)

    @tool(title="History", read_only=True, idempotent=True)
    def history(
        id: Annotated[str, Field(description="Id of the memory whose versions you want.")],
    ) -> History:
        """List every version of a memory's text, oldest first; the last is the current one.

        Storing new text under an existing id keeps the old text as a version, so nothing is
        lost when a memory is updated. Read-only: nothing is reinforced."""

        def work(b: Brain) -> History:
            return History(
                id=id,
                versions=[
                    VersionOut(
                        version=v.version,
                        text=v.text,
                        kind=v.kind,
                        props=v.props,
                        at=v.at,
                        current=v.current,
                        replaced_at=v.replaced_at,
                    )
                    for v in b.history(id)
                ],
            )

        return run("history", work)

    @tool(title="Pin", idempotent=True)
    def pin(
        id: Annotated[str, Field(description="Id of the memory that must not fade.")],
    ) -> Memory:
        """Pin a memory that must never fade: a standing instruction, a key fact about the user.

        A pinned memory stays hot and is never archived or queued for deletion. Only a person
        can unpin it (with the `ebb` command line). Returns the memory."""
        return run("pin", lambda b: Memory.of(b.pin(id, actor="agent")))

    @tool(title="Maintain", short=False)  # re-scores every memory: seconds on a large store
    def maintain() -> MaintainReport:
        """Re-score every memory and re-tier them: what decayed moves to warm or cold
        (archived), what fell below the last cut-off goes to the review queue for a person.

        Nothing is deleted. Run it now and then (for example at the end of a long session); it
        is safe to repeat. Returns how many memories moved between which tiers."""
        return run("maintain", lambda b: b.maintain())

    @tool(title="Review queue", read_only=True, idempotent=True)
    def review_queue(
        limit: Annotated[
            int, Field(ge=1, le=MAX_LIST, description="At most this many entries.")
        ] = 50,
    ) -> ReviewQueue:
        """List the memories waiting for a person's decision: forgotten ones and ones that
        decayed below the archive cut-off. Read-only.

        You cannot approve deletions. If the user asks, tell them to run `ebb review` to see the
        queue, `ebb approve ID --by NAME` to delete, or `ebb restore ID` to keep a memory."""

        def work(b: Brain) -> ReviewQueue:
            items = b.review_queue(limit)
            return ReviewQueue(
                count=len(items),
                items=items,
                message="Only a person can approve deletions: `ebb approve ID --by NAME` "
                "(or `ebb restore ID` to keep it).",
            )

        return run("review_queue", work)

    @tool(title="Read memories", read_only=True, idempotent=True)
    def read(
        ids: Annotated[
            list[str],
            Field(
                min_length=1,
                max_length=MAX_READ,
                description=f"Ids of the memories to read (1 to {MAX_READ}).",
            ),
        ],
        reinforce: Annotated[
            bool,
            Field(
                description="Count this as using them (resets their decay clock, as recall "
                "does). Default false: just look."
            ),
        ] = False,
    ) -> ReadResult:
        """Read one or several memories by id: their full text, kind, props, tier and dates.

        Use it when you already know the ids (from recall, neighbors, explore or an earlier
        turn). Ids that do not exist or wait in the review queue are listed in `missing`.
        Read-only unless `reinforce` is true."""

        def work(b: Brain) -> ReadResult:
            nodes = b.read(ids, reinforce=reinforce)
            if reinforce and nodes:  # as they are now, read clocks reset
                nodes = b.read([n.id for n in nodes], reinforce=False)
            found = {n.id for n in nodes}
            missing = [i for i in dict.fromkeys(ids) if i not in found]
            return ReadResult(
                memories=[Memory.of(n) for n in nodes], missing=missing, reinforced=reinforce
            )

        return run("read", work)

    @tool(title="Explore", read_only=True, idempotent=True)
    def explore(
        id: Annotated[str, Field(description="Id of the memory at the centre.")],
        depth: Annotated[
            int, Field(ge=1, le=3, description="How many links out to go (1 to 3).")
        ] = 2,
        per_node: Annotated[
            int,
            Field(ge=1, le=20, description="Follow at most this many strongest links per memory."),
        ] = 5,
        max_memories: Annotated[
            int,
            Field(
                ge=1,
                le=MAX_EXPLORE,
                description=f"At most this many memories in all (up to {MAX_EXPLORE}).",
            ),
        ] = 25,
        reinforce: Annotated[
            bool,
            Field(description="Count the memories returned as used. Default false: just look."),
        ] = False,
    ) -> Neighbourhood:
        """A bounded view of a memory's neighbourhood: the memories within `depth` links of it,
        following the strongest links first (after decay), and the links between them.

        Use it to see the context around a memory (the meeting behind a decision, the people
        around a client). Memories waiting in the review queue are left out. Read-only unless
        `reinforce` is true."""

        def work(b: Brain) -> Neighbourhood:
            centre = b.get(id)
            places = {
                centre.id: NearMemory(
                    id=centre.id,
                    kind=centre.kind,
                    text=centre.text,
                    tier=_label(centre.tier),
                    pinned=centre.pinned,
                    hops=0,
                )
            }
            links: dict[tuple[str, str, str], NearLink] = {}
            truncated = False
            frontier = [centre.id]
            for hops in range(1, depth + 1):
                following: list[str] = []
                for at in frontier:
                    around = [
                        n for n in b.neighbors(at, limit=MAX_LIST) if n.node.tier != Tier.FROZEN
                    ]
                    truncated |= len(around) > per_node
                    for n in around[:per_node]:
                        other = n.node
                        if other.id not in places:
                            if len(places) >= max_memories:
                                truncated = True
                                continue
                            places[other.id] = NearMemory(
                                id=other.id,
                                kind=other.kind,
                                text=other.text,
                                tier=_label(other.tier),
                                pinned=other.pinned,
                                hops=hops,
                            )
                            following.append(other.id)
                        e = n.edge
                        links.setdefault(
                            (e.src, e.dst, e.kind),
                            NearLink(
                                src=e.src,
                                dst=e.dst,
                                kind=e.kind,
                                weight=e.weight,
                                decayed_weight=n.decayed_weight,
                                reinforced_at=e.reinforced_at,
                            ),
                        )
                frontier = following
                if not frontier:
                    break
            if reinforce:
                b.read(list(places), reinforce=True)
            ordered = sorted(links.values(), key=lambda p: (-p.decayed_weight, p.src, p.dst))
            return Neighbourhood(
                id=centre.id,
                memories=list(places.values()),
                links=ordered,
                truncated=truncated,
                reinforced=reinforce,
            )

        return run("explore", work)

    @tool(title="Stats", read_only=True, idempotent=True)
    def stats() -> Stats:
        """Counts for this memory store: memories per tier, links, pinned memories, the size of
        the review queue, the decay half-life. Read-only."""
        return run("stats", lambda b: b.stats())

    @server.resource(
        "ebb://stats",
        name="stats",
        title="Memory statistics",
        description="Counts per tier, links, pinned, review queue size (JSON, read-only).",
        mime_type="application/json",
    )
    def stats_resource() -> str:
        return run("stats", lambda b: b.stats().model_dump_json(indent=2), ResourceError)

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

        return run("review queue", work, ResourceError)

    return server


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


def _inline_output_schema(server: Any, name: str) -> None:
    """Publish the tool's output schema with its ``$ref``s inlined.

    The SDK's client validates every structured result against the schema; with pydantic's
    ``$defs``/``$ref`` layout that costs twice as long as with the same schema inlined (about
    7 ms against 3.5 ms for a ten-hit recall on a busy 2-core machine). The SDK reads the
    schema from the tool's metadata on each call, so replacing it here is all it takes.
    """
    manager = getattr(server, "_tool_manager", None)
    registered = manager.get_tool(name) if manager is not None else None
    metadata = getattr(registered, "fn_metadata", None)
    schema = getattr(metadata, "output_schema", None)
    if metadata is None or not isinstance(schema, dict) or "$defs" not in schema:
        return
    defs = schema["$defs"]

    def inline(value: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(value, dict):
            ref = value.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                target = ref.removeprefix("#/$defs/")
                if target in seen or target not in defs:  # recursive: keep the reference
                    return value
                merged = {**defs[target], **{k: v for k, v in value.items() if k != "$ref"}}
                return inline(merged, (*seen, target))
            return {k: inline(v, seen) for k, v in value.items() if k != "$defs"}
        if isinstance(value, list):
            return [inline(v, seen) for v in value]
        return value

    flat = inline(schema, ())
    if "$ref" not in json.dumps(flat):
        metadata.output_schema = flat


def _compact(result: T) -> T:
    """The result's text copy of its structured content as compact JSON (the SDK indents it).

    Written by pydantic's serializer: the same text as ``json.dumps(..., ensure_ascii=False,
    separators=(",", ":"))`` in half the time (0.04 against 0.085 ms for a ten-hit recall).
    """
    from mcp.types import CallToolResult, TextContent
    from pydantic_core import to_json

    if (
        isinstance(result, CallToolResult)
        and not result.is_error
        and isinstance(result.structured_content, dict)
        and len(result.content) == 1
    ):
        text = to_json(result.structured_content).decode()
        return result.model_copy(update={"content": [TextContent(type="text", text=text)]})
    return result


def _description(doc: str | None) -> str:
    """A docstring as a tool description: dedented, each paragraph on one line."""
    paragraphs = inspect.cleandoc(doc or "").split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


def check_arguments(
    tool: str, arguments: Mapping[str, Any], allowed: frozenset[str] | None
) -> None:
    """Refuse unknown argument names and strings that are not valid Unicode, before any work."""
    from mcp.server.mcpserver.exceptions import ToolError

    from .mcp_wire import WIRE_ERROR_KEY

    if WIRE_ERROR_KEY in arguments:  # refused on the wire already (see mcp_wire)
        raise ToolError(str(arguments[WIRE_ERROR_KEY]))
    if allowed is not None:
        unknown = sorted(k for k in arguments if k not in allowed)
        if unknown:
            takes = ", ".join(sorted(allowed)) or "no arguments"
            raise ToolError(
                f"invalid arguments for {tool}: unknown argument "
                + ", ".join(repr(u[:40]) for u in unknown[:5])
                + f" ({tool} takes: {takes})"
            )
    bad = _bad_unicode(arguments)
    if bad is not None:
        raise ToolError(
            f"invalid arguments for {tool}: {bad} contains an unpaired UTF-16 surrogate, which "
            "is not valid Unicode text; send valid UTF-8"
        )


def _bad_unicode(value: Any, where: str = "") -> str | None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where or "a value"
        return None
    if isinstance(value, Mapping):
        for k, v in value.items():
            found = _bad_unicode(k, where or "a key") or _bad_unicode(
                v, f"{where}.{k}" if where else str(k)
            )
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _bad_unicode(v, f"{where}[{i}]")
            if found:
                return found
    return None


def explain_invalid(tool: str, error: ValidationError) -> str:
    """A schema violation as one line naming each bad argument (never echoing its value)."""
    parts = []
    for e in error.errors(include_url=False):
        loc = ".".join(str(p) for p in e["loc"]) or "arguments"
        if e["type"] == "missing":
            parts.append(f"{loc} is required")
            continue
        got = type(e.get("input")).__name__
        got = {"NoneType": "null", "str": "string", "dict": "object", "list": "array"}.get(got, got)
        parts.append(f"{loc}: {e['msg']} (got {got})")
    more = f" (and {len(parts) - 5} more)" if len(parts) > 5 else ""
    return f"invalid arguments for {tool}: " + "; ".join(parts[:5]) + more


# -- running it ----------------------------------------------------------------------------------


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
    soon as another process asks for it (see :class:`StoreAccess`). What recall reinforces is
    written within ``reinforcement_delay`` seconds (0: with each recall).
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
    try:
        where = access.check(wait=STARTUP_WAIT)
    except StoreLocked:
        # Another process (a person's `ebb` command, another server) holds the embedded store.
        # Serve anyway: each call waits for the store, and says so if it stays busy.
        where = access.location.removeprefix("at ")
        _note(
            f"ebb mcp: the store at {where} is busy (another process holds it); serving "
            f"anyway: each call waits up to {access.wait:g} s for it and answers with a "
            "'busy' tool error if it is still held"
        )
    # What is loaded by now (the SDK, pydantic's validators, the open store) lives as long as
    # the server: kept out of the collector's full passes, which otherwise walk all of it now
    # and then in the middle of a call (measured: 170 ms, against a 5 ms recall).
    gc.collect()
    gc.freeze()
    if transport == "stdio":
        _note(f"ebb mcp: serving {where} (namespace {access.namespace!r}) over stdio; {mode}")
        try:
            server.run("stdio")
        finally:
            access.close()
        return
    if host not in ("127.0.0.1", "localhost", "::1"):
        _note(
            f"ebb mcp: warning: listening on {host}; the server has no authentication, so "
            "anyone who can reach this address can read and write these memories"
        )
    shown = f"[{host}]" if ":" in host else host
    _note(
        f"ebb mcp: serving {where} (namespace {access.namespace!r}) over streamable HTTP at "
        f"http://{shown}:{port}{HTTP_PATH}; {mode}"
    )
    try:
        server.run("streamable-http", host=host, port=port, streamable_http_path=HTTP_PATH)
    finally:
        access.close()


def _note(message: str) -> None:
    # stdout belongs to the protocol on stdio: everything for people goes to stderr.
    print(message, file=sys.stderr, flush=True)


@click.command("mcp")
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio for a client that starts the server; http for streamable HTTP.",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="HTTP only: interface to listen on (no authentication: keep it on loopback).",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=8000,
    show_default=True,
    help="HTTP only: port; the endpoint is http://HOST:PORT/mcp.",
)
@store_options
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=DEFAULT_WAIT,
    show_default=True,
    envvar="EBB_MCP_WAIT",
    help="Seconds a tool call waits while a person's ebb command holds the store (EBB_MCP_WAIT).",
)
@click.option(
    "--idle-release",
    type=click.FloatRange(min=0),
    default=DEFAULT_IDLE_RELEASE,
    show_default=True,
    envvar="EBB_MCP_IDLE_RELEASE",
    help="Embedded store: seconds without a call before the server lets go of the store; 0 "
    "opens it for each call only (EBB_MCP_IDLE_RELEASE). An ebb command that needs the store "
    "gets it after the current call either way.",
)
@click.option(
    "--reinforcement-delay",
    type=click.FloatRange(min=0, max=3600),
    default=DEFAULT_REINFORCEMENT_DELAY,
    show_default=True,
    envvar="EBB_REINFORCEMENT_DELAY",
    help="Seconds what recall reinforces may wait to be written, grouped with other writes "
    "(it counts for the next recall at once); 0 writes it with each recall "
    "(EBB_REINFORCEMENT_DELAY). A crash loses at most this much reinforcement, never a memory.",
)
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
