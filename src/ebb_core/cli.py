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
from typing import TYPE_CHECKING, Any, TypeVar

import click

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
    def __init__(self, db: str | None, backend: str | None, namespace: str | None) -> None:
        self.db, self.backend, self.namespace = db, backend, namespace

    @contextmanager
    def brain(self, *, create: bool = True) -> Iterator[Brain]:
        """The Brain for this command; ``create=False`` (read commands): never create a store,
        raise :class:`NoStore` where there is none."""
        # A running `ebb mcp` keeps the embedded store open between calls: the open asks it to
        # let go (it does after its current call) and says on stderr what it is waiting for.
        brain = Brain.open(
            self.db,
            backend=self.backend,
            namespace=self.namespace,
            wait=15.0,
            create=create,
            on_wait=_waiting,
        )
        try:
            yield brain
        finally:
            brain.close()


def _waiting(message: str) -> None:
    click.echo(f"ebb: {message}", err=True)


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


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
@click.option("--db", envvar="EBB_DB_PATH", help="Embedded store file (EBB_DB_PATH, ./ebb_db).")
@click.option("--backend", envvar="EBB_BACKEND", help="kuzu (default) or neo4j (EBB_BACKEND).")
@click.option("--namespace", "-n", envvar="EBB_NAMESPACE", help="Namespace (EBB_NAMESPACE).")
@click.version_option(package_name="ebb-memory")
@click.pass_context
def main(ctx: click.Context, db: str | None, backend: str | None, namespace: str | None) -> None:
    """Ebb: long-term memory for AI agents, kept as a graph."""
    ctx.obj = Ctx(db, backend, namespace)
    import warnings

    from .kuzu_store import StoreRebuilt

    def show(message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
        if issubclass(category, StoreRebuilt):
            err.print(f"[bold yellow]warning:[/] {message}", markup=True)
        else:
            default_show(message, category, *args, **kwargs)

    default_show = warnings.showwarning
    warnings.showwarning = show


pass_ctx = click.make_pass_decorator(Ctx)


def _node_table(rows: list[Any], title: str | None = None) -> Table:
    t = Table(title=title, show_lines=False)
    for col in ("id", "kind", "tier", "text"):
        t.add_column(col, overflow="fold")
    for n in rows:
        t.add_row(n.id, n.kind, n.tier.label + (" (pinned)" if n.pinned else ""), _short(n.text))
    return t


def _short(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


@main.command()
@click.argument("text")
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
@json_option
@pass_ctx
@handle_errors
def remember(
    c: Ctx,
    text: str,
    kind: str | None,
    id_: str | None,
    links: tuple[str, ...],
    supersedes: tuple[str, ...],
    props: str | None,
    pin: bool,
    as_json: bool,
) -> None:
    """Store a memory (TEXT) and link it to others. New text under an existing --id is a new
    version: the old one is kept (`ebb history ID`)."""
    try:
        parsed = json.loads(props) if props else None
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"--props is not valid JSON: {exc}", field="props") from None
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
        )
    if as_json:
        emit_json(node)
    else:
        out.print(f"remembered {node.id}")


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
    t = Table()
    for col in ("#", "id", "score", "tier", "text", "why"):
        t.add_column(col, overflow="fold")
    for i, h in enumerate(hits, 1):
        t.add_row(
            str(i),
            h.id,
            f"{h.score:.3f}",
            h.node.tier.label,
            _short(h.node.text, 50),
            h.why.summary,
        )
    out.print(t)


@main.command()
@click.argument("src")
@click.argument("dst")
@click.option("--kind", default="related", show_default=True)
@click.option("--weight", type=float, default=None, help="Edge weight (default 1.0).")
@json_option
@pass_ctx
@handle_errors
def connect(c: Ctx, src: str, dst: str, kind: str, weight: float | None, as_json: bool) -> None:
    """Link SRC to DST (or reinforce that link). --kind supersedes: SRC replaces DST."""
    with c.brain() as b:
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
    with c.brain() as b:
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
@json_option
@pass_ctx
@handle_errors
def reinforce(c: Ctx, id_: str, with_id: str | None, as_json: bool) -> None:
    """Mark memory ID as used: its clocks reset."""
    with c.brain() as b:
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


@main.command()
@click.option(
    "--spreading",
    default="default",
    show_default=True,
    help="Spreading pass: default, or pagerank where the backend has it.",
)
@json_option
@pass_ctx
@handle_errors
def maintain(c: Ctx, spreading: str, as_json: bool) -> None:
    """Re-score everything and re-tier: archive what decayed, queue what froze."""
    with c.brain() as b:
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
    """Load an export from SRC (refuses, changing nothing, if an id already exists)."""
    from rich.progress import Progress

    from .engine import CommittedInterrupt

    with c.brain() as b:
        try:
            if as_json:
                counts = b.import_(src, namespace=into)
            else:
                console = err._get()  # type: ignore[attr-defined]
                with Progress(console=console, transient=True) as bar:
                    task = bar.add_task("importing", total=None)

                    def step(done: int, total: int) -> None:
                        bar.update(task, completed=done, total=total)

                    counts = b.import_(src, namespace=into, progress=step)
        except CommittedInterrupt as exc:  # Ctrl-C after the commit: the import stands
            counts = exc.counts
            err.print(
                "interrupted after the import had committed: everything below is stored; the "
                "text index is rebuilt when the store is next opened"
            )
    if as_json:
        emit_json(counts)
    else:
        out.print(
            f"imported {counts['nodes']} memories, {counts['edges']} edges, "
            f"{counts['audit']} audit entries"
        )


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
