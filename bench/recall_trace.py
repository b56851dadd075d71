"""Where a Neo4j recall's time goes, statement by statement: each of the store's reads and
writes (``_read``, ``_run``, ``_unit``) and the driver's ``BEGIN`` and ``COMMIT`` timed by
kind (full-text, second hop and read-ahead, the write...), per recall, on a server that
already holds a namespace (``NEO4J_URI``; see ``neo4j_reuse.py``). Prints, every 50
recalls, the group's p50 / p95 and its costliest kinds (with the time of day, to set beside
the server's log), then a table of every kind: statements a recall, p50 / p95 of one, and
the time a recall spends in it.

    export NEO4J_URI=$(scripts/neo4j-test-server uri)
    python bench/recall_trace.py --ns big --ops 300 --at-hours 3 [--no-reinforce]

Run it against an older checkout with ``PYTHONPATH=OLD/src`` (the store's internals it times
are the same since fcebe90).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import neo4j

import synth
from bench_core import pct
from ebb_core import Brain, FixedClock
from ebb_core.backends import open_store
from ebb_core.neo4j.session import Neo4jSession

#: A statement's kind, by a piece of its text (the first that matches).
KINDS = (
    ("queryNodes", "full-text"),
    ("UNWIND $ids AS i MATCH (s:Memory {ns: $ns, id: i}) WITH s,", "links (hop, read-ahead)"),
    ("MATCH (a:Audit)", "last audit seq"),
    ("Meta", "setting"),
)
GROUP = 50

Log = list[tuple[str, float]]


def kind(query: str) -> str:
    text = " ".join(query.split())
    return next((name for key, name in KINDS if key in text), text[:40])


def _timed(
    owner: Any, name: str, label: Callable[[tuple[Any, ...]], str], log: Log, depth: list[int]
) -> None:
    """Wrap ``owner.name`` to append ``(label, ms)`` to ``log`` for each call made outside
    the other wrappers sharing ``depth`` (a ``_read`` is logged once, not again as the
    ``_unit`` it runs in)."""
    real = getattr(owner, name)

    def wrapper(self: Any, *a: Any, **k: Any) -> Any:
        depth[0] += 1
        t0 = time.perf_counter()
        try:
            return real(self, *a, **k)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                log.append((label(a), (time.perf_counter() - t0) * 1e3))

    setattr(owner, name, wrapper)


def instrument(log: Log) -> None:
    _timed(neo4j.Session, "begin_transaction", lambda a: "BEGIN", log, [0])
    _timed(neo4j.Transaction, "commit", lambda a: "COMMIT", log, [0])
    store = [0]  # the store's own calls: the outermost one is logged
    _timed(Neo4jSession, "_read", lambda a: kind(a[0]), log, store)
    _timed(Neo4jSession, "_run", lambda a: kind(a[0]), log, store)
    _timed(Neo4jSession, "_unit", lambda a: getattr(a[0], "__qualname__", "?"), log, store)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--ns", default="big")
    ap.add_argument("--ops", type=int, default=300)
    ap.add_argument("--at-hours", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--warmup", type=int, default=10, help="recalls first, not reinforcing")
    ap.add_argument("--no-reinforce", action="store_true")
    args = ap.parse_args()
    log: Log = []
    instrument(log)
    clock = FixedClock(synth.NOW + timedelta(hours=args.at_hours))
    brain = Brain(open_store("neo4j"), namespace=args.ns, clock=clock, embedder=False)
    qs = synth.queries(args.ops + args.warmup, seed=args.seed)
    for q in qs[: args.warmup]:
        brain.recall(q, k=10, reinforce=False)
    per: dict[str, list[float]] = defaultdict(list)
    group: dict[str, float] = defaultdict(float)
    totals: list[float] = []
    for q in qs[args.warmup :]:
        clock.advance(seconds=1)
        log.clear()
        t0 = time.perf_counter()
        brain.recall(q, k=10, reinforce=not args.no_reinforce)
        totals.append((time.perf_counter() - t0) * 1e3)
        for name, ms in log:
            per[name].append(ms)
            group[name] += ms
        if len(totals) % GROUP == 0:
            g = totals[-GROUP:]
            top = sorted(group.items(), key=lambda x: -x[1])[:4]
            parts = " ".join(f"{n}={ms / GROUP:.1f}" for n, ms in top)
            print(
                f"{time.strftime('%H:%M:%S', time.gmtime())} recalls {len(totals) - GROUP + 1}-"
                f"{len(totals)}: p50 {pct(g, 50):.1f} p95 {pct(g, 95):.1f} ms | {parts}",
                flush=True,
            )
            group.clear()
    brain.close()
    n = len(totals)
    print(f"{n} recalls: p50 {pct(totals, 50):.1f} ms, p95 {pct(totals, 95):.1f} ms")
    print(f"{'kind':<44} {'a recall':>8} {'p50':>7} {'p95':>7} {'ms/recall':>9}")
    for name, v in sorted(per.items(), key=lambda x: -sum(x[1])):
        print(
            f"{name[:44]:<44} {len(v) / n:8.2f} {pct(v, 50):7.2f} {pct(v, 95):7.2f} "
            f"{sum(v) / n:9.2f}"
        )


if __name__ == "__main__":
    main()
