"""Where a Kùzu remember's time goes, call by call, in bench_core's own sequence.

Runs what ``bench_core.py`` runs before its remembers (import, maintain, the recalls of its
queries and of its common-word queries, same clock steps), then its ``--ops`` remembers with
every statement sent to Kùzu timed (wall and this process's CPU) and named by its query text.
Prints, as a table and JSON: the remember p50/p95/max, what the slowest calls (the ones that
set the p95: with 200 remembers, the 10 slowest) spent in each kind of statement, in the
checkpoint and in Python outside Kùzu, against the same for the median calls; and the WAL size
before each slow call.

    python bench/remember_profile.py --size 1000000 --ops 200 --workdir /tmp/w
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import synth
from ebb_core import Brain, FixedClock
from ebb_core.backends import open_store
from ebb_core.kuzu_store import KuzuStore


class _Timed:
    """A Kùzu connection whose ``execute`` calls are timed and named by their query text."""

    def __init__(self, conn: Any, sink: list[tuple[str, float, float]]) -> None:
        self._conn, self._sink = conn, sink
        self._names: dict[int, str] = {}

    def prepare(self, query: str) -> Any:
        stmt = self._conn.prepare(query)
        self._names[id(stmt)] = query
        return stmt

    def execute(self, query: Any, params: Any = None) -> Any:
        name = query if isinstance(query, str) else self._names.get(id(query), "?prepared")
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return self._conn.execute(query, params or {})
        finally:
            self._sink.append((_label(name), time.perf_counter() - t0, time.process_time() - c0))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _label(query: str) -> str:
    q = " ".join(query.split())
    if "recent_links = $l" in q:
        return "SET recent_links (older end)"
    if "RETURN n.recent_links" in q:
        return "read recent_links"
    if q.startswith("CREATE (n:Memory"):
        return "CREATE Memory"
    if "CREATE (a)-[:Link" in q:
        return "CREATE Link"
    for head in ("BEGIN", "COMMIT", "CHECKPOINT", "ROLLBACK"):
        if q.startswith(head):
            return head
    return q[:70]


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--ops", type=int, default=200)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--slow", type=int, default=10, help="slowest calls to break down")
    ap.add_argument(
        "--then",
        nargs="*",
        default=[],
        choices=["checkpoint", "freeze"],
        help="after the remembers: a forced checkpoint / gc.freeze(), then --ops more each",
    )
    args = ap.parse_args()
    work = Path(args.workdir)
    data = work / f"graph-{args.size}.jsonl"
    db = work / f"profile-{args.size}-{time.time_ns()}.kuzu"
    store = open_store("kuzu", db)
    assert isinstance(store, KuzuStore)  # its checkpoint is forced below
    clock = FixedClock(synth.NOW)
    ns = f"bench-{args.size}"
    brain = Brain(store, namespace=ns, clock=clock)
    try:
        t0 = time.perf_counter()
        brain.import_(data, namespace=ns)
        print(f"  import {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        clock.advance(hours=1)
        brain.maintain()
        qs = synth.queries(args.ops)
        for q in qs[:10]:
            brain.recall(q, k=10, reinforce=False)
        live: list[str] = []
        for q in qs:
            clock.advance(seconds=30)
            live.extend(h.id for h in brain.recall(q, k=10)[:2])
        for q in synth.common_queries(args.ops):
            clock.advance(seconds=30)
            brain.recall(q, k=10)
        live = list(dict.fromkeys(live)) or [n.id for n in brain.top(10)]
        calls = _remembers(brain, store, clock, live, qs, args.ops, str(db) + ".wal")
        for step in args.then:
            if step == "checkpoint":
                store._maybe_checkpoint(force=True)
            else:
                gc.collect()
                gc.freeze()
            more = _remembers(brain, store, clock, live, qs, args.ops, str(db) + ".wal")
            _report(more, args, f"after {step}")
    finally:
        brain.close()
        for leftover in (db, Path(f"{db}.wal")):
            leftover.unlink(missing_ok=True)
    _report(calls, args, "bench_core's sequence")


_GC = {"t": 0.0, "start": 0.0, "full": 0}


def _gc_watch(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _GC["start"] = time.perf_counter()
    else:
        _GC["t"] += time.perf_counter() - _GC["start"]
        _GC["full"] += info["generation"] == 2


def _remembers(
    brain: Brain, store: Any, clock: FixedClock, live: list[str], qs: list[str], ops: int, wal: str
) -> list[dict[str, Any]]:
    calls = []
    if _gc_watch not in gc.callbacks:
        gc.callbacks.append(_gc_watch)
    for i in range(ops):
        clock.advance(seconds=30)
        links = list(dict.fromkeys([live[i % len(live)], live[(i * 7) % len(live)]]))
        sink: list[tuple[str, float, float]] = []
        if not isinstance(store._conn, _Timed):  # replaced after large Arrow tables
            store._conn = _Timed(store._conn, sink)
        store._conn._sink = sink
        wal_before = os.stat(wal).st_size if os.path.exists(wal) else 0
        _GC["t"] = _GC["full"] = 0
        t0, c0 = time.perf_counter(), time.process_time()
        brain.remember(f"benchmark memory {i} about {qs[i % len(qs)]}", kind="note", links=links)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        parts: dict[str, list[float]] = {}
        for name, w, c in sink:
            p = parts.setdefault(name, [0.0, 0.0, 0])
            p[0] += w * 1000
            p[1] += c * 1000
            p[2] += 1
        kuzu = sum(p[0] for p in parts.values())
        parts["python's gc"] = [_GC["t"] * 1000, 0.0, _GC["full"]]
        parts["python (outside Kùzu, gc aside)"] = [wall * 1000 - kuzu - _GC["t"] * 1000, 0.0, 0]
        calls.append(
            {
                "i": i,
                "ms": wall * 1000,
                "cpu_ms": cpu * 1000,
                "wal_kb": wal_before >> 10,
                "parts": parts,
            }
        )
    return calls


def _report(calls: list[dict[str, Any]], args: argparse.Namespace, title: str) -> None:
    ms = [c["ms"] for c in calls]
    by_time = sorted(calls, key=lambda c: -c["ms"])
    slow = by_time[: args.slow]
    mid = by_time[len(by_time) // 2 - 5 : len(by_time) // 2 + 5]

    def mean_parts(group: list[dict[str, Any]]) -> dict[str, float]:
        out: dict[str, float] = {}
        for c in group:
            for name, p in c["parts"].items():
                out[name] = out.get(name, 0.0) + p[0] / len(group)
        return out

    slow_parts, mid_parts = mean_parts(slow), mean_parts(mid)
    print(
        f"{title}: remembers {len(ms)}: p50 {pct(ms, 50):.2f} ms, p95 {pct(ms, 95):.2f} ms, "
        f"max {max(ms):.1f} ms; CPU p50 {pct([c['cpu_ms'] for c in calls], 50):.2f} ms; "
        f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10} MB"
    )
    print(f"{'statement':70s} {'slowest ' + str(len(slow)):>12s} {'median 10':>10s}  (mean ms)")
    for name in sorted(slow_parts, key=lambda k: -slow_parts[k]):
        print(f"{name:70s} {slow_parts[name]:12.2f} {mid_parts.get(name, 0.0):10.2f}")
    print("slowest calls:")
    for c in slow:
        top = sorted(c["parts"].items(), key=lambda kv: -kv[1][0])[:4]
        desc = ", ".join(f"{k[:30]} {v[0]:.1f}/{v[1]:.1f}" for k, v in top)
        full = c["parts"]["python's gc"][2]
        desc += f"; full gc {full}"
        print(
            f"  #{c['i']:4d} {c['ms']:7.1f} ms (CPU {c['cpu_ms']:.1f}) wal {c['wal_kb']} kB: {desc}"
        )
    print(
        json.dumps(
            {
                "p50": pct(ms, 50),
                "p95": pct(ms, 95),
                "max": max(ms),
                "slow_parts": slow_parts,
                "median_parts": mid_parts,
                "ms": [round(x, 2) for x in ms],
            }
        )
    )


if __name__ == "__main__":
    main()
