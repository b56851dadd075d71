"""The store contract as a test suite: a backend subclasses :class:`StoreContractTests`.

In the manner of ``langchain-tests``' standard tests: a new :class:`~ebb_core.store.GraphStore`
proves it keeps the contract (docs/store-contract.md) by subclassing the suite in its own tests
and saying how to open a store::

    import pytest
    from ebb_core.testing import StoreContractTests

    class TestMyStore(StoreContractTests):
        @pytest.fixture
        def open_store(self, tmp_path):
            # each call opens the same, initially empty, store
            return lambda: MyStore(tmp_path / "db")

pytest then runs every test below against it. The tests go through the public
:class:`~ebb_core.engine.Brain` and the store's own methods, with a fixed clock; no test
depends on a server or model of its own (the Kùzu reference store in one ordering test is
embedded). Needs pytest: ``pip install 'ebb-memory[testing]'``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from .clock import FixedClock, to_us
from .engine import Brain
from .errors import InvalidInput
from .grouping import GroupedStore
from .kuzu_store import KuzuStore
from .model import Tier
from .scoring import Config
from .store import GraphStore, TierMoveColumns

__all__ = [
    "T0",
    "DataContract",
    "GroupingContract",
    "ScoringContract",
    "StoreContractTests",
    "hub_graph",
    "populate",
    "scores",
    "small_graph",
]

#: The time every contract test starts at.
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

WORDS = [
    "harbor",
    "lantern",
    "pricing",
    "outcome",
    "coffee",
    "roast",
    "invoice",
    "ledger",
    "meeting",
    "budget",
]


def scores(brain: Brain) -> dict[str, tuple[float, float, int]]:
    """Every memory's stored ``(base_key, key, degree)`` in the brain's namespace."""
    return {
        n.id: (n.base_key, n.key, n.degree)
        for batch in brain.store.scan_nodes(brain.namespace)
        for n in batch
    }


def small_graph(brain: Brain, clock: FixedClock) -> None:
    """Four memories over fifteen days: a client, a person, a decision linking both, a note."""
    brain.remember("Acme Corp is our largest client", kind="client", id="client:acme")
    brain.remember("Maya runs product", kind="person", id="person:maya")
    clock.advance(days=10)
    brain.remember(
        "We bill Acme per resolved ticket",
        kind="decision",
        id="decision:outcome",
        links=["client:acme", "person:maya"],
    )
    clock.advance(days=5)
    brain.remember("Old seat pricing notes", kind="note", id="note:seats", links=["client:acme"])


def hub_graph(brain: Brain, clock: FixedClock) -> None:
    """150 memories each linked to one very heavy hub, then twenty days pass."""
    brain.remember("the hub everyone links to", id="note:hub")
    for i in range(150):
        brain.remember(f"ordinary memory {i}", id=f"note:m{i}")
        brain.connect(f"note:m{i}", "note:hub", weight=50.0)  # one very heavy hub
    clock.advance(days=20)


def populate(brain: Brain) -> None:
    """The same small graph in any namespace: links, a replacement, archived memories."""
    with brain.batch():
        for i in range(40):
            text = " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7)) + f" item{i}"
            brain.remember(text, kind="fact" if i % 3 else "note", id=f"fact:{i}")
        for i in range(0, 40, 4):
            brain.connect(f"fact:{i}", f"fact:{(i + 5) % 40}", kind="related")
        brain.remember("pricing outcome decided anew", kind="decision", id="decision:new")
        brain.supersede("fact:1", "decision:new")
    brain.clock.advance(days=90)  # type: ignore[attr-defined]
    for i in range(0, 40, 9):
        brain.reinforce(f"fact:{i}")
    brain.maintain()  # the others sink to warm or cold: use promotes them again


def ranking(brain: Brain, query: str, **kw: object) -> list[tuple[str, float]]:
    """``(id, score)`` of a recall's hits."""
    return [(h.id, h.score) for h in brain.recall(query, k=6, **kw)]  # type: ignore[arg-type]


