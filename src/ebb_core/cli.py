"""``ebb``: the command line, a thin shell over :class:`~ebb_core.engine.Brain`.

Every command prints a readable table by default and JSON with ``--json``. Errors print one line
naming what went wrong and what to do, and exit non-zero: never a traceback (set ``EBB_DEBUG=1``
to see one).
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

from .clock import Clock, FixedClock, as_utc
from .errors import (
    EbbError,
    InvalidInput,
    NoStore,
    NotFound,
    StorageError,
    StoreFull,
    StoreLocked,
)

# Exit codes (documented in the README's command-line section).
EXIT_ERROR = 1  # any other Ebb error (e.g. a backend that is not installed)
EXIT_INPUT = 2  # bad input or an unknown id
EXIT_LOCKED = 3  # another process holds the embedded store
EXIT_STORAGE = 4  # the store cannot be read or written (`ebb doctor`, `ebb repair`)
EXIT_FULL = 5  # the disk is full: nothing of the failed call was stored
EXIT_NO_STORE = 6  # a read command on a path with no store (none is created)
EXIT_INTERRUPTED = 130  # Ctrl-C: what was in progress was rolled back

F = TypeVar("F", bound=Callable[..., Any])


class _Lazy:
    """A class (or an instance of one) imported on first use.

    Keeps `ebb --help`, and commands that never print a table or never open a store, from
    loading rich, pydantic or the storage engine: each name below behaves as the real one
    (calls, attributes) once touched.
    """

    def __init__(self, module: str, name: str, *args: Any, **kwargs: Any) -> None:
        self._where = (module, name)
        self._args: tuple[Any, ...] | None = (args, kwargs) if args or kwargs else None
        self._target: Any = None

    def _get(self) -> Any:
        if self._target is None:
            target = getattr(importlib.import_module(self._where[0]), self._where[1])
            if self._args is not None:
                args, kwargs = self._args
                target = target(*args, **kwargs)
            self._target = target
        return self._target

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._get(), attr)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._get()(*args, **kwargs)


if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from .engine import Brain

    out: Console
    err: Console
else:
    Brain = _Lazy("ebb_core.engine", "Brain")
    Table = _Lazy("rich.table", "Table")
    out = _Lazy("rich.console", "Console", highlight=False, soft_wrap=True)
    err = _Lazy("rich.console", "Console", stderr=True, highlight=False, soft_wrap=True)


def _fail(message: str, code: int = 1) -> None:
    err.print(f"[bold red]error:[/] {message}", markup=True)
    from . import kuzu_store

    if kuzu_store.abandoned_engines():
        # Kùzu failed to append to its WAL (a disk filled up under it): destroying that engine
        # at interpreter exit would abort the process. Everything committed is on disk.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)


def handle_errors(fn: F) -> F:
    """Turn Ebb errors (and anything unexpected) into one clear line and a non-zero exit."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (SystemExit, click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except StoreLocked as exc:
            _fail(str(exc), EXIT_LOCKED)
        except (NotFound, InvalidInput) as exc:
            _fail(str(exc), EXIT_INPUT)
        except StoreFull as exc:
            _fail(str(exc), EXIT_FULL)
        except StorageError as exc:
            _fail(str(exc), EXIT_STORAGE)
        except NoStore as exc:
            _fail(str(exc), EXIT_NO_STORE)
        except EbbError as exc:
            _fail(str(exc), EXIT_ERROR)
        except KeyboardInterrupt:
            _fail("interrupted: the change in progress was rolled back", EXIT_INTERRUPTED)
        except BrokenPipeError:  # e.g. `ebb recall ... | head`
            raise SystemExit(0) from None
        except RuntimeError as exc:  # the engine's own errors are RuntimeErrors
            if os.environ.get("EBB_DEBUG"):
                raise
            _fail(
                f"the store failed: {exc}. Check it with `ebb doctor`; `ebb repair` fixes what "
                "it can without losing a committed memory",
                EXIT_STORAGE,
            )
        except Exception as exc:
            if os.environ.get("EBB_DEBUG"):
                raise
            _fail(f"unexpected {type(exc).__name__}: {exc} (set EBB_DEBUG=1 for details)", 1)

    return wrapper  # type: ignore[return-value]


def _dump(value: Any) -> Any:
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


def emit_json(value: Any) -> None:
    click.echo(json.dumps(_dump(value), indent=2, ensure_ascii=False))


class Ctx:
    #: ``-n/--namespace`` was typed on this command line (not taken from EBB_NAMESPACE).
    namespace_from_flag: bool = False

    def __init__(self, db: str | None, backend: str | None, namespace: str | None) -> None:
        self.db, self.backend, self.namespace = db, backend, namespace

    @contextmanager
    def brain(
        self, clock: Clock | None = None, *, create: bool = True, embedder: Any = None
    ) -> Iterator[Brain]:
        """The Brain for this command; ``clock``: run as if at another time; ``create=False``
        (read commands): never create a store, raise :class:`NoStore` where there is none."""
        # A running `ebb mcp` keeps the embedded store open between calls: the open asks it to
        # let go (it does after its current call) and says on stderr what it is waiting for.
        brain = Brain.open(
            self.db,
            backend=self.backend,
            namespace=self.namespace,
            wait=15.0,
            create=create,
            on_wait=_waiting,
            clock=clock,
            embedder=embedder,
        )
        try:
            yield brain
        finally:
            brain.close()


