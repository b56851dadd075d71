"""One-shot `ebb` commands, whole process: wall time and CPU (user + system), this source tree
against another one, alternated run by run (A B A B ...), on the same store.

    python bench/cli_oneshot.py --db STORE -n bench --other-src /tmp/old/src \
        --cmd "--help" --cmd "stats --json" --cmd "recall WORD" --runs 15

Each command runs in a fresh interpreter (``python -m ebb_core.cli``) with ``PYTHONPATH`` set to
one source tree; the store is shared, so both sides see the same store as it changes (a
reinforcing recall writes). CPU is the child's ``ru_utime + ru_stime`` from ``os.wait4``. The
load average is printed at the start and the end: on a loaded machine wall time is CPU time
times the queueing, so compare the ratios of one run, never two runs taken at different times.
Bytecode: the environment's ``PYTHONDONTWRITEBYTECODE`` is left as it is (``--bytecode`` writes
and uses it, as an installed package does).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent / "src"


def run_once(src: Path, args: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall s, cpu s, exit code) of one ``python -m ebb_core.cli ARGS`` with ``src`` first."""
    child_env = {**env, "PYTHONPATH": str(src)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ebb_core.cli", *args],
        env=child_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{src}: ebb {shlex.join(args)} exited {proc.returncode}: {err}")
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, help="the store (use a copy: recall reinforces)")
    ap.add_argument("-n", "--namespace", default=None)
    ap.add_argument("--other-src", type=Path, default=None, help="the 'before' side's src/")
    ap.add_argument("--cmd", action="append", required=True, help="a command line after `ebb`")
    ap.add_argument("--runs", type=int, default=11, help="runs of each command on each side")
    ap.add_argument("--bytecode", action="store_true", help="write and use .pyc files")
    ap.add_argument("--json", action="store_true", help="print JSON after the table")
    a = ap.parse_args()

    env = dict(os.environ)
    if a.bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    sides = {"this": HERE}
    if a.other_src is not None:
        sides = {"other": a.other_src.resolve(), **sides}
    base = ["--db", a.db] + (["-n", a.namespace] if a.namespace else [])
    load0 = os.getloadavg()
    results: dict[str, dict[str, dict[str, list[float]]]] = {}
    for cmd in a.cmd:
        args = cmd.split() if cmd.startswith("-") else [*base, *shlex.split(cmd)]
        per = results.setdefault(cmd, {s: {"wall": [], "cpu": []} for s in sides})
        for src in sides.values():  # one warm-up each (bytecode, page cache)
            run_once(src, args, env)
        for i in range(a.runs):
            order = list(sides.items()) if i % 2 == 0 else list(reversed(sides.items()))
            for side, src in order:
                wall, cpu, _ = run_once(src, args, env)
                per[side]["wall"].append(wall)
                per[side]["cpu"].append(cpu)
    load1 = os.getloadavg()

    def med(xs: list[float]) -> float:
        return statistics.median(xs)

    print(f"load {load0[0]:.1f} -> {load1[0]:.1f}; {a.runs} runs a side, alternated")
    head = "| command | side | wall median (min) | CPU median (min) |"
    if len(sides) == 2:
        head += " wall ratio | CPU ratio |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    summary: dict[str, object] = {"load": [load0[0], load1[0]], "runs": a.runs, "commands": {}}
    for cmd, per in results.items():
        row: dict[str, object] = {}
        for side in sides:
            w, c = per[side]["wall"], per[side]["cpu"]
            line = (
                f"| `ebb {cmd}` | {side} | {med(w) * 1000:.0f} ms ({min(w) * 1000:.0f}) "
                f"| {med(c) * 1000:.0f} ms ({min(c) * 1000:.0f}) |"
            )
            if len(sides) == 2 and side == "this":
                o = per["other"]
                line += f" x{med(w) / med(o['wall']):.2f} | x{med(c) / med(o['cpu']):.2f} |"
            elif len(sides) == 2:
                line += " | |"
            print(line)
            row[side] = {"wall_s": w, "cpu_s": c, "wall_median": med(w), "cpu_median": med(c)}
        summary["commands"][cmd] = row  # type: ignore[index]
    if a.json:
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
