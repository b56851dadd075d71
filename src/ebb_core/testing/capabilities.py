"""The optional capabilities held to the core: a backend's own answer equals the default's.

Every capability method of :class:`~ebb_core.store.GraphStore` has a default built on the 14 core
methods (and the scoring rules of :mod:`ebb_core.scoring`). A backend that overrides one (an
index, a statement, a server-side pass) must answer as the default does: these tests call both
on the same data, the backend's method and the default (``IndexedReads.top_by_key(store, ...)``),
and compare. Server-side scoring (the decay of ``strongest_links``, ``recompute_keys``,
``reference_key``, the tier cut of ``tier_moves``) is checked here against the core's rules.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest

from .. import scoring
from ..clock import FixedClock, to_us
from ..engine import Brain
from ..model import Node, Tier
from ..store import Adjustment, FastWrites, GraphStore, IndexedReads, ServerScoring
from ._base import T0, _StoreFixtures, populate


def _graph(store: GraphStore, namespace: str) -> Brain:
    """:func:`populate` in ``namespace`` (its own clock from :data:`T0`), then a ``maintain``
    (tiers move, some to frozen), one memory pinned and one frozen by hand."""
    brain = Brain(store, namespace=namespace, clock=FixedClock(T0))
    populate(brain)
    brain.clock.advance(days=200)  # type: ignore[attr-defined]
    brain.remember("fresh harbor lantern", id="note:fresh", links=["fact:0"])
    brain.maintain()
    brain.pin("fact:8")
    when = brain.clock.now()
    store.update_nodes(
        namespace,
        {"fact:12": {"tier": Tier.FROZEN, "review_reason": "by hand", "queued_at": when}},
    )
    return brain


def _nodes(store: GraphStore, namespace: str) -> dict[str, dict[str, Any]]:
    """Every node of ``namespace`` as its fields, without the namespace (to compare two)."""
    return {
        n.id: n.model_dump(exclude={"namespace"})
        for batch in store.scan_nodes(namespace)
        for n in batch
    }


def _close(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> None:
    assert a.keys() == b.keys()
    for i in a:
        for f in ("base_key", "key"):
            assert a[i][f] == pytest.approx(b[i][f], rel=1e-9, abs=1e-12), (i, f)
        assert {k: v for k, v in a[i].items() if k not in ("base_key", "key")} == {
            k: v for k, v in b[i].items() if k not in ("base_key", "key")
        }, i


def _moves(moves: list[Any]) -> list[tuple[Any, ...]]:
    return sorted((m.node_id, m.from_tier, m.to_tier, pytest.approx(m.ratio)) for m in moves)


class CapabilityContract(_StoreFixtures):
    """A backend's capability methods answer as their defaults over the core do."""

    def test_server_side_scoring_equals_the_core(self, store: GraphStore) -> None:
        """``reference_key``, ``tier_moves`` (and its columns), ``recompute_keys`` and
        ``scale_keys`` as the backend computes them equal ``ServerScoring``'s defaults, which
        apply :mod:`ebb_core.scoring`'s rules to the nodes the core reads."""
        brain = _graph(store, "s")
        cfg = brain.config
        for q in (0.5, 0.9, 0.99, 1.0):
            key, rank = store.reference_key("s", q)
            core_key, core_rank = ServerScoring.reference_key(store, "s", q)
            assert rank == core_rank and key == pytest.approx(core_key), q
        reference, _ = store.reference_key("s", cfg.reference_quantile)
        assert reference > 0
        for ref in (reference, reference * 0.01, reference * 40, 0.0):
            rule = (ref, cfg.hot_ratio, cfg.warm_ratio, cfg.cold_ratio)
            moves = _moves(ServerScoring.tier_moves(store, "s", *rule))
            assert _moves(store.tier_moves("s", *rule)) == moves, ref
            assert _moves(store.tier_move_columns("s", *rule).moves()) == moves, ref
        assert _moves(store.tier_moves("s", reference * 40, *rule[1:])) != []  # moves seen
        h, now = cfg.half_life_us, to_us(brain.clock.now())
        epoch = now - int(h * 1.5)
        params = (epoch, h, cfg.read_bonus, cfg.spread)
        assert store.recompute_keys("s", *params) == len(_nodes(store, "s"))
        by_backend = _nodes(store, "s")
        assert ServerScoring.recompute_keys(store, "s", *params) == len(by_backend)
        _close(_nodes(store, "s"), by_backend)
        assert any(n["key"] > 0 for n in by_backend.values())
        store.scale_keys(4.0)
        scaled = _nodes(store, "s")
        assert scaled["fact:0"]["key"] == pytest.approx(4 * by_backend["fact:0"]["key"])
        ServerScoring.scale_keys(store, 0.25)
        _close(_nodes(store, "s"), by_backend)

    def test_decayed_links_equal_the_core(self, store: GraphStore) -> None:
        """``strongest_links`` (the decay of each link at ``now``, strongest first, frozen
        ends left out) equals the default's, which applies ``scoring.decay``."""
        brain = _graph(store, "s")
        for k in range(4):  # links of other weights and ages
            brain.clock.advance(days=7)  # type: ignore[attr-defined]
            brain.connect(f"fact:{k + 20}", f"fact:{k + 30}", weight=1.0 + k)
        ids = [n for n in _nodes(store, "s")]
        now = to_us(brain.clock.now())
        h = brain.config.half_life_us
        # floors between the decayed weights themselves (each link's, by the core's rule), so
        # that a different decay lets one more link in or keeps one out
        weights = sorted(
            {
                inc.edge.weight * scoring.decay(now - to_us(inc.edge.reinforced_at), h)
                for inc in store.incident("s", ids)
            }
        )
        floors = [0.0, *((a + b) / 2 for a, b in itertools.pairwise(weights))]
        assert len(floors) > 3
        for at in (now, now - int(h)):
            for floor in floors:
                for limit in (3, 500):
                    args = ("s", ids, at, h, floor, limit)
                    core = IndexedReads.strongest_links(store, *args)
                    assert store.strongest_links(*args) == core, (at, floor, limit)
        assert IndexedReads.strongest_links(store, "s", ids, now, h, 0.0, 500)  # links seen

    def test_indexed_reads_equal_the_core(self, store: GraphStore) -> None:
        """Each read a backend answers from its indexes equals the default over the core."""
        _graph(store, "s")
        ids = [*_nodes(store, "s"), "note:missing"]
        assert store.existing_ids("s", ids) == IndexedReads.existing_ids(store, "s", ids)
        for key in (("fact:0", "fact:5", "related"), ("fact:0", "fact:5", "other")):
            assert store.get_edge("s", *key) == IndexedReads.get_edge(store, "s", *key)
        assert store.get_edge("s", "fact:0", "fact:5", "related") is not None
        for tier in (Tier.HOT, Tier.COLD, Tier.FROZEN):
            for kinds in ((), ("note",), ("fact", "decision")):
                got = [n.id for n in store.top_by_key("s", tier, 7, kinds)]
                core = [n.id for n in IndexedReads.top_by_key(store, "s", tier, 7, kinds)]
                assert got == core, (tier, kinds)
        queue = IndexedReads.review_queue(store, "s", 50)
        assert store.review_queue("s", 50) == queue and queue
        edges = [e for b in store.scan_edges("s", 7) for e in b]
        assert edges == [e for b in IndexedReads.scan_edges(store, "s", 7) for e in b]
        assert store.counts("s") == IndexedReads.counts(store, "s")
        assert store.last_audit_seq("s") == IndexedReads.last_audit_seq(store, "s") > 0
        assert store.last_audit_seq("none") == IndexedReads.last_audit_seq(store, "none") == 0
        assert store.superseded_by("s") == IndexedReads.superseded_by(store, "s")
        matches = IndexedReads.matches_for(store, "s", ids)
        assert sorted(store.matches_for("s", ids), key=lambda m: m.id) == sorted(
            matches, key=lambda m: m.id
        )

    def test_fast_writes_equal_the_core(self, store: GraphStore) -> None:
        """``adjust``, ``update_nodes`` and ``bulk_insert`` written by the backend in one
        namespace and by the defaults (over ``get_nodes``, ``incident`` and ``upsert_*``) in
        another leave the same nodes and edges."""
        _graph(store, "a")
        _graph(store, "b")
        _close(_nodes(store, "a"), _nodes(store, "b"))
        when = T0 + timedelta(days=400)
        changes = {
            "fact:0": Adjustment(base_delta=0.5, key_delta=0.75, push_delta=0.125),
            "fact:5": Adjustment(
                degree_delta=1, key_delta=-0.25, push_delta=0.25, fields={"last_read_at": when}
            ),
            "note:fresh": Adjustment(push_delta=0.5),  # fact:0 takes two pushes (and its own)
            "fact:4": Adjustment(push_delta=2.0),
            "fact:13": Adjustment(fields={"pinned": True, "text": "changed"}),
        }
        store.adjust("a", changes)
        FastWrites.adjust(store, "b", changes)
        _close(_nodes(store, "a"), _nodes(store, "b"))
        fields: dict[str, dict[str, Any]] = {
            "fact:2": {"tier": Tier.COLD, "kind": "note"},
            "fact:3": {"props": {"x": 1}},
        }
        store.update_nodes("a", fields)
        FastWrites.update_nodes(store, "b", fields)
        _close(_nodes(store, "a"), _nodes(store, "b"))
        us = to_us(when)
        for ns, write in (("c", store.bulk_insert), ("d", None)):
            nodes: dict[str, list[Any]] = {
                "namespace": [ns, ns],
                "id": ["note:x", "note:y"],
                "kind": ["note", "note"],
                "text": ["x", "y"],
                "props": ['{"a": 1}', "{}"],
                "created_us": [us, us],
                "updated_us": [us, us],
                "last_read_us": [None, us],
                "pinned": [False, True],
                "tier": [1, 2],
                "review_reason": [None, None],
                "queued_us": [None, None],
            }
            edges: dict[str, list[Any]] = {
                "namespace": [ns],
                "src": ["note:x"],
                "dst": ["note:y"],
                "kind": ["related"],
                "weight": [2.0],
                "created_us": [us],
                "reinforced_us": [us],
                "props": ["{}"],
            }
            if write is not None:
                write(nodes, edges)
            else:
                FastWrites.bulk_insert(store, nodes, edges)
        _close(_nodes(store, "c"), _nodes(store, "d"))
        edges_c = [e.model_dump(exclude={"namespace"}) for b in store.scan_edges("c") for e in b]
        assert edges_c == [
            e.model_dump(exclude={"namespace"}) for b in store.scan_edges("d") for e in b
        ]
        assert len(edges_c) == 1
        assert isinstance(store.get_nodes("d", ["note:y"])["note:y"], Node)
