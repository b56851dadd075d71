"""What revising memories' texts costs as it goes on, on the embedded (Kùzu) store.

Kùzu 0.11.3 makes each checkpoint after a revised text (a string column) need more of the
buffer pool and more time, in proportion to the revisions so far, and it stays so after a
reopen (docs/kuzu.md, "a checkpoint that runs out of buffer pool"), until the store is copied
into a fresh file. A checkpoint that runs out of the pool stops the store in that process
(``engine.stop_after_failed_checkpoint``), and its next call makes that copy and goes on
there. This measures how the cost of a revision grows, and how often a budget makes a copy.

It makes a store of ``--memories`` memories in ``FOLDER`` (synthetic sentences, a few common
words each, like the tests'), or copies ``--store`` there. Then a child process under
``EBB_MEMORY_BUDGET=--budget`` revises ``--revisions`` of them (``remember`` with an existing
id, spread over the store) in batches of ``--batch``. It prints one row per batch: the
revisions so far, the batch's ms per revision and the copies into a fresh file it made. It
stops at the first error and says which.
``--json`` prints the rows as JSON too.

    python bench/revisions.py FOLDER [--memories 100000] [--revisions 20000] [--batch 5000]
        [--budget 2.5G] [--store PATH] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ANIMALS = ["otter", "heron", "badger", "lynx", "marten", "plover", "newt"]
PLACES = ["harbour", "orchard", "quarry", "meadow", "estuary", "chapel", "ridge", "weir"]


def _make(store: Path, memories: int) -> None:
    from ebb_core import Brain

    export = store.with_suffix(".jsonl")
    with export.open("w") as fh:
        for i in range(memories):
            text = f"a note that tells of a {ANIMALS[i % 7]} seen near the {PLACES[i % 8]}"
            rec = {"type": "node", "namespace": "t", "id": f"n{i}", "text": f"{text} at dawn"}
            fh.write(json.dumps(rec) + "\n")
    with Brain.open(store, namespace="t") as brain:
        brain.import_(export)
    export.unlink()


def _revise(store: Path, memories: int, revisions: int, batch: int) -> None:
    """The child: one JSON line per batch (with the copies into a fresh file it made, see
    ``KuzuStore._reopen_after_stop``), then one for the end (``stopped``: the error)."""
    import warnings

    from ebb_core import Brain, EbbError
    from ebb_core.kuzu_store import StoreRebuilt

    step = max(1, memories // max(1, revisions))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StoreRebuilt)
        with Brain.open(store, namespace="t") as brain:
            done, start = 0, time.perf_counter()
            try:
                while done < revisions:
                    i = (done * step) % memories
                    text = f"a revised note of a grebe on the mere, number {done}"
                    brain.remember(text, id=f"n{i}")
                    done += 1
                    if done % batch == 0:
                        ms = (time.perf_counter() - start) * 1000 / batch
                        row = {"revisions": done, "ms_per_revision": round(ms, 2)}
                        print(json.dumps({**row, "copies": len(caught)}))
                        caught.clear()
                        sys.stdout.flush()
                        start = time.perf_counter()
            except EbbError as exc:
                print(json.dumps({"revisions": done, "stopped": str(exc)}))
                return
    print(json.dumps({"revisions": done, "stopped": None}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--revisions", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=5_000)
    ap.add_argument("--budget", default="2.5G")
    ap.add_argument("--store", type=Path, help="a store to copy instead of making one")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    store = args.folder / "revisions.kuzu"
    if args.child:
        _revise(store, args.memories, args.revisions, args.batch)
        return
    args.folder.mkdir(parents=True, exist_ok=True)
    for suffix in ("", ".wal", ".shadow"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    if args.store:
        shutil.copy(args.store, store)
    else:
        _make(store, args.memories)
    cmd = [sys.executable, __file__, str(args.folder), "--child"]
    cmd += ["--memories", str(args.memories), "--revisions", str(args.revisions)]
    cmd += ["--batch", str(args.batch)]
    env = {**os.environ, "EBB_MEMORY_BUDGET": args.budget}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    rows: list[dict[str, Any]] = [json.loads(x) for x in out.stdout.splitlines() if x.strip()]
    print(f"{args.memories:,} memories, EBB_MEMORY_BUDGET={args.budget}")
    print(f"{'revisions':>10}  {'ms / revision':>13}  {'copies':>6}")
    for row in rows:
        if "ms_per_revision" in row:
            print(f"{row['revisions']:>10,}  {row['ms_per_revision']:>13.2f}  {row['copies']:>6}")
    end = rows[-1] if rows else {"revisions": 0, "stopped": out.stderr[-500:] or "no output"}
    print(
        f"after {end['revisions']:,} revisions: "
        + (f"stopped: {end['stopped']}" if end.get("stopped") else "went through")
    )
    if out.returncode:
        print(f"the child exited with {out.returncode}: {out.stderr[-500:]}")
    if args.json:
        print(json.dumps({"memories": args.memories, "budget": args.budget, "rows": rows}))


if __name__ == "__main__":
    main()
