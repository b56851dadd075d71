"""LoCoMo replay: turn-level retrieval quality of ``Brain.recall`` on long conversations.

Every turn of a conversation becomes a memory ``Speaker said, "text"`` (plus ``and shared
<caption>`` when the turn shared an image), remembered at its session's date
(``session_N_date_time``) and linked to the turn before it (``follows``). The clock then moves to
one day after the last session, ``maintain()`` runs, and every question of categories 1-4
(5 is adversarial) is recalled with ``k=10, reinforce=False``. A question's relevant turns are its
``evidence`` dia_ids. Prints R@5, R@10, NDCG@10 and any@10 per category and overall, as a table or
``--json``.

    python bench/locomo.py --data /path/to/locomo-dev.json
    python bench/locomo.py --data PATH --baseline              # also the text index alone
    python bench/locomo.py --data PATH --set half_life_days=90 --set spread_share=0.3
    python bench/locomo.py --data PATH --split 2 --grid text_weight=0.7,0.8 --grid ...
    python bench/locomo.py --data PATH --backend neo4j         # NEO4J_URI or EBB_TEST_NEO4J_URI
    python bench/locomo.py --data PATH --embedder minilm       # meaning-based recall too
    python bench/locomo.py --data PATH --embedder minilm --embed-cache /tmp/locomo-minilm.npz

``--embedder NAME`` (see ``ebb_core.embeddings.resolve``) turns on vectors; the report then adds
the embedding throughput (texts/s, measured on the texts actually embedded) and recall's
latency with the query's embedding shown apart. ``--embed-cache`` keeps every vector computed
in a file, so that tuning runs do not embed the same texts again (the throughput reported is
then that of the texts embedded in this run).

``--context-key prev|date|prev+date`` changes only what is *embedded* with each turn (the
memory's text stays the turn): ``prev`` prefixes the turn before it (the memory it
``follows``), ``date`` its session's date (``On 8 May 2023:``), ``prev+date`` both. Questions
are embedded as asked. ``--json`` adds R@10 per conversation (``per_conversation``), so one
run of the whole dev set also gives any subset's figure.

``--diagnose N`` says where the misses come from: every relevant turn left out of a question's
top 10 is classed by its rank in recall's whole ranking (11-20, 21-50, beyond 50, or not a
candidate at all) and by how it became a candidate (the text index, the vector index, both, or
only a link spreading to it); N of the missed turns (the first ones, in question order) are
printed with their parts (text_norm, similarity, spread, score) beside the top hit's score. It
watches the store's text and vector candidates and recall's full ranking on the Brain instance
(bench-only instrumentation; the recall itself is unchanged).

``--split N`` tunes on the first N conversations (by sample id): every combination of the
``--grid`` values is replayed there, the one with the best R@10 wins, and the figures reported
are the winner's (and the defaults') on the remaining conversations only.

The data file is read from ``--data`` and never copied anywhere.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import fields, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ebb_core import Brain, Config, FixedClock
from ebb_core.embeddings import Embedder, resolve
from ebb_core.store import GraphStore

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
METRICS = ("r5", "r10", "ndcg10", "any10")
#: the text index alone: nothing archived, activation out of the blend, no spreading
TEXT_ONLY: dict[str, Any] = {
    "hot_ratio": 0.0,
    "warm_ratio": 0.0,
    "cold_ratio": 0.0,
    "activation_weight": 0.0,
}


class CachedEmbedder(Embedder):
    """Wraps an embedder with a text → vector cache (optionally kept in a file), counting the
    time spent on texts it really embedded. Same name as the model, so stores agree."""

    def __init__(self, inner: Embedder, path: Path | None = None) -> None:
        import numpy as np

        self.inner, self.name, self.path = inner, inner.name, path
        self.cache: dict[str, Any] = {}
        self.embedded, self.seconds = 0, 0.0
        if path is not None and path.exists():
            data = np.load(path, allow_pickle=False)
            for t, v in zip(data["texts"].tolist(), data["vectors"], strict=True):
                self.cache[t] = v

    def embed_documents(self, texts: Sequence[str]) -> Any:
        import numpy as np

        todo = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if todo:
            t0 = time.perf_counter()
            vecs = self.inner.embed_documents(todo)
            self.seconds += time.perf_counter() - t0
            self.embedded += len(todo)
            self.cache.update(zip(todo, vecs, strict=True))
        return np.stack([self.cache[t] for t in texts])

    def save(self) -> None:
        import numpy as np

        if self.path is not None and self.embedded:
            texts = list(self.cache)
            np.savez(
                self.path, texts=np.array(texts), vectors=np.stack([self.cache[t] for t in texts])
            )


CONTEXT_KEYS = ("", "prev", "date", "prev+date")


class ContextEmbedder(Embedder):
    """Embeds a turn together with its context (``--context-key``): :func:`replay` registers,
    before each remember, the text to embed in place of the turn's own; queries go through
    unchanged. Same name as the model, so stores agree."""

    def __init__(self, inner: Embedder, key: str) -> None:
        self.inner, self.name, self.key = inner, inner.name, key
        self.context: dict[str, str] = {}

    def set(self, text: str, previous: str | None, when: datetime) -> None:
        parts = []
        if "date" in self.key:
            parts.append(f"On {when.day} {when:%B %Y}:")
        if "prev" in self.key and previous:
            parts.append(previous)
        self.context[text] = " ".join([*parts, text])

    def embed_documents(self, texts: Sequence[str]) -> Any:
        return self.inner.embed_documents([self.context.get(t, t) for t in texts])

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)


def log(msg: str) -> None:
    print(f"  {msg}", file=sys.stderr, flush=True)


def parse_date(raw: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` as an aware UTC datetime."""
    return datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def sessions(conv: Mapping[str, Any]) -> list[tuple[datetime, list[dict[str, Any]]]]:
    """A conversation's sessions in order, each with its date and turns."""
    numbers = sorted(
        int(k.split("_")[1])
        for k, v in conv.items()
        if k.startswith("session_") and isinstance(v, list)
    )
    return [(parse_date(conv[f"session_{n}_date_time"]), conv[f"session_{n}"]) for n in numbers]


