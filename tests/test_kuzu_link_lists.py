"""The recent-link lists of older memories kept in the LinkList table (schema 5): past one Kùzu
node group of memories (``lists_in_rows_upto``, set to 0 here to stand for a large store) a
linked remember or a new link writes its older end's list there, not into the end's Memory row
(whose SET costs Kùzu a rewrite of a whole node group's lists at the next checkpoint); within
one group it SETs the row and deletes a LinkList row the memory had; reads see the
LinkList row over the Memory row's; a list that changes again replaces its row (deleted and
created, never SET in place), and a rolled-back change leaves the row before it; unsetting a list
deletes its row; a salvage carries them;
and a schema-4 store (every list in Memory, no LinkList table) opens, gains the table and gives
the same answers."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kuzu
import pytest

from ebb_core import Brain, FixedClock
from ebb_core.kuzu.queries import SEP
from ebb_core.kuzu.schema import SCHEMA_VERSION
from ebb_core.kuzu_store import KuzuStore
from ebb_core.repair import diagnose
from ebb_core.salvage import salvage


@contextmanager
def _opened(path: Path, clock: FixedClock, *, in_rows_upto: int = 0) -> Iterator[Brain]:
    """The store at ``path``, its lists kept in LinkList past ``in_rows_upto`` memories (0:
    always, as past one node group)."""
    with Brain.open(path, namespace="t", clock=clock) as brain:
        store: Any = brain._s.store
        store.lists_in_rows_upto = in_rows_upto
        yield brain


def _fill(brain: Brain) -> None:
    for i in range(6):
        brain.remember(f"harbor lantern {i} keeper", kind="note", id=f"n:{i}")
    brain.remember("lantern keeper's log", kind="note", id="n:log", links=["n:0", "n:1"])
    brain.connect("n:2", "n:3", kind="mentions", weight=2.0)
    brain.recall("lantern keeper", k=5)  # reinforces what it returns, and their links


@pytest.fixture
def filled(tmp_path: Path, clock: FixedClock) -> Path:
    """The path of a store :func:`_fill` filled, its older ends' lists in LinkList (closed)."""
    path = tmp_path / "s.kuzu"
    with _opened(path, clock) as brain:
        _fill(brain)
    return path


def _answers(brain: Brain) -> list[Any]:
    hits = brain.recall("lantern keeper", k=6, reinforce=False)
    return [(h.node.id, [(x.id, x.kind, x.direction) for x in h.why.live_links]) for h in hits]


def _linked(brain: Brain, node_id: str) -> set[str]:
    """The other ends of ``node_id``'s recent-link list, as the store reads it."""
    store: Any = brain._s.store
    links = store.strongest_links("t", [node_id], 0, 1e30, 0.0, 50)
    return {x.other_id for x in links}


