"""How much of the exact vector top-k the Kùzu store's sign-bit shortlist keeps, and its cost.

Above ``EXACT_MAX`` vectors a namespace's in-process search (``ebb_core.kuzu.tail``) ranks
rows by how many sign bits they share with the query, keeps ``max(SHORTLIST_MIN, 10 × want)``
of them and re-ranks those exactly. This replays that on real vectors: the ``.npz`` cache that
``bench/locomo.py --embed-cache`` writes (every text it embedded, turns and questions), with the
LoCoMo questions as queries and every other cached text as the corpus (``--repeat`` stacks the
corpus with small noise to reach a namespace of that many times its size). Reports the share
of the exact top ``k`` found in the shortlist's top ``k`` (``recall@k``) and the time a search
takes both ways.

    python bench/vector_shortlist.py --cache /tmp/locomo-minilm.npz --data locomo-dev.json
    python bench/vector_shortlist.py --cache ... --data ... --repeat 10 --json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from ebb_core.kuzu import tail as kuzu_tail


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cache", type=Path, required=True, help="an --embed-cache .npz file")
    ap.add_argument("--data", type=Path, required=True, help="the LoCoMo JSON (its questions)")
    ap.add_argument("--repeat", type=int, default=1, help="stack the corpus this many times")
    ap.add_argument("--want", type=int, default=50, help="rows asked of the search (the pool)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    data = json.loads(args.data.read_text(encoding="utf-8"))
    asked = {str(qa["question"]) for conv in data for qa in conv["qa"]}
    cache = np.load(args.cache, allow_pickle=False)
    texts = cache["texts"].tolist()
    vecs = np.asarray(cache["vectors"], dtype=np.float32)
    is_q = np.array([t in asked for t in texts])
    queries, corpus = vecs[is_q], vecs[~is_q]
    rng = np.random.default_rng(0)
    parts = [corpus]
    for _ in range(args.repeat - 1):  # near-copies: a denser corpus, as a larger namespace
        noisy = corpus + 0.05 * rng.standard_normal(corpus.shape).astype(np.float32)
        parts.append(noisy / np.linalg.norm(noisy, axis=1, keepdims=True))
    corpus = np.concatenate(parts)
    tail = kuzu_tail._Tail(corpus.shape[1])
    tail.add([f"r{i}" for i in range(len(corpus))], corpus)

    out: dict[str, object] = {
        "corpus": len(corpus),
        "queries": len(queries),
        "want": args.want,
        "shortlist": max(kuzu_tail.SHORTLIST_MIN, 10 * args.want),
    }
    saved = kuzu_tail.EXACT_MAX
    found: dict[str, list[list[str]]] = {}
    for mode, limit in (("exact", len(corpus) + 1), ("shortlist", 0)):
        kuzu_tail.EXACT_MAX = limit
        t0 = time.perf_counter()
        found[mode] = [
            [u for u, _ in sorted(tail.search(q, args.want), key=lambda r: -r[1])] for q in queries
        ]
        out[f"{mode}_ms_per_search"] = round((time.perf_counter() - t0) * 1000 / len(queries), 3)
    kuzu_tail.EXACT_MAX = saved
    for k in (10, args.want):
        kept = [
            len(set(s[:k]) & set(e[:k])) / min(k, len(e))
            for s, e in zip(found["shortlist"], found["exact"], strict=True)
        ]
        out[f"recall@{k}"] = round(float(np.mean(kept)), 4)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for key, value in out.items():
            print(f"{key:>24}: {value}")


if __name__ == "__main__":
    main()