def turn_text(turn: Mapping[str, Any]) -> str:
    text = f'{turn["speaker"]} said, "{turn["text"]}"'
    if turn.get("blip_caption"):
        text += f" and shared {turn['blip_caption']}"
    return text


def memory_id(dia_id: str) -> str:
    return f"turn:{dia_id}"


def replay(brain: Brain, clock: FixedClock, conv: Mapping[str, Any]) -> None:
    """Remember every turn at its session's date, each linked to the one before it (with a
    :class:`ContextEmbedder`, each embedded with its context)."""
    previous: str | None = None
    previous_text: str | None = None
    context = brain.embedder if isinstance(brain.embedder, ContextEmbedder) else None
    for when, turns in sessions(conv):
        for i, turn in enumerate(turns):
            clock.set(when + timedelta(seconds=30 * i))  # turns of a session, in order
            mid = memory_id(turn["dia_id"])
            text = turn_text(turn)
            if context is not None:
                context.set(text, previous_text, when)
            previous_text = text
            brain.remember(
                text,
                kind="turn",
                id=mid,
                links=[previous] if previous else [],
                link_kind="follows",
            )
            previous = mid
    last = sessions(conv)[-1][0]
    clock.set(last + timedelta(days=1))
    brain.maintain()


def score_question(ranked: Sequence[str], evidence: set[str]) -> dict[str, float]:
    """R@5, R@10, NDCG@10 (binary relevance) and any@10 for one question."""
    if not evidence:
        return dict.fromkeys(METRICS, 0.0)
    r5 = len(evidence & set(ranked[:5])) / len(evidence)
    r10 = len(evidence & set(ranked[:10])) / len(evidence)
    dcg = sum(1.0 / math.log2(i + 2) for i, x in enumerate(ranked[:10]) if x in evidence)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(evidence), 10)))
    return {"r5": r5, "r10": r10, "ndcg10": dcg / ideal, "any10": float(r10 > 0)}


