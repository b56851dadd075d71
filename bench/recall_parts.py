"""Where a recall's time goes on a large Kùzu store: whole recalls, and the full-text part alone
answered by the store's in-process copy of the index and by Kùzu's own query, interleaved.

Imports ``bench/synth.py``'s graph of ``--size`` memories into ``--workdir`` once (the store is
kept there: later runs, e.g. with another ``EBB_MEMORY_BUDGET``, open it again), runs
``maintain``, warms up with 10 recalls, then times 200 rare-word and 200 common-word recalls
(``k=10``, reinforcing, the clock moving 30 s each), and then the same queries' full-text
candidates (the namespace's top 200) from the copy and from Kùzu, one after the other per query.
Prints p50/p95 of each, the row reads from the table and peak RSS; ``--json`` for JSON.

    python bench/recall_parts.py --size 1000000 --workdir /tmp/parts
    EBB_MEMORY_BUDGET=5G python bench/recall_parts.py --size 1000000 --workdir /tmp/parts
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synth
from ebb_core import Brain, FixedClock
from ebb_core.backends import open_store
from ebb_core.text import query_terms


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return round(values[min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))], 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--ops", type=int, default=200)
    ap.add_argument("--workdir", required=True, help="keeps the data and the store")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    data = work / f"graph-{args.size}.jsonl"
    if not data.exists():
        synth.write_file(data, args.size)
    db = work / f"parts-{args.size}.kuzu"
    clock = FixedClock(synth.NOW)
    fresh = not db.exists()
    brain = Brain(open_store("kuzu", db), namespace="p", clock=clock)
    store = brain.store
    out: dict[str, object] = {"memories": args.size}
    if fresh:
        t0 = time.perf_counter()
        brain.import_(data, namespace="p")
        out["import_s"] = round(time.perf_counter() - t0, 1)
        clock.advance(hours=1)
        brain.maintain()
    queries = synth.queries(args.ops) + synth.common_queries(args.ops)
    t0 = time.perf_counter()
    for q in queries[:10]:
        brain.recall(q, k=10, reinforce=False)
    out["warm_up_s"] = round(time.perf_counter() - t0, 1)
    whole = []
    for q in queries:
        clock.advance(seconds=30)
        t0 = time.perf_counter()
        brain.recall(q, k=10)
        whole.append((time.perf_counter() - t0) * 1000)
    copy, kuzu = [], []
    for q in queries:
        terms = " ".join(query_terms(q))
        t0 = time.perf_counter()
        store._namespace_hits("p", terms, 200)  # type: ignore[attr-defined]
        copy.append((time.perf_counter() - t0) * 1000)
        kept, store._text, store._text_skip = store._text, None, True  # type: ignore[attr-defined]
        t0 = time.perf_counter()
        store._namespace_hits("p", terms, 200)  # type: ignore[attr-defined]
        kuzu.append((time.perf_counter() - t0) * 1000)
        store._text, store._text_skip = kept, False  # type: ignore[attr-defined]
    out.update(
        recall_p50_ms=pct(whole, 50),
        recall_p95_ms=pct(whole, 95),
        text_copy_p50_ms=pct(copy, 50),
        text_copy_p95_ms=pct(copy, 95),
        text_kuzu_p50_ms=pct(kuzu, 50),
        text_kuzu_p95_ms=pct(kuzu, 95),
        text_copy_built=store._text is not None,  # type: ignore[attr-defined]
        snapshot=store._cache.base is not None,  # type: ignore[attr-defined]
        table_row_reads=store._row_reads,  # type: ignore[attr-defined]
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    )
    brain.close()
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for k, v in out.items():
        print(f"{k:<18} {v}")


if __name__ == "__main__":
    main()
