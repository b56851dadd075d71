"""Moving memories in and out: export, import, embed, ingest."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from ..errors import InvalidInput, NoStore
from .app import main
from .base import (
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    Ctx,
    _fail,
    emit_json,
    err,
    handle_errors,
    json_option,
    out,
    pass_ctx,
)

if TYPE_CHECKING:
    from ..engine import Brain


@main.command()
@click.argument("dest", type=click.Path(dir_okay=False, writable=True))
@click.option("--all-namespaces", is_flag=True, help="Export every namespace in the store.")
@pass_ctx
@handle_errors
def export(c: Ctx, dest: str, all_namespaces: bool) -> None:
    """Write the namespace to DEST as JSON Lines (lossless; '-' for stdout)."""
    with c.brain(create=False, only_reads=True) as b:
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

    from ..embeddings import from_env

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
    from ..ingest import ingest

    if dry_run:
        try:
            with c.brain(create=False, only_reads=True) as b:
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
