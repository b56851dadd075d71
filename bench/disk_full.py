"""Disk-full scenarios on a real small tmpfs: writes fail with ``StoreFull``, never an abort.

Run as root or where user namespaces allow mounting: the script re-runs itself under
``unshare -Urm`` (a private mount namespace) and mounts a tmpfs of ``--size-mb`` there, so
nothing on the machine is touched. Every step runs in its own process, so that an abort
(SIGABRT) shows as a failed step instead of ending the run. Scenarios:

1. ``remember`` until the disk is full: the first failure is ``StoreFull``; the process exits
   cleanly; reopening while the disk is still full fails cleanly or opens; once the tmpfs is
   made bigger, the store opens with every acknowledged memory and takes new writes.
2. ``import`` of a file too big for what is left: ``StoreFull``, nothing of it stored, the
   memories already there intact, the store opens once there is room.
3. ``maintain`` and an index rebuild on a full disk: done or ``StoreFull``, never an abort.

``python bench/disk_full.py [--json]``; tests/test_crash_safety.py runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()

STEP = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
from ebb_core import Brain, EbbError
op, db = sys.argv[1], sys.argv[2]
out = {"op": op}
try:
    b = Brain.open(db, namespace="acked")
except EbbError as exc:
    out["open_error"] = type(exc).__name__
    out["message"] = str(exc)
    print(json.dumps(out), flush=True)
    raise SystemExit(0)
try:
    if op == "fill":
        n = 0
        try:
            while True:
                b.remember("harbor lantern " + " ".join(f"w{n}x{i}" for i in range(60)),
                           id=f"note:{n}")
                print(json.dumps({"ack": n}), flush=True)
                n += 1
        except EbbError as exc:
            out["error"] = type(exc).__name__
            out["message"] = str(exc)
    elif op == "check":
        want = json.loads(sys.argv[3])
        have = b.store.existing_ids("acked", [f"note:{i}" for i in range(want)])
        out["present"] = len(have)
        out["imported"] = b.scoped("imp").stats().nodes
        out["recall"] = len(b.recall("harbor lantern", 3, reinforce=False))
        b.remember("after the disk was freed", id="note:after")
        out["wrote"] = True
    elif op == "import":
        try:
            b.import_(sys.argv[3], namespace="imp")
            out["imported"] = True
        except EbbError as exc:
            out["error"] = type(exc).__name__
            out["message"] = str(exc)
    elif op == "maintain":
        for what in ("maintain", "index"):
            try:
                b.maintain() if what == "maintain" else b.store.rebuild_text_index()
                out[what] = "done"
            except EbbError as exc:
                out[what] = type(exc).__name__
finally:
    b.close()
print(json.dumps(out), flush=True)
"""


