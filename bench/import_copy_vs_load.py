"""A/B: an import written with ``LOAD FROM … CREATE`` (what Ebb does: it rolls back cleanly on
Kùzu 0.11.3) against ``COPY`` (faster, but a rolled-back ``COPY`` damages the table: docs/kuzu.md,
known issues; ``bench/kuzu_rollback_copy.py``).

Each round imports the same synthetic export (``bench/synth.py``, written once to
``DATA_DIR``) into a new store, once each way, interleaved (B, A, A, B, …) so that load on the
machine falls on both. The ``COPY`` side is the old behaviour, reached by calling
``KuzuSession._copy`` with ``may_roll_back=False``. Then (a control: the same path both ways)
it stores ``--vectors`` random 384-dimension vectors as an import's or ``ebb embed``'s go
(``put_vectors(new=True)``: a ``COPY`` in a transaction of its own, either way); the two sides
of the control differ by what the machine's load does to one run.

``python bench/import_copy_vs_load.py DATA_DIR [--nodes 100000] [--rounds 2] [--json]``
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import synth  # noqa: E402
from ebb_core import Brain  # noqa: E402
from ebb_core.clock import FixedClock  # noqa: E402
from ebb_core.kuzu.session import KuzuSession  # noqa: E402

_REAL_COPY = KuzuSession._copy


def _as_copy(self: Any, name: str, table: Any, **kwargs: Any) -> None:
    kwargs.pop("may_roll_back", None)
    kwargs.pop("ends", None)
    _REAL_COPY(self, name, table, may_roll_back=False)


def one(data: Path, mode: str, vectors: int) -> dict[str, float]:
    KuzuSession._copy = _REAL_COPY if mode == "load" else _as_copy  # type: ignore[method-assign]
    folder = Path(tempfile.mkdtemp(prefix="ebb-ab-", dir=data.parent))
    try:
        with Brain.open(folder / "db.kuzu", namespace="bench", clock=FixedClock(synth.NOW)) as b:
            t0 = time.perf_counter()
            counts = b.import_(data)
            out = {"import_s": time.perf_counter() - t0, "nodes": counts["nodes"]}
            out["edges"] = counts["edges"]
            if vectors:
                import numpy as np

                ids = [n.id for batch in b.store.scan_nodes("bench") for n in batch][:vectors]
                mat = np.random.default_rng(1).random((len(ids), 384), dtype=np.float32)
                b.store.ensure_vectors(384)
                t0 = time.perf_counter()
                for lo in range(0, len(ids), 50_000):
                    b.store.put_vectors(
                        "bench", ids[lo : lo + 50_000], mat[lo : lo + 50_000], new=True
                    )
                out["vectors_s"] = time.perf_counter() - t0
        return out
    finally:
        KuzuSession._copy = _REAL_COPY  # type: ignore[method-assign]
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data_dir", type=Path, help="where the synthetic export is written (kept)")
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--edges-per-node", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--vectors", type=int, default=100_000, help="vectors stored each way")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    data = args.data_dir / f"synth-{args.nodes}-{args.edges_per_node:g}.jsonl"
    if not data.exists():
        synth.write_file(data, args.nodes, args.edges_per_node)
    runs: dict[str, list[dict[str, float]]] = {"load": [], "copy": []}
    for r in range(args.rounds):
        for mode in ("copy", "load") if r % 2 == 0 else ("load", "copy"):
            runs[mode].append(one(data, mode, args.vectors))
            print(f"round {r} {mode}: {runs[mode][-1]}", file=sys.stderr, flush=True)
    summary: dict[str, Any] = {"nodes": args.nodes, "rounds": args.rounds}
    for key in ("import_s", "vectors_s"):
        if key not in runs["load"][0]:
            continue
        a = statistics.median(r[key] for r in runs["copy"])
        b = statistics.median(r[key] for r in runs["load"])
        summary[key] = {"copy": round(a, 2), "load": round(b, 2), "load/copy": round(b / a, 3)}
    summary["edges"] = runs["load"][0]["edges"]
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(f"{'median of ' + str(args.rounds):<14} {'COPY s':>8} {'LOAD s':>8} {'LOAD/COPY':>10}")
    for key in ("import_s", "vectors_s"):
        if key in summary:
            row = summary[key]
            print(f"{key:<14} {row['copy']:>8.2f} {row['load']:>8.2f} {row['load/copy']:>10.3f}")
    print(f"{args.nodes:,} memories, {summary['edges']:,} links")


if __name__ == "__main__":
    main()
