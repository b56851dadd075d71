"""A fictional demo graph (Northwind Studio's pricing story) that shows recency beating raw links.

``decision:seat-pricing`` has the most links in the graph (11) but they are old; the fresh
``decision:outcome-pricing`` has three. Ten old ``note:analysis-*`` notes hang off the old
decision and decay into the frozen tier.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone

from .engine import Brain

#: The demo's fixed "now".
NOW = datetime(2026, 6, 1, 9, 0, tzinfo=timezone.utc)


def days_ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


def build(brain: Brain) -> None:
    """Write the seed graph through the public API with a clock moved to each event's time."""
    clock = brain.clock
    set_time = getattr(clock, "set", None)
    if set_time is None:
        raise TypeError("the seed needs a FixedClock so its timeline is deterministic")

    def at(days: float) -> None:
        set_time(days_ago(days))

    _last_autumn(brain, at)
    _this_spring(brain, at)
    set_time(NOW)


def _last_autumn(brain: Brain, at: Callable[[float], None]) -> None:
    """Last autumn: per-seat pricing and the analysis that backed it."""
    at(240)
    brain.remember(
        "Maya Chen, head of product at Northwind Studio", kind="person", id="person:maya"
    )
    brain.remember("Ravi Patel, finance lead", kind="person", id="person:ravi")
    brain.remember("Acme Corp, our largest client (120 seats)", kind="client", id="client:acme")
    brain.remember("Globex, mid-size client on the team plan", kind="client", id="client:globex")
    at(230)
    brain.remember(
        "Decision: price per seat, $40 per user per month, annual billing",
        kind="decision",
        id="decision:seat-pricing",
    )
    for i, topic in enumerate(_TOPICS, 1):
        at(220 - i)
        brain.remember(
            f"Pricing analysis {i:02d}: {topic} for per-seat pricing",
            kind="note",
            id=f"note:analysis-{i:02d}",
            links=["decision:seat-pricing"],
            link_kind="supports",
        )
    at(200)
    brain.remember(
        "Kickoff meeting for the 2025 pricing review",
        kind="meeting",
        id="meeting:pricing-kickoff",
        links=["person:maya", "person:ravi"],
    )
    brain.remember(
        "Acme renews every March; renewal owner is Ravi",
        kind="fact",
        id="fact:acme-renewal",
        links=["client:acme", "person:ravi"],
    )


#: what the ten old analysis notes are about
_TOPICS = [
    "seat counts by client",
    "discount bands",
    "competitor seat prices",
    "churn vs seat count",
    "annual vs monthly billing",
    "seat growth forecast",
    "sales cycle by plan",
    "support cost per seat",
    "margin by plan",
    "price sensitivity survey",
]


def _this_spring(brain: Brain, at: Callable[[float], None]) -> None:
    """This spring: churn, a pricing review, and a new decision that replaces the old one."""
    at(45)
    brain.remember(
        "Q1 churn note: small teams leave when seat prices rise",
        kind="note",
        id="note:q1-churn",
        links=["client:globex"],
    )
    at(6)
    brain.remember(
        "Pricing review meeting, May 2026: agreed to move to outcome-based pricing",
        kind="meeting",
        id="meeting:pricing-review",
        links=["person:maya", "person:ravi"],
    )
    at(4)
    brain.remember(
        "Decision: outcome-based pricing, billed per resolved ticket, replaces per-seat pricing",
        kind="decision",
        id="decision:outcome-pricing",
    )
    brain.connect(
        "decision:outcome-pricing", "meeting:pricing-review", kind="decided-in", weight=2.0
    )
    brain.connect("decision:outcome-pricing", "client:acme", kind="applies-to")
    brain.connect(
        "decision:outcome-pricing", "decision:seat-pricing", kind="supersedes", weight=1.5
    )
    at(1)
    brain.reinforce("decision:outcome-pricing")
