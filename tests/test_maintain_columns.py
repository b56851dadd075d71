"""Maintain at a size that takes the column paths (tier moves as columns, one write per target
tier, audit entries in one columnar write): it moves and freezes exactly what the policy says,
on every backend, and on Kùzu exactly what the per-row path (the ``GraphStore`` defaults and
the Cypher rule) does."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ebb_core import Brain, FixedClock, Tier, scoring
from ebb_core.clock import to_us
from ebb_core.errors import StorageError
from ebb_core.kuzu.engine import DEFAULT_MEMORY_BUDGET
from ebb_core.kuzu_store import _SMALL, KuzuStore, _decode_links
from ebb_core.neo4j.queries import TIER_MOVES
from ebb_core.store import GraphStore, TierMove, TierMoveColumns

GROUP = _SMALL + 8  # every group of moves below is past the per-row threshold


def _scenario(brain: Brain, clock: FixedClock) -> None:
    """Old memories: unlinked notes, ten decisions with notes linked only to them, a pinned
    fact. 300 days later the first five decisions are superseded, and a fresh note too."""
    for i in range(GROUP):
        brain.remember(f"loose note {i}", id=f"note:loose{i:03d}")
    for k in range(10):
        brain.remember(f"decision {k}", kind="decision", id=f"decision:d{k}")
        for j in range(GROUP // 5):
            brain.remember(f"support {k}.{j}", id=f"note:s{k}-{j}", links=[f"decision:d{k}"])
    brain.remember("company values", kind="fact", id="fact:values", pinned=True)
    clock.advance(days=300)
    for k in range(5):
        brain.remember(
            f"new decision {k}", kind="decision", id=f"decision:n{k}", supersedes=[f"decision:d{k}"]
        )
    brain.remember("fresh draft", id="note:draft")
    brain.remember("fresh final", id="note:final", supersedes=["note:draft"])
    clock.advance(days=1)


def _state(brain: Brain) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    nodes = [
        (n.id, n.tier, n.review_reason, n.queued_at)
        for batch in brain.store.scan_nodes(brain.namespace)
        for n in batch
    ]
    audit = [
        (a.seq, a.at, a.action, a.node_id, a.from_tier, a.to_tier, a.actor, a.reason)
        for a in brain.audit_log(limit=10_000)
    ]
    return sorted(nodes), audit


def test_maintain_at_column_scale_moves_what_the_policy_says(
    store: GraphStore, clock: FixedClock
) -> None:
    brain = Brain(store, namespace="test", clock=clock)
    _scenario(brain, clock)
    report = brain.maintain()
    tiers = {n.id: n.tier for batch in store.scan_nodes("test") for n in batch}
    supports = {f"note:s{k}-{j}": k for k in range(10) for j in range(GROUP // 5)}
    # notes whose only link leads to a superseded decision are queued; nothing else decayed is
    frozen = sorted(i for i, k in supports.items() if k < 5)
    assert sorted(report.newly_queued) == frozen
    assert len(frozen) > _SMALL
    assert {i: tiers[i] for i in frozen} == dict.fromkeys(frozen, Tier.FROZEN)
    archived = [i for i, k in supports.items() if k >= 5]
    archived += [f"note:loose{i:03d}" for i in range(GROUP)]
    assert {i: tiers[i] for i in archived} == dict.fromkeys(archived, Tier.COLD)
    assert tiers["fact:values"] is Tier.HOT  # pinned
    assert tiers["note:draft"] is not Tier.HOT  # superseded: leaves hot
    reasons = {q.id: q.reason for q in brain.review_queue(limit=1000)}
    assert sorted(reasons) == frozen
    assert reasons["note:s0-0"].startswith("decayed: activation is")
    assert reasons["note:s0-0"].endswith("everything it links to was superseded (decision:d0)")
    before = brain.audit_log(limit=10_000, action="supersede")  # the six supersede events
    entries = brain.audit_log(limit=10_000, after_seq=before[-1].seq)
    assert len(entries) == sum(report.moved.values())
    assert [e.seq for e in entries] == list(range(len(before) + 1, len(before) + len(entries) + 1))
    assert {e.node_id for e in entries if e.action == "freeze"} == set(frozen)
    assert all(e.actor == "maintain" and e.at == clock.now() for e in entries)
    assert brain.maintain().moved == {}  # the tiers now agree with the policy


class _RowPathKuzu(KuzuStore):
    """Kùzu through the per-row path: the Cypher tier rule, one change dict per memory
    (``GraphStore.set_tiers``) and one ``AuditEntry`` per move."""

    def tier_moves(self, namespace: str, reference: float, *ratios: float) -> list[TierMove]:
        hot, warm, cold = ratios
        params = {"ns": namespace, "mx": reference, "hot": hot, "warm": warm, "cold": cold}
        return [
            TierMove(r[0], Tier(int(r[1])), Tier(int(r[2])), float(r[3]))
            for r in self._q(TIER_MOVES, params)
        ]

    def tier_move_columns(self, namespace: str, reference: float, *r: float) -> TierMoveColumns:
        return GraphStore.tier_move_columns(self, namespace, reference, *r)

    def set_tiers(
        self,
        namespace: str,
        moves: TierMoveColumns,
        review_reasons: Any,
        queued_at: datetime,
    ) -> None:
        GraphStore.set_tiers(self, namespace, moves, review_reasons, queued_at)

    def append_audit_columns(self, *args: Any) -> None:
        GraphStore.append_audit_columns(self, *args)


@pytest.mark.parametrize("writes", ["whole", "batched-via-files"])
def test_kuzu_column_path_equals_the_per_row_path(
    tmp_path: Path, clock: FixedClock, writes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if writes != "whole":  # moves written 7 at a time, audit rows through Parquet files
        from ebb_core import maintenance
        from ebb_core.kuzu import session

        monkeypatch.setattr(maintenance, "_MOVES_PER_WRITE", 7)
        monkeypatch.setattr(session, "_COPY_VIA_FILE", 1)
    states = []
    for name, cls in (("columns", KuzuStore), ("rows", _RowPathKuzu)):
        clock_here = FixedClock(clock.now())
        store = cls(str(tmp_path / name))
        if writes != "whole":  # transactions of 37 moves (past _SMALL: the column path)
            store.tier_moves_per_transaction = _SMALL + 5
        brain = Brain(store, namespace="test", clock=clock_here)
        try:
            _scenario(brain, clock_here)
            first = brain.maintain()
            preview = brain.maintain_preview()
            for i in range(GROUP):  # used again (promoted at once), then old beside new ones
                brain.reinforce(f"note:loose{i:03d}")
            clock_here.advance(days=300)
            for i in range(3):
                brain.remember(f"newer note {i}", id=f"note:newer{i}")
            again = brain.maintain()
            states.append((first, preview, again, _state(brain)))
        finally:
            brain.close()
    (first, preview, again, state), rows = states
    assert first.moved == rows[0].moved and first.newly_queued == rows[0].newly_queued
    assert preview == rows[1]
    assert again.moved == rows[2].moved and again.newly_queued == rows[2].newly_queued
    assert sum(again.moved.values()) > _SMALL
    assert state == rows[3]
    by_maintain = [a for a in state[1] if a[6] == "maintain"]
    assert len(by_maintain) == sum(first.moved.values()) + sum(again.moved.values())


def test_kuzu_commits_moves_in_batches_its_buffer_pool_holds(tmp_path: Path) -> None:
    """A move's audit row written by ``LOAD FROM … CREATE`` waits in Kùzu's buffer pool until
    its transaction commits, so the moves per transaction follow the memory budget (a first
    maintain of 82k moves failed with "the buffer pool is full" at a 128 MiB budget when it was
    one transaction); batches large enough for ``COPY`` (budgets of ~0.7 GiB and up) hold only
    their tier updates there, and are bounded by those (809k moves at 1M: one transaction)."""
    tiny = KuzuStore(str(tmp_path / "tiny"), memory_budget=1 << 12)  # the 32 MiB minimum pool
    mid = KuzuStore(str(tmp_path / "mid"), memory_budget=512 << 20)
    roomy = KuzuStore(str(tmp_path / "default"), memory_budget=DEFAULT_MEMORY_BUDGET)
    try:
        assert tiny.tier_moves_per_transaction == 4_096
        assert mid.tier_moves_per_transaction == 39_321  # < COPY_AUDIT_MIN: audit rows wait
        assert roomy.tier_moves_per_transaction == 1_150_437
    finally:
        tiny.close()
        mid.close()
        roomy.close()


@pytest.mark.parametrize("audit_by", ["load", "copy"])
def test_kuzu_maintain_in_batches_equals_one_transaction(
    tmp_path: Path, clock: FixedClock, audit_by: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Moves committed 37 at a time (each batch with its audit entries): the same tiers,
    review reasons, report and audit log as every move in one transaction; with the audit rows
    by ``LOAD FROM … CREATE`` and, past ``COPY_AUDIT_MIN`` (lowered here), by ``COPY``."""
    if audit_by == "copy":
        from ebb_core.kuzu import audit

        monkeypatch.setattr(audit, "COPY_AUDIT_MIN", _SMALL + 1)
    runs = []
    for name, per_tx in (("batched", _SMALL + 5), ("whole", None)):
        here = FixedClock(clock.now())
        store = KuzuStore(str(tmp_path / name))
        store.tier_moves_per_transaction = per_tx
        brain = Brain(store, namespace="test", clock=here)
        try:
            _scenario(brain, here)
            report = brain.maintain()
            runs.append((report.model_dump(), _state(brain)))
        finally:
            brain.close()
    (batched, state), whole = runs
    assert sum(batched["moved"].values()) > 3 * (_SMALL + 5)  # several batches
    assert (batched, state) == whole


