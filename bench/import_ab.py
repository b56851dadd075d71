"""A/B of ``Brain.import_`` between two checkouts, alternated (A B A B …) in one run.

Each run imports the same export (``bench/synth.py``'s format: /tmp/ebb-data/graph-100000.jsonl)
into a new store in a child process of its own (``PYTHONPATH`` set to that side's ``src``) and
reports its wall time, CPU time (user + system) and peak RSS; the store is deleted after. Prints
a table and the medians' ratios (new / other), and with ``--json`` the raw figures.

    python bench/import_ab.py /tmp/ebb-data/graph-100000.jsonl --other-src /tmp/base/src \\
        --rounds 2 --workdir /tmp/me-w
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CHILD = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[3])
import synth
from ebb_core import Brain
from ebb_core.clock import FixedClock
path, data, ns = sys.argv[1], sys.argv[2], sys.argv[4]
with Brain.open(path, namespace=ns, clock=FixedClock(synth.NOW)) as b:
    t0, c0 = time.perf_counter(), time.process_time()  # as bench_core: the import_ call
    counts = b.import_(data, namespace=ns)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
print(json.dumps({"nodes": counts["nodes"], "wall_s": wall, "cpu_s": cpu, "peak_rss_mb": rss}))
"""


def _one(src: Path, data: Path, workdir: Path, namespace: str) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(dir=workdir))
    try:
        env = {**os.environ, "PYTHONPATH": str(src)}
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(folder / "db.kuzu"), str(data), str(HERE), namespace],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        result["rate"] = result["nodes"] / result["wall_s"]
        result["load"] = os.getloadavg()[0]
        return result
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("data", type=Path)
    ap.add_argument("--other-src", type=Path, required=True, help="the other checkout's src")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()))
    ap.add_argument(
        "--namespace",
        default="bench",
        help="the import's namespace: every uid begins with it, so its length costs time and "
        "memory (bench_core's, bench-<size>-<clock>, is 33 characters at 1M)",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sides = {"new": HERE.parent / "src", "other": args.other_src}
    runs: dict[str, list[dict[str, Any]]] = {"new": [], "other": []}
    for r in range(args.rounds):
        order = ["other", "new"] if r % 2 == 0 else ["new", "other"]
        for side in order:
            runs[side].append(_one(sides[side], args.data, args.workdir, args.namespace))
            print(side, json.dumps(runs[side][-1]), file=sys.stderr, flush=True)
    med = {
        side: {
            k: statistics.median(x[k] for x in rs)
            for k in ("rate", "wall_s", "cpu_s", "peak_rss_mb")
        }
        for side, rs in runs.items()
    }
    if args.json:
        print(json.dumps({"runs": runs, "median": med}, indent=1))
        return
    print(f"{'side':6} {'memories/s':>11} {'wall s':>8} {'CPU s':>8} {'peak RSS MB':>12}")
    for side, m in med.items():
        print(
            f"{side:6} {m['rate']:11,.0f} {m['wall_s']:8.1f} {m['cpu_s']:8.1f} "
            f"{m['peak_rss_mb']:12,.0f}"
        )
    ratio = {k: med["new"][k] / med["other"][k] for k in med["new"]}
    print("new/other: " + ", ".join(f"{k} x{v:.2f}" for k, v in ratio.items()))


if __name__ == "__main__":
    main()