def questions(conv: Mapping[str, Any]) -> Iterator[tuple[int, str, set[str]]]:
    for qa in conv["qa"]:
        cat = int(qa.get("category", 0))
        if cat not in CATEGORIES:
            continue
        evidence = {memory_id(e.strip()) for e in qa.get("evidence", []) if e.strip()}
        yield cat, str(qa["question"]), evidence


@contextmanager
def open_brain(
    backend: str,
    workdir: Path,
    name: str,
    cfg: Config,
    clock: FixedClock,
    embedder: Embedder | None = None,
) -> Iterator[Brain]:
    """A Brain on a fresh store (Kùzu) or a fresh namespace (Neo4j) for one replay."""
    store: GraphStore
    if backend == "kuzu":
        from ebb_core.kuzu_store import KuzuStore

        store = KuzuStore(workdir / f"{name}-{time.time_ns()}.kuzu")
    else:
        from ebb_core.neo4j import Neo4jStore

        uri = os.environ.get("NEO4J_URI") or os.environ.get("EBB_TEST_NEO4J_URI")
        if not uri:
            raise SystemExit("--backend neo4j needs NEO4J_URI (or EBB_TEST_NEO4J_URI)")
        store = Neo4jStore(uri)
    brain = Brain(
        store,
        namespace=f"{name}-{time.time_ns()}",
        config=cfg,
        clock=clock,
        embedder=embedder if embedder is not None else False,
    )
    try:
        yield brain
    finally:
        brain.close()


class Watch:
    """``--diagnose``: records, for the recall in progress, the store's text and vector
    candidates and recall's whole ranking (by wrapping them on this Brain and its store only)."""

    def __init__(self, brain: Brain) -> None:
        self.text: set[str] = set()
        self.vector: set[str] = set()
        self.ranked: list[Any] = []
        store: Any = brain.store
        text_matches, vector_matches = store.text_matches, store.vector_matches
        rank = brain._rank  # bench-only instrumentation

        def on_text(*a: Any, **kw: Any) -> Any:
            found = text_matches(*a, **kw)
            self.text = {m.id for m in found}
            return found

        def on_vector(*a: Any, **kw: Any) -> Any:
            found = vector_matches(*a, **kw)
            self.vector = {m.id for m, _sim in found}
            return found

        def on_rank(*a: Any, **kw: Any) -> Any:
            self.ranked = rank(*a, **kw)
            return self.ranked

        store.text_matches, store.vector_matches = on_text, on_vector
        brain._rank = on_rank  # type: ignore[method-assign]

    def reset(self) -> None:
        self.text, self.vector, self.ranked = set(), set(), []

    def misses(self, evidence: set[str], top: Sequence[str]) -> list[dict[str, Any]]:
        """Each relevant turn missing from ``top``: its rank band, source and score parts."""
        order = {c.id: (i, c) for i, c in enumerate(self.ranked)}
        out: list[dict[str, Any]] = []
        for e in sorted(evidence - set(top)):
            if e not in order:
                out.append({"turn": e, "band": "not a candidate", "source": None})
                continue
            i, c = order[e]
            source = "+".join(
                s for s, hit in (("text", e in self.text), ("vector", e in self.vector)) if hit
            ) or ("link" if c.spread > 0 else "other")
            band = "11-20" if i < 20 else "21-50" if i < 50 else "beyond 50"
            out.append(
                {
                    "turn": e,
                    "rank": i + 1,
                    "band": band,
                    "source": source,
                    "text_norm": round(c.t_norm, 3),
                    "similarity": None if c.sim is None else round(c.sim, 3),
                    "spread": round(c.spread, 3),
                    "score": round(c.score, 3),
                }
            )
        return out


