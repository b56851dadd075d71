"""Keeping the store in shape: maintain, the review queue and approvals, stats, the audit log."""

from __future__ import annotations

import click

from ..clock import Clock
from .app import main, plain_results
from .base import (
    Ctx,
    Table,
    _clock_at,
    _short,
    emit_json,
    err,
    handle_errors,
    json_option,
    out,
    pass_ctx,
)


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
    with c.brain(clock, create=False, only_reads=True) as b:
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
    with c.brain(create=False, only_reads=True) as b:
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
    plain_results()
    with c.brain(create=False, only_reads=True) as b:
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
    with c.brain(create=False, only_reads=True) as b:
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
