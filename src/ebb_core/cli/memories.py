"""Commands that write memories and links: remember, connect, supersede, reinforce, forget,
restore, pin, unpin."""

from __future__ import annotations

import json
import sys

import click

from ..errors import InvalidInput
from .app import main
from .base import (
    Ctx,
    _clock_at,
    _when,
    at_option,
    emit_json,
    handle_errors,
    json_option,
    out,
    pass_ctx,
)


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