def same(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> None:
    assert [i for i, _ in a] == [i for i, _ in b]
    assert [s for _, s in a] == pytest.approx([s for _, s in b], rel=1e-9, abs=1e-12)


def state(brain: Brain) -> dict[str, tuple[float, float, object, int]]:
    return {
        n.id: (n.key, n.base_key, n.last_read_at, int(n.tier))
        for batch in brain.store.scan_nodes(brain.namespace)
        for n in batch
    }


class _StoreFixtures:
    """The fixtures every part of the contract uses; ``open_store`` is the backend's."""

    @pytest.fixture
    def open_store(self) -> Callable[[], GraphStore]:
        """A function opening the backend's store: the first call on an empty store, each
        later one on the same data (a reopen). Every subclass defines it."""
        raise NotImplementedError("a StoreContractTests subclass defines the open_store fixture")

    @pytest.fixture
    def store(self, open_store: Callable[[], GraphStore]) -> Iterator[GraphStore]:
        s = open_store()
        yield s
        s.close()

    @pytest.fixture
    def clock(self) -> FixedClock:
        return FixedClock(T0)

    @pytest.fixture
    def brain(self, store: GraphStore, clock: FixedClock) -> Brain:
        return Brain(store, namespace="test", clock=clock)

    @pytest.fixture
    def eager(self, store: GraphStore, clock: FixedClock) -> Brain:
        return Brain(store, namespace="test", clock=clock, config=Config(eager_spreading=True))


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


class DataContract(_StoreFixtures):
    """Keeping, finding, scanning and rolling back memories, namespace by namespace."""

    # moved from tests/test_engine.py
    def test_namespaces_are_isolated(self, brain: Brain) -> None:
        other = brain.scoped("someone-else")
        brain.remember("secret pricing plan", kind="note", id="note:plan")
        other.remember("public pricing page", kind="note", id="note:plan")
        assert [h.node.text for h in brain.recall("pricing")] == ["secret pricing plan"]
        assert [h.node.text for h in other.recall("pricing")] == ["public pricing page"]
        other.forget("note:plan")
        assert brain.review_queue() == []
        assert brain.get("note:plan").tier is Tier.HOT
        assert brain.stats().nodes == 1 and other.stats().nodes == 1

    # moved from tests/test_engine.py
    def test_user_text_is_data_not_query(self, brain: Brain) -> None:
        nasty = "x'}) MATCH (n) DETACH DELETE n //  \"; DROP TABLE Memory; 🙂 \u202e"
        brain.remember("keep me", id="note:keep")
        node = brain.remember(nasty, kind="note", id="note:o'brien\"})//")
        assert brain.get(node.id).text == nasty
        assert brain.recall(nasty)  # searching for it is fine too
        assert brain.get("note:keep").text == "keep me"

    # moved from tests/test_engine.py
    def test_lone_surrogates_and_unicode_ids(self, brain: Brain) -> None:
        for call in (
            lambda: brain.remember("bad \ud800 text"),
            lambda: brain.remember("fine", id="note:\udc00"),
            lambda: brain.recall("\ud800"),
            lambda: brain.neighbors("\ud800"),
            lambda: brain.remember("fine", props={"k": "\ud800"}),
        ):
            with pytest.raises(InvalidInput, match="not valid Unicode"):
                call()
        assert brain.remember("Café résumé", kind="note").id == "note:cafe-resume"
        assert brain.remember("Привет мир", kind="note").id == "note:привет-мир"
        assert brain.stats().nodes == 2

    # moved from tests/test_engine.py
    def test_memories_lists_in_id_order_with_filters(self, brain: Brain) -> None:
        for i in range(4):
            brain.remember(f"note {i}", id=f"note:n{i}")
        brain.remember("a decision", kind="decision", id="decision:d")
        brain.forget("note:n2")
        brain.scoped("other").remember("not mine", id="note:a")
        assert [n.id for n in brain.memories()] == ["decision:d", *(f"note:n{i}" for i in range(4))]
        assert [n.id for n in brain.memories(kinds=["note"], tiers=[Tier.HOT])] == [
            "note:n0",
            "note:n1",
            "note:n3",
        ]
        assert [n.id for n in brain.memories(tiers=[4])] == ["note:n2"]
        assert [n.id for n in brain.memories(limit=2, after="note:n0")] == ["note:n1", "note:n2"]
        with pytest.raises(InvalidInput) as e:
            brain.memories(tiers=[7])
        assert e.value.field == "tiers"

    # moved from tests/test_kuzu_store.py
    def test_reopen_after_clean_close_keeps_everything(
        self, open_store: Callable[[], GraphStore]
    ) -> None:
        with Brain(open_store(), namespace="x") as b:
            b.remember("first", id="note:1")
            b.remember("second", id="note:2", links=["note:1"])
            b.forget("note:1")
        with Brain(open_store(), namespace="x") as b:
            assert b.stats().nodes == 2 and b.stats().edges == 1
            assert [i.id for i in b.review_queue()] == ["note:1"]
            b.remember("zebra written after reopening", id="note:3")
            assert [h.id for h in b.recall("zebra")] == ["note:3"]

    # moved from tests/test_kuzu_store.py
    def test_failed_operation_rolls_back(self, store: GraphStore) -> None:
        b = Brain(store, namespace="t")
        b.remember("anchor", id="note:a")
        assert [h.id for h in b.recall("anchor")] == ["note:a"]  # builds the recall cache
        with pytest.raises(RuntimeError), store.transaction():
            b.remember("inside a failed transaction", id="note:b")
            raise RuntimeError("boom")
        assert store.get_nodes("t", ["note:b"]) == {}
        assert b.stats().nodes == 1
        assert b.recall("failed transaction") == []  # recall's cached columns were dropped too
        assert [h.id for h in b.recall("anchor")] == ["note:a"]

    # moved from tests/test_neo4j_store.py
    def test_recall_takes_any_text_as_a_plain_query(
        self, store: GraphStore, clock: FixedClock
    ) -> None:
        brain = Brain(store, namespace="t", clock=clock)
        brain.remember("pricing for acme: seats and tickets", id="note:pricing")
        for query in [
            'acme (pricing" AND -seats ~ * ? : \\ / [ ] { } ^ || && NOT',
            "pricing~2 seats^10 title:acme",
            '"unbalanced',
            "OR",
        ]:
            hits = brain.recall(query, reinforce=False)
            assert all(h.id == "note:pricing" for h in hits), query
        assert [h.id for h in brain.recall('"acme" OR (tickets)', reinforce=False)] == [
            "note:pricing"
        ]

    # moved from tests/test_neo4j_store.py
    def test_a_failed_operation_leaves_nothing(self, store: GraphStore, clock: FixedClock) -> None:
        brain = Brain(store, namespace="t", clock=clock)
        brain.remember("anchor", id="note:a")
        before = scores(brain)
        with pytest.raises(Exception, match="note:nowhere"):
            brain.remember("half linked", id="note:b", links=["note:a", "note:nowhere"])
        assert scores(brain) == before

    # moved from tests/test_neo4j_store.py
    @pytest.mark.parametrize("arrow", [False, True])
    def test_bulk_insert_takes_lists_or_arrow_arrays(self, store: GraphStore, arrow: bool) -> None:
        us = 1_767_225_600_000_000
        nodes: dict[str, Any] = {
            "namespace": ["bulk", "bulk", "bulk"],
            "id": ["note:a", "note:b", "note:c"],
            "kind": ["note"] * 3,
            "text": ["alpha", "beta", "gamma"],
            "props": ['{"k": 1}', "{}", "{}"],
            "created_us": [us] * 3,
            "updated_us": [us] * 3,
            "last_read_us": [us, None, None],
            "pinned": [True, False, False],
            "tier": [1, 2, 4],
            "review_reason": [None, None, "forgotten"],
            "queued_us": [None, None, us],
        }
        edges: dict[str, Any] = {
            "namespace": ["bulk", "bulk"],
            "src": ["note:a", "note:b"],
            "dst": ["note:b", "note:c"],
            "kind": ["related", "mentions"],
            "weight": [1.0, 2.5],
            "created_us": [us, us],
            "reinforced_us": [us, us],
            "props": ["{}", '{"why": "x"}'],
        }
        if arrow:
            import pyarrow as pa

            nodes = {c: pa.array(v) for c, v in nodes.items()}
            edges = {c: pa.chunked_array([pa.array(v)]) for c, v in edges.items()}
        store.bulk_insert(nodes, edges)
        got = store.get_nodes("bulk", ["note:a", "note:b", "note:c"])
        assert got["note:a"].props == {"k": 1} and got["note:a"].pinned
        assert got["note:c"].tier is Tier.FROZEN and got["note:c"].review_reason == "forgotten"
        assert got["note:b"].last_read_at is None and got["note:a"].key == 0.0
        edge = store.get_edge("bulk", "note:b", "note:c", "mentions")
        assert edge is not None and edge.weight == 2.5 and edge.props == {"why": "x"}
        assert store.counts("bulk").edges == 2

    # moved from tests/test_neo4j_store.py
    def test_scans_follow_code_point_order_like_kuzu(
        self, store: GraphStore, tmp_path: Path, clock: FixedClock
    ) -> None:
        ids = ["note:a\uff01", "note:a\U0001f642", "note:aZ", "note:a_", "note:a\u00e9", "note:a"]
        kuzu = KuzuStore(tmp_path / "order.kuzu")
        orders = []
        for each in (kuzu, store):
            brain = Brain(each, namespace="o", clock=clock)
            for i in ids:
                brain.remember(f"memory {i}", id=i, links=[x for x in ids[:1] if x != i])
            orders.append(
                (
                    [n.id for b in each.scan_nodes("o", batch=2) for n in b],
                    [(e.src, e.dst) for b in each.scan_edges("o", batch=2) for e in b],
                )
            )
        kuzu.close()
        assert orders[0] == orders[1]
        assert orders[1][0] == sorted(ids)


class GroupingContract(_StoreFixtures):
    """:class:`~ebb_core.grouping.GroupedStore` over the backend: held reinforcement."""

    # moved from tests/test_grouping.py
    def test_grouped_ranks_every_recall_as_write_through_does(self, store: GraphStore) -> None:
        clock = FixedClock(T0)
        plain = Brain(store, namespace="plain", clock=clock)
        grouped = Brain(store, namespace="grouped", clock=clock, reinforcement_delay=600)
        populate(plain)
        clock.set(T0)
        populate(grouped)
        assert isinstance(grouped.store, GroupedStore)
        queries = ["pricing", "harbor lantern", "coffee", "pricing outcome", "", "ledger budget"]
        for step in range(36):
            clock.advance(minutes=17)
            q = queries[step % len(queries)]
            kw: dict[str, object] = {}
            if step % 5 == 4:
                kw["kinds"] = ["fact"]
            if step % 7 == 6:
                kw["depth"] = 2
            same(ranking(plain, q, **kw), ranking(grouped, q, **kw))
            if step == 20:  # a write in between: the held reinforcement goes with it
                held = grouped.store.held
                assert held > 0
                for b in (plain, grouped):
                    b.remember("harbor ledger reopened", id="fact:late")
                assert grouped.store.held == 0
            if step == 27:
                for b in (plain, grouped):
                    assert [n.id for n in b.read(["fact:3", "fact:8"])] == ["fact:3", "fact:8"]
        assert grouped.store.held > 0
        # held reads look the same as stored ones, before and after they are written
        assert grouped.get("fact:0").key == pytest.approx(plain.get("fact:0").key, rel=1e-9)
        assert [n.id for n in grouped.top(8)] == [n.id for n in plain.top(8)]
        grouped.store.flush()
        a, g = state(plain), state(grouped)
        assert a.keys() == g.keys()
        for i in a:
            assert a[i][2:] == g[i][2:], i
            assert a[i][:2] == pytest.approx(g[i][:2], rel=1e-9), i
        strip = [(e.action, e.node_id, e.from_tier, e.to_tier) for e in plain.audit_log(limit=500)]
        assert strip == [
            (e.action, e.node_id, e.from_tier, e.to_tier) for e in grouped.audit_log(limit=500)
        ]
        assert any(e.action == "promote" for e in grouped.audit_log(limit=500))

    # moved from tests/test_grouping.py
    def test_held_reinforcement_is_written_with_the_next_write(self, store: GraphStore) -> None:
        clock = FixedClock(T0)
        b = Brain(store, namespace="t", clock=clock, reinforcement_delay=600)
        b.remember("harbor lantern", id="note:a")
        clock.advance(days=3)
        b.recall("harbor")
        grouped = b.store
        assert isinstance(grouped, GroupedStore)
        assert grouped.held == 1 and grouped.flushes == 0
        # what the inner store holds is still the old read clock
        assert grouped.inner.get_nodes("t", ["note:a"])["note:a"].last_read_at == T0
        b.remember("ledger", id="note:b")
        assert grouped.held == 0 and grouped.flushes == 1
        assert grouped.inner.get_nodes("t", ["note:a"])["note:a"].last_read_at == T0 + timedelta(
            days=3
        )

    # moved from tests/test_grouping.py
    def test_held_reinforcement_is_written_after_the_delay(self, store: GraphStore) -> None:
        clock = FixedClock(T0)
        b = Brain(store, namespace="t", clock=clock, reinforcement_delay=0.2)
        b.remember("harbor lantern", id="note:a")
        clock.advance(days=3)
        b.recall("harbor")
        grouped = b.store
        assert isinstance(grouped, GroupedStore)
        deadline = time.monotonic() + 30
        while grouped.held and time.monotonic() < deadline:
            time.sleep(0.02)
        assert grouped.held == 0 and grouped.flushes == 1
        assert grouped.inner.get_nodes("t", ["note:a"])["note:a"].last_read_at == T0 + timedelta(
            days=3
        )


class StoreContractTests(ScoringContract, DataContract, GroupingContract):
    """What every :class:`~ebb_core.store.GraphStore` must do. Subclass it (the subclass's name
    starting with ``Test``) and define the ``open_store`` fixture."""
