"""Stored keys, the epoch, the tier reference and tier moves."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from datetime import timedelta

import pytest

from ..clock import FixedClock, to_us
from ..engine import Brain
from ..model import Tier
from ..scoring import Config
from ..store import GraphStore, TierMoveColumns
from ._base import _StoreFixtures, flat_keys, hub_graph, live_links, scores, small_graph


class ScoringContract(_StoreFixtures):
    """Stored keys, the epoch, the tier reference and tier moves."""

    # moved from tests/test_engine.py
    def test_incremental_keys_equal_full_recompute(self, eager: Brain, clock: FixedClock) -> None:
        """With eager spreading every write updates keys locally; they must equal a from-scratch
        recomputation."""
        brain = eager
        small_graph(brain, clock)
        clock.advance(days=3)
        brain.recall("Acme ticket pricing")
        brain.connect("note:seats", "person:maya", kind="mentions", weight=2.5)
        brain.connect("person:maya", "note:seats", kind="wrote")  # a second edge, same pair
        clock.advance(days=1)
        brain.reinforce("client:acme")
        brain.reinforce("decision:outcome", with_id="person:maya")
        brain.forget("note:seats", "superseded")
        brain.approve_deletion(["note:seats"], approved_by="tester")
        brain.restore("person:maya")
        incremental = scores(brain)
        brain.maintain()
        exact = scores(brain)
        assert incremental.keys() == exact.keys()
        for i, (b, k, d) in incremental.items():
            assert b == pytest.approx(exact[i][0], rel=1e-9), i
            assert k == pytest.approx(exact[i][1], rel=1e-9), i
            assert d == exact[i][2], i

    # moved from tests/test_engine.py
    def test_maintain_freezes_decayed_and_never_deletes(
        self, store: GraphStore, clock: FixedClock
    ) -> None:
        """With ``decay_alone_freezes`` (off by default), decay alone queues for review."""
        brain = Brain(store, namespace="test", clock=clock, config=Config(decay_alone_freezes=True))
        for i in range(3):
            brain.remember(f"stale analysis {i}", kind="note", id=f"note:a{i}")
        clock.advance(days=300)
        brain.remember("live decision", kind="decision", id="decision:live")
        report = brain.maintain()
        assert sorted(report.newly_queued) == ["note:a0", "note:a1", "note:a2"]
        assert report.moved == {"hot->frozen": 3}
        queue = brain.review_queue()
        assert [q.id for q in queue] == ["note:a0", "note:a1", "note:a2"]
        assert all(q.reason.startswith("decayed") for q in queue)
        assert brain.stats().nodes == 4
        assert [e.action for e in brain.audit_log()] == ["freeze"] * 3
        # a second pass moves nothing and frozen stays frozen
        assert brain.maintain().moved == {}

    # moved from tests/test_engine.py
    def test_epoch_rebase_keeps_rankings(self, store: GraphStore, clock: FixedClock) -> None:
        from ebb_core import Config

        brain = Brain(store, namespace="t", clock=clock, config=Config(rebase_after_half_lives=2))
        brain.remember("alpha note", id="note:a")
        clock.advance(days=100)
        brain.remember("beta note", id="note:b", links=["note:a"])
        assert store.get_meta("epoch_us") == str(to_us(clock.now()))  # the write moved the epoch
        clock.advance(days=100)
        assert brain.maintain().rebased
        clock.set(clock.now() - timedelta(days=100))
        expected = 2.0 + brain.config.spread * (
            1.0 + 2 ** (-100 / 30)
        )  # own edge + read, a's share
        assert brain.activation("note:b") == pytest.approx(expected)
        clock.advance(days=10)
        hits = brain.recall("note", k=2, reinforce=False)
        assert [h.id for h in hits] == ["note:b", "note:a"]

    # moved from tests/test_engine.py
    def test_bulk_paths_keep_keys_exact(self, eager: Brain, clock: FixedClock) -> None:
        """Many hits at once (bulk updates, pushes that meet at shared neighbours) stay exact."""
        brain = eager
        brain.remember("central hub memory", id="note:hub")
        for i in range(44):
            links = ["note:hub"] + ([f"note:leaf-{i - 1}"] if i else [])
            brain.remember(
                f"leaf memory number {i} about gardens", id=f"note:leaf-{i}", links=links
            )
            clock.advance(hours=6)
        clock.advance(days=9)
        hits = brain.recall("gardens leaf memory", k=40)  # > 32 rows: the bulk LOAD FROM path
        assert len(hits) == 40
        clock.advance(days=2)
        brain.reinforce("note:hub")
        brain.forget("note:leaf-3")
        brain.forget("note:leaf-4")
        brain.approve_deletion(["note:leaf-3", "note:leaf-4"], approved_by="tester")
        incremental = scores(brain)
        brain.maintain()
        exact = scores(brain)
        for nid, (b, k, d) in incremental.items():
            assert b == pytest.approx(exact[nid][0], rel=1e-9), nid
            assert d == exact[nid][2], nid
            assert k == pytest.approx(exact[nid][1], rel=1e-9), nid

    # moved from tests/test_engine.py
    def test_a_hub_does_not_archive_the_whole_graph(self, brain: Brain, clock: FixedClock) -> None:
        hub_graph(brain, clock)
        brain.maintain()
        tiers = brain.stats().by_tier
        assert tiers["frozen"] == 0 and tiers["hot"] >= 140
        key, rank = brain.store.reference_key(brain.namespace, brain.config.reference_quantile)
        assert rank == 1  # floor(151 * 0.01): the second most active memory, not the hub
        assert key < brain.get("note:hub").key

    # moved from tests/test_engine.py
    def test_reference_quantile_one_is_the_maximum(
        self, store: GraphStore, clock: FixedClock
    ) -> None:
        from ebb_core import Config

        cfg = Config(reference_quantile=1.0, decay_alone_freezes=True)
        brain = Brain(store, namespace="q", clock=clock, config=cfg)
        hub_graph(brain, clock)
        brain.maintain()
        assert brain.stats().by_tier["frozen"] == 150  # everything but the hub, as the seed's rule

    # moved from tests/test_neo4j_store.py
    def test_scale_keys_inside_and_outside_a_transaction(
        self, store: GraphStore, clock: FixedClock
    ) -> None:
        brain = Brain(store, namespace="s", clock=clock)
        brain.remember("one", id="note:1")
        brain.remember("two", id="note:2", links=["note:1"])
        before = scores(brain)
        store.scale_keys(0.5)
        with store.transaction():
            store.scale_keys(4.0)
        for i, (b, k, d) in scores(brain).items():
            assert b == pytest.approx(before[i][0] * 2) and k == pytest.approx(before[i][1] * 2)
            assert d == before[i][2]

    # moved from tests/test_engine.py
    def test_imports_store_the_scores_a_full_recompute_gives(
        self, brain: Brain, clock: FixedClock
    ) -> None:
        small_graph(brain, clock)
        exported = io.StringIO()
        brain.export(exported)
        target = brain.scoped("imported")
        # into an empty namespace: scores and link lists come from the file
        target.import_(io.StringIO(exported.getvalue()), namespace="imported")
        imported, links = flat_keys(target), live_links(target, "Acme pricing")
        assert links["client:acme"] == ["decision:outcome", "note:seats"]
        reference = target._reference()
        target.maintain()
        assert flat_keys(target) == pytest.approx(imported)
        assert target._reference() == pytest.approx(reference)  # the tier reference too
        assert live_links(target, "Acme pricing") == links
        # into a namespace that has memories, linking to one of them: recomputed from the store
        t = "2026-01-01T00:00:00Z"
        node = {"type": "node", "id": "note:late", "namespace": "imported", "kind": "note",
                "text": "late Acme note", "props": {}, "created_at": t, "updated_at": t,
                "last_read_at": t, "pinned": False, "tier": 1, "review_reason": None,
                "queued_at": None}  # fmt: skip
        edge = {"type": "edge", "namespace": "imported", "src": "note:late", "dst": "client:acme",
                "kind": "related", "weight": 2.0, "created_at": t, "reinforced_at": t,
                "props": {}}  # fmt: skip
        target.import_(io.StringIO(json.dumps(node) + "\n" + json.dumps(edge) + "\n"))
        imported, links = flat_keys(target), live_links(target, "Acme pricing late")
        assert "note:late" in links["client:acme"]
        target.maintain()
        assert flat_keys(target) == pytest.approx(imported)
        assert live_links(target, "Acme pricing late") == links

    # moved from tests/test_engine.py
    def test_maintain_preview_changes_nothing_and_foretells_the_moves(
        self, brain: Brain, clock: FixedClock
    ) -> None:
        for i in range(3):
            brain.remember(f"old {i}", id=f"note:old{i}")
        clock.advance(days=300)
        for i in range(10):
            brain.remember(f"fresh {i}", id=f"note:new{i}")
        before = io.StringIO()
        brain.export(before)
        preview = brain.maintain_preview()
        after = io.StringIO()
        brain.export(after)
        assert after.getvalue() == before.getvalue()
        # decay alone archives to cold; nothing of these was replaced, so nothing is queued
        assert {(m.node_id, m.to_tier) for m in preview} == {
            (f"note:old{i}", Tier.COLD) for i in range(3)
        }
        report = brain.maintain()
        assert report.newly_queued == []
        assert {i: brain.get(i).tier for i in (f"note:old{j}" for j in range(3))} == {
            f"note:old{j}": Tier.COLD for j in range(3)
        }
        # with a replacement recorded, the preview foretells what maintain then does
        brain.remember("fresh pricing replaces the old", id="note:repl", supersedes=["note:old0"])
        planned = {m.node_id: m.to_tier for m in brain.maintain_preview()}
        report = brain.maintain()
        assert sum(report.moved.values()) == len(planned)
        assert {i: brain.get(i).tier for i in planned} == planned

    # moved from tests/test_kuzu_store.py
    def test_changed_half_life_recomputes_keys(
        self, open_store: Callable[[], GraphStore], clock: FixedClock
    ) -> None:
        with Brain(open_store(), clock=clock) as b:
            b.remember("old", id="note:old")
            clock.advance(days=30)
            assert b.activation("note:old") == pytest.approx(0.5)
        with Brain(open_store(), clock=clock, config=Config(half_life_days=15)) as b:
            assert b.activation("note:old") == pytest.approx(0.25)

    def test_tier_move_columns_and_set_tiers(self, store: GraphStore, clock: FixedClock) -> None:
        """``tier_move_columns`` is ``tier_moves`` as columns, in id order; ``set_tiers`` gives
        each memory its new tier, and one moving to frozen its review reason and
        ``queued_at``. (40 moves: past the size from which Kùzu writes them column-wise.)"""
        brain = Brain(store, namespace="t", clock=clock)
        for i in range(40):
            brain.remember(f"old {i}", id=f"note:o{i:02d}")
        clock.advance(days=300)
        brain.remember("new", id="note:new")
        cfg = brain.config
        reference, _ = store.reference_key("t", cfg.reference_quantile)
        rule = (reference, cfg.hot_ratio, cfg.warm_ratio, cfg.cold_ratio)
        moves = store.tier_move_columns("t", *rule)
        assert moves.moves() == sorted(store.tier_moves("t", *rule), key=lambda m: m.node_id)
        assert sorted(moves.ids.tolist()) == [f"note:o{i:02d}" for i in range(40)]
        to = moves.to_tier.copy()  # the rule's tiers, except: five frozen, the rest cold
        to[:5], to[5:] = int(Tier.FROZEN), int(Tier.COLD)
        ids = moves.ids.tolist()
        review = {i: f"reason for {i}" for i in ids[:5]}
        store.set_tiers(
            "t", TierMoveColumns(moves.ids, moves.from_tier, to, moves.ratio), review, clock.now()
        )
        nodes = store.get_nodes("t", ids)
        assert [nodes[i].tier for i in ids] == [Tier(t) for t in to.tolist()]
        assert [nodes[i].review_reason for i in ids[:5]] == [review[i] for i in ids[:5]]
        assert all(nodes[i].queued_at == clock.now() for i in ids[:5])
        assert [q.id for q in brain.review_queue()] == sorted(ids[:5])
        # what the rule still moves: the memories now elsewhere than it says (frozen stay)
        left = {m.node_id for m in store.tier_moves("t", *rule)}
        assert left == {i for k, i in enumerate(ids) if k >= 5 and moves.to_tier[k] != to[k]}