def _batched(path: Path, clock: FixedClock) -> Brain:
    """The scenario on a Kùzu store that commits 37 moves per transaction."""
    here = FixedClock(clock.now())
    store = KuzuStore(str(path))
    store.tier_moves_per_transaction = _SMALL + 5
    brain = Brain(store, namespace="test", clock=here)
    _scenario(brain, here)
    return brain


@pytest.mark.parametrize("audit_by", ["load", "copy"])
def test_a_kuzu_maintain_cut_short_between_batches_leaves_whole_moves(
    tmp_path: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch, audit_by: str
) -> None:
    """The third batch fails after its moves were written (its audit rows never are): the two
    committed batches stay moved and audited, the third rolls back whole, and the next
    maintain ends where an uninterrupted one does; with the committed batches' audit rows
    by ``LOAD FROM … CREATE`` or by ``COPY`` (``COPY_AUDIT_MIN`` lowered)."""
    from ebb_core.kuzu import audit

    if audit_by == "copy":
        monkeypatch.setattr(audit, "COPY_AUDIT_MIN", _SMALL + 1)
    with _batched(tmp_path / "whole", clock) as whole:
        whole.maintain()
        want = _state(whole)[0]
    brain = _batched(tmp_path / "cut", clock)
    try:
        before = {n[0]: n[1] for n in _state(brain)[0]}
        real, calls = brain.store.append_audit_columns, []

        def failing(*args: Any) -> None:
            calls.append(1)
            if len(calls) == 3:
                raise StorageError("the disk went away (test)")
            real(*args)

        with monkeypatch.context() as m:
            m.setattr(brain.store, "append_audit_columns", failing)
            with pytest.raises(StorageError, match="went away"):
                brain.maintain()
        nodes, audit_rows = _state(brain)
        moved = {a[3]: a for a in audit_rows if a[6] == "maintain"}
        assert len(moved) == 2 * (_SMALL + 5)  # two whole batches
        for i, tier, *_ in nodes:
            if i in moved:
                assert (moved[i][4], moved[i][5]) == (before[i], tier)
            else:
                assert tier == before[i], i
        brain.maintain()
        assert _state(brain)[0] == want
    finally:
        brain.close()


