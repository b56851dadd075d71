"""Synthetic memory graphs for benchmarks: Zipf-worded texts, skewed degrees, spread-out ages.

Writes an Ebb export (JSON Lines), so the benchmark measures the real import path.
"""

from __future__ import annotations

import json
import os
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import IO

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)
KINDS = ["note", "fact", "decision", "meeting", "person", "client", "message"]


def vocabulary(size: int, rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(4, 9))))
    return sorted(words)


class Zipf:
    """Draws ranks 0..n-1 with probability ∝ 1 / (rank+1)^s (inverse-CDF over a table)."""

    def __init__(self, n: int, s: float, rng: random.Random) -> None:
        import bisect
        import itertools

        weights = [1.0 / (i + 1) ** s for i in range(n)]
        self._cdf = list(itertools.accumulate(weights))
        self._total = self._cdf[-1]
        self._rng = rng
        self._bisect = bisect.bisect_left

    def draw(self) -> int:
        return self._bisect(self._cdf, self._rng.random() * self._total)


def iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def write_graph(
    out: IO[str],
    nodes: int,
    edges_per_node: float = 5.0,
    namespace: str = "bench",
    seed: int = 7,
    vocab_size: int = 20_000,
) -> tuple[int, int]:
    """Write ``nodes`` memories and about ``edges_per_node × nodes`` edges. Returns the counts."""
    rng = random.Random(seed)
    vocab = vocabulary(vocab_size, rng)
    words = Zipf(len(vocab), 1.07, rng)
    out.write(json.dumps({"type": "ebb-export", "version": 1, "namespaces": [namespace]}) + "\n")
    created: list[datetime] = []
    for i in range(nodes):
        age_days = rng.random() ** 2 * 365  # more recent memories than old ones
        c = NOW - timedelta(days=age_days)
        created.append(c)
        text = " ".join(vocab[words.draw()] for _ in range(rng.randint(6, 18)))
        read = c + timedelta(days=rng.random() * age_days) if rng.random() < 0.6 else c
        rec = {
            "type": "node",
            "id": f"m:{i:07d}",
            "namespace": namespace,
            "kind": KINDS[i % len(KINDS)],
            "text": text,
            "props": {},
            "created_at": iso(c),
            "updated_at": iso(c),
            "last_read_at": iso(read),
            "pinned": False,
            "tier": 1,
            "review_reason": None,
            "queued_at": None,
        }
        out.write(json.dumps(rec) + "\n")
    # preferential attachment by popularity rank: a few hubs, a long tail
    targets = Zipf(nodes, 0.8, rng)
    perm = list(range(nodes))
    rng.shuffle(perm)
    seen: set[tuple[int, int]] = set()
    total = int(nodes * edges_per_node)
    n_edges = 0
    while n_edges < total:
        a = rng.randrange(nodes)
        b = perm[targets.draw()]
        if a == b or (a, b) in seen:
            continue
        seen.add((a, b))
        start = max(created[a], created[b])
        span = (NOW - start).total_seconds()
        reinforced = start + timedelta(seconds=rng.random() ** 3 * span)
        rec = {
            "type": "edge",
            "namespace": namespace,
            "src": f"m:{a:07d}",
            "dst": f"m:{b:07d}",
            "kind": "related",
            "weight": round(0.5 + rng.random() * 1.5, 3),
            "created_at": iso(start),
            "reinforced_at": iso(reinforced),
            "props": {},
        }
        out.write(json.dumps(rec) + "\n")
        n_edges += 1
    return nodes, n_edges


def queries(count: int, seed: int = 11, vocab_size: int = 20_000) -> list[str]:
    """Recall queries of 1-3 words drawn from the same Zipf vocabulary, skipping the top 50."""
    rng = random.Random(7)
    vocab = vocabulary(vocab_size, rng)
    qrng = random.Random(seed)
    words = Zipf(len(vocab), 1.07, qrng)
    out = []
    for _ in range(count):
        picks: list[str] = []
        while len(picks) < qrng.randint(1, 3):
            r = words.draw()
            if r >= 50:  # the commonest words behave like stop words
                picks.append(vocab[r])
        out.append(" ".join(picks))
    return out


def common_queries(count: int, seed: int = 13, vocab_size: int = 20_000) -> list[str]:
    """Queries of 2-3 words among ranks 50-1000 of the vocabulary (each in ~0.1-2% of the
    memories): at every size they match far more than k memories, so recall fills k and
    explains ten hits, where :func:`queries` mostly finds one or two."""
    vocab = vocabulary(vocab_size, random.Random(7))
    rng = random.Random(seed)
    return [
        " ".join(vocab[rng.randrange(50, 1000)] for _ in range(rng.randint(2, 3)))
        for _ in range(count)
    ]


def queries_from(
    texts: list[str], count: int, seed: int = 11, vocab_size: int = 20_000
) -> list[str]:
    """Queries of 1-2 words taken from ``texts`` (skipping the 50 commonest words): each one
    matches at least one of those memories."""
    common = set(vocabulary(vocab_size, random.Random(7))[:50])
    rng = random.Random(seed)
    out = []
    for i in range(count):
        picks = [w for w in texts[i % len(texts)].split() if w not in common] or ["none"]
        out.append(" ".join(rng.sample(picks, min(len(picks), rng.randint(1, 2)))))
    return out


def write_file(
    path: Path, nodes: int, edges_per_node: float = 5.0, namespace: str = "bench"
) -> tuple[int, int]:
    """:func:`write_graph` into ``path``, atomically: written under a temporary name beside it
    and renamed into place once complete, so a run stopped half-way leaves no partial file that
    the next run (which reuses ``path`` when it exists) would import as the whole graph."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            counts = write_graph(fh, nodes, edges_per_node, namespace=namespace)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return counts