def _kuzu(path: Path, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
    """``query``'s rows, read with Kùzu itself (not through the store)."""
    db = kuzu.Database(str(path))
    conn = kuzu.Connection(db)
    try:
        result = conn.execute(query, params or {})
        assert not isinstance(result, list)  # one statement, one result
        return [row for row in result.get_all() if isinstance(row, list)]
    finally:
        conn.close()
        db.close()


def _rows(path: Path) -> tuple[dict[str, str | None], dict[str, str]]:
    """(Memory.recent_links, LinkList.links) by memory id, read with Kùzu itself."""
    memory = dict(_kuzu(path, "MATCH (n:Memory) RETURN n.id, n.recent_links"))
    lists = _kuzu(path, "MATCH (l:LinkList) RETURN l.uid, l.links")
    return memory, {u.split(SEP, 1)[1]: links for u, links in lists}


def test_older_ends_lists_go_to_link_list_and_reads_see_them(
    tmp_path: Path, clock: FixedClock
) -> None:
    path = tmp_path / "s.kuzu"
    with _opened(path, clock) as brain:
        _fill(brain)
        before = _answers(brain)
    memory, lists = _rows(path)
    # n:0 and n:1 were stored before the log that links them: their Memory rows keep the
    # (empty) list they were written with, their current lists are LinkList's
    assert memory["n:0"] == "" and "n:log" in lists["n:0"]
    assert "n:3" in lists["n:2"] and "n:2" in lists["n:3"]
    assert "n:log" not in lists and "n:0" in (memory["n:log"] or "")  # new: in its own row
    with _opened(path, clock) as again:  # read from the table
        assert _answers(again) == before
        assert "n:log" in _linked(again, "n:0")


def _link_list_rows(path: Path, node_id: str) -> list[str]:
    """Every LinkList row of ``node_id`` (one at most), read with Kùzu itself."""
    rows = _kuzu(
        path, "MATCH (l:LinkList) WHERE l.uid = $u RETURN l.links", {"u": f"t{SEP}{node_id}"}
    )
    return [r[0] for r in rows]


def test_a_list_changed_again_replaces_its_row_and_a_rollback_keeps_it(
    tmp_path: Path, clock: FixedClock
) -> None:
    path = tmp_path / "s.kuzu"
    with _opened(path, clock) as brain:
        _fill(brain)
        for i in range(3):  # three more changes of n:4's list: by remember and by connect
            clock.advance(seconds=10)
            brain.remember(f"later note {i}", kind="note", id=f"n:later{i}", links=["n:4"])
        brain.connect("n:4", "n:5", kind="mentions")
        store: Any = brain._s.store
        try:  # a change rolled back: the row stays as it was
            with store.transaction():
                brain.connect("n:4", "n:log", kind="mentions")
                raise RuntimeError("abandon")
        except RuntimeError:
            pass
        assert "n:log" not in _linked(brain, "n:4")
        # the recall columns' bits (which memories have a LinkList row) agree with the table
        brain.recall("lantern keeper", k=5, reinforce=False)
        brain.remember("one more", kind="note", id="n:more", links=["n:later0", "n:5"])
        cache = store._cache
        assert cache.listed is not None
        apart = {r[0] for r in store._q("MATCH (l:LinkList) RETURN l.uid")}
        assert {u for u in cache.offset if cache.lists_apart(u)} == apart
        assert f"t{SEP}n:later0" in apart and f"t{SEP}n:more" not in apart
    (listed,) = _link_list_rows(path, "n:4")
    assert all(f"n:later{i}" in listed for i in range(3)) and "n:5" in listed
    assert "n:log" not in listed
    with _opened(path, clock) as again:  # read from the table
        assert {"n:later0", "n:later1", "n:later2", "n:5"} <= _linked(again, "n:4")
        assert "n:log" not in _linked(again, "n:4")


def test_unsetting_a_list_deletes_its_link_list_row(filled: Path, clock: FixedClock) -> None:
    path = filled
    with _opened(path, clock) as brain:
        brain.forget("n:log", reason="test")
        brain.approve_deletion("n:log", approved_by="tester")
    memory, lists = _rows(path)
    # its neighbours' lists named it: unset (NULL in Memory, no LinkList row), rebuilt on use
    assert "n:0" not in lists and memory["n:0"] is None
    with _opened(path, clock) as again:
        assert "n:log" not in _linked(again, "n:0")


def test_an_import_linking_a_stored_memory_unsets_its_list_in_both_places(
    tmp_path: Path, clock: FixedClock
) -> None:
    path = tmp_path / "s.kuzu"
    lines = [
        {"type": "ebb-export", "version": 1, "namespaces": ["t"]},
        {"type": "node", "namespace": "t", "id": "n:new", "text": "imported lantern note"},
        {"type": "edge", "namespace": "t", "src": "n:new", "dst": "n:0", "kind": "related"},
    ]
    with _opened(path, clock) as brain:
        _fill(brain)
        brain.import_(io.StringIO("".join(json.dumps(x) + "\n" for x in lines)))
        assert {"n:log", "n:new"} <= _linked(brain, "n:0")
    memory, lists = _rows(path)
    # rebuilt on first use into its row (an unset list has no LinkList row to replace)
    assert "n:0" not in lists and "n:new" in (memory["n:0"] or "")


def test_a_salvage_keeps_the_link_list_lists(
    filled: Path, tmp_path: Path, clock: FixedClock
) -> None:
    with _opened(filled, clock) as brain:
        before = _answers(brain)
    salvage(filled, tmp_path / "r.kuzu")
    with Brain.open(tmp_path / "r.kuzu", namespace="t", clock=clock) as again:
        assert _answers(again) == before


def test_a_schema_4_store_opens_gains_the_table_and_gives_the_same_answers(
    filled: Path, clock: FixedClock
) -> None:
    path = filled
    with _opened(path, clock) as brain:
        before = _answers(brain)
    # as schema 4 stored it: every list in its Memory row, no LinkList table, version 4
    db = kuzu.Database(str(path))
    conn = kuzu.Connection(db)
    conn.execute("MATCH (l:LinkList), (n:Memory {uid: l.uid}) SET n.recent_links = l.links")
    conn.execute("DROP TABLE LinkList")
    conn.execute("MATCH (m:Meta {key: 'schema_version'}) SET m.value = '4'")
    conn.close()
    db.close()
    # `ebb doctor` names the tables it has and passes it (a writing open adds LinkList)
    assert _schema_check(path) == (
        True,
        "Memory, Link, Audit, Meta (opening it with Ebb adds LinkList)",
    )
    # read-only, it is read as it is (no LinkList table: every list in its Memory row)
    store = KuzuStore(path, read_only=True)
    try:
        assert _answers(Brain(store, namespace="t", clock=clock)) == before
        assert "n:log" in _linked(Brain(store, namespace="t", clock=clock), "n:0")
    finally:
        store.close()
    with _opened(path, clock) as old:
        assert _answers(old) == before
        old.remember("a later note", kind="note", id="n:later", links=["n:4"])
        assert "n:later" in _linked(old, "n:4")
    store = KuzuStore(path)
    try:
        assert store.get_meta("schema_version") == SCHEMA_VERSION == "5"
    finally:
        store.close()
    assert "n:later" in _rows(path)[1]["n:4"]
    assert _schema_check(path) == (True, "Memory, Link, LinkList, Audit, Meta")


def _schema_check(path: Path) -> tuple[bool, str]:
    """``ebb doctor``'s schema line for the store at ``path``: (passed, what it says)."""
    (check,) = [c for c in diagnose(path).checks if c.name == "schema"]
    return check.ok, check.detail


def test_doctor_fails_a_schema_5_store_without_its_link_list_table(filled: Path) -> None:
    _kuzu(filled, "DROP TABLE LinkList")
    assert _schema_check(filled) == (False, "tables missing: ['LinkList']")


def test_within_one_node_group_a_changed_list_is_set_in_its_memory_row(
    tmp_path: Path, clock: FixedClock
) -> None:
    path = tmp_path / "s.kuzu"
    with Brain.open(path, namespace="t", clock=clock) as brain:  # the default: 131,072 rows
        _fill(brain)  # ends with a recall: the store knows its table's size from then on
        brain.remember("later note", kind="note", id="n:later", links=["n:4"])
        brain.connect("n:4", "n:5", kind="mentions")
        before = _answers(brain)
        assert {"n:later", "n:5"} <= _linked(brain, "n:4")
    memory, lists = _rows(path)
    assert "n:4" not in lists and "n:5" not in lists
    assert "n:later" in (memory["n:4"] or "") and "n:5" in (memory["n:4"] or "")
    with Brain.open(path, namespace="t", clock=clock) as again:  # read from the table
        assert _answers(again) == before
        assert {"n:later", "n:5"} <= _linked(again, "n:4")


def test_lists_move_between_row_and_link_list_as_the_table_crosses_the_threshold(
    filled: Path, clock: FixedClock
) -> None:
    path = filled  # a large store: n:0's list went to LinkList
    assert "n:log" in _rows(path)[1]["n:0"]
    # within the threshold: n:0's new list goes into its row and its LinkList row goes
    with _opened(path, clock, in_rows_upto=10) as brain:
        brain.remember("a filler", kind="note", id="n:fill")  # the store knows its size
        brain.remember("second log", kind="note", id="n:log2", links=["n:0"])
        assert {"n:log", "n:log2"} <= _linked(brain, "n:0")
    memory, lists = _rows(path)
    assert "n:0" not in lists and "n:log2" in (memory["n:0"] or "")
    # past it (9 memories, 12 with these): n:0's next list goes to LinkList, overriding the row
    with _opened(path, clock, in_rows_upto=10) as brain:
        for i in range(3):
            brain.remember(f"filler {i}", kind="note", id=f"n:fill{i}")
        brain.remember("third log", kind="note", id="n:log3", links=["n:0"])
        assert {"n:log", "n:log2", "n:log3"} <= _linked(brain, "n:0")
        before = _answers(brain)
    memory, lists = _rows(path)
    assert "n:log3" in lists["n:0"] and "n:log3" not in (memory["n:0"] or "")
    with Brain.open(path, namespace="t", clock=clock) as again:  # read from the table
        assert _answers(again) == before
        assert {"n:log", "n:log2", "n:log3"} <= _linked(again, "n:0")


def test_a_rolled_back_move_into_the_row_keeps_the_link_list_row(
    filled: Path, clock: FixedClock
) -> None:
    path = filled
    with _opened(path, clock, in_rows_upto=100) as brain:
        brain.remember("a filler", kind="note", id="n:fill")  # the store knows its size
        store: Any = brain._s.store
        try:
            with store.transaction():
                brain.connect("n:0", "n:5", kind="mentions")  # into the row, LinkList's gone
                raise RuntimeError("abandon")
        except RuntimeError:
            pass
        assert "n:5" not in _linked(brain, "n:0") and "n:log" in _linked(brain, "n:0")
        brain.remember("another", kind="note", id="n:fill2")  # a rollback forgot the size
        brain.connect("n:0", "n:4", kind="mentions")  # this one stays: into the row
        assert {"n:log", "n:4"} <= _linked(brain, "n:0") and "n:5" not in _linked(brain, "n:0")
    memory, lists = _rows(path)
    assert "n:0" not in lists and "n:4" in (memory["n:0"] or "")
    assert "n:5" not in (memory["n:0"] or "")
