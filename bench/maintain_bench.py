"""Maintain benchmark: the time and peak RSS of ``maintain`` on a synthetic Kùzu store.

Builds a store of ``--size`` memories (``synth``'s graph, ``--edges-per-node`` links each,
imported as ``bench_core`` does) and never maintains it; each run copies it and, in a process
of its own (so ``peak_rss_mb`` is that run's alone), times a first ``maintain`` an hour after
the graph's "now" (which moves most memories between tiers) and a second one a day later
(which moves few). ``--keep`` keeps the built store in ``--workdir`` for the next run (a 1M
store takes minutes to build), so two versions of the code can be compared on the same store:

    python bench/maintain_bench.py --size 100000 --workdir /tmp/mb --keep
    python bench/maintain_bench.py --size 1000000 --workdir /tmp/mb --keep --json

Reported: ``maintain_s`` and ``maintain_again_s`` (wall time), ``moved`` and ``moved_again``
(tier moves), ``rss_open_mb`` (RSS once the store is open, before maintain) and
``peak_rss_mb`` (the run's peak), and the audit entries written.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synth
from ebb_core import Brain, FixedClock
from ebb_core.backends import open_store

NAMESPACE = "bench"
TARGETS = {"maintain_s": 10.0, "peak_rss_mb": 3_000}  # issue 15, at 1M memories / 5M links


def log(msg: str) -> None:
    print(f"  {msg}", file=sys.stderr, flush=True)


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def store_files(db: Path) -> list[Path]:
    return [p for p in (db, Path(f"{db}.wal")) if p.exists()]


def build(size: int, edges_per_node: float, workdir: Path, db: Path) -> dict[str, Any]:
    """Import the synthetic graph into a new store at ``db`` (not maintained)."""
    data = workdir / f"graph-{size}-{edges_per_node:g}.jsonl"
    if not data.exists():
        log(f"writing {data.name}")
        synth.write_file(data, size, edges_per_node)
    brain = Brain(open_store("kuzu", db), namespace=NAMESPACE, clock=FixedClock(synth.NOW))
    try:
        t0 = time.perf_counter()
        counts = brain.import_(data, namespace=NAMESPACE)
        log(f"import {time.perf_counter() - t0:.1f} s")
    finally:
        brain.close()
    return counts


def run(db: Path) -> dict[str, Any]:
    """Time two maintains on the store at ``db`` (in this process: run it in a child)."""
    clock = FixedClock(synth.NOW).advance(hours=1)
    brain = Brain(open_store("kuzu", db), namespace=NAMESPACE, clock=clock)
    try:
        rss_open = rss_mb()
        before = brain.stats()
        t0 = time.perf_counter()
        first = brain.maintain()
        maintain_s = time.perf_counter() - t0
        log(f"maintain {maintain_s:.1f} s")
        clock.advance(days=1)
        t0 = time.perf_counter()
        again = brain.maintain()
        maintain2_s = time.perf_counter() - t0
        log(f"maintain again {maintain2_s:.1f} s")
        after = brain.stats()
    finally:
        brain.close()
    return {
        "memories": before.nodes,
        "edges": before.edges,
        "maintain_s": round(maintain_s, 2),
        "maintain_again_s": round(maintain2_s, 2),
        "moved": sum(first.moved.values()),
        "moved_again": sum(again.moved.values()),
        "queued": len(first.newly_queued) + len(again.newly_queued),
        "audit_entries": after.audit_entries - before.audit_entries,
        "by_tier": after.by_tier,
        "rss_open_mb": round(rss_open),
        "peak_rss_mb": round(peak_rss_mb()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size", type=int, default=100_000, help="memories (default 100000)")
    ap.add_argument("--edges-per-node", type=float, default=5.0)
    ap.add_argument("--workdir", help="where the data and stores go (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the built store for the next run")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--run", help=argparse.SUPPRESS)  # child: time maintain on this store
    args = ap.parse_args()
    if args.run:
        print(json.dumps(run(Path(args.run))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        kept = work / f"maintain-{args.size}-{args.edges_per_node:g}.kuzu"
        if not kept.exists():
            print(f"… building {args.size:,} memories", file=sys.stderr, flush=True)
            build(args.size, args.edges_per_node, work, kept)
        runs = work / f"run-{os.getpid()}"
        runs.mkdir()
        try:
            db = runs / kept.name
            for f in store_files(kept):  # maintain writes: each run gets a fresh copy
                shutil.copyfile(f, runs / f.name)
            print(f"… maintain on {args.size:,} memories", file=sys.stderr, flush=True)
            out = subprocess.run(
                [sys.executable, __file__, "--run", str(db)],
                stdout=subprocess.PIPE,
                text=True,
                check=True,
            ).stdout
            row: dict[str, Any] = json.loads(out)
        finally:
            shutil.rmtree(runs, ignore_errors=True)
            if not args.keep:
                for f in store_files(kept):
                    f.unlink()
    row["load"] = round(os.getloadavg()[0], 2)
    if args.json:
        print(json.dumps({"targets": TARGETS, "result": row}, indent=2))
        return
    cols = [c for c in row if c != "by_tier"]
    widths = [max(len(c), len(str(row[c]))) for c in cols]
    print("  ".join(c.rjust(w) for c, w in zip(cols, widths, strict=True)))
    print("  ".join(str(row[c]).rjust(w) for c, w in zip(cols, widths, strict=True)))
    print("tiers after: " + ", ".join(f"{k} {v}" for k, v in row["by_tier"].items()))
    print("targets at 1M: " + ", ".join(f"{k} {v}" for k, v in TARGETS.items()))


if __name__ == "__main__":
    main()
