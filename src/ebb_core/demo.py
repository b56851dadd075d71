"""The narrated demo: ``ebb demo`` or ``python -m ebb_core.demo``. Deterministic (fixed clock).

It builds the fictional seed graph in a temporary store, runs ``maintain``, prints the ranking
table (raw links vs recency-weighted activation), then narrates a recall with its reasons, a
reinforce that changes the ranking, and the forget → review queue → approve flow.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from . import seed
from .clock import FixedClock
from .engine import Brain
from .kuzu_store import KuzuStore
from .model import Node, Tier


def ranking(brain: Brain) -> list[dict[str, Any]]:
    """Every memory (below frozen and frozen alike) ranked by activation now."""
    nodes: list[Node] = [n for batch in brain.store.scan_nodes(brain.namespace) for n in batch]
    scored = sorted(((brain.activation(n.id), n) for n in nodes), key=lambda p: (-p[0], p[1].id))
    return [
        {
            "id": n.id,
            "raw_links": n.degree,
            "activation": round(act, 3),
            "rank": rank,
            "tier": int(n.tier),
        }
        for rank, (act, n) in enumerate(scored, 1)
    ]


def _table(rows: list[dict[str, Any]], title: str) -> Table:
    t = Table(title=title)
    for col, justify in (
        ("node", "left"),
        ("raw links", "right"),
        ("activation", "right"),
        ("rank", "right"),
        ("tier", "right"),
    ):
        t.add_column(col, justify=justify)  # type: ignore[arg-type]
    labels = {1: "1 hot", 2: "2 warm", 3: "3 cold", 4: "4 frozen"}
    for r in rows:
        t.add_row(
            r["id"],
            str(r["raw_links"]),
            f"{r['activation']:.3f}",
            str(r["rank"]),
            labels[r["tier"]],
        )
    return t


def run(*, as_json: bool = False, path: str | None = None, console: Console | None = None) -> None:
    """Run the demo; with ``as_json`` print only the ranking table as JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(path) if path else Path(tmp) / "demo.kuzu"
        clock = FixedClock(seed.NOW)
        with Brain(KuzuStore(db), namespace="demo", clock=clock) as brain:
            if brain.stats().nodes == 0:
                seed.build(brain)
            brain.maintain()
            rows = ranking(brain)
            if as_json:
                print(json.dumps(rows, indent=2))
                return
            _narrate(brain, clock, rows, console or Console(highlight=False, soft_wrap=True))


def _narrate(brain: Brain, clock: FixedClock, rows: list[dict[str, Any]], c: Console) -> None:
    say = c.print
    say("[bold]Ebb demo[/] — Northwind Studio's pricing story, on an embedded Kùzu store.")
    say(
        f"It is {clock.now():%Y-%m-%d}. Half-life {brain.config.half_life_days:g} days. "
        "Activation = Σ edge weight × decay since last reinforced + read bonus + one damped hop "
        "from neighbours.\n"
    )
    shown = [r for r in rows if not r["id"].startswith("note:analysis-")]
    analysis = [r for r in rows if r["id"].startswith("note:analysis-")]
    say(_table(shown, "Ranking after maintain"))
    top = max(analysis, key=lambda r: r["activation"])
    say(
        f"note:analysis-* (x{len(analysis)}): 1 raw link each, activation ≤ "
        f"{top['activation']:.3f}, {_tiers(r['tier'] for r in analysis)}\n"
    )
    by_id = {r["id"]: r for r in rows}
    seat, outcome = by_id["decision:seat-pricing"], by_id["decision:outcome-pricing"]
    say(
        f"decision:seat-pricing has the most links in the graph ({seat['raw_links']}) and ranks "
        f"#{seat['rank']}; decision:outcome-pricing has {outcome['raw_links']} fresh ones and "
        f"ranks #{outcome['rank']}. Raw count lost; recency won.\n"
    )

    say('[bold]1. Recall[/] — an agent asks: "how do we price for Acme?"')
    for i, hit in enumerate(brain.recall("how do we price for Acme?", k=3), 1):
        say(f"  {i}. {hit.id}  score {hit.score:.3f}\n     why: {hit.why.summary}")
    say("  Recall reinforced what it returned: their read clocks reset.\n")

    say("[bold]2. Reinforce[/] — a week later the team keeps coming back to the Q1 churn note.")
    clock.advance(days=7)
    before = {r["id"]: r["rank"] for r in ranking(brain)}
    brain.reinforce("note:q1-churn")
    brain.connect("note:q1-churn", "decision:outcome-pricing", kind="motivated")
    after = {r["id"]: r["rank"] for r in ranking(brain)}
    say(
        f"  note:q1-churn moved from rank #{before['note:q1-churn']} to "
        f"#{after['note:q1-churn']} (reinforced, and linked to the decision it motivated).\n"
    )

    say("[bold]3. Forget → review queue → approve[/]")
    brain.forget("fact:acme-renewal", "Acme moved to monthly renewals", actor="agent")
    queue = brain.review_queue()
    say(
        f"  The agent forgot fact:acme-renewal. Nothing is deleted: the review queue now holds "
        f"{len(queue)} memories ({len(queue) - 1} decayed analysis notes and the forgotten fact)."
    )
    for item in queue[-2:]:
        say(f"    {item.id}: {item.reason}")
    deleted = brain.approve_deletion(
        ["note:analysis-01"], approved_by="maya", note="obsolete per-seat analysis"
    )
    restored = brain.restore("fact:acme-renewal", actor="maya")
    say(
        f"  Maya approves deleting {deleted[0]} and restores {restored.id} (tier "
        f"{restored.tier.label})."
    )
    say("  The audit log keeps every step, including the deleted memory's JSON:")
    for e in brain.audit_log(3):
        tiers = (
            f"{e.from_tier.label if e.from_tier else '-'} → {e.to_tier.label if e.to_tier else '-'}"
        )
        say(f"    #{e.seq} {e.action:<8} {e.node_id:<22} {tiers:<14} by {e.actor}")
    say(
        '\nTry it yourself: ebb remember "..." ; ebb recall "..." ; ebb review ; '
        "ebb approve ID --by NAME"
    )


def _tiers(tiers: Iterable[int]) -> str:
    """``tier 4 (frozen, waiting for review)``, or ``tiers 3, 4 (cold, frozen)`` for several."""
    found = sorted(set(tiers))
    labels = ", ".join(Tier(t).label for t in found)
    if found == [Tier.FROZEN]:
        labels += ", waiting for review"
    word = "tier" if len(found) == 1 else "tiers"
    return f"{word} {', '.join(str(t) for t in found)} ({labels})"


if __name__ == "__main__":  # pragma: no cover
    run()
