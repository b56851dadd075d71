"""Core benchmark: import rate, remember latency, recall p50/p95 (with its reinforcement write),
full maintain time and peak RSS, on synthetic graphs. Prints a table; ``--json`` prints JSON.

Then a small namespace (``--small`` memories: the large one's first texts, so every word is
shared) is imported beside the large one and recalled with queries taken from its own texts:
``small_recall_*`` is the cost of finding a namespace's own matches when most of the full-text
index's hits belong to another namespace, ``small_recall_mean_hits`` what it finds.

    python bench/bench_core.py --sizes 10000 100000
    EBB_BACKEND=neo4j python bench/bench_core.py --sizes 100000 --backend neo4j
    python bench/bench_core.py --sizes 100000 --embedder fake:384   # vectors too (see below)

``--embedder NAME`` (``ebb_core.embeddings.resolve``: ``minilm``, ``fake:384``...) gives every
memory a vector (the import embeds in batches) and recall fuses vector candidates. Reported
beside the usual figures: ``embed_per_s`` (texts/s at import), recall p50/p95 *excluding* the
query's embedding with ``query_embed_p50_ms`` apart, remember p50 excluding its embedding, and
the store's size. Run it and the text-only run in the same session to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synth
from ebb_core import Brain, FixedClock
from ebb_core.backends import open_store
from ebb_core.embeddings import Embedder, resolve


class TimedEmbedder(Embedder):
    """The embedder it wraps, with the time spent in it kept (to report costs apart)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name = inner, inner.name
        self.seconds, self.texts, self.last = 0.0, 0, 0.0

    def embed_documents(self, texts: Any) -> Any:
        t0 = time.perf_counter()
        out = self.inner.embed_documents(texts)
        self.last = time.perf_counter() - t0
        self.seconds += self.last
        self.texts += len(texts)
        return out

    def embed_query(self, text: str) -> Any:
        t0 = time.perf_counter()
        out = self.inner.embed_query(text)
        self.last = time.perf_counter() - t0
        return out


def store_mb(path: Path) -> float:
    files = [p for p in path.parent.glob(path.name + "*") if p.is_file()]
    return round(sum(p.stat().st_size for p in files) / 2**20, 1)


TARGETS = {"recall_p95_ms": 25.0, "maintain_s": 3.0, "import_per_s": 20_000, "remember_p50_ms": 5.0}


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    idx = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[idx]


