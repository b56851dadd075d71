"""Commands that read without changing anything: recall, history, neighbors, get/show, list,
top, namespaces."""

from __future__ import annotations

import json
from typing import Any

import click

from .app import main, plain_results
from .base import Ctx, Table, _dump, _short, emit_json, handle_errors, json_option, out, pass_ctx


def _node_table(rows: list[Any]) -> Table:
    """``ebb list``'s table: one memory a row."""
    t = Table(show_lines=False)
    for col in ("id", "kind", "tier", "text"):
        t.add_column(col, overflow="fold")
    for n in rows:
        t.add_row(n.id, n.kind, n.tier.label + (" (pinned)" if n.pinned else ""), _short(n.text))
    return t


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
    plain_results()
    with c.brain(create=False, only_reads=no_reinforce) as b:
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
@click.argument("id_", metavar="ID")
@json_option
@pass_ctx
@handle_errors
def history(c: Ctx, id_: str, as_json: bool) -> None:
    """List every version of memory ID's text, oldest first (the last is current)."""
    with c.brain(create=False, only_reads=True) as b:
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
@click.option("--limit", default=20, show_default=True)
@json_option
@pass_ctx
@handle_errors
def neighbors(c: Ctx, id_: str, limit: int, as_json: bool) -> None:
    """Memories linked to ID, strongest (decayed) link first."""
    with c.brain(create=False, only_reads=True) as b:
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
    with c.brain(create=False, only_reads=True) as b:
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
    with c.brain(create=False, only_reads=True) as b:
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
    with c.brain(create=False, only_reads=True) as b:
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
    with c.brain(create=False, only_reads=True) as b:
        names = b.namespaces()
    if as_json:
        emit_json(names)
    elif not names:
        out.print("no namespaces yet (ebb remember TEXT creates one)")
    else:
        for name in names:
            out.print(name, markup=False)
