"""Core benchmark: import rate, remember latency, recall p50/p95 (with its reinforcement write),
full maintain time and peak RSS, on synthetic graphs. Prints a table; ``--json`` prints JSON.

Then a small namespace (``--small`` memories: the large one's first texts, so every word is
shared) is imported beside the large one and recalled with queries taken from its own texts:
``small_recall_*`` is the cost of finding a namespace's own matches when most of the full-text
index's hits belong to another namespace, ``small_recall_mean_hits`` what it finds.

``recall_*`` uses queries of 1-3 rarer words (about one hit each); ``common_recall_*`` queries
of 2-3 common words that match thousands of memories at 1M, so every recall returns (and
explains) k=10 hits. Each size runs in a process of its own, so ``peak_rss_mb`` is that size's
peak (import included). ``--plot FILE.png`` draws recall p95, remember p95, maintain time and
peak RSS against size for each backend in the results (``--merge`` adds earlier ``--json``
outputs, e.g. another backend's run); it needs matplotlib (``pip install -e '.[bench]'``).

    python bench/bench_core.py --sizes 10000 100000
    python bench/bench_core.py --sizes 10000 100000 1000000 --workdir /tmp/bench --plot curve.png
    python bench/bench_core.py --sizes --merge kuzu.json neo4j.json --plot both.png  # no new run
    NEO4J_URI=bolt://host:7687 python bench/bench_core.py --sizes 100000 --backend neo4j  # Bolt
    python bench/bench_core.py --sizes 100000 --embedder fake:384   # vectors too (see below)

``--backend neo4j`` without ``NEO4J_URI`` runs, for each size, a benchmark test server of its
own (``scripts/neo4j-test-server``, ``EBB_NEO4J_BENCH=1``, GDS off, ``--neo4j-heap`` and
``--neo4j-pagecache``, default 4g and 3g; its state in ``WORKDIR/neo4j-N-state``, deleted after)
and loads it as ``--neo4j-import`` says: ``bolt`` (``Brain.import_`` through the driver, ~600
memories/s at 10k), ``bulk`` (the offline path of docs/neo4j.md: ``ebb neo4j-bulk prepare``,
neo4j-admin with the server stopped, a server start, ``ebb neo4j-bulk finish``; ``import_s`` is
the four stages' wall time in all, each also reported as ``import_prepare_s`` ...
``import_finish_s``) or ``auto`` (the default: bulk from 100,000 memories, Bolt below, where
neo4j-admin's and the server's start-up cost more than the Bolt import). Everything after the
import is the same as on Kùzu. The RSS figures are apart: ``peak_rss_mb`` is the client's (the
larger of this process's peak, ``client_peak_rss_mb``, and ``prepare``'s, ``import_peak_rss_mb``),
``server_peak_rss_mb`` the server JVM's (VmHWM; ``server_heap``/``server_pagecache`` its
configuration), drawn as a dotted line of its own. With ``NEO4J_URI`` set the server is used as
it is (an emptied or dedicated database: the import goes to a new namespace) and the import is
Bolt's; its RSS is reported only when ``EBB_NEO4J_STATE_DIR`` names a test server on this host.
A 1M Neo4j size takes ~8 minutes and ~7 GB (the server) plus ~5 GB for neo4j-admin: run it under
``flock /tmp/ebb-heavy.lock``:

    python bench/bench_core.py --backend neo4j --sizes 10000 100000 1000000 --workdir /tmp/w \
        --json > neo4j.json
    python bench/bench_core.py --sizes --merge kuzu.json neo4j.json --plot growth.png

``--embedder NAME`` (``ebb_core.embeddings.resolve``: ``minilm``, ``fake:384``...) gives every
memory a vector (the import embeds in batches) and recall fuses vector candidates. Reported
beside the usual figures: ``embed_per_s`` (texts/s at import), recall p50/p95 *excluding* the
query's embedding with ``query_embed_p50_ms`` apart, remember p50 excluding its embedding, and
the store's size. Run it and the text-only run in the same session to compare.

``--dump-latencies FILE`` appends, for each size, one JSON line with every timed operation's
milliseconds in the order they ran (``recall``, ``common_recall``, ``remember``,
``small_recall``; recalls with their query) and the second each phase began: to see whether
a p95 comes from the start of a phase, from pauses spread through it, or from certain queries.

``--second-hop X`` sets ``Config.spread_second_hop`` (0 turns spreading's second hop off).
The script also runs against an older checkout's ``src`` (``PYTHONPATH=OLD/src``, even one from
before embeddings, without ``--embedder``), so a before/after pair measures the same work:

    git archive 86c1187 | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/src python bench/bench_core.py --sizes 100000 --workdir /tmp/w --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import neo4j_harness
import synth
from ebb_core import Brain, FixedClock
from ebb_core.backends import open_store

try:
    from ebb_core.embeddings import Embedder, resolve
except ImportError:  # a checkout from before embeddings (an A/B's old side): text alone
    Embedder = object  # type: ignore[assignment,misc]
    resolve = None  # type: ignore[assignment]


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


# issue 15's targets at 1M memories / 5M links on Kùzu (at 100k: maintain 3 s, remember p50 5 ms)
TARGETS = {
    "recall_p95_ms": 25.0,
    "remember_p95_ms": 10.0,
    "maintain_s": 10.0,
    "import_per_s": 20_000,
    "peak_rss_mb": 3_000,
}


BULK_SET = ("import_s", "import_cpu_s", "import_peak_rss_mb")  # a bulk load's, set in the row


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
    second_hop: float | None = None,
    neo4j: argparse.Namespace | None = None,
) -> dict[str, Any]:
    import ebb_core

    log(f"ebb_core from {Path(ebb_core.__file__).parent}")
    data = workdir / f"graph-{n}.jsonl"
    if not data.exists():
        synth.write_file(data, n, edges_per_node)
    ns = f"bench-{n}-{time.time_ns()}"
    if backend != "neo4j" or neo4j is None:
        return measure(
            n, backend, workdir, data, ns, ops, edges_per_node, small, embedder, second_hop
        )
    # Neo4j: the test server, started for this size (unless NEO4J_URI names one), loaded through
    # Bolt (Brain.import_ in measure) or the bulk path (here); its RSS read before it stops
    path = neo4j_harness.import_path(n, neo4j.neo4j_import, bool(os.environ.get("NEO4J_URI")))
    server = None
    if not os.environ.get("NEO4J_URI"):
        server = neo4j_harness.HarnessServer(
            workdir / f"neo4j-{n}-state", neo4j.neo4j_heap, neo4j.neo4j_pagecache
        )
    try:
        bulk: dict[str, Any] | None = None
        if server is not None and path == "bulk":
            log(f"bulk path: prepare, neo4j-admin, start, finish ({server.state})")
            bulk = server.bulk_load(data, workdir / f"neo4j-{n}-csv", ns, synth.NOW)
        elif server is not None:
            server.start()
        row = measure(
            n, backend, workdir, data, ns, ops, edges_per_node, small, embedder, second_hop, bulk
        )
        row["import_path"] = path
        if server is not None:
            row.update(server.rss(), server_heap=server.heap, server_pagecache=server.pagecache)
        else:
            row.update(neo4j_harness.external_rss())
    finally:
        if server is not None:
            server.close()
    return row


def measure(
    n: int,
    backend: str,
    workdir: Path,
    data: Path,
    ns: str,
    ops: int,
    edges_per_node: float,
    small: int,
    embedder: str,
    second_hop: float | None,
    bulk: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One size's measurements on an open store; ``bulk``: the data is already loaded (Neo4j's
    bulk path, its figures), else it is imported here."""
    clock = FixedClock(synth.NOW)
    db = workdir / f"bench-{n}-{time.time_ns()}.kuzu"
    store = open_store("kuzu", db) if backend == "kuzu" else open_store(backend)
    inner = resolve(embedder) if embedder else None
    timed = TimedEmbedder(inner) if inner is not None else None
    kwargs: dict[str, Any] = {"embedder": timed} if timed is not None else {}
    if second_hop is not None:  # Config.spread_second_hop (f54586b); the default otherwise
        from ebb_core import Config

        kwargs["config"] = Config(spread_second_hop=second_hop)
    brain = Brain(store, namespace=ns, clock=clock, **kwargs)
    embed_ms: list[float] = []
    remember_embed_ms: list[float] = []
    try:
        if bulk is None:
            t0, c0 = time.perf_counter(), time.process_time()
            counts = brain.import_(data, namespace=ns)
            import_s, import_cpu_s = time.perf_counter() - t0, time.process_time() - c0
            import_rss = peak_rss_mb()  # the peak so far: the import's (or what came before it)
        else:  # loaded by the bulk path: its whole time, its client's CPU, prepare's peak RSS
            counts = {"nodes": bulk["memories"], "edges": bulk["links"]}
            import_s, import_cpu_s = bulk["import_s"], bulk["import_cpu_s"]
            import_rss = bulk["import_peak_rss_mb"]
        log(f"import {import_s:.1f} s")

        clock.advance(hours=1)
        t0 = time.perf_counter()
        report = brain.maintain()
        maintain_s = time.perf_counter() - t0
        log(f"maintain {maintain_s:.1f} s")

        qs = synth.queries(ops)
        for q in qs[:10]:  # warm caches and prepared statements
            brain.recall(q, k=10, reinforce=False)
        began = {"recall": time.time()}
        recall_ms = []
        hits = 0
        live: list[str] = []
        for q in qs:
            clock.advance(seconds=30)
            t0 = time.perf_counter()
            res = brain.recall(q, k=10)
            recall_ms.append((time.perf_counter() - t0) * 1000)
            embed_ms.append(getattr(brain, "last_query_embed_s", 0.0) * 1000)
            hits += len(res)
            live.extend(h.id for h in res[:2])
        log(f"recall p50 {pct(recall_ms, 50):.1f} ms")
        common_ms = []
        common_hits = 0
        began["common_recall"] = time.time()
        for q in synth.common_queries(ops):
            clock.advance(seconds=30)
            t0 = time.perf_counter()
            common_hits += len(brain.recall(q, k=10))
            common_ms.append((time.perf_counter() - t0) * 1000)
        log(f"common-word recall p50 {pct(common_ms, 50):.1f} ms")
        live = list(dict.fromkeys(live)) or [n.id for n in brain.top(10)]

        remember_ms = []
        began["remember"] = time.time()
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
            synth.write_file(small_data, small, edges_per_node, namespace="small")
        brain.import_(small_data, namespace=f"{ns}-small")
        neighbour = brain.scoped(f"{ns}-small")
        texts = [n.text for batch in brain.store.scan_nodes(f"{ns}-small") for n in batch]
        small_qs = synth.queries_from(texts, ops)
        for q in small_qs[:10]:
            neighbour.recall(q, k=10, reinforce=False)
        small_ms = []
        small_hits = 0
        began["small_recall"] = time.time()
        for q in small_qs:
            clock.advance(seconds=30)
            t0 = time.perf_counter()
            small_hits += len(neighbour.recall(q, k=10))
            small_ms.append((time.perf_counter() - t0) * 1000)
        log(f"small-namespace recall p50 {pct(small_ms, 50):.1f} ms")
        embed_texts, embed_s = (timed.texts, timed.seconds) if timed is not None else (0, 0.0)
    finally:
        brain.close()
    size_mb = store_mb(db) if backend == "kuzu" else None
    for leftover in (db, Path(f"{db}.wal")):  # 2.5 GB at 1M; the data file is kept
        leftover.unlink(missing_ok=True)
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
    if size_mb is not None:
        extra["store_mb"] = size_mb
    return {
        "backend": backend,
        "memories": counts["nodes"],
        "edges": counts["edges"],
        "import_s": round(import_s, 2),
        "import_per_s": round(counts["nodes"] / import_s),
        "import_cpu_s": round(import_cpu_s, 2),  # this process's CPU (all its threads)
        "maintain_s": round(maintain_s, 2),
        "maintain_again_s": round(maintain2_s, 2),
        "moved_first_maintain": sum(report.moved.values()),
        "recall_p50_ms": round(pct(recall_ms, 50), 2),
        "recall_p95_ms": round(pct(recall_ms, 95), 2),
        "recall_mean_hits": round(hits / len(qs), 1),
        "common_recall_p50_ms": round(pct(common_ms, 50), 2),
        "common_recall_p95_ms": round(pct(common_ms, 95), 2),
        "common_recall_mean_hits": round(common_hits / len(common_ms), 1),
        "small_recall_p50_ms": round(pct(small_ms, 50), 2),
        "small_recall_p95_ms": round(pct(small_ms, 95), 2),
        "small_recall_mean_hits": round(small_hits / len(qs), 2),
        "remember_p50_ms": round(statistics.median(remember_ms), 2),
        "remember_p95_ms": round(pct(remember_ms, 95), 2),
        "peak_rss_mb": round(max(peak_rss_mb(), import_rss)),
        "import_peak_rss_mb": round(import_rss),
        **extra,
        **({"client_peak_rss_mb": round(peak_rss_mb())} if backend != "kuzu" else {}),
        **{k: v for k, v in (bulk or {}).items() if k.startswith("import_") and k not in BULK_SET},
        "_latencies": {  # --dump-latencies (taken out of the row before it is printed)
            "began": {k: round(v, 3) for k, v in began.items()},
            "recall": [[q, round(ms, 3)] for q, ms in zip(qs, recall_ms, strict=True)],
            "common_recall": [
                [q, round(ms, 3)]
                for q, ms in zip(synth.common_queries(ops), common_ms, strict=True)
            ],
            "remember": [round(ms, 3) for ms in remember_ms],
            "small_recall": [[q, round(ms, 3)] for q, ms in zip(small_qs, small_ms, strict=True)],
        },
    }


