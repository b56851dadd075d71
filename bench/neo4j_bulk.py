"""The offline bulk path (``ebb neo4j-bulk``) stage by stage, optionally A/B against older code.

Each round loads the export into a fresh benchmark server (``scripts/neo4j-test-server``:
``EBB_NEO4J_BENCH=1``, GDS off, the store kept in ``<workdir>/<side>/state/data``) through the
three stages of docs/neo4j.md: ``prepare`` (``ebb neo4j-bulk prepare``), ``admin`` (the
``neo4j-admin database import full`` it prints, run by ``scripts/neo4j-test-server admin``), then
a server ``start`` and ``finish`` (``ebb neo4j-bulk finish``). Each stage's wall time is printed
beside its CPU time (the client's for prepare and finish, neo4j-admin's, the server's during
finish) and the load average. With ``--other-src OLD/src`` the rounds alternate A (this tree's
``src``) and B (the other's), each with its own ``prepare``/``finish`` code; neo4j-admin and the
server are this tree's. A 1M round takes minutes and several GB: run it under
``flock /tmp/ebb-heavy.lock``.

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
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "neo4j-test-server"


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def load() -> float:
    return round(os.getloadavg()[0], 1)


def proc_cpu(pid: int) -> float:
    """User + system seconds of a live process (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run ``cmd``; its wall and CPU seconds and its stdout (raises with its output if it fails)."""
    c0, t0 = children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, children_cpu() - c0
    if done.returncode != 0:
        raise SystemExit(f"{cmd[:4]} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return wall, cpu, done.stdout


def ebb(src: Path, *args: str) -> list[str]:
    code = f"import sys; sys.path.insert(0, {str(src)!r}); from ebb_core.cli import main; main()"
    return [sys.executable, "-c", code, *args]


def one_load(side: str, src: Path, args: argparse.Namespace) -> dict[str, Any]:
    base = Path(args.workdir) / side
    shutil.rmtree(base, ignore_errors=True)
    files, state = base / "files", base / "state"
    env = {
        **os.environ,
        "EBB_NEO4J_STATE_DIR": str(state),
        "EBB_NEO4J_BENCH": "1",
        "EBB_NEO4J_GDS": "0",
        "EBB_NEO4J_KEEP_DATA": "1",
        "EBB_NEO4J_HEAP": args.heap,
        "EBB_NEO4J_PAGECACHE": args.pagecache,
        "EBB_NEO4J_ADMIN_HEAP": args.admin_heap,
    }
    out: dict[str, Any] = {"side": side, "src": str(src)}
    prep = ["neo4j-bulk", "prepare", args.data, str(files), "--at", args.at]
    if args.into:
        prep += ["--into", args.into]
    out["load_before"] = load()
    wall, cpu, stdout = timed(ebb(src, *prep, "--json"), env)
    manifest = json.loads(stdout)
    out["prepare"] = {"wall": round(wall, 1), "cpu": round(cpu, 1), "load": load()}
    command = manifest["command"]
    extra = [f"--max-off-heap-memory={args.off_heap}"] if args.off_heap else []
    wall, cpu, log = timed(["bash", str(SCRIPT), "admin", *command[1:], *extra], env)
    (Path(args.workdir) / f"{side}-admin.log").write_text(log)
    out["admin"] = {"wall": round(wall, 1), "cpu": round(cpu, 1), "load": load()}
    t0 = time.perf_counter()
    uri = subprocess.run(
        ["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, check=True
    ).stdout.split()[-1]
    out["start"] = {"wall": round(time.perf_counter() - t0, 1), "load": load()}
    pid = int((state / "pid").read_text())
    try:
        s0 = proc_cpu(pid)
        wall, cpu, stdout = timed(ebb(src, "neo4j-bulk", "finish", str(files), "--json"), {
            **env, "NEO4J_URI": uri
        })  # fmt: skip
        found = json.loads(stdout)
        out["finish"] = {
            "wall": round(wall, 1),
            "cpu": round(cpu, 1),
            "server_cpu": round(proc_cpu(pid) - s0, 1),
            "index_s": found.get("index_s"),
            "load": load(),
        }
        out["counts"] = {k: found[k] for k in ("memories", "links", "audit")}
    finally:
        lines = [  # each index's population, from the server's log (gone once it stops)
            line
            for debug in state.glob("work/*/logs/debug.log")
            for line in debug.read_text(errors="replace").splitlines()
            if "IndexPopulationJob" in line or "is ONLINE" in line
        ]
        (Path(args.workdir) / f"{side}-index.log").write_text("\n".join(lines) + "\n")
        subprocess.run(["bash", str(SCRIPT), "stop"], env=env, capture_output=True, check=False)
    total = out["prepare"]["wall"] + out["admin"]["wall"] + out["finish"]["wall"]
    out["total_s"] = round(total, 1)
    out["per_s"] = round(out["counts"]["memories"] / total)
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    else:
        shutil.rmtree(files, ignore_errors=True)
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
            f"{x['total_s']:7.1f} {x['per_s']:7}  {x['load_before']}-{f['load']}"
        )
    print(json.dumps({"data": args.data, "runs": runs}))


if __name__ == "__main__":
    main()
