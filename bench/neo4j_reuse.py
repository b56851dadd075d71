"""Neo4j at scale without re-importing: one import into a fixed namespace, then repeated
maintain and recall measurements on the same server (``NEO4J_URI``), each in a process of its
own so code changes between them are measured on the same data.

    export EBB_NEO4J_STATE_DIR=/tmp/neo1m EBB_NEO4J_BENCH=1 EBB_NEO4J_KEEP_DATA=1
    export NEO4J_URI=$(scripts/neo4j-test-server start)  # KEEP_DATA: the import outlives it
    python bench/neo4j_reuse.py import /tmp/b1m/graph-1000000.jsonl --ns big
    python bench/neo4j_reuse.py maintain --ns big --at-hours 2
    python bench/neo4j_reuse.py recall --ns big --ops 300 --at-hours 3 [--no-reinforce]

``--at-hours`` is the clock (hours after ``synth.NOW``); give later runs later hours so time
only moves forward. Each command prints one JSON line. A 1M import holds a core for minutes:
run it under ``flock /tmp/ebb-heavy.lock``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import neo4j_harness
import synth
from bench_core import pct
from ebb_core import Brain, FixedClock
from ebb_core.backends import open_store

STORE_CALLS = (
    "recompute_keys",
    "reference_key",
    "tier_move_columns",
    "superseded_by",
    "strongest_links",
    "get_nodes",
    "set_tiers",
    "append_audit_columns",
    "last_audit_seq",
    "refresh_hubs",
)


def _time_store_calls(store: Any) -> dict[str, float]:
    """Wrap ``store``'s maintain calls to add up their wall time in the returned dict."""
    spent: dict[str, float] = {}
    for name in STORE_CALLS:
        fn = getattr(store, name, None)
        if fn is None:
            continue

        def timed(*a: Any, _fn: Any = fn, _name: str = name, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                spent[_name] = round(spent.get(_name, 0.0) + time.perf_counter() - t0, 2)

        setattr(store, name, timed)
    return spent


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _server_cpu() -> float | None:
    """The test server's CPU seconds (``$EBB_NEO4J_STATE_DIR/java.pid``), if it is readable."""
    state = os.environ.get("EBB_NEO4J_STATE_DIR")
    try:
        return neo4j_harness.proc_cpu(int(Path(state or "", "java.pid").read_text().strip()))
    except (OSError, IndexError, ValueError):
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("command", choices=["import", "maintain", "recall"])
    ap.add_argument("file", nargs="?")
    ap.add_argument("--ns", default="big")
    ap.add_argument("--ops", type=int, default=300)
    ap.add_argument("--at-hours", type=float, default=1.0)
    ap.add_argument("--common", action="store_true", help="common-word queries (fill k)")
    ap.add_argument("--no-reinforce", action="store_true")
    args = ap.parse_args()
    clock = FixedClock(synth.NOW + timedelta(hours=args.at_hours))
    brain = Brain(open_store("neo4j"), namespace=args.ns, clock=clock, embedder=False)
    out: dict[str, object] = {"command": args.command, "ns": args.ns}
    try:
        if args.command == "import":
            t0 = time.perf_counter()
            counts = brain.import_(Path(args.file), namespace=args.ns)
            secs = time.perf_counter() - t0
            out.update(counts=counts, import_s=round(secs, 1), per_s=round(counts["nodes"] / secs))
        elif args.command == "maintain":
            phases = _time_store_calls(brain.store)
            cpu0, server0 = _cpu(), _server_cpu()
            t0 = time.perf_counter()
            report = brain.maintain()
            out.update(maintain_s=round(time.perf_counter() - t0, 2), moved=report.moved)
            out.update(client_cpu_s=round(_cpu() - cpu0, 1), phases_s=phases)
            if server0 is not None:
                out.update(server_cpu_s=round((_server_cpu() or 0.0) - server0, 1))
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
            out.update(client_peak_rss_mb=peak)
        else:
            qs = synth.common_queries(args.ops) if args.common else synth.queries(args.ops)
            for q in qs[:10]:
                brain.recall(q, k=10, reinforce=False)
            ms, hits = [], 0
            for q in qs:
                clock.advance(seconds=1)
                t0 = time.perf_counter()
                hits += len(brain.recall(q, k=10, reinforce=not args.no_reinforce))
                ms.append((time.perf_counter() - t0) * 1000)
            out.update(
                p50_ms=round(pct(ms, 50), 2),
                p95_ms=round(pct(ms, 95), 2),
                mean_hits=round(hits / len(qs), 2),
            )
    finally:
        brain.close()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
