"""How long ``ebb ui``'s views take to answer on a synthetic store (real ``ebb ui`` over HTTP).

Builds a store of N synthetic memories (bench/synth.py, the real import path), runs ``maintain``
and forgets ``--queued`` of them so the review queue has work, starts ``ebb ui`` on it and times
each API call the page makes (whole HTTP round trip, the store already open, ``--repeat`` times).

    python bench/ui_bench.py --sizes 10000 [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synth
from ebb_core import Brain

NS = "bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def build(n: int, workdir: Path, queued: int) -> tuple[Path, list[str]]:
    data = workdir / f"graph-{n}.jsonl"
    synth.write_file(data, n)
    db = workdir / f"ui-{n}.kuzu"
    with Brain.open(db, backend="kuzu", namespace=NS) as brain:
        brain.import_(data, namespace=NS)
        brain.maintain()
        top = [m.id for m in brain.top(40, depth=3)]
        for node_id in top[-queued:]:
            brain.forget(node_id, "benchmark", actor="bench")
        return db, top[:6]


def run_size(n: int, workdir: Path, queued: int, repeat: int) -> dict[str, Any]:
    db, live = build(n, workdir, queued)
    port = free_port()
    env = {**os.environ, "EBB_DB_PATH": str(db), "EBB_NAMESPACE": NS, "EBB_BACKEND": "kuzu"}
    exe = Path(sys.executable).with_name("ebb")
    argv = [str(exe)] if exe.exists() else [sys.executable, "-m", "ebb_core.cli"]
    proc = subprocess.Popen(
        [*argv, "ui", "--port", str(port)], env=env, stderr=subprocess.PIPE, text=True
    )
    base = f"http://127.0.0.1:{port}"
    calls: dict[str, tuple[str, dict[str, str | int]]] = {
        "page": ("/", {}),
        "queue": ("/api/queue", {}),
        "graph top 30": ("/api/graph", {"k": 30}),
        "graph neighbourhood": ("/api/graph", {"id": live[0]}),
        "decay 3 memories": ("/api/decay", {"ids": ",".join(live[:3])}),
        "audit log 200": ("/api/log", {}),
        "stats": ("/api/stats", {}),
    }
    rows: dict[str, Any] = {}
    try:
        with httpx.Client(base_url=base, timeout=60) as c:
            deadline = time.monotonic() + 60
            while True:
                try:
                    c.get("/")
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            for name, (path, params) in calls.items():
                c.get(path, params=params).raise_for_status()  # warm
                ms = []
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    c.get(path, params=params).raise_for_status()
                    ms.append((time.perf_counter() - t0) * 1000)
                rows[name] = {
                    "p50_ms": round(statistics.median(ms), 1),
                    "p95_ms": round(pct(ms, 95), 1),
                }
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
    return {"memories": n, "queued": queued, "calls": rows, "load": round(os.getloadavg()[0], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    ap.add_argument("--queued", type=int, default=20, help="memories put in the review queue")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = [run_size(n, Path(tmp), args.queued, args.repeat) for n in args.sizes]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for r in results:
        print(f"{r['memories']} memories, {r['queued']} queued (load {r['load']}):")
        print(f"  {'call':<22} {'p50 ms':>8} {'p95 ms':>8}")
        for name, row in r["calls"].items():
            print(f"  {name:<22} {row['p50_ms']:>8} {row['p95_ms']:>8}")


if __name__ == "__main__":
    main()
