"""What the MCP client's output-schema check costs per tool result.

The official ``mcp`` SDK client checks every structured result against the tool's output schema
with ``jsonschema`` (pure Python), on every call, whatever the server. This script builds
``ebb mcp``'s server in process on a store of ``--size`` memories (every memory ten Zipf words
and a token of its own, as in ``mcp_bench.py``; one in four linked to another), connects the
SDK's ``Client`` to it in memory, calls each tool ``--calls`` times and reports, per tool, the
median time of that check (timed inside the SDK, never changed) and the size of the reply's text.

    python bench/mcp_schema_check.py [--size 1000] [--calls 50] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mcp import Client

import mcp_bench
from ebb_core import Brain
from ebb_core.mcp_access import StoreAccess
from ebb_core.mcp_server import build_server


def build_store(db: Path, corpus: mcp_bench.Corpus) -> None:
    with Brain.open(db, backend="kuzu", namespace=mcp_bench.NAMESPACE) as brain, brain.batch():
        for i, text in enumerate(corpus.texts):
            links = [f"note:{i - 1:07d}"] if i % 4 == 3 else []
            brain.remember(text, id=f"note:{i:07d}", links=links)


async def measure(db: Path, corpus: mcp_bench.Corpus, calls: int) -> list[dict[str, Any]]:
    access = StoreAccess(db, backend="kuzu", namespace=mcp_bench.NAMESPACE, idle_release=600)
    ids = [f"note:{i:07d}" for i in range(len(corpus.texts))]
    cases: list[tuple[str, str, Any]] = [
        ("recall (k=10)", "recall", lambda i: {"query": corpus.queries[i], "k": 10}),
        (
            "recall (k=10, explain=true)",
            "recall",
            lambda i: {"query": corpus.queries[i], "k": 10, "explain": True},
        ),
        ("remember", "remember", lambda i: {"text": corpus.new_texts[i]}),
        ("read (5 ids)", "read", lambda i: {"ids": ids[5 * i : 5 * i + 5]}),
        ("explore (depth 2)", "explore", lambda i: {"id": ids[4 * i + 3], "depth": 2}),
        ("neighbors", "neighbors", lambda i: {"id": ids[4 * i + 3]}),
        ("history", "history", lambda i: {"id": ids[i]}),
        ("stats", "stats", lambda i: {}),
    ]
    out = []
    try:
        async with Client(build_server(access)) as client:
            for label, tool, args in cases:
                checks, sizes = [], []
                for i in range(calls + 3):
                    before = mcp_bench._CHECKED[0]
                    result = await client.call_tool(tool, args(i))
                    if result.is_error:
                        raise RuntimeError(f"{label}: {result.content}")
                    if i >= 3:  # the first calls warm up
                        checks.append(mcp_bench._CHECKED[0] - before)
                        sizes.append(len(result.content[0].text))  # type: ignore[union-attr]
                out.append(
                    {
                        "tool": label,
                        "check_ms_p50": round(statistics.median(checks), 3),
                        "reply_bytes_p50": int(statistics.median(sizes)),
                    }
                )
    finally:
        access.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size", type=int, default=1000, help="memories in the store")
    ap.add_argument("--calls", type=int, default=50, help="calls per tool")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args()
    mcp_bench.count_client_checks()
    corpus = mcp_bench.Corpus(args.size, max(args.calls + 3, 10))
    with tempfile.TemporaryDirectory(prefix="ebb-schema-check-") as tmp:
        db = Path(tmp) / "store.kuzu"
        build_store(db, corpus)
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        rows = asyncio.run(measure(db, corpus, args.calls))
        took = time.perf_counter() - t0
    if args.json:
        print(json.dumps({"size": args.size, "load": round(load, 2), "rows": rows}, indent=2))
        return
    print("| tool result | client's schema check p50 | reply text p50 |")
    print("|---|---|---|")
    for r in rows:
        print(f"| {r['tool']} | {r['check_ms_p50']:.2f} ms | {r['reply_bytes_p50']:,} B |")
    print(f"\n{args.size:,} memories, {args.calls} calls each, {took:.0f} s, load {load:.1f}")


if __name__ == "__main__":
    main()
