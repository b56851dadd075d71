"""The ``ebb`` command group: its options, and the commands imported only when they run."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, NoReturn

import click

from .base import Ctx, err, handle_errors, json_option, store_options


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
        "neo4j-bulk": (
            "ebb_core.cli.bulk",
            "neo4j_bulk",
            "Load an export into an EMPTY Neo4j database with neo4j-admin (offline, much faster).",
        ),
        "ui": (
            "ebb_core.ui.server",
            "ui_command",
            "Serve a local web page: review queue (approve, restore), graph, decay, log, stats.",
        ),
    }

    served = False  # a lazy command (a server) ran: the process ends the ordinary way
    one_shot = False  # run as `ebb` (main() reading sys.argv): see plain_results()

    def main(self, args: Any = None, *rest: Any, **kwargs: Any) -> Any:
        """Run the command line. Run as ``ebb`` (arguments from ``sys.argv``), a finished
        command ends the process at once, without the interpreter's teardown: freeing every
        module's objects cost a one-shot command 50-90 ms of CPU, more than its recall.

        Only once everything is done: output flushed, logging shut down, and no embedded
        store left open (one still open ends the ordinary way, which checkpoints it). Called
        with arguments (tests, ``CliRunner``, another program), it returns or raises as click
        does."""
        if args is not None or not kwargs.get("standalone_mode", True):
            return super().main(args, *rest, **kwargs)
        self.one_shot = True
        try:
            super().main(args, *rest, **kwargs)
        except SystemExit as exc:
            code = exc.code
        else:  # pragma: no cover - click's standalone mode always exits
            code = 0
        if self.served or not isinstance(code, (int, type(None))):
            raise SystemExit(code)
        _exit_now(code or 0)

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
        if cmd_name in self.lazy:  # a server: its threads and libraries end the ordinary way
            self.served = True
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


def plain_results() -> None:
    """Called by a command that only prints what it gets (``recall``, ``stats``) before it
    opens its store. In a process run as ``ebb`` (and ended by :func:`_exit_now`), its results
    are then built as the plain classes of :mod:`ebb_core.model_plain` rather than pydantic
    models: the same fields and JSON without importing pydantic and building its models
    (~0.15 s of a one-shot recall's CPU). Never once something has imported the models, and
    never for ``main([...])`` (tests, ``CliRunner``), ``ebb mcp`` or ``ebb ui``."""
    ctx = click.get_current_context(silent=True)
    group = ctx.find_root().command if ctx is not None else None
    mine = isinstance(group, _Commands) and group.one_shot and not group.served
    if mine and "ebb_core.model" not in sys.modules:
        import ebb_core

        ebb_core._plain_models = True


def _exit_now(code: int) -> NoReturn:
    """End a one-shot command's process with ``code`` once nothing is left to finish; else
    the ordinary ``SystemExit``."""
    if "ebb_core.kuzu.engine" in sys.modules:
        from ..kuzu.engine import open_stores

        if open_stores():
            raise SystemExit(code)
    if "logging" in sys.modules:  # its handlers (EBB_LOG_FILE, ...) are flushed at exit
        import logging

        logging.shutdown()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: nothing more can be said
        pass
    os._exit(code)


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

    from ..errors import ImportInterrupted, StoreRebuilt

    def show(message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
        if issubclass(category, (StoreRebuilt, ImportInterrupted)):
            err.print(f"[bold yellow]warning:[/] {message}", markup=True)
        else:
            default_show(message, category, *args, **kwargs)

    default_show = warnings.showwarning
    warnings.showwarning = show


@main.command()
@json_option
@click.option("--db", "demo_db", help="Keep the demo store at this path (default: a temp file).")
@handle_errors
def demo(as_json: bool, demo_db: str | None) -> None:
    """The narrated walkthrough on a fictional seed graph (deterministic)."""
    from ..demo import run

    run(as_json=as_json, path=demo_db)