def run(
    convs: Sequence[Mapping[str, Any]],
    cfg: Config,
    backend: str,
    workdir: Path,
    embedder: Embedder | None = None,
    diagnose: bool = False,
) -> dict[str, Any]:
    """Replay ``convs`` and score every question; per-question rows plus recall timings
    (``recall_ms`` includes the query's embedding, ``embed_ms`` is that part alone) and, with
    ``diagnose``, every missed relevant turn (``misses``)."""
    rows: list[dict[str, Any]] = []
    recall_ms: list[float] = []
    embed_ms: list[float] = []
    misses: list[dict[str, Any]] = []
    for conv in convs:
        start = sessions(conv["conversation"])[0][0]
        clock = FixedClock(start)
        name = str(conv["sample_id"])
        with open_brain(backend, workdir, name, cfg, clock, embedder) as brain:
            replay(brain, clock, conv["conversation"])
            watch = Watch(brain) if diagnose else None
            for cat, question, evidence in questions(conv):
                if watch is not None:
                    watch.reset()
                t0 = time.perf_counter()
                hits = brain.recall(question, k=10, reinforce=False)
                recall_ms.append((time.perf_counter() - t0) * 1000)
                embed_ms.append(brain.last_query_embed_s * 1000)
                ranked = [h.id for h in hits]
                rows.append(
                    {"conv": conv["sample_id"], "category": cat, **score_question(ranked, evidence)}
                )
                if watch is not None:
                    top_score = round(hits[0].score, 3) if hits else None
                    for miss in watch.misses(evidence, ranked):
                        misses.append(
                            {
                                "conv": conv["sample_id"],
                                "category": CATEGORIES[cat],
                                "question": question,
                                "top_score": top_score,
                                **miss,
                            }
                        )
    return {"rows": rows, "recall_ms": recall_ms, "embed_ms": embed_ms, "misses": misses}


def miss_table(misses: Sequence[Mapping[str, Any]], relevant: int) -> dict[str, Any]:
    """Missed relevant turns counted by rank band and by source, as shares of all relevant
    turns (``relevant``)."""
    bands: dict[str, int] = {}
    sources: dict[str, int] = {}
    for m in misses:
        bands[m["band"]] = bands.get(m["band"], 0) + 1
        if m["source"] is not None:
            sources[m["source"]] = sources.get(m["source"], 0) + 1
    return {
        "relevant_turns": relevant,
        "missed": len(misses),
        "by_rank": {b: bands.get(b, 0) for b in ("11-20", "21-50", "beyond 50", "not a candidate")},
        "ranked_by_source": dict(sorted(sources.items(), key=lambda kv: -kv[1])),
    }


