"""The embedded store's page cache: a share of the memory budget, not Kùzu's 80% of the machine."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ebb_core import Brain
from ebb_core.errors import InvalidInput
from ebb_core.kuzu_store import DEFAULT_MEMORY_BUDGET, _buffer_pool, memory_budget_from_env


def test_the_pool_is_a_share_of_the_budget_below_kuzus_own_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("EBB_MEMORY_BUDGET", raising=False)
    pool = _buffer_pool(memory_budget_from_env())
    assert pool == DEFAULT_MEMORY_BUDGET * 3 // 5
    kuzu_default = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 0.8)
    assert pool < kuzu_default


def test_the_budget_sets_it_and_the_store_works_with_a_small_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EBB_MEMORY_BUDGET", "128M")
    assert _buffer_pool(memory_budget_from_env()) == (128 << 20) * 3 // 5
    db = tmp_path / "s.kuzu"
    with Brain.open(db, backend="kuzu") as brain:
        for i in range(50):
            brain.remember(f"lantern harbour note {i}", id=f"note:{i}")
        assert len(brain.recall("lantern", k=5)) == 5
    monkeypatch.setenv("EBB_MEMORY_BUDGET", "4G")
    with Brain.open(db, backend="kuzu") as brain:
        assert brain.stats().nodes == 50


@pytest.mark.parametrize("value", ["lots", "-5", "1M"])
def test_a_bad_value_is_refused_by_name_and_nothing_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("EBB_MEMORY_BUDGET", value)
    with pytest.raises(InvalidInput, match="EBB_MEMORY_BUDGET"):
        Brain.open(tmp_path / "s.kuzu", backend="kuzu")
    assert not (tmp_path / "s.kuzu").exists()


def _wal(brain: Brain) -> int:
    try:
        return os.path.getsize(brain.store.location + ".wal")
    except OSError:
        return 0


def test_a_wal_of_updates_alone_is_folded_in_early_and_created_rows_wait(
    tmp_path: Path,
) -> None:
    """Kùzu keeps every committed update in memory until a checkpoint (~600 times its WAL
    record): reinforcing recalls are checkpointed from 128 KiB of WAL, not Kùzu's 16 MiB, and
    the store does not hold them; a WAL with created memories waits (such a checkpoint costs
    much more), until a checkpoint has folded them in."""
    from ebb_core.kuzu.engine import _UPDATES_WAL

    with Brain.open(tmp_path / "s.kuzu", backend="kuzu", namespace="p") as brain:
        for i in range(300):  # ~0.6 KB of WAL each: past the updates' threshold, kept
            brain.remember(f"lantern harbour note {i} about tide {i % 7}", id=f"n{i}")
        assert _wal(brain) > _UPDATES_WAL
        brain.store._maybe_checkpoint(force=True)  # type: ignore[attr-defined]
        assert _wal(brain) == 0
        seen, grown = [], 0
        for i in range(400):
            before = _wal(brain)
            assert brain.recall(f"tide {i % 7} lantern", k=5)
            seen.append(_wal(brain))
            grown += max(0, seen[-1] - before)
        assert grown > 2 * _UPDATES_WAL  # the recalls wrote more than the threshold ...
        assert max(seen) < _UPDATES_WAL + (64 << 10)  # ... and none stayed in the WAL past it
        assert brain.store._reshaped is False  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("statement", "reshapes"),
    [
        ("CREATE (:Audit {uid: $uid, ns: $ns})", False),
        ("LOAD FROM $t CREATE (:Audit {`uid`: `uid`})", False),
        ("COPY Audit FROM $t", False),
        ("MERGE (m:Meta {key: $k}) SET m.value = $v", False),
        ("MATCH (m:Meta {key: $k}) DELETE m", False),
        ("MATCH (n:Memory {uid: $u}) SET n.key = n.key + $d", False),
        ("MATCH (x0:Memory {uid: $u}) CREATE (n0:Memory {uid: $n})", True),
        ("MATCH (a:Memory {uid: `a`}) MATCH (b:Memory {uid: `b`}) CREATE (a)-[:Link]->(b)", True),
        ("MATCH (n:Memory {uid: $uid}) DETACH DELETE n", True),
        ("COPY Memory FROM '/tmp/rows.parquet'", True),
        ("CALL CREATE_FTS_INDEX('Memory', 'memory_text', ['text'])", True),
    ],
)
def test_what_counts_as_creating_or_deleting_rows(statement: str, reshapes: bool) -> None:
    from ebb_core.kuzu.engine import _reshapes

    assert _reshapes(statement) is reshapes


def test_an_import_is_folded_in_and_closing_lets_go_of_the_copies(tmp_path: Path) -> None:
    """An import ends with a checkpoint (its rows would keep the recalls after it from being
    checkpointed early), and closing drops the in-process copies before Kùzu's own closing
    checkpoint."""
    import io

    with Brain.open(tmp_path / "s.kuzu", backend="kuzu", namespace="p") as brain:
        small = brain.scoped("small")
        for i in range(20):
            small.remember(f"pebble cove note {i}", id=f"s{i}")
        data = io.StringIO()
        small.export(data)
        for i in range(300):
            brain.remember(f"lantern harbour note {i} about tide {i % 7}", id=f"n{i}")
        store: Any = brain.store
        assert store._reshaped and _wal(brain) > 0
        assert brain.import_(io.StringIO(data.getvalue()), namespace="q")["nodes"] == 20
        assert _wal(brain) == 0 and not store._reshaped
        assert brain.recall("lantern tide", k=5) and brain.scoped("q").recall("pebble", k=5)
        assert store._mirror.recall.ready and store._mirror.rows.rows
    mirror = store._mirror
    assert not mirror.recall.ready and mirror.recall.uid == [] and mirror.recall.ns is None
    assert not mirror.rows.rows and mirror.text is None
    with Brain.open(tmp_path / "s.kuzu", backend="kuzu", namespace="q") as brain:
        assert brain.stats().nodes == 20 and brain.recall("pebble", k=5)


def _word(i: int) -> str:
    return "z" + "".join(chr(97 + (i // 26**k) % 26) for k in range(3))


def test_taking_the_snapshot_and_the_text_copy_hand_freed_memory_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What Kùzu's result (the row snapshot's) and the index's tables as read took is handed
    back to the system once the copy is made, not left in the C library's heap."""
    from ebb_core.kuzu import reads
    from ebb_core.kuzu.queries import _release_arrow_memory as real

    seen: list[tuple[bool, bool]] = []

    def release() -> None:  # the real release, noted with what was held when it ran
        mirror = store._mirror
        seen.append((mirror.recall.base is not None, mirror.text is not None))
        real()

    db = tmp_path / "s.kuzu"
    with Brain.open(db, backend="kuzu", namespace="p") as brain:
        for i in range(400):
            brain.remember(f"lantern harbour note about {_word(i)} and {_word(i // 4)}", id=f"n{i}")
    monkeypatch.setattr(reads, "_release_arrow_memory", release)
    with Brain.open(db, backend="kuzu", namespace="p") as brain:  # no row read yet
        store: Any = brain.store
        for i in range(100):  # different memories each time: read from the table, then not
            assert brain.recall(_word(i), k=10)
        mirror = store._mirror
        assert mirror.recall.base is not None and mirror.text is not None  # both taken
    assert (False, False) in seen  # the text copy's tables, before the copy is kept
    assert any(snapshot for snapshot, _ in seen)  # Kùzu's result, once the snapshot is kept


def test_a_long_run_of_remembers_never_fills_the_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kùzu keeps what each commit changed in its memory until a checkpoint: at the smallest
    budget ~1,900 remembers filled the pool ("the buffer pool is full") long before the WAL
    reached its 16 MiB checkpoint, and every write failed from then on. The store now also
    checkpoints by the number of commits, so any run of remembers goes through."""
    monkeypatch.setenv("EBB_MEMORY_BUDGET", "64M")
    db = tmp_path / "s.kuzu"
    with Brain.open(db, backend="kuzu") as brain:
        for i in range(1200):
            brain.remember(f"seed note {i} on topic {i % 37}", id=f"seed:{i}")
    with Brain.open(db, backend="kuzu") as brain:
        for j in range(1200):  # each links two older memories: their lists change too
            links = [f"seed:{(j * 7) % 1200}", f"seed:{(j * 13 + 5) % 1200}"]
            brain.remember(f"later note {j} linking older ones", links=links)
        brain.remember("the lighthouse keeper's last entry", links=["seed:0"])
        assert brain.stats().nodes == 2401
        hit = brain.recall("lighthouse keeper", k=1, reinforce=False)[0]
        assert hit.node.text == "the lighthouse keeper's last entry"