def log(msg: str) -> None:
    print(f"  {msg}", file=sys.stderr, flush=True)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_size(
    n: int,
    backend: str,
    workdir: Path,
    ops: int,
    edges_per_node: float,
    small: int = 200,
    embedder: str = "",
) -> dict[str, Any]:
    data = workdir / f"graph-{n}.jsonl"
    if not data.exists():
        synth.write_file(data, n, edges_per_node)
    clock = FixedClock(synth.NOW)
    path = workdir / f"bench-{n}-{time.time_ns()}.kuzu"
    store = open_store("kuzu", path) if backend == "kuzu" else open_store(backend)
    ns = f"bench-{n}-{time.time_ns()}"
    inner = resolve(embedder) if embedder else None
    timed = TimedEmbedder(inner) if inner is not None else None
    brain = Brain(store, namespace=ns, clock=clock, embedder=timed or False)
    embed_ms: list[float] = []
    remember_embed_ms: list[float] = []
    try:
        t0 = time.perf_counter()
        counts = brain.import_(data, namespace=ns)
        import_s = time.perf_counter() - t0
        log(f"import {import_s:.1f} s")

        clock.advance(hours=1)
        t0 = time.perf_counter()
        report = brain.maintain()
        maintain_s = time.perf_counter() - t0
        log(f"maintain {maintain_s:.1f} s")

        qs = synth.queries(ops)
        for q in qs[:10]:  # warm caches and prepared statements
            brain.recall(q, k=10, reinforce=False)
        recall_ms = []
        hits = 0
        live: list[str] = []
        for q in qs:
            clock.advance(seconds=30)
            t0 = time.perf_counter()
            res = brain.recall(q, k=10)
            recall_ms.append((time.perf_counter() - t0) * 1000)
            embed_ms.append(brain.last_query_embed_s * 1000)
            hits += len(res)
            live.extend(h.id for h in res[:2])
        log(f"recall p50 {pct(recall_ms, 50):.1f} ms")
        live = list(dict.fromkeys(live)) or [n.id for n in brain.top(10)]

        remember_ms = []
        for i in range(ops):
            clock.advance(seconds=30)
            links = list(dict.fromkeys([live[i % len(live)], live[(i * 7) % len(live)]]))
            t0 = time.perf_counter()
            brain.remember(
                f"benchmark memory {i} about {qs[i % len(qs)]}", kind="note", links=links
            )
            remember_ms.append((time.perf_counter() - t0) * 1000)
            remember_embed_ms.append(timed.last * 1000 if timed is not None else 0.0)
        clock.advance(days=1)
        t0 = time.perf_counter()
        brain.maintain()
        maintain2_s = time.perf_counter() - t0

        small_data = workdir / f"small-{small}.jsonl"
        if not small_data.exists():
            with open(small_data, "w", encoding="utf-8") as fh:
                synth.write_graph(fh, small, edges_per_node, namespace="small")
        brain.import_(small_data, namespace=f"{ns}-small")
        neighbour = brain.scoped(f"{ns}-small")
        texts = [n.text for batch in brain.store.scan_nodes(f"{ns}-small") for n in batch]
        small_qs = synth.queries_from(texts, ops)
        for q in small_qs[:10]:
            neighbour.recall(q, k=10, reinforce=False)
        small_ms = []
        small_hits = 0
        for q in small_qs:
            clock.advance(seconds=30)
            t0 = time.perf_counter()
            small_hits += len(neighbour.recall(q, k=10))
            small_ms.append((time.perf_counter() - t0) * 1000)
        log(f"small-namespace recall p50 {pct(small_ms, 50):.1f} ms")
        embed_texts, embed_s = (timed.texts, timed.seconds) if timed is not None else (0, 0.0)
    finally:
        brain.close()
    excl = [r - e for r, e in zip(recall_ms, embed_ms, strict=True)]
    rem_excl = [r - e for r, e in zip(remember_ms, remember_embed_ms, strict=True)]
    extra = (
        {
            "embedder": embedder,
            "embed_per_s": round(embed_texts / embed_s) if embed_s else None,
            "recall_excl_embed_p50_ms": round(pct(excl, 50), 2),
            "recall_excl_embed_p95_ms": round(pct(excl, 95), 2),
            "query_embed_p50_ms": round(pct(embed_ms, 50), 2),
            "remember_excl_embed_p50_ms": round(pct(rem_excl, 50), 2),
        }
        if embedder
        else {}
    )
    if backend == "kuzu":
        extra["store_mb"] = store_mb(path)
    return {
        "backend": backend,
        "memories": counts["nodes"],
        "edges": counts["edges"],
        "import_s": round(import_s, 2),
        "import_per_s": round(counts["nodes"] / import_s),
        "maintain_s": round(maintain_s, 2),
        "maintain_again_s": round(maintain2_s, 2),
        "moved_first_maintain": sum(report.moved.values()),
        "recall_p50_ms": round(pct(recall_ms, 50), 2),
        "recall_p95_ms": round(pct(recall_ms, 95), 2),
        "recall_mean_hits": round(hits / len(qs), 1),
        "small_recall_p50_ms": round(pct(small_ms, 50), 2),
        "small_recall_p95_ms": round(pct(small_ms, 95), 2),
        "small_recall_mean_hits": round(small_hits / len(qs), 2),
        "remember_p50_ms": round(statistics.median(remember_ms), 2),
        "remember_p95_ms": round(pct(remember_ms, 95), 2),
        "peak_rss_mb": round(peak_rss_mb()),
        **extra,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--backend", default=os.environ.get("EBB_BACKEND", "kuzu"))
    ap.add_argument("--ops", type=int, default=300, help="recalls and remembers per size")
    ap.add_argument("--edges-per-node", type=float, default=5.0)
    ap.add_argument("--small", type=int, default=200, help="memories in the neighbour namespace")
    ap.add_argument("--workdir", help="keep generated data here (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--embedder", default="", help="give memories vectors (minilm, fake:384...)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = []
        for n in args.sizes:
            print(f"… {n:,} memories on {args.backend}", file=sys.stderr, flush=True)
            rows.append(
                run_size(
                    n, args.backend, work, args.ops, args.edges_per_node, args.small, args.embedder
                )
            )
    if args.json:
        print(json.dumps({"targets": TARGETS, "results": rows}, indent=2))
        return
    cols = [
        "backend",
        "memories",
        "edges",
        "import_per_s",
        "maintain_s",
        "maintain_again_s",
        "recall_p50_ms",
        "recall_p95_ms",
        "small_recall_p50_ms",
        "small_recall_p95_ms",
        "small_recall_mean_hits",
        "remember_p50_ms",
        "remember_p95_ms",
        "peak_rss_mb",
    ]
    cols += [c for c in rows[0] if c not in cols and c not in ("small_recall_mean_hits",)]
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in cols]
    print("  ".join(c.rjust(w) for c, w in zip(cols, widths, strict=True)))
    for r in rows:
        print("  ".join(str(r[c]).rjust(w) for c, w in zip(cols, widths, strict=True)))
    print("targets at 100k: " + ", ".join(f"{k} {v}" for k, v in TARGETS.items()))


if __name__ == "__main__":
    main()
