"""A stateful model test of the Brain (hypothesis): random sequences of everything an agent or a
person can do, checked after every step against a model of what may have changed.

Invariants (issue 10, item 9):
- a memory leaves the store only through the approval of a queued (frozen) memory;
- the review queue is exactly what was forgotten or decayed and not yet restored or deleted;
- a pinned memory stays hot;
- recall never returns a frozen memory or another namespace's;
- export → import into a fresh store gives back the same export (checked at the end of each
  example).

Runs on Kùzu; on Neo4j too when a test server is there (fewer examples: each one starts from an
empty database).
"""

from __future__ import annotations

import io
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ebb_core import Brain, FixedClock, InvalidInput, NotFound, Tier
from ebb_core.kuzu_store import KuzuStore
from ebb_core.store import GraphStore

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NAMESPACES = ("alpha", "beta")
WORDS = ("harbor", "lantern", "ledger", "tide", "pricing", "acme", "seats", "maya")
KINDS = ("note", "fact", "decision")

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
queries = st.lists(st.sampled_from(WORDS), min_size=1, max_size=2).map(" ".join)
namespaces = st.sampled_from(NAMESPACES)


class BrainModel(RuleBasedStateMachine):
    """The model: per namespace, every memory's id with whether it is pinned and queued."""

    memories = Bundle("memories")  # (namespace, id) pairs, deleted ones included

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="ebb-model-"))
        self.clock = FixedClock(T0)
        self.store = self.open_store()
        self.brains = {ns: Brain(self.store, namespace=ns, clock=self.clock) for ns in NAMESPACES}
        self.pinned: dict[tuple[str, str], bool] = {}
        self.queued: dict[tuple[str, str], bool] = {}
        self.serial = 0
        self.copies = 0

    def open_store(self) -> GraphStore:
        return KuzuStore(self.tmp / "ebb.kuzu")

    def teardown(self) -> None:
        try:
            self.export_import()  # once per example, on the state its steps left
        finally:
            self.store.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- helpers -------------------------------------------------------------------------------
    def live(self, ns: str) -> list[str]:
        return sorted(i for (n, i), q in self.queued.items() if n == ns and not q)

    def gone(self, m: tuple[str, str]) -> bool:
        """Deleted by an approval (the bundle still holds it: later calls must say not found)."""
        return m not in self.queued

    def stored(self, ns: str) -> dict[str, Any]:
        return {n.id: n for batch in self.store.scan_nodes(ns) for n in batch}

    # -- rules ---------------------------------------------------------------------------------
    @initialize(target=memories)
    def seed(self) -> Any:
        made = []
        for ns in NAMESPACES:
            node = self.brains[ns].remember("harbor lantern ledger", kind="note", id="note:seed")
            made.append((ns, node.id))
            self.pinned[(ns, node.id)] = False
            self.queued[(ns, node.id)] = False
        return multiple(*made)

    @rule(target=memories, ns=namespaces, text=texts, kind=st.sampled_from(KINDS), data=st.data())
    def remember(self, ns: str, text: str, kind: str, data: st.DataObject) -> Any:
        live = self.live(ns)
        links = data.draw(st.lists(st.sampled_from(live), max_size=2, unique=True)) if live else []
        self.serial += 1
        node = self.brains[ns].remember(text, kind=kind, id=f"{kind}:m{self.serial}", links=links)
        assert node.tier is Tier.HOT and node.namespace == ns
        self.pinned[(ns, node.id)] = False
        self.queued[(ns, node.id)] = False
        return (ns, node.id)

    @rule(a=memories, b=memories, weight=st.sampled_from([None, 0.5, 2.0]))
    def connect(self, a: tuple[str, str], b: tuple[str, str], weight: float | None) -> None:
        if a[0] != b[0] or a[1] == b[1]:
            return
        brain = self.brains[a[0]]
        if self.gone(a) or self.gone(b):
            with pytest.raises(NotFound):
                brain.connect(a[1], b[1], weight=weight)
        elif self.queued[a] or self.queued[b]:
            with pytest.raises(InvalidInput, match="review queue"):
                brain.connect(a[1], b[1], weight=weight)
        else:
            edge = brain.connect(a[1], b[1], weight=weight)
            assert (edge.src, edge.dst, edge.namespace) == (a[1], b[1], a[0])

    @rule(m=memories)
    def reinforce(self, m: tuple[str, str]) -> None:
        brain = self.brains[m[0]]
        if self.gone(m):
            with pytest.raises(NotFound):
                brain.reinforce(m[1])
        elif self.queued[m]:
            with pytest.raises(InvalidInput, match="review queue"):
                brain.reinforce(m[1])
        else:
            assert brain.reinforce(m[1]).last_read_at == self.clock.now()

    @rule(m=memories, then_approve=st.booleans())
    def forget(self, m: tuple[str, str], then_approve: bool) -> None:
        brain = self.brains[m[0]]
        if self.gone(m):
            with pytest.raises(NotFound):
                brain.forget(m[1], "model test")
        elif self.pinned[m]:
            with pytest.raises(InvalidInput, match="pinned"):
                brain.forget(m[1], "model test")
        else:
            item = brain.forget(m[1], "model test")
            assert item.id == m[1]
            if not self.queued[m]:  # already queued (forgotten or decayed): reason unchanged
                assert item.reason == "forgotten: model test"
            self.queued[m] = True
            if then_approve:
                self.approve_one(m)

    @rule(m=memories)
    def restore(self, m: tuple[str, str]) -> None:
        if self.gone(m):
            with pytest.raises(NotFound):
                self.brains[m[0]].restore(m[1])
            return
        assert self.brains[m[0]].restore(m[1]).tier is Tier.HOT
        self.queued[m] = False

    @precondition(lambda self: any(self.queued.values()))
    @rule(data=st.data())
    def approve(self, data: st.DataObject) -> None:
        self.approve_one(data.draw(st.sampled_from(sorted(k for k, q in self.queued.items() if q))))

    def approve_one(self, m: tuple[str, str]) -> None:
        brain = self.brains[m[0]]
        assert brain.approve_deletion([m[1]], approved_by="model") == [m[1]]
        event("approved a queued memory")
        del self.pinned[m], self.queued[m]
        assert brain.audit_log(node_id=m[1], action="delete")[-1].actor == "model"

    @rule(m=memories)
    def approve_refused(self, m: tuple[str, str]) -> None:
        """Only a queued memory can be deleted: anything else is refused, changing nothing."""
        brain = self.brains[m[0]]
        if self.gone(m):
            with pytest.raises(NotFound):
                brain.approve_deletion([m[1]], approved_by="model")
        elif not self.queued[m]:
            with pytest.raises(InvalidInput, match="not in the review queue"):
                brain.approve_deletion([m[1]], approved_by="model")

    @rule(m=memories, pin=st.booleans())
    def pin(self, m: tuple[str, str], pin: bool) -> None:
        brain = self.brains[m[0]]
        if self.gone(m):
            with pytest.raises(NotFound):
                brain.pin(m[1]) if pin else brain.unpin(m[1])
        elif not pin:
            assert not brain.unpin(m[1]).pinned
            self.pinned[m] = False
        elif self.queued[m]:
            with pytest.raises(InvalidInput, match="review queue"):
                brain.pin(m[1])
        else:
            node = brain.pin(m[1])
            assert node.pinned and node.tier is Tier.HOT
            self.pinned[m] = True

    @rule(ns=namespaces)
    def maintain(self, ns: str) -> None:
        report = self.brains[ns].maintain()
        for i in report.newly_queued:
            assert not self.queued[(ns, i)], f"{i} was queued twice"
            assert not self.pinned[(ns, i)], f"pinned {i} decayed into the review queue"
            self.queued[(ns, i)] = True
            event("maintain queued a decayed memory")

    @rule(days=st.sampled_from([0.5, 3, 30, 120, 400]))
    def advance(self, days: float) -> None:
        self.clock.advance(days=days)

    @rule(target=memories, ns=namespaces, days=st.sampled_from([200, 400]))
    def age(self, ns: str, days: float) -> Any:
        """Long silence, then something new: what nobody used decays toward the review queue."""
        self.clock.advance(days=days)
        self.serial += 1
        node = self.brains[ns].remember(
            "fresh ledger entry", kind="fact", id=f"fact:m{self.serial}"
        )
        self.pinned[(ns, node.id)] = False
        self.queued[(ns, node.id)] = False
        self.maintain(ns)
        return (ns, node.id)

    @rule(
        ns=namespaces,
        query=queries,
        depth=st.sampled_from([1, 2, 3]),
        reinforce=st.booleans(),
    )
    def recall(self, ns: str, query: str, depth: int, reinforce: bool) -> None:
        hits = self.brains[ns].recall(query, k=10, depth=depth, reinforce=reinforce)
        for h in hits:
            assert h.node.namespace == ns, f"{h.id} from {h.node.namespace} recalled in {ns}"
            assert (ns, h.id) in self.queued, f"recall returned unknown {h.id}"
            assert not self.queued[(ns, h.id)], f"recall returned frozen {h.id}"
            assert h.node.tier is not Tier.FROZEN and h.node.tier <= Tier(depth)
        assert len({h.id for h in hits}) == len(hits)
        event(f"recall returned {'some' if hits else 'nothing'}")

    def export_import(self) -> None:
        """Export every namespace, import into a fresh store, export again: the same text."""
        first = io.StringIO()
        self.brains[NAMESPACES[0]].export(first, all_namespaces=True)
        self.copies += 1
        copy = self.tmp / f"copy-{self.copies}.kuzu"
        fresh = Brain(KuzuStore(copy), namespace=NAMESPACES[0], clock=self.clock)
        try:
            fresh.import_(io.StringIO(first.getvalue()))
            second = io.StringIO()
            fresh.export(second, all_namespaces=True)
            assert second.getvalue() == first.getvalue()
            fields = {"nodes", "edges", "by_tier", "pinned", "review_queue", "audit_entries"}
            for ns in NAMESPACES:
                got = fresh.scoped(ns).stats().model_dump(include=fields)
                assert got == self.brains[ns].stats().model_dump(include=fields)
        finally:
            fresh.close()

    # -- invariants ----------------------------------------------------------------------------
    @invariant()
    def memories_leave_only_by_approval(self) -> None:
        for ns in NAMESPACES:
            stored = self.stored(ns)
            expected = {i for (n, i) in self.queued if n == ns}
            assert set(stored) == expected
            frozen = {i for i, node in stored.items() if node.tier is Tier.FROZEN}
            assert frozen == {i for i in expected if self.queued[(ns, i)]}
            assert {r.id for r in self.brains[ns].review_queue()} == frozen

    @invariant()
    def pinned_stays_hot(self) -> None:
        for ns in NAMESPACES:
            for i, node in self.stored(ns).items():
                assert node.pinned == self.pinned[(ns, i)]
                if node.pinned:
                    assert node.tier is Tier.HOT, f"pinned {i} is {node.tier.label}"

    @invariant()
    def namespaces_stay_apart(self) -> None:
        for ns in NAMESPACES:
            assert all(n.namespace == ns for n in self.stored(ns).values())


BrainModel.TestCase.settings = settings(
    max_examples=20,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    derandomize=True,
)
TestBrainModelKuzu = BrainModel.TestCase


@pytest.mark.neo4j
def test_brain_model_on_neo4j(neo4j_server: Any) -> None:
    """The same model on a real Neo4j server (each example starts from an emptied database)."""
    from ebb_core.neo4j import Neo4jStore

    uri = neo4j_server.find()

    class OnNeo4j(BrainModel):
        def open_store(self) -> GraphStore:
            neo4j_server.reset()
            return Neo4jStore(uri, retry_seconds=5.0)

    run_state_machine_as_test(
        OnNeo4j,
        settings=settings(
            max_examples=5,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            derandomize=True,
        ),
    )
