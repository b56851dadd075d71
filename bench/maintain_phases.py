"""Where a maintain's time and bytes go: a first and a second ``maintain`` on a Kùzu store, with
the wall time of each store call (re-score, recall columns, tier moves, audit rows, commit,
checkpoint), every Kùzu statement over 50 ms, and the peak RSS sampled every 50 ms per phase.

It maintains the store it is given: run it on a copy (``bench/maintain_bench.py --keep`` keeps
an unmaintained synthetic store; copy ``maintain-N-5.kuzu`` and run this on the copy):

    cp /tmp/mb/maintain-1000000-5.kuzu /tmp/run.kuzu
    python bench/maintain_phases.py /tmp/run.kuzu

``--events N`` runs ``bench_core``'s sequence between the two maintains (N reinforcing recalls,
N common-word recalls, N remembers with two links each), so the second maintain is the one
``bench_core`` times as "maintain again"; ``--checkpoint-between`` then sends a ``CHECKPOINT``
before it (timed apart as ``checkpoint_before_again_s``), to tell its own work from the
checkpoint of the events' writes that it would otherwise trigger.

To compare with an older version, run it with ``PYTHONPATH=<old checkout>/src`` (a phase that
version lacks is not timed). Times are wall time; ``cpu`` is the process's CPU time (all
threads). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synth
from ebb_core import Brain, FixedClock
from ebb_core.backends import open_store

STORE_CALLS = (
    "recompute_keys",
    "_ensure_cache",
    "tier_move_columns",
    "set_tiers",
    "append_audit_columns",
    "superseded_by",
    "_exec",  # COMMIT, CHECKPOINT
    "_maybe_checkpoint",
    "_flush_deferred",  # the audit rows' COPY, sent just before the commit
)
BRAIN_CALLS = ("_policy_moves", "_refresh_reference", "_write_moves")


class Probe:
    """Phase timers, slow statements and per-phase RSS peaks."""

    def __init__(self) -> None:
        self.phase = "open"
        self.times: dict[str, float] = {}
        self.slow: list[tuple[str, str, float]] = []
        self.peaks: dict[str, int] = {}
        self.running = True
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while self.running:
            with open("/proc/self/status") as fh:
                kb = next(int(x.split()[1]) for x in fh if x.startswith("VmRSS"))
            self.peaks[self.phase] = max(self.peaks.get(self.phase, 0), kb >> 10)
            time.sleep(0.05)

    def wrap(self, obj: Any, name: str) -> None:
        inner = getattr(obj, name, None)
        if inner is None:  # an older version without this step
            return

        def timed(*args: Any, **kwargs: Any) -> Any:
            outer, self.phase = self.phase, name
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.times[name] = self.times.get(name, 0.0) + time.perf_counter() - t0
                self.phase = outer

        setattr(obj, name, timed)


class _Conn:
    """Kùzu's connection with every statement over 50 ms noted."""

    def __init__(self, conn: Any, probe: Probe) -> None:
        self._c, self._p = conn, probe

    def __getattr__(self, name: str) -> Any:
        return getattr(self._c, name)

    def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self._c.execute(query, *args, **kwargs)
        finally:
            dt = time.perf_counter() - t0
            if dt > 0.05:
                text = query if isinstance(query, str) else "<prepared>"
                self._p.slow.append((self._p.phase, text[:80], round(dt, 2)))


def events(brain: Brain, clock: FixedClock, ops: int) -> None:
    """``bench_core``'s recalls and remembers between its two maintains."""
    qs = synth.queries(ops)
    live: list[str] = []
    for q in qs:
        clock.advance(seconds=30)
        live.extend(h.id for h in brain.recall(q, k=10)[:2])
    for q in synth.common_queries(ops):
        clock.advance(seconds=30)
        brain.recall(q, k=10)
    live = list(dict.fromkeys(live)) or [n.id for n in brain.top(10)]
    for i in range(ops):
        clock.advance(seconds=30)
        links = list(dict.fromkeys([live[i % len(live)], live[(i * 7) % len(live)]]))
        brain.remember(f"benchmark memory {i} about {qs[i % len(qs)]}", kind="note", links=links)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("store", help="a COPY of a synthetic store (it is maintained)")
    ap.add_argument("--namespace", default="bench")
    ap.add_argument("--events", type=int, default=0, help="bench_core's recalls and remembers")
    ap.add_argument("--checkpoint-between", action="store_true", help="CHECKPOINT before again")
    args = ap.parse_args()
    probe = Probe()
    clock = FixedClock(synth.NOW).advance(hours=1)
    store: Any = open_store("kuzu", args.store)
    brain = Brain(store, namespace=args.namespace, clock=clock)
    store._conn = _Conn(store._conn, probe)
    let_go = store._let_go_of_tables

    def keep_watching() -> None:  # the store replaces its connection now and then
        let_go()
        if not isinstance(store._conn, _Conn):
            store._conn = _Conn(store._conn, probe)

    store._let_go_of_tables = keep_watching
    for name in STORE_CALLS:
        probe.wrap(store, name)
    for name in BRAIN_CALLS:
        probe.wrap(brain, name)
    import ebb_core

    out: dict[str, Any] = {"ebb_core": str(Path(ebb_core.__file__).parent)}
    out["rss_open_mb"] = probe.peaks.get("open", 0)
    for label in ("first", "again"):
        if label == "again":
            if args.events:
                events(brain, clock, args.events)
            if args.checkpoint_between:
                t0 = time.perf_counter()
                store._exec("CHECKPOINT")
                out["checkpoint_before_again_s"] = round(time.perf_counter() - t0, 2)
            clock.advance(days=1)
        probe.times.clear()
        probe.slow.clear()
        probe.phase = label
        t0, c0 = time.perf_counter(), time.process_time()
        report = brain.maintain()
        out[label] = {
            "wall_s": round(time.perf_counter() - t0, 2),
            "cpu_s": round(time.process_time() - c0, 2),
            "moved": sum(report.moved.values()),
            "phases_s": {k: round(v, 2) for k, v in probe.times.items()},
            "slow_statements": list(probe.slow),
        }
    probe.running = False
    brain.close()
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10
    out["peak_rss_mb_by_phase"] = probe.peaks
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
