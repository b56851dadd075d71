"""The offline bulk path (``ebb neo4j-bulk``) stage by stage, optionally A/B against older code.

Each round loads the export into a fresh benchmark server (``scripts/neo4j-test-server``:
``EBB_NEO4J_BENCH=1``, GDS off, the store kept in ``<workdir>/<side>/state/data``) through the
three stages of docs/neo4j.md, as ``neo4j_harness.HarnessServer.bulk_load`` runs them for
``bench_core.py --backend neo4j``: ``prepare`` (``ebb neo4j-bulk prepare``), ``admin`` (the
``neo4j-admin database import full`` it prints, run by ``scripts/neo4j-test-server admin``), then
a server ``start`` and ``finish`` (``ebb neo4j-bulk finish``). Each stage's wall time is printed
beside its CPU time (the client's for prepare and finish, neo4j-admin's, the server's during
finish), with the load average before and after. With ``--other-src OLD/src`` the rounds
alternate A (this tree's ``src``) and B (the other's), each with its own ``prepare``/``finish``
code; neo4j-admin and the server are this tree's. A 1M round takes minutes and several GB: run
it under ``flock /tmp/ebb-heavy.lock``.

    python bench/neo4j_bulk.py --data /tmp/ebb-data/graph-100000.jsonl --workdir /tmp/w \\
        [--other-src /tmp/base/src] [--rounds 2] [--into big] [--keep]

``--keep`` leaves the last round's server stopped with its store on disk (``<workdir>/<side>/
state``; start it with ``EBB_NEO4J_STATE_DIR=... EBB_NEO4J_KEEP_DATA=1 scripts/neo4j-test-server
start``): a quick way to a loaded 1M store. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import neo4j_harness

ROOT = Path(__file__).resolve().parent.parent


def load() -> float:
    return round(os.getloadavg()[0], 1)


def one_load(side: str, src: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One load through ``neo4j_harness.HarnessServer.bulk_load`` with ``src``'s prepare/finish."""
    base = Path(args.workdir) / side
    shutil.rmtree(base, ignore_errors=True)
    state = base / "state"
    server = neo4j_harness.HarnessServer(state, args.heap, args.pagecache, args.admin_heap)
    out: dict[str, Any] = {"side": side, "src": str(src), "load_before": load()}
    at = datetime.fromisoformat(args.at)
    try:
        got = server.bulk_load(
            Path(args.data), base / "files", args.into, at, args.off_heap, src=src
        )
    finally:
        lines = [  # each index's population, from the server's log (gone once it stops)
            line
            for debug in state.glob("work/*/logs/debug.log")
            for line in debug.read_text(errors="replace").splitlines()
            if "IndexPopulationJob" in line or "is ONLINE" in line
        ]
        (Path(args.workdir) / f"{side}-index.log").write_text("\n".join(lines) + "\n")
        if (state / "admin.log").exists():
            shutil.copy(state / "admin.log", Path(args.workdir) / f"{side}-admin.log")
        if args.keep:
            server.stop()
            os.environ.pop("NEO4J_URI", None)
        else:
            server.close()
    for stage in ("prepare", "admin", "finish"):
        out[stage] = {"wall": got[f"import_{stage}_s"], "cpu": got[f"import_{stage}_cpu_s"]}
    out["start"] = {"wall": got["import_start_s"]}
    out["finish"] |= {"server_cpu": got["import_server_cpu_s"], "index_s": got["import_index_s"]}
    out["load_after"] = load()
    out["counts"] = {k: got[k] for k in ("memories", "links", "audit")}
    out["total_s"] = round(got["import_s"], 1)
    out["per_s"] = round(got["memories"] / got["import_s"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", required=True, help="an Ebb export (bench/synth.py's format)")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--other-src", help="B side: another tree's src/ (alternated with this one)")
    ap.add_argument("--rounds", type=int, default=1, help="loads per side")
    ap.add_argument("--into", default="", help="load every memory into this namespace")
    ap.add_argument("--at", default="2026-06-01T12:00:00+00:00", help="the store's epoch")
    ap.add_argument("--heap", default="4g")
    ap.add_argument("--pagecache", default="3g")
    ap.add_argument("--admin-heap", default="2g")
    ap.add_argument("--off-heap", default="3g", help="neo4j-admin --max-off-heap-memory")
    ap.add_argument("--keep", action="store_true", help="keep the last store (see above)")
    args = ap.parse_args()
    sides = [("A", ROOT / "src")]
    if args.other_src:
        sides.append(("B", Path(args.other_src).resolve()))
    runs = []
    for r in range(args.rounds):
        for side, src in sides if r % 2 == 0 else sides[::-1]:
            runs.append(one_load(side, src, args))
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    print(f"{'side':4} {'prepare':>15} {'admin':>15} {'start':>6} {'finish':>22} {'total':>7} "
          f"{'/s':>7}  load")  # fmt: skip
    for x in runs:
        p, a, f = x["prepare"], x["admin"], x["finish"]
        print(
            f"{x['side']:4} {p['wall']:6.1f} ({p['cpu']:5.1f}) {a['wall']:6.1f} ({a['cpu']:5.1f}) "
            f"{x['start']['wall']:6.1f} {f['wall']:6.1f} ({f['cpu']:4.1f}+{f['server_cpu']:5.1f}) "
            f"{x['total_s']:7.1f} {x['per_s']:7}  {x['load_before']}-{x['load_after']}"
        )
    print(json.dumps({"data": args.data, "runs": runs}))


if __name__ == "__main__":
    main()
