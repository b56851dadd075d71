"""Recall of two (or more) versions of Ebb on one Neo4j server, in lockstep: each version runs
in a worker process of its own (``--side NAME=SRC``, ``SRC`` put first on its ``PYTHONPATH``),
and the workers take turns on batches of the same queries, who goes first rotating from batch
to batch, so both meet the same server, page cache and load. Per side: p50/p95 of the whole
recall and its split into the read (up to the reinforcing write) and the write (the write
statements and the commit), the server's CPU over the side's turns, and how many queries
returned the same hits on every side.

    export EBB_NEO4J_STATE_DIR=/tmp/neo1m   # the server's state (its java.pid), for server CPU
    export NEO4J_URI=$(scripts/neo4j-test-server uri)
    python bench/recall_lockstep.py --ns big --ops 200 --at-hours 3 \
        --side main=/tmp/base/src --side new=src

Each side's clock moves one second per query and side (the sides of a query a second apart,
so each one's reinforcement moves a read clock and writes). ``--seed`` picks other rare-word
queries (a run reinforces memories that an earlier run of the same queries has reinforced).
Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def worker(ns: str) -> None:
    """Answer batches from stdin: {"q": [...], "s": [seconds after synth.NOW], "r": bool}."""
    import synth
    from ebb_core import Brain, FixedClock
    from ebb_core.backends import open_store

    clock = FixedClock(synth.NOW)
    brain = Brain(open_store("neo4j"), namespace=ns, clock=clock, embedder=False)
    store = brain.store
    first_write: list[float] = []
    for name in ("adjust", "update_nodes", "append_audit", "append_audit_columns"):
        fn = getattr(store, name, None)
        if fn is None:
            continue

        def timed(*a: Any, _fn: Any = fn, **k: Any) -> Any:
            if not first_write:
                first_write.append(time.perf_counter())
            return _fn(*a, **k)

        setattr(store, name, timed)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        out = []
        for q, s in zip(job["q"], job["s"], strict=True):
            clock.set(synth.NOW + timedelta(seconds=s))
            first_write.clear()
            t0 = time.perf_counter()
            hits = brain.recall(q, k=10, reinforce=job["r"])
            t1 = time.perf_counter()
            tw = first_write[0] if first_write else t1
            out.append(
                {"ms": (t1 - t0) * 1e3, "read": (tw - t0) * 1e3, "write": (t1 - tw) * 1e3}
                | {"ids": [h.id for h in hits]}
            )
        print(json.dumps(out), flush=True)
    brain.close()


def main() -> None:
    from neo4j_reuse import _server_cpu as server_cpu  # the test server's CPU seconds

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ns", default="big")
    ap.add_argument("--side", action="append", default=[], help="NAME=SRC (two or more)")
    ap.add_argument("--ops", type=int, default=200)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--at-hours", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--common", action="store_true", help="common-word queries (fill k)")
    ap.add_argument("--no-reinforce", action="store_true")
    ap.add_argument("--warmup", type=int, default=10, help="queries each side runs first, unread")
    args = ap.parse_args()
    if args.worker:
        worker(args.ns)
        return
    import synth
    from bench_core import pct

    sides = [s.split("=", 1) for s in args.side]
    procs = {}
    for name, src in sides:
        env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--ns", args.ns]
        procs[name] = subprocess.Popen(
            cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
    for p in procs.values():
        assert p.stdout is not None and json.loads(p.stdout.readline())["ready"]

    def ask(name: str, qs: list[str], secs: list[float], reinforce: bool) -> list[dict[str, Any]]:
        p = procs[name]
        assert p.stdin is not None and p.stdout is not None
        p.stdin.write(json.dumps({"q": qs, "s": secs, "r": reinforce}) + "\n")
        p.stdin.flush()
        return list(json.loads(p.stdout.readline()))

    if args.common:
        qs = synth.common_queries(args.ops + args.warmup, seed=args.seed)
    else:
        qs = synth.queries(args.ops + args.warmup, seed=args.seed)
    base = args.at_hours * 3600.0
    names = [n for n, _ in sides]
    for name in names:  # warm-up: plans and caches, no reinforcement
        ask(name, qs[: args.warmup], [base] * args.warmup, False)
    res: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    cpu = dict.fromkeys(names, 0.0)
    work = qs[args.warmup :]
    for b, lo in enumerate(range(0, len(work), args.batch)):
        part = work[lo : lo + args.batch]
        order = names[b % len(names) :] + names[: b % len(names)]
        for r, name in enumerate(order):
            secs = [base + (lo + i) * len(names) + r + 1 for i in range(len(part))]
            c0 = server_cpu()
            res[name].extend(ask(name, part, secs, not args.no_reinforce))
            c1 = server_cpu()
            if c0 is not None and c1 is not None:
                cpu[name] += c1 - c0
    for p in procs.values():
        assert p.stdin is not None
        p.stdin.close()
        p.wait()
    same = sum(len({tuple(res[n][i]["ids"]) for n in names}) == 1 for i in range(len(work)))
    out: dict[str, Any] = {"ops": len(work), "same_hits": same, "load": os.getloadavg()[0]}
    print(
        f"{'side':<10} {'p50':>7} {'p95':>7} {'read p50':>9} {'read p95':>9} "
        f"{'write p50':>9} {'write p95':>9} {'srv CPU':>8}"
    )
    for n in names:
        rows = res[n]
        fig = {
            "p50": pct([x["ms"] for x in rows], 50),
            "p95": pct([x["ms"] for x in rows], 95),
            "read_p50": pct([x["read"] for x in rows], 50),
            "read_p95": pct([x["read"] for x in rows], 95),
            "write_p50": pct([x["write"] for x in rows], 50),
            "write_p95": pct([x["write"] for x in rows], 95),
            "write_max": max(x["write"] for x in rows),
            "server_cpu_s": round(cpu[n], 1),
        }
        out[n] = {k: round(v, 1) for k, v in fig.items()}
        print(
            f"{n:<10} {fig['p50']:7.1f} {fig['p95']:7.1f} {fig['read_p50']:9.1f} "
            f"{fig['read_p95']:9.1f} {fig['write_p50']:9.1f} {fig['write_p95']:9.1f} "
            f"{cpu[n]:8.1f}"
        )
    print(f"same hits on every side: {same}/{len(work)}")
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
