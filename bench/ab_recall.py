"""Recall latency of two versions of Ebb, A/B in one run, interleaved so both see the same load.

Two worker processes (A: this checkout; B: the ``src`` folder of another, e.g. an earlier
commit unpacked with ``git archive``) each import the same synthetic graph as
``bench/bench_core.py`` does, run ``maintain`` and warm up; then they take turns running batches
of the same recalls (``k=10``, each reinforcing its hits, the clock moving 30 s per recall), so a
busy machine slows both alike. Prints p50/p95 of each and their ratio; ``--json`` for JSON.

    git archive <commit> | tar -x -C /tmp/base
    python bench/ab_recall.py --other-src /tmp/base/src --size 100000 --ops 200
    python bench/ab_recall.py --embedder fake:384 --size 100000 --ops 200
    python bench/ab_recall.py --other-src /tmp/base/src --second-hop 0 --data graph-100000.jsonl

``--second-hop X`` sets A's ``Config.spread_second_hop`` (0: spreading's one hop, as before
f54586b); ``--data FILE`` imports that graph (e.g. the one ``bench_core.py`` wrote) instead of
writing one.

``--embedder NAME`` gives A's memories vectors (its import embeds them; recall fuses vector
candidates) and, without ``--other-src``, makes B this checkout on text alone: the cost of
vectors at that size, measured under the same load. Both then also take turns at ``remember``
(a memory linked to two recent hits, in batches as the recalls). Recall and remember times
exclude the embedder's own time (the query's or the new text's embedding, measured apart).
``--remember`` makes both sides take those turns at ``remember`` without an embedder too (a
remember A/B of two versions: ``--other-src OLD/src --remember``).

The default queries (``--queries rare``) are those of ``bench_core``'s recall: 1-3 rarer words,
with few text matches (spreading and activation fill the ten hits: ``mean_hits`` 10 on both
sides at 100k), while a vector recall also ranks its 50 vector candidates. ``--queries common``
(2-3 common words, as ``bench_core``'s common-word recall) gives both sides many text
matches; ``--queries both`` runs the rare ones, then the common ones on the same stores
(``common_*``); ``mean_hits`` says how many each side returned. Each side's ``cpu_p50_ms`` is
the CPU of all its threads per op (the embedder's own taken out): on a busy machine the wall
clock after an embedding also holds the scheduler's wait."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

HERE = Path(__file__).resolve().parent

if TYPE_CHECKING:
    from ebb_core.embeddings import Embedder as _EmbedderBase
else:  # not imported at load: an older checkout may have no embeddings (see worker)
    _EmbedderBase = object


def worker(
    data: Path,
    ops: int,
    embedder: str = "",
    second_hop: float | None = None,
    common: bool = False,
    fake_import: bool = False,
) -> None:
    """Build the store, then answer "run LO HI" lines with the recall times in ms and "mem LO
    HI" lines with remember times (JSON: the times and the hits returned), the embedder's own
    time taken out of both. ``common``: :func:`synth.common_queries` instead of the rare-word
    :func:`synth.queries`. ``fake_import``: the import's vectors come from the deterministic
    fake embedder (under the model's name and dimension), the recalls' and remembers' from
    ``embedder``."""
    sys.path.insert(0, str(HERE))
    import synth
    from ebb_core import Brain, FixedClock
    from ebb_core.backends import open_store

    clock = FixedClock(synth.NOW)
    timed = switch = None
    if embedder:  # imported only then: an older checkout may have no embeddings at all
        from bench_core import TimedEmbedder
        from ebb_core.embeddings import resolve

        inner = resolve(embedder)
        switch = _Switch(inner, fake_import) if inner is not None else None
        timed = TimedEmbedder(switch) if switch is not None else None
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store("kuzu", Path(tmp) / "ab.kuzu")
        # an Ebb without embedders (an older checkout) takes no such argument
        kwargs: dict[str, Any] = {"embedder": timed} if timed is not None else {}
        if second_hop is not None:  # Config.spread_second_hop (f54586b)
            from ebb_core import Config

            kwargs["config"] = Config(spread_second_hop=second_hop)
        brain = Brain(store, namespace="ab", clock=clock, **kwargs)
        brain.import_(data, namespace="ab")
        clock.advance(hours=1)
        brain.maintain()
        if switch is not None:
            switch.current = switch.real  # from now on the model itself
        qs = synth.common_queries(ops) if common else synth.queries(ops)
        also = synth.common_queries(ops)  # "com" lines (--queries both)
        for q in qs[:10]:
            brain.recall(q, k=10, reinforce=False)
        live: list[str] = []
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            what, lo, hi = line.split()
            times, hits_seen, embeds, cpu = [], 0, [], []
            for i in range(int(lo), int(hi)):
                clock.advance(seconds=30)
                if timed is not None:
                    timed.last = 0.0
                if switch is not None:
                    switch.cpu = 0.0
                c0 = time.process_time()
                if what in ("run", "com"):
                    t0 = time.perf_counter()
                    hits = brain.recall((qs if what == "run" else also)[i], k=10)
                    took = time.perf_counter() - t0
                    took -= getattr(brain, "last_query_embed_s", 0.0)
                    hits_seen += len(hits)
                    live.extend(h.id for h in hits[:2])
                else:
                    live = list(dict.fromkeys(live))[-50:] or [n.id for n in brain.top(10)]
                    links = list(dict.fromkeys([live[i % len(live)], live[(i * 7) % len(live)]]))
                    text = f"benchmark memory {i} about {qs[i % len(qs)]}"
                    t0 = time.perf_counter()
                    brain.remember(text, kind="note", links=links)
                    took = time.perf_counter() - t0 - (timed.last if timed is not None else 0.0)
                times.append(took * 1000)
                # CPU of every thread of the process (Kùzu's, the BLAS's), the embedder's own
                # taken out: what the op costs whatever the scheduler does on a busy machine
                spent = time.process_time() - c0 - (switch.cpu if switch is not None else 0.0)
                cpu.append(spent * 1000)
                if timed is not None:
                    embeds.append(timed.last * 1000)
            got = {"times": times, "hits": hits_seen, "embeds": embeds, "cpu": cpu}
            print(json.dumps(got), flush=True)
        brain.close()


class _Switch(_EmbedderBase):
    """``real`` (an embedder), or until ``current`` is set to it, the FAKE hashing embedder
    under ``real``'s name and dimension: a store imported with cheap vectors, recalled and
    written with the model (its forward pass, threads and all, runs beside the store's work)."""

    def __init__(self, real: Any, fake_first: bool) -> None:
        from ebb_core.embeddings import FakeEmbedder

        self.real, self.name = real, real.name
        self.current: Any = real
        if fake_first:
            probe = real.embed_query("probe")
            self.current = FakeEmbedder(len(probe), name=real.name)
        self.cpu = 0.0  # CPU seconds (all threads) spent embedding since last reset

    def embed_documents(self, texts: Any) -> Any:
        c0 = time.process_time()
        try:
            return self.current.embed_documents(texts)
        finally:
            self.cpu += time.process_time() - c0

    def embed_query(self, text: str) -> Any:
        c0 = time.process_time()
        try:
            return self.current.embed_query(text)
        finally:
            self.cpu += time.process_time() - c0


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--other-src", help="the src folder of the version to compare against")
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--ops", type=int, default=200)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--edges-per-node", type=float, default=5.0)
    ap.add_argument("--embedder", default="", help="A's embedder (fake:384, minilm...)")
    ap.add_argument("--second-hop", type=float, help="A's Config.spread_second_hop (0: off)")
    ap.add_argument("--data", help="the graph to import (default: written by bench/synth.py)")
    ap.add_argument(
        "--queries",
        choices=["rare", "common", "both"],
        default="rare",
        help="rare: 1-3 rarer words (few text matches; the default);\n"
        "common: 2-3 common words (many text matches on both sides);\n"
        "both: the rare ones, then the common ones on the same stores (common_* figures)",
    )
    ap.add_argument(
        "--import-vectors",
        choices=["model", "fake"],
        default="model",
        help="fake: A's import takes the FAKE hashing embedder's vectors (MiniLM embeds\n"
        "~25 texts/s here: 100k would take an hour); recalls and remembers use --embedder",
    )
    ap.add_argument(
        "--remember",
        action="store_true",
        help="both sides also take turns at remember (always so with --embedder)",
    )
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(
            Path(args.worker),
            args.ops,
            args.embedder,
            args.second_hop,
            args.queries == "common",
            args.import_vectors == "fake",
        )
        return
    if not args.other_src and not args.embedder:
        raise SystemExit("--other-src (another version) or --embedder (vectors) is required")
    sys.path.insert(0, str(HERE))
    import synth

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(args.data) if args.data else Path(tmp) / f"graph-{args.size}.jsonl"
        if not args.data:
            synth.write_file(data, args.size, args.edges_per_node)
        other = {"PYTHONPATH": str(Path(args.other_src).resolve())} if args.other_src else {}
        a_name = "A (this checkout" + (f", {args.embedder})" if args.embedder else ")")
        b_name = "B (other)" if args.other_src else "B (this checkout, text only)"
        envs = {a_name: (dict(os.environ), args.embedder), b_name: ({**os.environ, **other}, "")}
        if args.other_src and args.embedder:
            envs[b_name] = (envs[b_name][0], args.embedder)
        procs: dict[str, Any] = {}
        for name, (env, emb) in envs.items():
            cmd = [sys.executable, __file__, "--worker", str(data), "--ops", str(args.ops)]
            if name == a_name and args.second_hop is not None:
                cmd += ["--second-hop", str(args.second_hop)]
            cmd += ["--queries", args.queries, "--import-vectors", args.import_vectors]
            procs[name] = subprocess.Popen(
                [*cmd, *(["--embedder", emb] if emb else [])],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            json.loads(procs[name].stdout.readline())  # ready (built one after the other)
        times: dict[str, list[float]] = {name: [] for name in procs}
        writes: dict[str, list[float]] = {name: [] for name in procs}
        common: dict[str, list[float]] = {name: [] for name in procs}
        hits: dict[tuple[str, str], int] = {}
        embeds: dict[tuple[str, str], list[float]] = {}
        cpus: dict[tuple[str, str], list[float]] = {}
        steps = [("run", times)] + ([("com", common)] if args.queries == "both" else [])
        steps += [("mem", writes)] if args.embedder or args.remember else []
        for what, into in steps:
            for lo in range(0, args.ops, args.batch):
                order = list(procs) if (lo // args.batch) % 2 == 0 else list(reversed(procs))
                for name in order:
                    p = procs[name]
                    p.stdin.write(f"{what} {lo} {min(lo + args.batch, args.ops)}\n")
                    p.stdin.flush()
                    got = json.loads(p.stdout.readline())
                    into[name] += got["times"]
                    hits[name, what] = hits.get((name, what), 0) + got["hits"]
                    embeds.setdefault((name, what), []).extend(got["embeds"])
                    cpus.setdefault((name, what), []).extend(got["cpu"])
        for p in procs.values():
            p.stdin.close()
            p.wait()
    out: dict[str, Any] = {
        name: {
            "p50_ms": round(pct(t, 50), 2),
            "p95_ms": round(pct(t, 95), 2),
            "mean_hits": round(hits[name, "run"] / max(1, len(t)), 1),
        }
        for name, t in times.items()
    }
    for name, t in common.items():
        if t:
            out[name]["common_p50_ms"] = round(pct(t, 50), 2)
            out[name]["common_p95_ms"] = round(pct(t, 95), 2)
            out[name]["common_mean_hits"] = round(hits[name, "com"] / len(t), 1)
    for name, t in writes.items():
        if t:
            out[name]["remember_p50_ms"] = round(pct(t, 50), 2)
            out[name]["remember_p95_ms"] = round(pct(t, 95), 2)
    for (name, what), c in cpus.items():
        cpu_key = {"run": "cpu_p50_ms", "com": "common_cpu_p50_ms", "mem": "remember_cpu_p50_ms"}
        out[name][cpu_key[what]] = round(pct(c, 50), 2)
    for (name, what), e in embeds.items():  # the embedder's own time, taken out above
        if e:
            label = "remember_embed" if what == "mem" else "query_embed"
            out[name][f"{label}_p50_ms"] = round(pct(e, 50), 2)
    a, b = out[a_name], out[b_name]
    out["ratio"] = {
        "p50": round(a["p50_ms"] / b["p50_ms"], 3),
        "p95": round(a["p95_ms"] / b["p95_ms"], 3),
    }
    if "remember_p50_ms" in a:
        out["ratio"]["remember_p50"] = round(a["remember_p50_ms"] / b["remember_p50_ms"], 3)
        out["ratio"]["remember_p95"] = round(a["remember_p95_ms"] / b["remember_p95_ms"], 3)
    for key in (
        "cpu_p50_ms",
        "remember_cpu_p50_ms",
        "common_p50_ms",
        "common_p95_ms",
        "common_cpu_p50_ms",
    ):
        if a.get(key) and b.get(key):
            out["ratio"][key.removesuffix("_ms")] = round(a[key] / b[key], 3)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for name, r in out.items():
        print(f"{name:<20} " + "  ".join(f"{k} {v}" for k, v in r.items()))


if __name__ == "__main__":
    main()
