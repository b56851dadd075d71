"""Knowledge updates: does recall rank a current fact above the stale fact it replaced?

A generated set of cases, each a fact that was replaced by a newer one. The stale fact is the
better connected: 6-11 old memories reference it; the current fact has 1-3 recent ones. Both
share the query's words, and so do some of the referencing notes. The replacement is recorded
explicitly, as the API allows (``remember(..., supersedes=[old])`` for half the cases,
``Brain.supersede(old, new)`` for the rest); a store also holds unrelated filler memories so
that tiers mean something. After ``maintain`` every case's question is recalled at depth 1, 2
and 3 (and with the default depth): once with ``reinforce=False``, and in a second replay after
three rounds of the same questions with reinforcement between them (a day apart).

Reports, per depth and mode: current-above-stale (the current fact is returned and ranks above
the stale one, or the stale one is not returned) and current-in-top-5.

    python bench/knowledge_update.py                  # 60 cases, Kùzu, a table
    python bench/knowledge_update.py --cases 200 --seed 7 --json
    python bench/knowledge_update.py --backend neo4j  # NEO4J_URI or EBB_TEST_NEO4J_URI
    python bench/knowledge_update.py --no-supersede   # the facts without the explicit link
    python bench/knowledge_update.py --embedder minilm  # with vectors fused into recall
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ebb_core import Brain, Config, FixedClock
from ebb_core.embeddings import resolve
from locomo import CachedEmbedder, log, open_brain, parse_settings

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)
DEPTHS: tuple[int | None, ...] = (1, 2, 3, None)
ROUNDS = 3

SUBJECTS = [
    "billing",
    "search",
    "payments",
    "onboarding",
    "analytics",
    "reporting",
    "mobile",
    "checkout",
    "inventory",
    "shipping",
    "support",
    "marketing",
    "hiring",
    "security",
    "storage",
    "logging",
    "alerting",
    "pricing",
    "deployment",
    "backup",
    "identity",
    "messaging",
    "scheduling",
    "invoicing",
    "catalog",
    "recommendations",
    "compliance",
    "docs",
    "forecasting",
    "routing",
]
ASPECTS = [
    "database",
    "vendor",
    "framework",
    "owner",
    "region",
    "cadence",
    "budget",
    "format",
    "provider",
    "protocol",
    "library",
    "dashboard",
    "queue",
    "cluster",
    "contract",
    "deadline",
    "policy",
    "tool",
    "language",
    "channel",
]


def pseudo_words(n: int, rng: random.Random) -> list[str]:
    """Distinct made-up words (values nobody else mentions)."""
    consonants, vowels = "bcdfghklmnprstvz", "aeiou"
    out: set[str] = set()
    while len(out) < n:
        out.add(
            "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.randint(2, 4)))
        )
    return sorted(out)


@dataclass(frozen=True)
class Case:
    topic: str  # "billing database"
    stale_id: str
    current_id: str
    question: str


def generate(
    brain: Brain, clock: FixedClock, cases: int, fillers: int, seed: int, supersede: bool
) -> list[Case]:
    """Write the cases (and filler memories) into ``brain``, oldest events first."""
    rng = random.Random(seed)
    topics = rng.sample([(s, a) for s in SUBJECTS for a in ASPECTS], cases)
    values = pseudo_words(2 * cases + fillers * 3, rng)
    events: list[tuple[datetime, int, dict[str, Any]]] = []
    out = []
    for n, (subject, aspect) in enumerate(topics):
        old_value, new_value = values[2 * n], values[2 * n + 1]
        stale_at = NOW - timedelta(days=rng.uniform(60, 200))
        current_at = NOW - timedelta(days=rng.uniform(2, 25))
        stale_id, current_id = f"fact:{subject}-{aspect}-{n}-old", f"fact:{subject}-{aspect}-{n}"
        events.append(
            (
                stale_at,
                0,
                {
                    "op": "remember",
                    "id": stale_id,
                    "text": f"The {subject} {aspect} is {old_value}.",
                },
            )
        )
        for r in range(rng.randint(6, 11)):
            at = stale_at + timedelta(days=rng.uniform(0.5, 40))
            events.append(
                (
                    at,
                    1,
                    {
                        "op": "remember",
                        "id": f"note:{n}-old-{r}",
                        "links": [stale_id],
                        "text": rng.choice(
                            [
                                f"Meeting: reviewed the {subject} {aspect} again ({old_value}).",
                                f"Notes on {old_value} for {subject}: works well so far.",
                                f"Asked the team about {subject} costs; {old_value} is fine.",
                            ]
                        ),
                    },
                )
            )
        mentions_old = rng.random() < 0.5
        text = f"The {subject} {aspect} is now {new_value}" + (
            f", replacing {old_value}." if mentions_old else "."
        )
        style = "remember" if rng.random() < 0.5 else "supersede"
        events.append(
            (
                current_at,
                2,
                {
                    "op": "remember",
                    "id": current_id,
                    "text": text,
                    "supersedes": [stale_id] if supersede and style == "remember" else [],
                },
            )
        )
        if supersede and style == "supersede":
            events.append(
                (
                    current_at + timedelta(minutes=5),
                    3,
                    {"op": "supersede", "old": stale_id, "new": current_id},
                )
            )
        for r in range(rng.randint(1, 3)):
            at = current_at + timedelta(days=rng.uniform(0.1, 2))
            events.append(
                (
                    at,
                    4,
                    {
                        "op": "remember",
                        "id": f"note:{n}-new-{r}",
                        "links": [current_id],
                        "text": f"Started on {new_value} for the {subject} work.",
                    },
                )
            )
        out.append(
            Case(
                f"{subject} {aspect}",
                stale_id,
                current_id,
                rng.choice(
                    [
                        f"What is the {subject} {aspect}?",
                        f"Which {aspect} does {subject} use?",
                        f"{subject} {aspect}",
                    ]
                ),
            )
        )
    filler_ids: list[str] = []
    for f in range(fillers):
        at = NOW - timedelta(days=rng.uniform(0, 220))
        words = rng.sample(values[2 * cases :], 3)
        events.append(
            (
                at,
                5,
                {
                    "op": "filler",
                    "id": f"note:filler-{f}",
                    "text": f"Filler about {' '.join(words)} and {rng.choice(SUBJECTS)}.",
                },
            )
        )
    events.sort(key=lambda e: (e[0], e[1]))
    for at, _, e in events:
        clock.set(at)
        if e["op"] == "filler":
            links = rng.sample(filler_ids, min(2, len(filler_ids))) if filler_ids else []
            brain.remember(e["text"], id=e["id"], links=links)
            filler_ids.append(e["id"])
        elif e["op"] == "supersede":
            brain.supersede(e["old"], e["new"])
        else:
            kwargs: dict[str, Any] = {"id": e["id"], "links": e.get("links", [])}
            if e.get("supersedes"):
                kwargs["supersedes"] = e["supersedes"]
            brain.remember(
                e["text"], kind="fact" if e["id"].startswith("fact:") else "note", **kwargs
            )
    clock.set(NOW)
    brain.maintain()
    return out


def ask(brain: Brain, case: Case, depth: int | None, reinforce: bool) -> list[str]:
    kwargs: dict[str, Any] = {"k": 10, "reinforce": reinforce}
    if depth is not None:
        kwargs["depth"] = depth
    return [h.id for h in brain.recall(case.question, **kwargs)]


def score(ranked: Sequence[str], case: Case) -> tuple[bool, bool]:
    """(current above stale, current in the top 5)."""
    if case.current_id not in ranked:
        return False, False
    cur = ranked.index(case.current_id)
    above = case.stale_id not in ranked or cur < ranked.index(case.stale_id)
    return above, cur < 5


def run(cfg: Config, backend: str, work: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    # one model for every replay, each text embedded once (the replays share their texts)
    inner = resolve(args.embedder) if args.embedder else None
    emb = CachedEmbedder(inner) if inner is not None else None
    for reinforce in (False, True):
        for depth in DEPTHS:
            clock = FixedClock(NOW)
            name = f"ku-{'r' if reinforce else 'n'}{depth}"
            with open_brain(backend, work, name, cfg, clock, emb) as brain:
                cases = generate(
                    brain, clock, args.cases, args.fillers, args.seed, not args.no_supersede
                )
                if reinforce:  # the same questions, day after day, each returning its hits
                    for _ in range(ROUNDS):
                        clock.advance(days=1)
                        for case in cases:
                            ask(brain, case, depth, True)
                    clock.advance(days=1)
                results = [score(ask(brain, c, depth, False), c) for c in cases]
            above = sum(a for a, _ in results) / len(results)
            top5 = sum(t for _, t in results) / len(results)
            rows.append(
                {
                    "depth": "default" if depth is None else depth,
                    "reinforced": reinforce,
                    "current_above_stale": round(above, 4),
                    "current_in_top5": round(top5, 4),
                    "cases": len(results),
                }
            )
            log(f"depth {depth} reinforce {reinforce}: above {above:.3f} top5 {top5:.3f}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--backend", choices=["kuzu", "neo4j"], default="kuzu")
    ap.add_argument("--cases", type=int, default=60)
    ap.add_argument("--fillers", type=int, default=400)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Config field (repeatable)",
    )
    ap.add_argument(
        "--no-supersede",
        action="store_true",
        help="record no replacement: measure what decay alone does",
    )
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--embedder",
        default="",
        help="recall by meaning too (e.g. minilm): vectors make old "
        "and new versions look alike, so supersession must still decide",
    )
    args = ap.parse_args()
    cfg = replace(Config(), **parse_settings(args.set))
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        rows = run(cfg, args.backend, Path(tmp), args)
    if args.json:
        print(
            json.dumps(
                {
                    "backend": args.backend,
                    "cases": args.cases,
                    "seed": args.seed,
                    "supersede": not args.no_supersede,
                    "results": rows,
                },
                indent=2,
            )
        )
        return
    print(
        f"knowledge updates on {args.backend}: {args.cases} cases, seed {args.seed}"
        + ("" if not args.no_supersede else ", no supersedes links")
    )
    print(f"{'depth':>8} {'reinforced':>10} {'current>stale':>14} {'current@5':>10}")
    for r in rows:
        print(
            f"{r['depth']!s:>8} {r['reinforced']!s:>10} {r['current_above_stale']:>14.3f} "
            f"{r['current_in_top5']:>10.3f}"
        )


if __name__ == "__main__":
    main()
