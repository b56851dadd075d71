"""The embedded store's health: doctor and repair."""

from __future__ import annotations

import os
from typing import Any

import click

from ..errors import InvalidInput
from .app import main
from .base import EXIT_STORAGE, Ctx, emit_json, handle_errors, json_option, out, pass_ctx


def _kuzu_path(c: Ctx) -> str:
    from ..backends import DEFAULT_PATH

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
    from ..repair import diagnose

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
    from ..repair import repair as run_repair

    report = run_repair(_kuzu_path(c), into=into)
    if as_json:
        emit_json(report.as_dict())
    else:
        out.print(f"ebb repair · {report.path}")
        _print_report(report)
        if report.damaged_copy:
            out.print(f"the original file is kept at {report.damaged_copy}")
        if report.salvaged_to and report.salvaged_to != report.path:
            out.print(f"the salvaged store is at {report.salvaged_to} (use it with --db)")
        out.print("repaired" if report.ok else "some problems remain (see above)")
    if not report.ok:
        raise SystemExit(EXIT_STORAGE)
