"""What a bulk import stores that it computes column-wise: the recent-link lists and keys it
writes with the memories (equal to a plain reference, ties of ``reinforced_at`` included), and the
id checks of the plan (an id twice in a namespace refused, the same id in two namespaces
taken, a clash with a stored memory refused with nothing written), and the lists an import
builds in two halves equal to those built in one piece."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ebb_core import Brain, FixedClock, scoring
from ebb_core.clock import to_us
from ebb_core.errors import InvalidInput
from ebb_core.kuzu.bulk import _lists_in_halves
from ebb_core.kuzu.maintain import _recent_link_lists
from ebb_core.kuzu.queries import LINK_SEP, RECENT_LINKS, SEP
from ebb_core.kuzu_store import KuzuStore


def _node(ns: str, i: str, at: str) -> dict[str, Any]:
    return {
        "type": "node", "id": i, "namespace": ns, "kind": "note", "text": f"memory {i}",
        "props": {}, "created_at": at, "updated_at": at, "last_read_at": at, "pinned": False,
        "tier": 1, "review_reason": None, "queued_at": None,
    }  # fmt: skip


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_an_imports_recent_link_lists_equal_the_reference_ties_included(
    tmp_path: Path, clock: FixedClock
) -> None:
    """Every memory's list: its links newest first, at most RECENT_LINKS, a tie broken by the
    link's place in the file with the memory's outgoing links before its incoming ones (what
    the vectorised sort must keep); a memory without links has an empty list."""
    rng = random.Random(7)
    t0 = clock.now()
    n = 60
    ids = [f"note:m{i:03d}" for i in range(n)]
    lines: list[dict[str, Any]] = [{"type": "ebb-export", "version": 1, "namespaces": ["test"]}]
    lines += [_node("test", i, (t0 - timedelta(days=3)).isoformat()) for i in ids]
    # few distinct times (many ties), hubs with more than RECENT_LINKS links, and the last
    # five memories with none
    times = [t0 - timedelta(hours=h) for h in range(4)]
    edges: list[tuple[int, int, str, float, datetime]] = []
    pairs: set[tuple[int, int]] = set()
    while len(edges) < 400:
        a = rng.choice([0, 1, 2]) if rng.random() < 0.3 else rng.randrange(n - 5)
        b = rng.randrange(n - 5)
        if a == b or (a, b) in pairs:
            continue
        pairs.add((a, b))
        at = rng.choice(times)
        edges.append((a, b, rng.choice(["related", "about"]), round(0.5 + rng.random(), 3), at))
    for a, b, kind, weight, at in edges:
        lines.append(
            {
                "type": "edge", "namespace": "test", "src": ids[a], "dst": ids[b],
                "kind": kind, "weight": weight, "created_at": at.isoformat(),
                "reinforced_at": at.isoformat(), "props": {},
            }
        )  # fmt: skip
    data = _write(tmp_path / "graph.jsonl", lines)
    store = KuzuStore(str(tmp_path / "db"))
    brain = Brain(store, namespace="test", clock=clock)
    try:
        brain.import_(data)
        stored = dict(store._q("MATCH (n:Memory) RETURN n.id, n.recent_links"))
        scores = {r[0]: r[1:] for r in store._q("MATCH (n:Memory) RETURN n.id, n.key, n.degree")}
        cfg, epoch = brain.config, brain._s.epoch_us
    finally:
        brain.close()
    # the keys stored from the file (the edge ends' positions the plan matched) are graph_keys'
    read = to_us(t0 - timedelta(days=3))
    _, key, degree = scoring.graph_keys(
        n,
        np.array([a for a, *_ in edges]),
        np.array([b for _, b, *_ in edges]),
        np.array([w for *_, w, _ in edges]),
        np.array([to_us(at) for *_, at in edges]),
        np.full(n, read),
        np.ones(n, bool),
        epoch,
        cfg.half_life_us,
        cfg.read_bonus,
        cfg.spread,
    )
    assert [scores[i][0] for i in ids] == pytest.approx(key.tolist(), rel=1e-12)
    assert [scores[i][1] for i in ids] == degree.tolist()
    # the reference: the doubled edge list (outgoing ends, then incoming), by memory, newest
    # first, stable
    entries: dict[int, list[tuple[int, int, str]]] = {i: [] for i in range(n)}
    doubled = [(a, b, 1, e) for e, (a, b, *_) in enumerate(edges)]
    doubled += [(b, a, 0, e) for e, (a, b, *_) in enumerate(edges)]
    for pos, (me, other, out, e) in enumerate(doubled):
        entries[me].append((-to_us(edges[e][4]), pos, SEP.join(
            (ids[other], edges[e][2], str(out), repr(edges[e][3]), str(to_us(edges[e][4])))
        )))  # fmt: skip
    hubs = 0
    for i in range(n):
        kept = [x[2] for x in sorted(entries[i])[:RECENT_LINKS]]
        assert stored[ids[i]] == LINK_SEP.join(kept), ids[i]
        hubs += len(entries[i]) > RECENT_LINKS
    assert hubs >= 3
    assert all(stored[i] == "" for i in ids[-5:])


def test_an_import_checks_ids_per_namespace(tmp_path: Path, clock: FixedClock) -> None:
    """An id twice in one namespace is refused, naming it; the same id in two namespaces is
    taken; an id already stored in one of them is refused, and nothing is written."""
    at = (clock.now() - timedelta(days=1)).isoformat()
    store = KuzuStore(str(tmp_path / "db"))
    brain = Brain(store, namespace="a", clock=clock)
    try:
        twice = _write(
            tmp_path / "twice.jsonl",
            [_node("a", "note:x", at), _node("b", "note:y", at), _node("b", "note:y", at)],
        )
        with pytest.raises(InvalidInput, match="'note:y' appears twice in the import"):
            brain.import_(twice)
        both = _write(
            tmp_path / "both.jsonl",
            [_node("a", "note:x", at), _node("b", "note:x", at), _node("b", "note:z", at)],
        )
        assert brain.import_(both)["nodes"] == 3
        assert store.existing_ids("b", ["note:x", "note:z"]) == {"note:x", "note:z"}
        clash = _write(
            tmp_path / "clash.jsonl",
            [_node("c", "note:w", at), _node("b", "note:q", at), _node("b", "note:z", at)],
        )
        with pytest.raises(InvalidInput, match="'note:z' already exists in namespace 'b'"):
            brain.import_(clash)
        assert not store.existing_ids("c", ["note:w"])
        assert not store.existing_ids("b", ["note:q"])
    finally:
        brain.close()


def test_the_lists_built_in_halves_equal_those_built_in_one_piece() -> None:
    """An import builds its lists in two threads, one half of the memories each, from one
    doubled edge list they share: the same lists as maintain's one piece, ties and hubs on
    both sides of the cut included."""
    import pyarrow as pa

    rng = np.random.default_rng(11)
    n, m = 301, 2_000  # odd: the halves differ by one
    a = rng.integers(0, n - 4, m)
    b = (a + rng.integers(1, n - 4, m)) % (n - 4)  # the last four have no links
    a[:300] = rng.choice([3, n // 2 - 1, n // 2], 300)  # hubs at and beside the cut
    nodes = pa.table({"i": pa.array([f"note:m{i:03d}" for i in range(n)])})
    edges = pa.table(
        {
            "a": a,
            "b": b,
            "t": rng.integers(0, 5, m) * 1_000_000,  # few distinct times: many ties
            "k": pa.array(rng.choice(["related", "about"], m).tolist()),
            "w": rng.random(m).round(3),
        }
    )
    whole = _recent_link_lists(nodes, edges, np.arange(n))
    halves = _lists_in_halves(nodes, edges, np.arange(n))
    assert halves.to_pylist() == whole.to_pylist()
    lists = whole.to_pylist()
    assert all(x == "" for x in lists[-4:])
    assert all(x.count(LINK_SEP) == RECENT_LINKS - 1 for x in lists[n // 2 - 1 : n // 2 + 1])
