"""Recall latency of two versions of Ebb, A/B in one run, interleaved so both see the same load.

Two worker processes (A: this checkout; B: the ``src`` folder of another, e.g. an earlier
commit unpacked with ``git archive``) each import the same synthetic graph as
``bench/bench_core.py`` does, run ``maintain`` and warm up; then they take turns running batches
of the same recalls (``k=10``, each reinforcing its hits, the clock moving 30 s per recall), so a
busy machine slows both alike. Prints p50/p95 of each and their ratio; ``--json`` for JSON.

    git archive <commit> | tar -x -C /tmp/base
    python bench/ab_recall.py --other-src /tmp/base/src --size 100000 --ops 200
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def worker(data: Path, ops: int) -> None:
    """Build the store, then answer "run LO HI" lines with the recall times in ms (JSON)."""
    sys.path.insert(0, str(HERE))
    import synth
    from ebb_core import Brain, FixedClock
    from ebb_core.backends import open_store

    clock = FixedClock(synth.NOW)
    with tempfile.TemporaryDirectory() as tmp:
        brain = Brain(open_store("kuzu", Path(tmp) / "ab.kuzu"), namespace="ab", clock=clock)
        brain.import_(data, namespace="ab")
        clock.advance(hours=1)
        brain.maintain()
        qs = synth.queries(ops)
        for q in qs[:10]:
            brain.recall(q, k=10, reinforce=False)
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            _, lo, hi = line.split()
            times = []
            for q in qs[int(lo) : int(hi)]:
                clock.advance(seconds=30)
                t0 = time.perf_counter()
                brain.recall(q, k=10)
                times.append((time.perf_counter() - t0) * 1000)
            print(json.dumps(times), flush=True)
        brain.close()


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--other-src", help="the src folder of the version to compare against")
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--ops", type=int, default=200)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--edges-per-node", type=float, default=5.0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(Path(args.worker), args.ops)
        return
    if not args.other_src:
        raise SystemExit("--other-src is required")
    sys.path.insert(0, str(HERE))
    import synth

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / f"graph-{args.size}.jsonl"
        synth.write_file(data, args.size, args.edges_per_node)
        envs = {
            "A (this checkout)": dict(os.environ),
            "B (other)": {**os.environ, "PYTHONPATH": str(Path(args.other_src).resolve())},
        }
        procs: dict[str, Any] = {}
        for name, env in envs.items():
            procs[name] = subprocess.Popen(
                [sys.executable, __file__, "--worker", str(data), "--ops", str(args.ops)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            json.loads(procs[name].stdout.readline())  # ready (built one after the other)
        times: dict[str, list[float]] = {name: [] for name in procs}
        for lo in range(0, args.ops, args.batch):
            order = list(procs) if (lo // args.batch) % 2 == 0 else list(reversed(procs))
            for name in order:
                p = procs[name]
                p.stdin.write(f"run {lo} {min(lo + args.batch, args.ops)}\n")
                p.stdin.flush()
                times[name] += json.loads(p.stdout.readline())
        for p in procs.values():
            p.stdin.close()
            p.wait()
    out = {
        name: {"p50_ms": round(pct(t, 50), 2), "p95_ms": round(pct(t, 95), 2)}
        for name, t in times.items()
    }
    a, b = out["A (this checkout)"], out["B (other)"]
    out["ratio"] = {
        "p50": round(a["p50_ms"] / b["p50_ms"], 3),
        "p95": round(a["p95_ms"] / b["p95_ms"], 3),
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for name, r in out.items():
        print(f"{name:<20} " + "  ".join(f"{k} {v}" for k, v in r.items()))


if __name__ == "__main__":
    main()