def dump_latencies(row: dict[str, Any], path: str | None) -> None:
    """Take the per-operation milliseconds out of ``row``; append them to ``path`` if given."""
    latencies = row.pop("_latencies")
    if path:
        with open(path, "a") as out:
            keep = {"backend": row["backend"], "memories": row["memories"], **latencies}
            out.write(json.dumps(keep) + "\n")


def run_in_child(n: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """One size in a process of its own: its peak RSS is that size's alone."""
    cmd = [
        sys.executable,
        __file__,
        "--one-size",
        str(n),
        "--backend",
        args.backend,
        "--ops",
        str(args.ops),
        "--edges-per-node",
        str(args.edges_per_node),
        "--small",
        str(args.small),
        "--workdir",
        str(work),
        "--embedder",
        args.embedder,
    ]
    if args.second_hop is not None:
        cmd += ["--second-hop", str(args.second_hop)]
    cmd += ["--neo4j-import", args.neo4j_import, "--neo4j-heap", args.neo4j_heap]
    cmd += ["--neo4j-pagecache", args.neo4j_pagecache]
    if args.dump_latencies:
        cmd += ["--dump-latencies", str(Path(args.dump_latencies).resolve())]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True).stdout
    row: dict[str, Any] = json.loads(out)
    return row


PLOTS = [
    ("recall p95 (ms)", ["recall_p95_ms", "common_recall_p95_ms"]),
    ("remember p95 (ms)", ["remember_p95_ms"]),
    ("maintain (s)", ["maintain_s"]),
    ("peak RSS (MB)", ["peak_rss_mb", "server_peak_rss_mb"]),
]
# how a second line of a backend is drawn and labelled (the first: a solid line, the backend)
STYLES = {
    "common_recall_p95_ms": ("--", " (common words)"),
    "peak_rss_mb": ("-", " (client)"),
    "server_peak_rss_mb": (":", " server"),
}


