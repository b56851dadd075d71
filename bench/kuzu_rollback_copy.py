"""Kùzu 0.11.3: what rolling back a transaction that ran a ``COPY`` does to a store.

Raw Kùzu (no Ebb code), one small store per case under ``FOLDER`` (made, then deleted), each
case in its own process under a file-size limit (``--max-mb``, default 512) and with a 1 GiB
buffer pool, so a runaway can neither fill the disk nor the memory. Cases:

- ``node-copy``: 80,000 rows ``COPY``ed into a 1,000-row node table inside ``BEGIN
  TRANSACTION``, ``ROLLBACK``, then three one-row writes each followed by ``CHECKPOINT``.
  On 0.11.3 the file grows without bound (the limit stops it within a few writes; without
  one, a 100k-memory store reached 58 GB) or the buffer pool fills.
- ``node-copy-then-failure``: the same ``COPY``, then a statement that fails in the same
  transaction (Kùzu aborts the transaction itself): the same runaway.
- ``rel-copy``: 100 rows ``COPY``ed into a rel table holding 1,000, rolled back: right after
  the rollback the rel table reads as empty, and after the next checkpoint the 1,000
  committed rows are gone for good.
- ``node-copy-empty``: the 80,000 rows ``COPY``ed into the node table while it is still
  empty (as into a fresh store), rolled back: no safer. On 0.11.3 the one-row writes pass,
  then the next ``COPY`` grows the file without bound (5.9 GB within seconds, without a
  limit), or fails ("Invalid transaction type to rollback") and the process aborts as the
  engine is closed.
- ``node-copy-emptied``: the same into a table whose 1,000 rows were deleted and checkpointed
  (empty by count, not by storage): the runaway of ``node-copy``.
- ``node-copy-abandoned``: the ``node-copy`` rollback, after which the process exits without
  closing the engine (``os._exit``: closing checkpoints the damaged state), and a new process
  opens the store and writes: the store on disk is sound (the damage is in memory only), but
  nothing short of leaving the engine unclosed avoids it.
- ``node-load`` (control): the 80,000 rows written with ``LOAD FROM $t CREATE`` instead and
  rolled back: the file stays a few MB and every committed row is there.

``python bench/kuzu_rollback_copy.py FOLDER [--max-mb 512] [--json]`` prints one row per case
(file size after, rows after, what went wrong).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

CASE = r"""
import importlib.util, json, os, resource, sys
import kuzu, numpy as np, pyarrow as pa

path, case, cap = sys.argv[1], sys.argv[2], int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))
db = kuzu.Database(path, buffer_pool_size=1 << 30, auto_checkpoint=False)
c = kuzu.Connection(db)
if case != "reopen":  # "reopen": the store node-copy-abandoned left, opened anew
    c.execute("CREATE NODE TABLE M(uid STRING, PRIMARY KEY(uid))")
    c.execute("CREATE REL TABLE L(FROM M TO M, w DOUBLE)")
    seed = 1000
    if case != "node-copy-empty":
        c.execute("COPY M FROM $t", {"t": pa.table({"uid": [f"s{i}" for i in range(seed)]})})
        ends = {"from": [f"s{i}" for i in range(seed)]}
        ends["to"] = [f"s{(i + 1) % seed}" for i in range(seed)]
        c.execute("COPY L FROM $t", {"t": pa.table({**ends, "w": np.ones(seed)})})
        c.execute("CHECKPOINT")
    if case == "node-copy-emptied":
        c.execute("MATCH (m:M) DETACH DELETE m")
        c.execute("CHECKPOINT")
    new = pa.table({"uid": [f"b{i}" for i in range(80000)]})
    c.execute("BEGIN TRANSACTION")
    if case.startswith("node-copy"):
        c.execute("COPY M FROM $t", {"t": new})
    if case == "node-copy-then-failure":
        try:
            c.execute("MATCH (a:M {uid: 's1'}) CREATE (a)-[:L {w: 1}]->(:M {uid: 's2'})")
        except RuntimeError:
            pass  # a duplicated key: Kùzu aborts the transaction
    if case == "node-load":
        c.execute("LOAD FROM $t CREATE (:M {uid: uid})", {"t": new})
    if case == "rel-copy":
        links = {"from": [f"s{i}" for i in range(100)], "to": [f"s{i + 1}" for i in range(100)]}
        c.execute("COPY L FROM $t", {"t": pa.table({**links, "w": np.ones(100)})})
    try:
        c.execute("ROLLBACK")
    except RuntimeError:
        pass  # already aborted
    if case == "node-copy-abandoned":
        os._exit(0)  # the engine left unclosed; run() then runs "reopen" on the store
out = {"error": ""}
try:
    for i in range(3):
        c.execute("CREATE (:M {uid: $u})", {"u": f"w{i}"})
        c.execute("CHECKPOINT")
    c.execute("COPY M FROM $t", {"t": pa.table({"uid": [f"c{i}" for i in range(1000)]})})
    c.execute("CHECKPOINT")
    out["nodes"] = c.execute("MATCH (m:M) RETURN count(*)").get_next()[0]
    out["links"] = c.execute("MATCH ()-[l:L]->() RETURN count(*)").get_next()[0]
except RuntimeError as exc:
    out["error"] = str(exc)[:100]
out["size"] = os.path.getsize(path)
print(json.dumps(out), flush=True)
"""

CASES = (
    "node-copy",
    "node-copy-then-failure",
    "rel-copy",
    "node-copy-empty",
    "node-copy-emptied",
    "node-copy-abandoned",
    "node-load",
)


def run(folder: Path, case: str, cap: int, timeout: float = 30) -> dict[str, Any]:
    store = folder / f"{case}.kuzu"
    try:
        try:
            proc = subprocess.run(
                [sys.executable, "-c", CASE, str(store), case, str(cap)],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            if case == "node-copy-abandoned" and not proc.returncode:
                proc = subprocess.run(
                    [sys.executable, "-c", CASE, str(store), "reopen", str(cap)],
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                )
        except subprocess.TimeoutExpired:
            size = store.stat().st_size if store.exists() else 0
            return {"case": case, "size": size, "error": f"still running after {timeout:.0f} s"}
        lines = proc.stdout.strip().splitlines()
        row: dict[str, Any] = json.loads(lines[-1]) if lines else {}
        if proc.returncode:
            row["error"] = f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"
        if "size" not in row:
            row["size"] = store.stat().st_size if store.exists() else 0
    finally:
        for leftover in folder.glob(f"{case}.kuzu*"):
            leftover.unlink()
    return {"case": case, **row}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path, help="a folder for the small stores (deleted after)")
    ap.add_argument("--max-mb", type=int, default=512, help="file-size limit of each case")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    args.folder.mkdir(parents=True, exist_ok=False)
    try:
        rows = [run(args.folder, case, args.max_mb << 20) for case in CASES]
    finally:
        shutil.rmtree(args.folder, ignore_errors=True)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'case':<24} {'file MB':>8} {'nodes':>7} {'links':>6}  error")
    for r in rows:
        print(
            f"{r['case']:<24} {r['size'] / 2**20:>8.1f} {r.get('nodes', '-')!s:>7} "
            f"{r.get('links', '-')!s:>6}  {r['error']}"
        )
    print("expected after each: 2,003 nodes, 1,000 links, a few MB (node-copy-empty: 1,003, 0)")


if __name__ == "__main__":
    main()
