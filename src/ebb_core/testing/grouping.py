"""GroupedStore over the backend: held reinforcement."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from ..clock import FixedClock
from ..engine import Brain
from ..grouping import GroupedStore
from ..store import GraphStore
from ._base import T0, _StoreFixtures, populate, ranking, same, state


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