def summarise(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Mean of every metric per category (by name) and overall, with question counts."""
    out: dict[str, dict[str, float]] = {}
    groups: dict[str, list[Mapping[str, Any]]] = {"overall": list(rows)}
    for cat, name in CATEGORIES.items():
        groups[f"{cat}:{name}"] = [r for r in rows if r["category"] == cat]
    for name, group in groups.items():
        n = len(group)
        out[name] = {m: round(sum(r[m] for r in group) / n, 4) if n else 0.0 for m in METRICS}
        out[name]["questions"] = n
    return out


def parse_value(raw: str) -> Any:
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        return float(raw)
    except ValueError:
        return raw


def parse_settings(items: Sequence[str]) -> dict[str, Any]:
    names = {f.name for f in fields(Config) if f.init}
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in names:
            raise SystemExit(
                f"--set {item!r}: expected NAME=VALUE with NAME one of {sorted(names)}"
            )
        out[key] = parse_value(value)
    return out


def parse_grid(items: Sequence[str]) -> list[dict[str, Any]]:
    axes = []
    for item in items:
        key, _sep, values = item.partition("=")
        axes.append([(key, parse_value(v)) for v in values.split(",")])
        parse_settings([f"{key}={values.split(',')[0]}"])  # validates the name
    return [dict(combo) for combo in itertools.product(*axes)] if axes else [{}]


def table(results: Mapping[str, Mapping[str, Mapping[str, float]]]) -> str:
    """One row per (setting, group): R@5, R@10, NDCG@10, any@10 and the question count."""
    head = ("setting", "group", "R@5", "R@10", "NDCG@10", "any@10", "n")
    lines = ["{:<22} {:<14} {:>6} {:>6} {:>8} {:>7} {:>5}".format(*head)]
    for setting, groups in results.items():
        for group, m in groups.items():
            lines.append(
                f"{setting:<22} {group:<14} {m['r5']:>6.3f} {m['r10']:>6.3f} "
                f"{m['ndcg10']:>8.3f} {m['any10']:>7.3f} {int(m['questions']):>5}"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", required=True, help="the LoCoMo JSON file (a list of conversations)")
    ap.add_argument("--backend", choices=["kuzu", "neo4j"], default="kuzu")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Config field for the measured setting (repeatable)",
    )
    ap.add_argument(
        "--baseline",
        action="store_true",
        help="also measure the text index alone (tiers cut at 0, no activation)",
    )
    ap.add_argument(
        "--split",
        type=int,
        default=0,
        metavar="N",
        help="tune --grid on the first N conversations, report on the rest",
    )
    ap.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        help="values to try when tuning (repeatable; every combination)",
    )
    ap.add_argument("--conversations", nargs="*", help="only these sample ids")
    ap.add_argument(
        "--embedder", default="", help="an embedder name (e.g. minilm): recall by meaning too"
    )
    ap.add_argument(
        "--embed-cache", type=Path, default=None, help="a .npz file caching the vectors"
    )
    ap.add_argument(
        "--context-key",
        choices=CONTEXT_KEYS,
        default="",
        help="embed each turn with the turn before it and/or its session's date",
    )
    ap.add_argument(
        "--diagnose",
        type=int,
        default=0,
        metavar="N",
        help="class every missed relevant turn and print N of them with their score parts",
    )
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args()

    data = json.loads(Path(args.data).read_text(encoding="utf-8"))
    convs = sorted(data, key=lambda c: str(c["sample_id"]))
    if args.conversations:
        convs = [c for c in convs if c["sample_id"] in set(args.conversations)]
    base = replace(Config(), **parse_settings(args.set)) if args.set else Config()
    inner = resolve(args.embedder) if args.embedder else None
    cached = CachedEmbedder(inner, args.embed_cache) if inner is not None else None
    embedder: Embedder | None = cached
    if cached is not None and args.context_key:
        embedder = ContextEmbedder(cached, args.context_key)
    elif args.context_key:
        raise SystemExit("--context-key needs --embedder")
    tune, report = (convs[: args.split], convs[args.split :]) if args.split else ([], convs)
    if args.split and (not tune or not report):
        raise SystemExit(f"--split {args.split}: needs fewer than {len(convs)} conversations")

    out: dict[str, Any] = {
        "backend": args.backend,
        "tuned_on": [c["sample_id"] for c in tune],
        "reported_on": [c["sample_id"] for c in report],
        "results": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        chosen = base
        if tune and args.grid:
            trials = []
            for combo in parse_grid(args.grid):
                cfg = replace(base, **combo)
                r10 = summarise(run(tune, cfg, args.backend, work, embedder)["rows"])["overall"][
                    "r10"
                ]
                log(f"tune {combo}: R@10 {r10:.4f}")
                trials.append((r10, combo))
            _best_r10, best = max(trials, key=lambda t: t[0])
            chosen = replace(base, **best)
            out["tuning"] = {"trials": [{"r10": r, **c} for r, c in trials], "chosen": best}
        settings = {"default" if not args.set else "set": base}
        if tune and args.grid:
            settings["tuned"] = chosen
        if args.baseline:
            settings["text-index-alone"] = replace(Config(), **TEXT_ONLY, **_no_spread())
        timings = {}
        for name, cfg in settings.items():
            t0 = time.perf_counter()
            emb = embedder if name != "text-index-alone" else None
            result = run(report, cfg, args.backend, work, emb, diagnose=args.diagnose > 0)
            out["results"][name] = summarise(result["rows"])
            if args.diagnose > 0:
                relevant = sum(len(e) for c in report for _, _, e in questions(c))
                out.setdefault("diagnostics", {})[name] = {
                    **miss_table(result["misses"], relevant),
                    "sample": result["misses"][: args.diagnose],
                }
            out.setdefault("per_conversation", {})[name] = {
                c["sample_id"]: summarise(
                    [r for r in result["rows"] if r["conv"] == c["sample_id"]]
                )["overall"]
                for c in report
            }
            ms = sorted(result["recall_ms"])
            ex = sorted(r - e for r, e in zip(result["recall_ms"], result["embed_ms"], strict=True))
            em = sorted(result["embed_ms"])
            timings[name] = {
                "replay_and_recall_s": round(time.perf_counter() - t0, 1),
                "recall_p50_ms": round(ms[len(ms) // 2], 2),
                "recall_p95_ms": round(ms[int(len(ms) * 0.95)], 2),
                "recall_excl_embed_p50_ms": round(ex[len(ex) // 2], 2),
                "recall_excl_embed_p95_ms": round(ex[int(len(ex) * 0.95)], 2),
                "query_embed_p50_ms": round(em[len(em) // 2], 2),
                "query_embed_p95_ms": round(em[int(len(em) * 0.95)], 2),
            }
            log(f"{name}: R@10 {out['results'][name]['overall']['r10']:.4f}")
        out["timings"] = timings
        if cached is not None:
            cached.save()
            out["embedder"] = {
                "name": cached.name,
                "context_key": args.context_key or None,
                "texts_embedded": cached.embedded,
                "texts_per_s": round(cached.embedded / cached.seconds, 1)
                if cached.seconds
                else None,
            }
        out["config"] = {k: v for k, v in vars(chosen).items() if k != "half_life_us"}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(
        f"LoCoMo on {args.backend}, reported on {', '.join(out['reported_on'])}"
        + (f" (tuned on {', '.join(out['tuned_on'])})" if out["tuned_on"] else "")
    )
    print(table(out["results"]))
    for name, t in out["timings"].items():
        print(
            f"{name}: recall p50/p95 {t['recall_p50_ms']}/{t['recall_p95_ms']} ms, excluding "
            f"the query embedding {t['recall_excl_embed_p50_ms']}/{t['recall_excl_embed_p95_ms']}"
            f" ms, query embedding {t['query_embed_p50_ms']}/{t['query_embed_p95_ms']} ms"
        )
    if "embedder" in out:
        print(f"embedder: {out['embedder']}")
    if "tuning" in out:
        print(f"tuned: {out['tuning']['chosen']}")
    for name, d in out.get("diagnostics", {}).items():
        n = d["relevant_turns"]
        print(f"{name}: {d['missed']} of {n} relevant turns missed from the top 10")
        for band, count in d["by_rank"].items():
            print(f"  ranked {band:<16} {count:>5}  {count / n:.1%}")
        for source, count in d["ranked_by_source"].items():
            print(f"  a candidate by {source:<11} {count:>5}  {count / n:.1%}")
        for m in d["sample"]:
            parts = (
                f"rank {m['rank']} by {m['source']}: text {m['text_norm']}, similarity "
                f"{m['similarity']}, spread {m['spread']}, score {m['score']}"
                if "rank" in m
                else "not a candidate"
            )
            print(
                f"  [{m['category']}] {m['question']!r} {m['turn']}: {parts} "
                f"(top hit {m['top_score']})"
            )


def _no_spread() -> dict[str, Any]:
    """Query-time spreading off, where this version of Ebb has it."""
    names = {f.name for f in fields(Config) if f.init}
    return {"spread_share": 0.0} if "spread_share" in names else {}


if __name__ == "__main__":
    main()