def _step(op: str, db: Path, *extra: str) -> dict[str, Any]:
    p = subprocess.run(
        [sys.executable, "-c", STEP, op, str(db), *extra],
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    acks = [line["ack"] for line in lines if "ack" in line]
    final: dict[str, Any] = next((line for line in reversed(lines) if "op" in line), {})
    return {"rc": p.returncode, "acks": len(acks), **final, "stderr": p.stderr[-400:]}


def _resize(mnt: Path, mb: int) -> None:
    subprocess.run(["mount", "-o", f"remount,size={mb}m", str(mnt)], check=True)


def inside(mnt: Path, size_mb: int, import_file: Path) -> dict[str, Any]:
    """The scenarios, run where ``mnt`` is a tmpfs we may mount and resize."""
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(mnt)], check=True
    )
    res: dict[str, Any] = {"size_mb": size_mb}
    db = mnt / "store.kuzu"
    fill = _step("fill", db)
    res["fill"] = fill
    cli = subprocess.run(
        [sys.executable, "-m", "ebb_core.cli", "--db", str(db), "remember", "one more"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    res["cli_full"] = {"rc": cli.returncode, "stderr": cli.stderr[-400:]}
    res["reopen_full"] = _step("maintain", db)  # reopen, maintain, rebuild: all while full
    res["import_full"] = _step("import", db, str(import_file))
    # enough room to open (which keeps room for a checkpoint): maintain and an index build
    # with little more than that
    _resize(mnt, size_mb + size_mb // 2 + 6)
    res["maintain_near_full"] = _step("maintain", db)
    res["import_near_full"] = _step("import", db, str(import_file))
    _resize(mnt, size_mb * 4)
    res["after_room"] = _step("check", db, str(fill["acks"]))
    problems = []
    for name in ("fill", "reopen_full", "import_full", "maintain_near_full", "after_room"):
        step = res[name]
        if step["rc"] != 0:
            problems.append(f"{name}: process ended with {step['rc']}: {step['stderr']}")
    if res["cli_full"]["rc"] != 5 or "full" not in res["cli_full"]["stderr"]:
        problems.append(f"`ebb remember` on a full disk: {res['cli_full']} (expected exit 5)")
    if fill.get("error") != "StoreFull":
        problems.append(f"fill ended with {fill.get('error')!r}, not StoreFull")
    for name in ("import_full", "import_near_full"):
        step = res[name]
        if step.get("imported") is True:
            problems.append(f"{name}: the import fitted: make the file bigger than the tmpfs")
        elif step.get("error", step.get("open_error")) != "StoreFull":
            problems.append(f"{name}: {step}")
    near = res["maintain_near_full"]
    if near.get("open_error") or {near.get("maintain"), near.get("index")} - {"done", "StoreFull"}:
        problems.append(f"maintain / index build near full: {near}")
    after = res["after_room"]
    if after.get("present") != fill["acks"]:
        problems.append(f"after freeing space: {after.get('present')} of {fill['acks']} acked")
    if after.get("imported") not in (0,):
        problems.append(f"a failed import left {after.get('imported')} memories")
    if not after.get("wrote") or not after.get("recall"):
        problems.append(f"after freeing space the store does not work: {after}")
    res["problems"] = problems
    return res


def run(size_mb: int = 20, import_nodes: int = 30_000) -> dict[str, Any]:
    """Run the scenarios in a private mount namespace; returns the figures and ``problems``."""
    with tempfile.TemporaryDirectory(prefix="ebb-diskfull-") as tmp:
        mnt = Path(tmp) / "mnt"
        mnt.mkdir()
        data = Path(tmp) / "import.jsonl"
        sys.path.insert(0, str(HERE.parent))
        import synth

        synth.write_file(data, import_nodes, 2.0)
        cmd = [sys.executable, str(HERE), "--inside", str(mnt), "--size-mb", str(size_mb)]
        cmd += ["--import-file", str(data)]
        # root: a private mount namespace; others: a user namespace too, where allowed
        cmd = ["unshare", "-m" if os.geteuid() == 0 else "-Urm", *cmd]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
        if p.returncode != 0 or not p.stdout.strip():
            return {"problems": [f"could not run in a private mount namespace: {p.stderr[-800:]}"]}
        result: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
        return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=int, default=20)
    ap.add_argument("--import-nodes", type=int, default=30_000)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--inside", help=argparse.SUPPRESS)
    ap.add_argument("--import-file", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inside:
        print(json.dumps(inside(Path(args.inside), args.size_mb, Path(args.import_file))))
        return 0
    res = run(args.size_mb, args.import_nodes)
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        fill = res.get("fill", {})
        print(f"tmpfs {res.get('size_mb')} MB: {fill.get('acks')} memories acknowledged before "
              f"{fill.get('error')}; reopened full: {res.get('reopen_full', {})}; import on a "
              f"full disk: {res.get('import_full', {}).get('error')}; after room: "
              f"{res.get('after_room', {}).get('present')} present")  # fmt: skip
        for p in res["problems"]:
            print("PROBLEM:", p)
    return 1 if res["problems"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
