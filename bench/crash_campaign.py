"""Crash campaign: SIGKILL a writer at random points and check that nothing acknowledged is lost.

Every cycle starts a worker process that first reopens the store the previous worker was
killed in (Kùzu's recovery and Ebb's clean-up run here, and can be killed too), checks that
every memory acknowledged so far is there, that each import is all-or-nothing, and that recall
answers, then does one phase's work, printing an acknowledgement after each call returns. The
parent kills it at a random moment. Phases:

- ``remember``: remember() in a loop (with links), each id acknowledged when the call returns;
- ``import-empty``: import a file into a new, empty store;
- ``import-full``: import a file into a store that already holds acknowledged memories;
- ``index``: rebuild the full-text index in a loop;
- ``maintain``: maintain() in a loop (after reinforcing a few memories).

The test suite runs a short campaign (tests/test_crash_safety.py); run a longer one with
``python bench/crash_campaign.py --kills 200`` (``--json`` for machine-readable figures).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PHASES = ("remember", "import-empty", "import-full", "index", "maintain")
HERE = Path(__file__).resolve().parent


# -- the worker (runs in a subprocess) ---------------------------------------------------------
def _worker(args: argparse.Namespace) -> int:
    import warnings

    from ebb_core import Brain

    warnings.simplefilter("ignore")  # a StoreRebuilt warning is fine; the check below decides
    expect = json.loads(Path(args.expect).read_text()) if args.expect else {}
    if args.verify:
        t0 = time.monotonic()
        try:
            b = Brain.open(args.verify, namespace="acked")
        except Exception as exc:  # the campaign reports it, with the kill that caused it
            print(f"FAIL open {type(exc).__name__}: {exc}", flush=True)
            return 3
        problems = _verify(b, expect)
        b.close()
        if problems:
            print("FAIL verify " + "; ".join(problems[:5]), flush=True)
            return 4
        print(f"verified {time.monotonic() - t0:.3f}", flush=True)
    if args.phase == "none":
        return 0
    b = Brain.open(args.db, namespace="acked")
    print("ready", flush=True)
    rng = random.Random(args.seed)
    if args.phase == "remember":
        n = 0
        while True:
            mid = f"note:{args.seed}-{n}"
            links = [f"note:{args.seed}-{rng.randrange(n)}"] if n else []
            b.remember(f"harbor lantern memory {args.seed} {n} {rng.random()}", id=mid, links=links)
            print(f"ack {mid}", flush=True)
            n += 1
    elif args.phase in ("import-empty", "import-full"):
        t0 = time.monotonic()
        b.import_(args.file, namespace=args.into)
        print(f"committed {args.into} {time.monotonic() - t0:.3f}", flush=True)
        time.sleep(3600)
    elif args.phase == "index":
        while True:
            t0 = time.monotonic()
            b.store.rebuild_text_index()  # type: ignore[attr-defined]
            print(f"indexed {time.monotonic() - t0:.3f}", flush=True)
    elif args.phase == "maintain":
        while True:
            t0 = time.monotonic()
            b.recall("harbor lantern", 3)
            b.maintain()
            print(f"maintained {time.monotonic() - t0:.3f}", flush=True)
    return 0


def _verify(b: Any, expect: dict[str, Any]) -> list[str]:
    problems = []
    acked = expect.get("acked", [])
    if acked:
        have = b.store.existing_ids("acked", acked)
        lost = [i for i in acked if i not in have]
        if lost:
            problems.append(f"{len(lost)} acknowledged memories lost, e.g. {lost[:3]}")
        if not b.recall("harbor lantern", 1, reinforce=False):
            problems.append("recall finds nothing for 'harbor lantern'")
    size = expect.get("import_size", 0)
    for ns, committed in expect.get("imports", {}).items():
        n = b.scoped(ns).stats().nodes
        if n not in (0, size) or (committed and n != size):
            problems.append(f"import into {ns}: {n} memories (committed={committed}, file {size})")
        if n == size and size and not b.scoped(ns).recall(expect["import_word"], 1, depth=3):
            problems.append(f"import into {ns}: its memories are not in the text index")
    return problems


# -- the parent ------------------------------------------------------------------------------------
@dataclass
class Result:
    kills: int = 0
    cycles: int = 0
    by_phase: dict[str, int] = field(default_factory=dict)
    acked: int = 0
    imports_committed: int = 0
    imports_rolled_back: int = 0
    failures: list[str] = field(default_factory=list)
    reopen_s: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        r = sorted(self.reopen_s)
        return {
            "kills": self.kills,
            "cycles": self.cycles,
            "kills_by_phase": self.by_phase,
            "acknowledged_memories": self.acked,
            "imports_committed": self.imports_committed,
            "imports_rolled_back": self.imports_rolled_back,
            "failures": self.failures,
            "unopenable_stores": sum(1 for f in self.failures if "FAIL open" in f),
            "lost": sum(1 for f in self.failures if "lost" in f or "import into" in f),
            "reopen_median_s": r[len(r) // 2] if r else None,
            "reopen_max_s": r[-1] if r else None,
            "seconds": round(self.seconds, 1),
        }


def _python() -> str:
    return sys.executable


def _spawn(args: list[str]) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [_python(), str(Path(__file__).resolve()), "--worker", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _read_until(p: subprocess.Popen[str], word: str, timeout: float, out: list[str]) -> bool:
    """Read lines until one starts with ``word`` (True) or the process ends (False)."""
    assert p.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            return False
        out.append(line.strip())
        if line.startswith(word):
            return True
    return False


def make_import_file(path: Path, nodes: int) -> None:
    sys.path.insert(0, str(HERE))
    import synth

    synth.write_file(path, nodes, 2.0)


def run_campaign(
    workdir: Path,
    kills: int,
    *,
    seed: int = 1,
    import_size: int = 6000,
    phases: tuple[str, ...] = PHASES,
    log: Any = None,
) -> Result:
    """Kill a writer ``kills`` times, spread over ``phases`` in turn; see the module docstring."""
    rng = random.Random(seed)
    result = Result()
    started = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    data = workdir / f"import-{import_size}.jsonl"
    if not data.exists():
        make_import_file(data, import_size)
    import_word = _first_word(data)
    stores = {ph: workdir / f"{ph}.kuzu" for ph in phases}
    expect: dict[Path, dict[str, Any]] = {
        db: {"acked": [], "imports": {}, "import_size": import_size, "import_word": import_word}
        for db in stores.values()
    }
    # how long each phase's work takes, to spread the kills over it (measured on first use)
    span = {"remember": 3.0, "import-empty": 2.5, "import-full": 3.0, "index": 1.5, "maintain": 2.0}
    _prepare(stores, expect, data)
    base_full = stores.get("import-full", workdir / "none")
    k = 0
    while result.kills < kills:
        phase = phases[k % len(phases)]
        k += 1
        db = stores[phase]
        exp = expect[db]
        cycle_seed = rng.randrange(1 << 30)
        args = ["--phase", phase, "--seed", str(cycle_seed), "--db", str(db), "--verify", str(db)]
        if phase == "import-empty":
            fresh = workdir / f"empty-{k}.kuzu"
            args[args.index("--db") + 1] = str(fresh)
            stores[phase] = fresh
            expect[fresh] = {
                "acked": [],
                "imports": {"imp": False},
                "import_size": import_size,
                "import_word": import_word,
            }
            args += ["--file", str(data), "--into", "imp"]
        elif phase == "import-full":
            # a copy of the full base store each time, so that every import takes the path that
            # drops and rebuilds the text index around the load (as big as the store or bigger)
            fresh = workdir / f"full-{k}.kuzu"
            shutil.copyfile(base_full, fresh)
            args[args.index("--db") + 1] = str(fresh)
            stores[phase] = fresh
            expect[fresh] = {
                "acked": list(expect[base_full]["acked"]),
                "imports": {"imp": False},
                "import_size": import_size,
                "import_word": import_word,
            }
            args += ["--file", str(data), "--into", "imp"]
        expect_file = workdir / "expect.json"
        expect_file.write_text(json.dumps(exp))
        args += ["--expect", str(expect_file)]
        p = _spawn(args)
        out: list[str] = []
        result.cycles += 1
        early = rng.random() < 0.15  # now and then, kill during the reopen and recovery itself
        if early:
            time.sleep(rng.uniform(0.3, 2.5))
        else:
            if not _read_until(p, "verified", 120, out):
                p.wait()
                result.failures.append(_failure(phase, k, out, p))
                break
            result.reopen_s.append(float(out[-1].split()[1]))
            if not _read_until(p, "ready", 60, out):
                p.wait()
                result.failures.append(_failure(phase, k, out, p))
                break
            time.sleep(rng.uniform(0.0, span[phase]))
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            result.kills += 1
            result.by_phase[phase] = result.by_phase.get(phase, 0) + 1
        p.wait()
        assert p.stdout is not None
        out += [line.strip() for line in p.stdout.read().splitlines()]
        if any(line.startswith("FAIL") for line in out):
            result.failures.append(_failure(phase, k, out, p))
            break
        new_db = Path(args[args.index("--db") + 1])
        for line in out:
            words = line.split() or [""]
            if words[0] in ("committed", "indexed", "maintained") and len(words) > 1:
                span[phase] = max(span[phase] * 0.8, float(words[-1]) * 1.2)
            if line.startswith("ack "):
                expect[new_db]["acked"].append(line.split()[1])
                result.acked += 1
            elif line.startswith("committed "):
                expect[new_db]["imports"][line.split()[1]] = True
        if log:
            last = out[-1] if out else ""
            log(f"cycle {k} {phase}: killed={p.returncode == -9} early={early} last={last!r}")
    # a last reopen of every store, with no kill
    for db, exp in expect.items():
        if not db.exists():
            continue
        expect_file = workdir / "expect.json"
        expect_file.write_text(json.dumps(exp))
        p = _spawn(["--phase", "none", "--verify", str(db), "--expect", str(expect_file)])
        out = []
        ok = _read_until(p, "verified", 120, out)
        p.wait()
        if not ok:
            result.failures.append(_failure("final", 0, out, p) + f" ({db.name})")
        for committed in exp["imports"].values():
            if committed:
                result.imports_committed += 1
            else:
                result.imports_rolled_back += 1
    result.seconds = time.monotonic() - started
    return result


def _prepare(stores: dict[str, Path], expect: dict[Path, dict[str, Any]], data: Path) -> None:
    """Give the remember / import-full / index / maintain stores some acknowledged memories."""
    for phase, db in stores.items():
        if phase == "import-empty":
            continue
        n = 300 if phase == "import-full" else 100
        script = (
            "import sys\nfrom ebb_core import Brain\n"
            "b = Brain.open(sys.argv[1], namespace='acked')\n"
            f"for i in range({n}):\n"
            "    b.remember(f'harbor lantern seed {i}', id=f'note:seed-{i}',"
            " links=[f'note:seed-{i - 1}'] if i else [])\n"
            "b.close()\n"
        )
        if phase in ("index", "maintain"):  # big enough for a kill to land inside the work
            script += f"b = Brain.open(sys.argv[1])\nb.import_({str(data)!r}, namespace='bulk')\n"
            script += "b.close()\n"
            expect[db]["imports"]["bulk"] = True
        subprocess.run([_python(), "-c", script, str(db)], check=True)
        expect[db]["acked"] += [f"note:seed-{i}" for i in range(n)]


def _first_word(data: Path) -> str:
    with open(data, encoding="utf-8") as fh:
        fh.readline()
        return str(json.loads(fh.readline())["text"].split()[0])


def _failure(phase: str, k: int, out: list[str], p: subprocess.Popen[str]) -> str:
    assert p.stderr is not None
    err = p.stderr.read()[-600:] if p.stderr else ""
    fails = [line for line in out if line.startswith("FAIL")]
    return f"cycle {k} ({phase}): rc={p.returncode} {fails[-1] if fails else ''} {err.strip()}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--import-size", type=int, default=6000)
    ap.add_argument("--dir", help="work folder (default: a temporary one, removed after)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    for a in ("--phase", "--db", "--verify", "--expect", "--file", "--into"):
        ap.add_argument(a, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return _worker(args)
    log = (lambda m: print(m, file=sys.stderr)) if args.verbose else None
    if args.dir:
        res = run_campaign(Path(args.dir), args.kills, seed=args.seed,
                           import_size=args.import_size, log=log)  # fmt: skip
    else:
        with tempfile.TemporaryDirectory(prefix="ebb-crash-") as tmp:
            res = run_campaign(Path(tmp), args.kills, seed=args.seed,
                               import_size=args.import_size, log=log)  # fmt: skip
    d = res.as_dict()
    if args.json:
        print(json.dumps(d, indent=2))
    else:
        print("| what | value |\n|---|---|")
        for key, value in d.items():
            if key != "failures":
                print(f"| {key} | {value} |")
        for f in d["failures"]:
            print(f"FAILURE: {f}")
    return 1 if d["failures"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