def _waiting(message: str) -> None:
    click.echo(f"ebb: {message}", err=True)


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def store_options(fn: F) -> F:
    """``--db``, ``--backend`` and ``-n/--namespace``, with their environment variables: the
    same three on ``ebb`` itself, ``ebb mcp`` and ``ebb ui``."""
    fn = click.option(
        "--namespace", "-n", envvar="EBB_NAMESPACE", help="Namespace (EBB_NAMESPACE)."
    )(fn)
    fn = click.option(
        "--backend", envvar="EBB_BACKEND", help="kuzu (default) or neo4j (EBB_BACKEND)."
    )(fn)
    return click.option(
        "--db", envvar="EBB_DB_PATH", help="Embedded store file (EBB_DB_PATH, ./ebb_db)."
    )(fn)


def _when(value: str | None, option: str = "--at") -> datetime | None:
    """An ISO-8601 time from the command line (``2026-03-02``, ``2026-03-02T09:30:00Z``; no
    zone means UTC)."""
    if value is None:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):  # Python 3.10 does not read "Z"
        text = text[:-1] + "+00:00"
    try:
        return as_utc(datetime.fromisoformat(text))
    except ValueError:
        raise InvalidInput(
            f"{option} {value!r} is not an ISO-8601 time (e.g. 2026-03-02 or 2026-03-02T09:30Z)",
            field=option.lstrip("-"),
        ) from None


def _clock_at(value: str | None, option: str = "--at") -> FixedClock | None:
    """A clock stopped at ``value``, for a command run as if at that time."""
    when = _when(value, option)
    return None if when is None else FixedClock(when)


at_option = click.option(
    "--at", "at", metavar="ISO", help="Do it as of this time (backdating; ISO-8601, UTC default)."
)