def test_kuzu_rescore_reads_no_text_and_stores_what_the_row_path_gives(
    tmp_path: Path, clock: FixedClock
) -> None:
    """``recompute_keys`` reads only numbers (uids come from the recall columns): its keys
    equal ``scoring.graph_keys`` over the memories and links read back as objects, and the
    recent-link lists it builds equal those Cypher builds one memory at a time."""
    rng = random.Random(5)
    t0 = clock.now()
    lines = [{"type": "ebb-export", "version": 1, "namespaces": ["test"]}]
    for i in range(80):
        at = (t0 - timedelta(days=rng.randint(1, 300), seconds=i)).isoformat()
        read = None if i % 3 == 0 else at
        lines.append(
            {
                "type": "node",
                "id": f"note:m{i:03d}",
                "namespace": "test",
                "kind": "note",
                "text": f"memory {i}",
                "props": {},
                "created_at": at,
                "updated_at": at,
                "last_read_at": read,
                "pinned": False,
                "tier": 1,
                "review_reason": None,
                "queued_at": None,
            }
        )
    pairs: set[tuple[int, int]] = set()
    while len(pairs) < 300:
        a, b = rng.randrange(80), rng.randrange(80)
        if a != b and (b, a) not in pairs:
            pairs.add((a, b))
    for k, (a, b) in enumerate(sorted(pairs)):
        at = (t0 - timedelta(days=rng.randint(0, 200), seconds=k)).isoformat()
        lines.append(
            {
                "type": "edge",
                "namespace": "test",
                "src": f"note:m{a:03d}",
                "dst": f"note:m{b:03d}",
                "kind": rng.choice(["related", "about"]),
                "weight": round(0.5 + rng.random(), 3),
                "created_at": at,
                "reinforced_at": at,
                "props": {},
            }
        )
    data = tmp_path / "graph.jsonl"
    data.write_text("".join(json.dumps(x) + "\n" for x in lines))
    store = KuzuStore(str(tmp_path / "db"))
    brain = Brain(store, namespace="test", clock=clock)
    try:
        brain.import_(data)
        # every stored score and link list wrong or unset: the pass must write them all
        store._q("MATCH (n:Memory) SET n.key = 0.0, n.base_key = 0.0, n.degree = 0")
        store._q("MATCH (n:Memory) SET n.recent_links = NULL")
        store._cache.ready = False
        store._rows_cache.clear()
        cfg, epoch = brain.config, brain._s.epoch_us
        assert store.recompute_keys("test", epoch, cfg.half_life_us, cfg.read_bonus, cfg.spread)
        nodes = [n for batch in store.scan_nodes("test") for n in batch]
        edges = [e for batch in store.scan_edges("test") for e in batch]
        pos = {n.id: k for k, n in enumerate(nodes)}
        base, key, degree = scoring.graph_keys(
            len(nodes),
            np.array([pos[e.src] for e in edges]),
            np.array([pos[e.dst] for e in edges]),
            np.array([e.weight for e in edges]),
            np.array([to_us(e.reinforced_at) for e in edges]),
            np.array([to_us(n.last_read_at) if n.last_read_at else 0 for n in nodes]),
            np.array([n.last_read_at is not None for n in nodes]),
            epoch,
            cfg.half_life_us,
            cfg.read_bonus,
            cfg.spread,
        )
        assert [n.base_key for n in nodes] == pytest.approx(base.tolist(), rel=1e-12)
        assert [n.key for n in nodes] == pytest.approx(key.tolist(), rel=1e-12)
        assert [n.degree for n in nodes] == degree.tolist()
        built = dict(store._q("MATCH (n:Memory) RETURN n.id, n.recent_links"))
        assert all(built.values())
        for n in nodes:
            assert _decode_links(built[n.id]) == store._build_recent_links("test", n.id), n.id
    finally:
        brain.close()