def plot(rows: list[dict[str, Any]], path: str) -> None:
    """Recall p95, remember p95, maintain time and peak RSS against size, a line per backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(9, 6.5))
    backends = sorted({r["backend"] for r in rows})
    for ax, (title, keys) in zip(axes.flat, PLOTS, strict=True):
        for colour, backend in enumerate(backends):  # one colour per backend on every panel
            mine = sorted((r for r in rows if r["backend"] == backend), key=lambda r: r["memories"])
            for key in keys:
                points = [r for r in mine if r.get(key) is not None]
                if not points:
                    continue
                style, suffix = STYLES.get(key, ("-", ""))
                if key == "peak_rss_mb" and not any("server_peak_rss_mb" in r for r in mine):
                    suffix = ""  # an embedded engine: its process is all there is
                ax.plot(
                    [r["memories"] for r in points],
                    [r[key] for r in points],
                    marker="o",
                    color=f"C{colour}",
                    linestyle=style,
                    label=backend + suffix,
                )
        ax.set_xscale("log")
        ax.set_title(title)
        ax.set_xlabel("memories (5 links each)")
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.suptitle("Ebb growth curve (bench/bench_core.py)")
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--sizes", type=int, nargs="*", default=[10_000, 100_000], help="none: only --plot --merge"
    )
    ap.add_argument("--backend", default=os.environ.get("EBB_BACKEND", "kuzu"))
    ap.add_argument("--ops", type=int, default=300, help="recalls and remembers per size")
    ap.add_argument("--edges-per-node", type=float, default=5.0)
    ap.add_argument("--small", type=int, default=200, help="memories in the neighbour namespace")
    ap.add_argument("--workdir", help="keep generated data here (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--embedder", default="", help="give memories vectors (minilm, fake:384...)")
    ap.add_argument(
        "--second-hop",
        type=float,
        help="Config.spread_second_hop for this run (0: spreading's one hop, as before f54586b)",
    )
    ap.add_argument("--plot", help="draw the growth curve into this PNG (needs matplotlib)")
    ap.add_argument("--merge", nargs="+", default=[], help="--json outputs to add to the plot")
    ap.add_argument(
        "--neo4j-import",
        choices=["auto", "bulk", "bolt"],
        default="auto",
        help="Neo4j's import: the offline bulk path (test server only) or Bolt; auto: bulk from "
        f"{neo4j_harness.BULK_FROM:,} memories when this script runs the server, else Bolt",
    )
    ap.add_argument(
        "--neo4j-heap",
        default=os.environ.get("EBB_NEO4J_HEAP", "4g"),
        help="the test server's heap (EBB_NEO4J_HEAP, else 4g)",
    )
    ap.add_argument(
        "--neo4j-pagecache",
        default=os.environ.get("EBB_NEO4J_PAGECACHE", "3g"),
        help="the test server's page cache (EBB_NEO4J_PAGECACHE, else 3g)",
    )
    ap.add_argument(
        "--dump-latencies",
        metavar="FILE",
        help="append each size's per-operation milliseconds to FILE (a JSON line per size)",
    )
    ap.add_argument("--one-size", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one_size:
        row = run_size(
            args.one_size,
            args.backend,
            Path(args.workdir),
            args.ops,
            args.edges_per_node,
            args.small,
            args.embedder,
            args.second_hop,
            args,
        )
        dump_latencies(row, args.dump_latencies)
        print(json.dumps(row))
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = []
        for n in args.sizes:
            print(f"… {n:,} memories on {args.backend}", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            rows.append(run_in_child(n, args, work))
            rows[-1]["size_run_s"] = round(time.perf_counter() - t0, 1)  # the whole size, wall
            print(f"  {n:,}: {rows[-1]['size_run_s']} s in all", file=sys.stderr, flush=True)
    if args.plot:
        merged = [r for f in args.merge for r in json.loads(Path(f).read_text())["results"]]
        plot(rows + merged, args.plot)
    if not rows:  # `--sizes` with no size: the plot of the merged runs only
        return
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
        "common_recall_p50_ms",
        "common_recall_p95_ms",
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
    print("targets: " + ", ".join(f"{k} {v}" for k, v in TARGETS.items()))


if __name__ == "__main__":
    main()