class _Commands(click.Group):
    """The command group, with commands whose module is imported only when they run.

    ``ebb mcp`` lives in :mod:`ebb_core.mcp_server` (its tool models cost an import of their
    own); ``ebb --help`` lists it from the short help below without importing it.
    """

    lazy: dict[str, tuple[str, str, str]] = {  # noqa: RUF012
        "mcp": (
            "ebb_core.mcp_server",
            "mcp_command",
            "Serve Ebb's memory tools to an MCP client (stdio by default, or streamable HTTP).",
        ),
        "ui": (
            "ebb_core.ui.server",
            "ui_command",
            "Serve a local web page: review queue (approve, restore), graph, decay, log, stats.",
        ),
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, name, _ = self.lazy[cmd_name]
            try:
                command: click.Command = getattr(importlib.import_module(module), name)
            except ImportError:  # an optional part that is not installed
                return None
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max((len(n) for n in names), default=0)
        rows = []
        for name in names:
            if name in self.lazy and name not in self.commands:
                placeholder = click.Command(name, help=self.lazy[name][2])
                rows.append((name, placeholder.get_short_help_str(limit)))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@store_options
@click.version_option(package_name="ebb-memory")
@click.pass_context
def main(ctx: click.Context, db: str | None, backend: str | None, namespace: str | None) -> None:
    """Ebb: long-term memory for AI agents, kept as a graph."""
    ctx.obj = Ctx(db, backend, namespace)
    source = ctx.get_parameter_source("namespace")
    ctx.obj.namespace_from_flag = source is click.core.ParameterSource.COMMANDLINE
    import warnings

    from .errors import StoreRebuilt

    def show(message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
        if issubclass(category, StoreRebuilt):
            err.print(f"[bold yellow]warning:[/] {message}", markup=True)
        else:
            default_show(message, category, *args, **kwargs)

    default_show = warnings.showwarning
    warnings.showwarning = show


pass_ctx = click.make_pass_decorator(Ctx)


def _node_table(rows: list[Any]) -> Table:
    """``ebb list``'s table: one memory a row."""
    t = Table(show_lines=False)
    for col in ("id", "kind", "tier", "text"):
        t.add_column(col, overflow="fold")
    for n in rows:
        t.add_row(n.id, n.kind, n.tier.label + (" (pinned)" if n.pinned else ""), _short(n.text))
    return t


def _short(text: str, n: int = 80) -> str:
    """The text on one line, cut to ``n`` characters, for a table cell: brackets stay as typed
    (``[[roadmap]]`` is not rich markup)."""
    from rich.markup import escape

    text = " ".join(text.split())
    return escape(text if len(text) <= n else text[: n - 1] + "…")


@main.command()
@click.argument("text", required=False)
@click.option(
    "--file",
    "file_",
    type=click.Path(dir_okay=False),
    help="Read the text from this file (UTF-8) instead.",
)
@click.option(
    "--kind", default=None, help="Kind of memory [default: note; an existing memory keeps its own]."
)
@click.option(
    "--id", "id_", help="Id like kind:slug (generated when omitted; an existing id: new version)."
)
@click.option("--link", "links", multiple=True, help="Id of a memory to link to (repeatable).")
@click.option(
    "--supersedes",
    multiple=True,
    help="Id of a memory this one replaces: it ranks below it from now on (repeatable).",
)
@click.option("--props", help="JSON object of extra properties.")
@click.option("--pin", is_flag=True, help="Pin it: never archived.")
@at_option
@json_option
@pass_ctx
@handle_errors
def remember(
    c: Ctx,
    text: str | None,
    file_: str | None,
    kind: str | None,
    id_: str | None,
    links: tuple[str, ...],
    supersedes: tuple[str, ...],
    props: str | None,
    pin: bool,
    at: str | None,
    as_json: bool,
) -> None:
    """Store a memory (TEXT; '-' reads standard input, --file PATH a file) and link it to
    others. New text under an existing --id is a new version: the old one is kept (`ebb history
    ID`)."""
    text = _memory_text(text, file_)
    try:
        parsed = json.loads(props) if props else None
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"--props is not valid JSON: {exc}", field="props") from None
    when = _when(at)
    with c.brain() as b:
        node = b.remember(
            text,
            kind=kind,
            id=id_,
            links=links,
            props=parsed,
            pinned=pin,
            supersedes=supersedes,
            actor="cli",
            at=when,
        )
    if as_json:
        emit_json(node)
    else:
        out.print(f"remembered {node.id}")


def _memory_text(text: str | None, file_: str | None) -> str:
    """The text to remember: the argument, standard input for '-', or the file's content."""
    if file_ is not None:
        if text is not None:
            raise InvalidInput("give the text or --file, not both", field="text")
        try:
            with open(file_, encoding="utf-8") as fh:
                return fh.read()
        except FileNotFoundError:
            raise InvalidInput(f"no such file: {file_}", field="file") from None
        except UnicodeDecodeError:
            raise InvalidInput(f"{file_} is not UTF-8 text", field="file") from None
        except OSError as exc:
            raise InvalidInput(f"cannot read {file_}: {exc.strerror}", field="file") from None
    if text == "-":
        try:
            return sys.stdin.read()
        except UnicodeDecodeError:
            raise InvalidInput("standard input is not UTF-8 text", field="text") from None
    if text is None:
        raise InvalidInput(
            "no text: give it as an argument, '-' to read standard input, or --file PATH",
            field="text",
        )
    return text


@main.command()
@click.argument("query")
@click.option("-k", default=5, show_default=True, help="How many results.")
@click.option(
    "--depth",
    type=click.IntRange(1, 3),
    default=None,
    help="A limit: 1 hot, 2 +warm, 3 +cold [default: every live tier, hot first].",
)
@click.option("--archived", is_flag=True, help="Include cold (archived) memories.")
@click.option("--kind", "kinds", multiple=True, help="Only these kinds (repeatable).")
@click.option("--no-reinforce", is_flag=True, help="Look without reinforcing what is returned.")
@click.option("--why", "full_why", is_flag=True, help="Print each hit's full explanation.")
@json_option
@pass_ctx
@handle_errors
def recall(
    c: Ctx,
    query: str,
    k: int,
    depth: int | None,
    archived: bool,
    kinds: tuple[str, ...],
    no_reinforce: bool,
    full_why: bool,
    as_json: bool,
) -> None:
    """Find the memories most relevant to QUERY, and why each surfaced."""
    with c.brain(create=False) as b:
        hits = b.recall(
            query,
            k,
            depth=depth,
            include_archived=archived,
            kinds=kinds,
            reinforce=not no_reinforce,
        )
    if as_json:
        emit_json(hits)
        return
    if not hits:
        out.print("no memories matched")
        return
    # One line per hit (ids fold if the terminal is very narrow); --why or --json for the rest.
    t = Table()
    fixed = {
        "#": len(str(len(hits))),
        "id": min(max(len(h.id) for h in hits), 40),
        "score": 5,
        "tier": max(4, *(len(h.node.tier.label) for h in hits)),
    }
    rest = max(out.width - sum(fixed.values()) - 3 * 6 - 1, 24)  # borders and padding
    widths = {**fixed, "text": rest * 3 // 5, "why": rest - rest * 3 // 5}
    for col, width in widths.items():
        if col == "id":
            t.add_column(col, width=width, overflow="fold")
        else:
            t.add_column(col, width=width, overflow="ellipsis", no_wrap=True)
    for i, h in enumerate(hits, 1):
        t.add_row(
            str(i),
            h.id,
            f"{h.score:.3f}",
            h.node.tier.label,
            _short(h.node.text, widths["text"]),
            _brief_why(h),
        )
    out.print(t)
    if full_why:
        for i, h in enumerate(hits, 1):
            out.print(f"{i}. {h.id}: {h.why.summary}", markup=False)
    else:
        out.print("full reasons: --why (or --json)", style="dim")


def _brief_why(hit: Any) -> str:
    """The why of a hit in a few words: what matched, its live links, when last used."""
    why = hit.why
    bits = ["matched " + ", ".join(why.matched_terms) if why.matched_terms else "no text match"]
    others = list(dict.fromkeys(link.id for link in why.live_links))
    if others:
        bits.append(f"{len(others)} linked")
    if why.last_reinforced_at is not None:
        bits.append("used " + why.summary.rsplit("last reinforced ", 1)[-1].split(";")[0])
    return " · ".join(bits)


@main.command()
@click.argument("src")
@click.argument("dst")
@click.option("--kind", default="related", show_default=True)
@click.option("--weight", type=float, default=None, help="Edge weight (default 1.0).")
@at_option
@json_option
@pass_ctx
@handle_errors
def connect(
    c: Ctx, src: str, dst: str, kind: str, weight: float | None, at: str | None, as_json: bool
) -> None:
    """Link SRC to DST (or reinforce that link). --kind supersedes: SRC replaces DST."""
    with c.brain(_clock_at(at)) as b:
        edge = b.connect(src, dst, kind=kind, weight=weight, actor="cli")
    if as_json:
        emit_json(edge)
    else:
        out.print(f"{edge.src} -[{edge.kind} {edge.weight:g}]-> {edge.dst}")


@main.command()
@click.argument("old")
@click.argument("new")
@json_option
@pass_ctx
@handle_errors
def supersede(c: Ctx, old: str, new: str, as_json: bool) -> None:
    """Record that memory NEW replaces memory OLD: OLD then ranks below NEW in recall and
    leaves hot at the next maintain. Nothing is deleted."""
    with c.brain() as b:
        edge = b.supersede(old, new, actor="cli")
    if as_json:
        emit_json(edge)
    else:
        out.print(f"{edge.src} supersedes {edge.dst}")


@main.command()
@click.argument("id_", metavar="ID")
@json_option
@pass_ctx
@handle_errors
def history(c: Ctx, id_: str, as_json: bool) -> None:
    """List every version of memory ID's text, oldest first (the last is current)."""
    with c.brain(create=False) as b:
        versions = b.history(id_)
    if as_json:
        emit_json(versions)
        return
    t = Table()
    for col in ("version", "written", "kind", "text", "replaced"):
        t.add_column(col, overflow="fold")
    for v in versions:
        t.add_row(
            str(v.version) + (" (current)" if v.current else ""),
            f"{v.at:%Y-%m-%d %H:%M}",
            v.kind,
            _short(v.text, 60),
            f"{v.replaced_at:%Y-%m-%d %H:%M}" if v.replaced_at else "",
        )
    out.print(t)


@main.command()
@click.argument("id_", metavar="ID")
@click.option("--with", "with_id", help="Only reinforce the link to this memory.")
@at_option
@json_option
@pass_ctx
@handle_errors
def reinforce(c: Ctx, id_: str, with_id: str | None, at: str | None, as_json: bool) -> None:
    """Mark memory ID as used: its clocks reset."""
    with c.brain(_clock_at(at)) as b:
        node = b.reinforce(id_, with_id=with_id)
        act = b.activation(id_)
    if as_json:
        emit_json({"node": node, "activation": act})
    else:
        out.print(f"reinforced {node.id}: activation {act:.3f}, tier {node.tier.label}")


@main.command()
@click.argument("id_", metavar="ID")
@click.option("--reason", default="", help="Why it should go.")
@json_option
@pass_ctx
@handle_errors
def forget(c: Ctx, id_: str, reason: str, as_json: bool) -> None:
    """Queue memory ID for deletion (a human approves it with `ebb approve`)."""
    with c.brain() as b:
        item = b.forget(id_, reason, actor="cli")
    if as_json:
        emit_json(item)
    else:
        out.print(f"{item.id} is frozen and waits in the review queue (ebb review / ebb approve)")


@main.command()
@click.argument("id_", metavar="ID")
@json_option
@pass_ctx
@handle_errors
def restore(c: Ctx, id_: str, as_json: bool) -> None:
    """Bring memory ID back to hot (out of the review queue or an archive tier)."""
    with c.brain() as b:
        node = b.restore(id_, actor="cli")
    if as_json:
        emit_json(node)
    else:
        out.print(f"restored {node.id} to hot")


@main.command()
@click.argument("id_", metavar="ID")
@json_option
@pass_ctx
@handle_errors
def pin(c: Ctx, id_: str, as_json: bool) -> None:
    """Pin memory ID: it stays hot and never archives."""
    with c.brain() as b:
        node = b.pin(id_, actor="cli")
    emit_json(node) if as_json else out.print(f"pinned {node.id}")


@main.command()
@click.argument("id_", metavar="ID")
@json_option
@pass_ctx
@handle_errors
def unpin(c: Ctx, id_: str, as_json: bool) -> None:
    """Unpin memory ID."""
    with c.brain() as b:
        node = b.unpin(id_, actor="cli")
    emit_json(node) if as_json else out.print(f"unpinned {node.id}")


@main.command()
@click.argument("id_", metavar="ID")
@click.option("--limit", default=20, show_default=True)
@json_option
@pass_ctx
@handle_errors
def neighbors(c: Ctx, id_: str, limit: int, as_json: bool) -> None:
    """Memories linked to ID, strongest (decayed) link first."""
    with c.brain(create=False) as b:
        rows = b.neighbors(id_, limit=limit)
    if as_json:
        emit_json(rows)
        return
    t = Table()
    for col in ("id", "link", "weight", "decayed", "tier", "text"):
        t.add_column(col, overflow="fold")
    for r in rows:
        arrow = f"-{r.edge.kind}->" if r.edge.src == id_ else f"<-{r.edge.kind}-"
        t.add_row(
            r.node.id,
            arrow,
            f"{r.edge.weight:g}",
            f"{r.decayed_weight:.3f}",
            r.node.tier.label,
            _short(r.node.text, 50),
        )
    out.print(t)


_TIER_NAMES = {"hot": 1, "warm": 2, "cold": 3, "frozen": 4, "1": 1, "2": 2, "3": 3, "4": 4}
tier_choice = click.Choice(list(_TIER_NAMES), case_sensitive=False)


@main.command("get")
@click.argument("id_", metavar="ID")
@json_option
@pass_ctx
@handle_errors
def get_cmd(c: Ctx, id_: str, as_json: bool) -> None:
    """Show memory ID in full (any tier), without reinforcing it. Also: ebb show ID."""
    with c.brain(create=False) as b:
        node = b.get(id_)
        act = b.activation(id_)
    if as_json:
        emit_json({**_dump(node), "activation": act})
        return
    t = Table(show_header=False, box=None)
    t.add_column("field", style="bold")
    t.add_column("value", overflow="fold")
    t.add_row("id", node.id)
    t.add_row("kind", node.kind)
    t.add_row("tier", node.tier.label + (" (pinned)" if node.pinned else ""))
    if node.review_reason:
        t.add_row("in review", node.review_reason)
    t.add_row("activation", f"{act:.3f}")
    t.add_row("links", str(node.degree))
    for label, when in (
        ("created", node.created_at),
        ("updated", node.updated_at),
        ("last read", node.last_read_at),
    ):
        t.add_row(label, when.isoformat() if when else "-")
    if node.props:
        t.add_row("props", json.dumps(node.props, ensure_ascii=False))
    out.print(t)
    out.print(node.text, markup=False)


main.add_command(get_cmd, "show")


@main.command("list")
@click.option("--kind", "kinds", multiple=True, help="Only these kinds (repeatable).")
@click.option(
    "--tier", "tiers", multiple=True, type=tier_choice, help="Only these tiers (repeatable)."
)
@click.option("--limit", default=50, show_default=True, help="At most this many.")
@click.option("--after", help="Start after this id (paging through a long list).")
@json_option
@pass_ctx
@handle_errors
def list_cmd(
    c: Ctx,
    kinds: tuple[str, ...],
    tiers: tuple[str, ...],
    limit: int,
    after: str | None,
    as_json: bool,
) -> None:
    """The namespace's memories in id order (without reinforcing them)."""
    with c.brain(create=False) as b:
        rows = b.memories(
            kinds=kinds, tiers=[_TIER_NAMES[t.lower()] for t in tiers], limit=limit, after=after
        )
    if as_json:
        emit_json(rows)
    elif not rows:
        out.print("no memories")
    else:
        out.print(_node_table(rows))
        if len(rows) == limit:
            out.print(f"more after {rows[-1].id}: ebb list --after {rows[-1].id}", markup=False)


@main.command()
@click.option("-k", default=10, show_default=True, help="How many.")
@click.option("--depth", default=3, show_default=True, help="1 hot, 2 +warm, 3 +cold.")
@click.option("--kind", "kinds", multiple=True, help="Only these kinds (repeatable).")
@json_option
@pass_ctx
@handle_errors
def top(c: Ctx, k: int, depth: int, kinds: tuple[str, ...], as_json: bool) -> None:
    """The most active memories right now (without reinforcing them)."""
    with c.brain(create=False) as b:
        rows = b.top(k, depth=depth, kinds=kinds)
        acts = [b.activation(n.id) for n in rows]
    if as_json:
        emit_json([{**_dump(n), "activation": a} for n, a in zip(rows, acts, strict=True)])
        return
    if not rows:
        out.print("no memories")
        return
    t = Table()
    for col in ("#", "id", "activation", "tier", "text"):
        t.add_column(col, overflow="fold")
    for i, (n, a) in enumerate(zip(rows, acts, strict=True), 1):
        tier = n.tier.label + (" (pinned)" if n.pinned else "")
        t.add_row(str(i), n.id, f"{a:.3f}", tier, _short(n.text, 50))
    out.print(t)


@main.command()
@json_option
@pass_ctx
@handle_errors
def namespaces(c: Ctx, as_json: bool) -> None:
    """Every namespace in the store."""
    with c.brain(create=False) as b:
        names = b.namespaces()
    if as_json:
        emit_json(names)
    elif not names:
        out.print("no namespaces yet (ebb remember TEXT creates one)")
    else:
        for name in names:
            out.print(name, markup=False)


@main.command()
@click.option(
    "--spreading",
    default="default",
    show_default=True,
    help="Spreading pass: default, or pagerank where the backend has it.",
)
@click.option(
    "--now", "now", metavar="ISO", help="Run as if it were this time (replaying history)."
)
@click.option("--dry-run", is_flag=True, help="Show what would move between tiers; change nothing.")
@json_option
@pass_ctx
@handle_errors
def maintain(c: Ctx, spreading: str, now: str | None, dry_run: bool, as_json: bool) -> None:
    """Re-score everything and re-tier: archive what decayed, queue what froze."""
    if dry_run:
        _maintain_preview(c, _clock_at(now, "--now"), as_json)
        return
    with c.brain(_clock_at(now, "--now")) as b:
        if as_json:
            report = b.maintain(spreading=spreading)
        else:
            with err.status("maintaining: re-scoring and re-tiering every memory…"):
                report = b.maintain(spreading=spreading)
    if as_json:
        emit_json(report)
        return
    moved = ", ".join(f"{k}: {v}" for k, v in sorted(report.moved.items())) or "none"
    out.print(
        f"scored {report.scanned} memories; moves: {moved}; "
        f"{len(report.newly_queued)} newly queued for review"
    )


def _maintain_preview(c: Ctx, clock: Clock | None, as_json: bool) -> None:
    with c.brain(clock, create=False) as b:
        moves = b.maintain_preview()
    if as_json:
        rows = [
            {"id": m.node_id, "from": m.from_tier.label, "to": m.to_tier.label, "ratio": m.ratio}
            for m in moves
        ]
        emit_json({"dry_run": True, "moves": rows})
        return
    if not moves:
        out.print("dry run: maintain would move nothing")
        return
    t = Table(title="dry run: maintain would move (nothing was changed)")
    for col in ("id", "from", "to", "activation / reference"):
        t.add_column(col, overflow="fold")
    for m in moves:
        t.add_row(m.node_id, m.from_tier.label, m.to_tier.label, f"{m.ratio:.2%}")
    out.print(t)
    queued = sum(m.to_tier == 4 for m in moves)  # tier 4: frozen, queued for review
    out.print(f"{len(moves)} would move; {queued} would wait in the review queue", markup=False)


@main.command()
@click.option("--limit", default=100, show_default=True)
@json_option
@pass_ctx
@handle_errors
def review(c: Ctx, limit: int, as_json: bool) -> None:
    """The review queue: memories waiting for a human to approve deletion (or restore)."""
    with c.brain(create=False) as b:
        items = b.review_queue(limit)
    if as_json:
        emit_json(items)
        return
    if not items:
        out.print("the review queue is empty")
        return
    t = Table(title="review queue")
    for col in ("id", "queued", "reason", "text"):
        t.add_column(col, overflow="fold")
    for i in items:
        t.add_row(
            i.id, i.queued_at.isoformat() if i.queued_at else "", i.reason, _short(i.text, 50)
        )
    out.print(t)
    out.print("approve with: ebb approve ID... --by YOUR-NAME   |   keep with: ebb restore ID")


@main.command()
@click.argument("ids", nargs=-1, required=True)
@click.option(
    "--by", "approved_by", required=True, help="Who approves (recorded in the audit log)."
)
@click.option("--note", default="", help="A note for the audit log.")
@json_option
@pass_ctx
@handle_errors
def approve(c: Ctx, ids: tuple[str, ...], approved_by: str, note: str, as_json: bool) -> None:
    """Delete reviewed memories IDS for good (only ones in the review queue)."""
    with c.brain() as b:
        deleted = b.approve_deletion(list(ids), approved_by=approved_by, note=note)
    if as_json:
        emit_json({"deleted": deleted})
    else:
        out.print(f"deleted {len(deleted)}: {', '.join(deleted)} (audited; see ebb log)")


@main.command()
@json_option
@pass_ctx
@handle_errors
def stats(c: Ctx, as_json: bool) -> None:
    """Counts for the namespace: memories per tier, edges, review queue."""
    with c.brain(create=False) as b:
        s = b.stats()
    if as_json:
        emit_json(s)
        return
    t = Table(title=f"ebb · {s.namespace} · {s.backend} · {s.location}", show_header=False)
    t.add_column("what")
    t.add_column("value", justify="right")
    t.add_row("memories", str(s.nodes))
    for tier, n in s.by_tier.items():
        t.add_row(f"  {tier}", str(n))
    for label, value in (
        ("edges", s.edges),
        ("pinned", s.pinned),
        ("review queue", s.review_queue),
        ("audit entries", s.audit_entries),
    ):
        t.add_row(label, str(value))
    t.add_row("half-life (days)", f"{s.half_life_days:g}")
    out.print(t)


@main.command("log")
@click.option("--limit", default=50, show_default=True)
@click.option("--id", "node_id", help="Only entries about this memory.")
@click.option("--action", help="Only this action (forget, restore, delete, freeze...).")
@json_option
@pass_ctx
@handle_errors
def log_cmd(c: Ctx, limit: int, node_id: str | None, action: str | None, as_json: bool) -> None:
    """The audit log: every tier change, forget, restore, pin and approved deletion."""
    with c.brain(create=False) as b:
        entries = b.audit_log(limit, node_id=node_id, action=action)
    if as_json:
        emit_json(entries)
        return
    t = Table(title="audit log")
    for col in ("#", "at", "action", "id", "tiers", "by", "reason"):
        t.add_column(col, overflow="fold")
    for e in entries:
        tiers = (
            f"{e.from_tier.label if e.from_tier else '-'} → {e.to_tier.label if e.to_tier else '-'}"
        )
        t.add_row(str(e.seq), e.at.isoformat(), e.action, e.node_id, tiers, e.actor, e.reason)
    out.print(t)


@main.command()
@click.argument("dest", type=click.Path(dir_okay=False, writable=True))
@click.option("--all-namespaces", is_flag=True, help="Export every namespace in the store.")
@pass_ctx
@handle_errors
def export(c: Ctx, dest: str, all_namespaces: bool) -> None:
    """Write the namespace to DEST as JSON Lines (lossless; '-' for stdout)."""
    with c.brain(create=False) as b:
        if dest == "-":
            n = b.export(sys.stdout, all_namespaces=all_namespaces)
            return
        n = b.export(dest, all_namespaces=all_namespaces)
    err.print(f"exported {n} records to {dest}")


@main.command("import")
@click.argument("src", type=click.Path(dir_okay=False))
@click.option("--into", "into", help="Put every memory into this namespace instead.")
@json_option
@pass_ctx
@handle_errors
def import_cmd(c: Ctx, src: str, into: str | None, as_json: bool) -> None:
    """Load an export from SRC (refuses, changing nothing, if an id already exists).

    Memories keep the file's namespaces unless --into NS (or `ebb -n NS import`) puts them all
    in NS.
    """
    from rich.progress import Progress

    if c.namespace_from_flag:
        if into is not None and into != c.namespace:
            raise InvalidInput(
                f"-n {c.namespace!r} and --into {into!r} disagree: give one of them "
                "(both mean the namespace every imported memory goes into)",
                field="into",
            )
        into = c.namespace

    opened: list[Brain] = []
    try:
        with c.brain() as b:
            opened.append(b)
            if as_json:
                counts = b.import_(src, namespace=into)
            else:
                console = err._get()  # type: ignore[attr-defined]
                with Progress(console=console, transient=True) as bar:
                    task = bar.add_task("importing", total=None)

                    def step(done: int, total: int) -> None:
                        bar.update(task, completed=done, total=total)

                    counts = b.import_(src, namespace=into, progress=step)
    except KeyboardInterrupt:
        # Ctrl-C after the commit (while the index was rebuilt, or the store closed): the
        # import stands, and is reported as stored, never as rolled back.
        done = opened[0].last_import if opened else None
        if done is None:
            raise
        counts = done
        err.print(
            "interrupted after the import had committed: everything below is stored; the "
            "text index is rebuilt when the store is next opened if it was not finished"
        )
    if as_json:
        emit_json(counts)
    else:
        where = f"into namespace {into!r}" if into else "into the file's own namespaces"
        out.print(
            f"imported {counts['nodes']} memories, {counts['edges']} edges, "
            f"{counts['audit']} audit entries {where}",
            markup=False,
        )


@main.command("embed")
@click.option(
    "--rebuild",
    is_flag=True,
    help="Drop every vector (all namespaces) and re-embed all memories with EBB_EMBEDDER.",
)
@click.option("--batch", default=64, show_default=True, help="Memories embedded per batch.")
@click.option("--all-namespaces", is_flag=True, help="Every namespace, not only -n's.")
@json_option
@pass_ctx
@handle_errors
def embed_cmd(c: Ctx, rebuild: bool, batch: int, all_namespaces: bool, as_json: bool) -> None:
    """Give every memory that has none a vector, for recall by meaning (EBB_EMBEDDER names the
    embedder; minilm is the offline default).

    Batched, each batch committed: a run that is stopped resumes where it was when run again.
    --rebuild moves the store to another model (the store keeps one model's vectors).
    """
    from rich.progress import Progress

    from .embeddings import from_env

    if batch < 1:
        raise InvalidInput("--batch must be at least 1", field="batch")
    emb = from_env()
    with c.brain(embedder=False if rebuild else None) as b:
        if emb is None and b.embedder is None:
            raise InvalidInput(
                "no embedder: set EBB_EMBEDDER (e.g. EBB_EMBEDDER=minilm ebb embed)",
                field="embedder",
            )
        if as_json:
            report = b.embed(
                rebuild=rebuild, embedder=emb, batch=batch, all_namespaces=all_namespaces
            )
        else:
            console = err._get()  # type: ignore[attr-defined]
            with Progress(console=console, transient=True) as bar:
                task = bar.add_task("embedding", total=None)

                def step(done: int, total: int) -> None:
                    bar.update(task, completed=done, total=total)

                report = b.embed(
                    rebuild=rebuild,
                    embedder=emb,
                    batch=batch,
                    progress=step,
                    all_namespaces=all_namespaces,
                )
    if as_json:
        emit_json(report)
    else:
        used = emb or b.embedder
        name = used.name if used is not None else "?"
        out.print(f"embedded {report['embedded']} memories with {name}", markup=False)


@main.command("ingest")
@click.argument("path", type=click.Path())
@click.option(
    "--by",
    type=click.Choice(["file", "section"]),
    default="file",
    show_default=True,
    help="One memory per file, or one per heading section.",
)
@click.option("--kind", default="note", show_default=True, help="Kind of the memories.")
@click.option("--dry-run", is_flag=True, help="Say what would be added or updated; change nothing.")
@json_option
@pass_ctx
@handle_errors
def ingest_cmd(c: Ctx, path: str, by: str, kind: str, dry_run: bool, as_json: bool) -> None:
    """Bring in a text or Markdown file, or a folder of notes (.md, .markdown, .txt).

    Each file becomes a memory (--by section: each heading section), as of the file's
    modification time, with id note:FOLDER/FILE. [[wikilinks]] and relative links like
    [x](other.md) between the notes become links. Run it again after editing: unchanged notes are
    left alone, changed ones become new versions (`ebb history ID`). Exit 2 if a file could not
    be read (the others still go in).
    """
    try:
        report = _ingest(c, path, by, kind, dry_run, as_json)
    except KeyboardInterrupt:
        _fail(
            "interrupted: the notes written before Ctrl-C are stored, the one in progress was "
            "rolled back; run the same `ebb ingest` again to finish (what is in is skipped)",
            EXIT_INTERRUPTED,
        )
        return
    _ingest_shown(report, dry_run, as_json)


def _ingest(c: Ctx, path: str, by: str, kind: str, dry_run: bool, as_json: bool) -> Any:
    from .ingest import ingest

    if dry_run:
        try:
            with c.brain(create=False) as b:
                report = ingest(b, path, by=by, kind=kind, dry_run=True)
        except NoStore:
            report = ingest(None, path, by=by, kind=kind, dry_run=True)
    elif as_json:
        with c.brain() as b:
            report = ingest(b, path, by=by, kind=kind)
    else:
        from rich.progress import Progress

        with c.brain() as b:
            console = err._get()  # type: ignore[attr-defined]
            with Progress(console=console, transient=True) as bar:
                task = bar.add_task("ingesting", total=None)

                def step(done: int, total: int) -> None:
                    bar.update(task, completed=done, total=total)

                report = ingest(b, path, by=by, kind=kind, progress=step)
    return report


def _ingest_shown(report: Any, dry_run: bool, as_json: bool) -> None:
    for s in report.skipped:
        label = "error" if s.problem else "skipped"
        click.echo(f"{label}: {s.reason if s.problem else s.path + ': ' + s.reason}", err=True)
    if as_json:
        emit_json(report.as_dict())
    else:
        verb = "would ingest" if dry_run else "ingested"
        unit = "file" if report.by == "file" else "heading section"
        out.print(
            f"{verb} {report.files} files from {report.root} (one memory per {unit}): "
            f"{report.added} added, {report.updated} updated, {report.unchanged} unchanged, "
            f"{len(report.skipped)} skipped",
            markup=False,
        )
        made = "would be made" if dry_run else "made"
        out.print(
            f"links: {report.links} {made}, {report.links_unresolved} to notes not ingested",
            markup=False,
        )
        for src, target in report.unresolved[:10]:
            out.print(f"  not linked: {src} -> {target}", markup=False, style="dim")
        if len(report.unresolved) > 10:
            out.print(f"  ... and {len(report.unresolved) - 10} more (--json lists all)")
    if report.problems:
        raise SystemExit(EXIT_INPUT)


def _kuzu_path(c: Ctx) -> str:
    from .backends import DEFAULT_PATH

    backend = (c.backend or os.environ.get("EBB_BACKEND") or "kuzu").strip().lower()
    if backend != "kuzu":
        raise InvalidInput(
            "doctor and repair check the embedded (Kùzu) store; a Neo4j database has its own "
            "tools (neo4j-admin database check)",
            field="backend",
        )
    return c.db or os.environ.get("EBB_DB_PATH") or DEFAULT_PATH


def _print_report(report: Any) -> None:
    for action in report.actions:
        out.print(f"- {action}")
    for check in report.checks:
        mark = "[green]ok[/]" if check.ok else "[bold red]PROBLEM[/]"
        out.print(f"{mark}  {check.name}: {check.detail}", markup=True)


@main.command()
@json_option
@pass_ctx
@handle_errors
def doctor(c: Ctx, as_json: bool) -> None:
    """Check the embedded store: opens, counts, text index, schema version, WAL (exit 4 if
    something is wrong; `ebb repair` mends it)."""
    from .repair import diagnose

    report = diagnose(_kuzu_path(c))
    if as_json:
        emit_json(report.as_dict())
    else:
        out.print(f"ebb doctor · {report.path}")
        _print_report(report)
        out.print("healthy" if report.ok else "problems found: run `ebb repair`")
    if not report.ok:
        raise SystemExit(EXIT_STORAGE)


@main.command()
@click.option(
    "--into",
    "into",
    type=click.Path(dir_okay=False),
    help="Salvage into this new store and leave the original untouched.",
)
@json_option
@pass_ctx
@handle_errors
def repair(c: Ctx, into: str | None, as_json: bool) -> None:
    """Mend the embedded store without losing a committed memory. If Ebb cannot open it, every
    row Kùzu can still read is salvaged into a new store, and the damaged file is kept."""
    from .repair import repair as run_repair

    report = run_repair(_kuzu_path(c), into=into)
    if as_json:
        emit_json(report.as_dict())
    else:
        out.print(f"ebb repair · {report.path}")
        _print_report(report)
        if report.damaged_copy:
            out.print(f"the damaged original is kept at {report.damaged_copy}")
        if report.salvaged_to and report.salvaged_to != report.path:
            out.print(f"the salvaged store is at {report.salvaged_to} (use it with --db)")
        out.print("repaired" if report.ok else "some problems remain (see above)")
    if not report.ok:
        raise SystemExit(EXIT_STORAGE)


@main.command()
@json_option
@click.option("--db", "demo_db", help="Keep the demo store at this path (default: a temp file).")
@handle_errors
def demo(as_json: bool, demo_db: str | None) -> None:
    """The narrated walkthrough on a fictional seed graph (deterministic)."""
    from .demo import run

    run(as_json=as_json, path=demo_db)


if __name__ == "__main__":  # pragma: no cover
    main()
