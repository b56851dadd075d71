"""How long ``ebb ingest`` takes on a generated folder of Markdown notes (embedded Kùzu).

Writes ``--notes`` notes into a temporary folder (a few per sub-folder, each a paragraph with
``--links`` ``[[wikilinks]]`` to random others and one to a note that does not exist), then
times three runs on one store: the first ingest, the same folder again (nothing changed), and
again after ``--changed`` of the notes were edited. Prints a table; ``--json`` for JSON.

    python bench/ingest_bench.py --notes 1000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WORDS = [
    "harbour",
    "berth",
    "pilot",
    "tide",
    "map",
    "feed",
    "night",
    "boat",
    "price",
    "roadmap",
    "risk",
    "team",
    "alert",
    "phone",
    "ship",
    "station",
    "fee",
    "radio",
    "cache",
    "quay",
    "crane",
    "cargo",
    "dock",
]


def make_notes(root: Path, n: int, links: int, rng: random.Random) -> list[Path]:
    paths = []
    for i in range(n):
        path = root / f"area-{i % 20:02d}" / f"Note {i:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        targets = [f"[[Note {rng.randrange(n):05d}]]" for _ in range(links)]
        body = " ".join(rng.choice(WORDS) for _ in range(60))
        path.write_text(
            f"# Note {i}\n\n{body}\n\nSee {', '.join(targets)} and [[missing {i}]].\n",
            encoding="utf-8",
        )
        stamp = 1_700_000_000 + i * 3600
        os.utime(path, (stamp, stamp))
        paths.append(path)
    return paths


def run(notes: int, links: int, changed: int, seed: int) -> dict[str, Any]:
    from ebb_core import Brain
    from ebb_core.backends import open_store
    from ebb_core.ingest import ingest

    rng = random.Random(seed)
    rows: dict[str, Any] = {"notes": notes, "links_per_note": links, "changed": changed}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "notes"
        paths = make_notes(root, notes, links, rng)
        brain = Brain(open_store("kuzu", Path(tmp) / "bench.kuzu"), namespace="bench")
        try:
            for label in ("first", "unchanged", "edited"):
                if label == "edited":
                    for path in rng.sample(paths, changed):
                        with path.open("a", encoding="utf-8") as fh:
                            fh.write(f"\nEdited: {rng.choice(WORDS)}.\n")
                t0 = time.perf_counter()
                report = ingest(brain, root)
                seconds = time.perf_counter() - t0
                rows[label] = {
                    "seconds": round(seconds, 3),
                    "notes_per_s": round(notes / seconds, 1),
                    **{
                        k: report.as_dict()[k]
                        for k in ("added", "updated", "unchanged", "links", "links_unresolved")
                    },
                }
        finally:
            brain.close()
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=1000)
    parser.add_argument("--links", type=int, default=3, help="Wikilinks per note.")
    parser.add_argument("--changed", type=int, default=100, help="Notes edited before run 3.")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.notes, args.links, min(args.changed, args.notes), args.seed)
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
        return
    print(f"ingest: {args.notes} notes, {args.links} wikilinks each (embedded Kùzu)")
    print(f"{'run':<10} {'seconds':>8} {'notes/s':>8} {'added':>6} {'updated':>8} {'links':>6}")
    for label in ("first", "unchanged", "edited"):
        r = result[label]
        print(
            f"{label:<10} {r['seconds']:>8.2f} {r['notes_per_s']:>8.1f} {r['added']:>6} "
            f"{r['updated']:>8} {r['links']:>6}"
        )


if __name__ == "__main__":
    main()
