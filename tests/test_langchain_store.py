"""EbbStore: LangGraph's BaseStore on Ebb (namespaces, recall-ranked search, delete = forget)."""

from __future__ import annotations

import pytest
from langgraph.store.base import GetOp, InvalidNamespaceError, Item, PutOp, SearchOp

from ebb_core import Brain, FixedClock, Tier
from ebb_langchain import EbbStore, ebb_namespace, langgraph_namespace

ALICE = ("memories", "alice")
BOB = ("memories", "bob")


@pytest.fixture
def store(kuzu_brain: Brain) -> EbbStore:
    return EbbStore(kuzu_brain)


def test_namespace_mapping_is_reversible() -> None:
    assert ebb_namespace(("memories", "alice", "prefs")) == "memories.alice.prefs"
    assert langgraph_namespace("memories.alice.prefs") == ("memories", "alice", "prefs")


def test_put_get_round_trip(store: EbbStore, kuzu_brain: Brain, clock: FixedClock) -> None:
    value = {"content": "Alice prefers Python", "tags": ["lang", "pref"], "n": 3, "x": None}
    store.put(ALICE, "pref-1", value)
    item = store.get(ALICE, "pref-1")
    assert isinstance(item, Item)
    assert (item.namespace, item.key, item.value) == (ALICE, "pref-1", value)
    assert item.created_at == item.updated_at == clock.now()
    node = kuzu_brain.scoped("memories.alice").get("pref-1")
    assert node.kind == "memory"
    assert node.text == "Alice prefers Python\nlang\npref"
    clock.advance(days=1)
    store.put(ALICE, "pref-1", {"content": "Alice prefers Rust"})
    again = store.get(ALICE, "pref-1")
    assert again is not None
    assert again.value == {"content": "Alice prefers Rust"}
    assert again.created_at == item.created_at
    assert again.updated_at == clock.now()
    assert store.get(BOB, "pref-1") is None
    assert store.get(ALICE, "missing") is None


def test_put_keeps_the_kind_of_an_existing_memory(store: EbbStore, kuzu_brain: Brain) -> None:
    alice = kuzu_brain.scoped("memories.alice")
    alice.remember("Alice works at Acme", kind="fact", id="fact:employer")
    item = store.get(ALICE, "fact:employer")
    assert item is not None
    assert item.value == {"content": "Alice works at Acme", "kind": "fact"}
    store.put(ALICE, "fact:employer", {"content": "Alice works at Globex"})
    assert alice.get("fact:employer").kind == "fact"
    assert alice.get("fact:employer").text == "Alice works at Globex"


def test_index_decides_the_text_recall_matches(store: EbbStore, kuzu_brain: Brain) -> None:
    store.put(ALICE, "doc", {"title": "Quarterly plan", "body": "hire two engineers"}, ["title"])
    store.put(ALICE, "secret", {"content": "the vault code is orange"}, index=False)
    store.put(ALICE, "numbers", {"age": 42})
    alice = kuzu_brain.scoped("memories.alice")
    assert alice.get("doc").text == "Quarterly plan"
    assert alice.get("secret").text == "secret"
    assert alice.get("numbers").text == '{"age": 42}'
    assert [i.key for i in store.search(ALICE, query="quarterly")] == ["doc"]
    assert store.search(ALICE, query="engineers") == []
    assert store.search(ALICE, query="orange vault") == []
    fielded = EbbStore(kuzu_brain, fields=["body"])
    fielded.put(BOB, "doc", {"title": "Quarterly plan", "body": "hire two engineers"})
    assert [i.key for i in fielded.search(BOB, query="engineers")] == ["doc"]


def test_search_ranks_with_recall_and_scores(store: EbbStore, kuzu_brain: Brain) -> None:
    store.put(ALICE, "a", {"content": "Alice likes Python for data work"})
    store.put(ALICE, "b", {"content": "Alice likes hiking"})
    store.put(ALICE, "c", {"content": "Python packaging notes for Alice's team"})
    hits = store.search(ALICE, query="python data")
    assert [h.key for h in hits] == ["a", "c"]
    assert hits[0].score is not None and hits[1].score is not None
    assert hits[0].score > hits[1].score
    # The same ranking recall gives, item for item.
    recalled = kuzu_brain.scoped("memories.alice").recall("python data", reinforce=False)
    assert [h.id for h in recalled] == ["a", "c"]
    assert [h.score for h in recalled] == pytest.approx([h.score for h in hits])


def test_search_limit_offset_filter_and_listing(kuzu_brain: Brain, clock: FixedClock) -> None:
    store = EbbStore(kuzu_brain, reinforce=False)  # keep the order the writes gave
    for n in range(5):
        clock.advance(hours=1)
        store.put(ALICE, f"k{n}", {"content": f"note number {n}", "n": n, "even": n % 2 == 0})
    listed = store.search(ALICE, limit=10)  # no query: the most active first (the newest here)
    assert [i.key for i in listed] == ["k4", "k3", "k2", "k1", "k0"]
    assert [i.key for i in store.search(ALICE, query="note", limit=2, offset=1)] == ["k3", "k2"]
    assert {i.key for i in store.search(ALICE, query="note", filter={"even": True})} == {
        "k0",
        "k2",
        "k4",
    }
    assert {i.key for i in store.search(ALICE, filter={"n": {"$gte": 3}})} == {"k3", "k4"}
    assert {i.key for i in store.search(ALICE, filter={"n": {"$ne": 0, "$lt": 2}})} == {"k1"}
    assert store.search(ALICE, filter={"missing": 1}) == []
    assert store.search(ALICE, limit=0) == []


def test_search_covers_a_namespace_prefix(store: EbbStore, kuzu_brain: Brain) -> None:
    store.put(ALICE, "a", {"content": "Alice likes tea"})
    store.put(BOB, "b", {"content": "Bob likes tea too"})
    store.put(("other",), "c", {"content": "tea everywhere"})
    assert {(i.namespace, i.key) for i in store.search(("memories",), query="tea")} == {
        (ALICE, "a"),
        (BOB, "b"),
    }
    assert len(store.search((), query="tea")) == 3
    assert [i.key for i in store.search(BOB, query="tea")] == ["b"]
    # A prefix matches whole labels only.
    assert store.search(("memories", "ali"), query="tea") == []


def test_list_namespaces(store: EbbStore) -> None:
    for ns in [ALICE, BOB, ("memories", "alice", "prefs"), ("docs", "v1"), ("cache", "v1")]:
        store.put(ns, "k", {"content": "x"})
    assert store.list_namespaces() == [
        ("cache", "v1"),
        ("docs", "v1"),
        ALICE,
        ("memories", "alice", "prefs"),
        BOB,
    ]
    assert store.list_namespaces(prefix=("memories",)) == [
        ALICE,
        ("memories", "alice", "prefs"),
        BOB,
    ]
    assert store.list_namespaces(prefix=("memories",), max_depth=2) == [ALICE, BOB]
    assert store.list_namespaces(suffix=("v1",)) == [("cache", "v1"), ("docs", "v1")]
    assert store.list_namespaces(prefix=("*", "v1")) == [("cache", "v1"), ("docs", "v1")]
    assert store.list_namespaces(max_depth=1) == [("cache",), ("docs",), ("memories",)]
    assert store.list_namespaces(limit=2, offset=1) == [("docs", "v1"), ALICE]


def test_search_and_get_raise_activation_of_what_they_return(
    store: EbbStore, kuzu_brain: Brain, clock: FixedClock
) -> None:
    store.put(ALICE, "a", {"content": "Alice likes Python"})
    store.put(ALICE, "b", {"content": "Alice likes hiking"})
    store.put(ALICE, "c", {"content": "Alice likes chess"})
    alice = kuzu_brain.scoped("memories.alice")
    clock.advance(days=15)
    before = {k: alice.activation(k) for k in "abc"}
    assert [i.key for i in store.search(ALICE, query="python")] == ["a"]
    assert alice.activation("a") > before["a"]
    assert alice.activation("b") == pytest.approx(before["b"])
    assert store.get(ALICE, "b") is not None
    assert alice.activation("b") > before["b"]
    assert alice.activation("c") == pytest.approx(before["c"])
    # Skipped by offset or cut by limit: not returned, not reinforced.
    clock.advance(days=15)
    before = {k: alice.activation(k) for k in "abc"}
    page = store.search(ALICE, query="alice likes", limit=1, offset=1)
    assert len(page) == 1
    for k in "abc":
        if k == page[0].key:
            assert alice.activation(k) > before[k]
        else:
            assert alice.activation(k) == pytest.approx(before[k])


def test_reinforce_switch_off(kuzu_brain: Brain, clock: FixedClock) -> None:
    store = EbbStore(kuzu_brain, reinforce=False)
    store.put(ALICE, "a", {"content": "Alice likes Python"})
    clock.advance(days=15)
    alice = kuzu_brain.scoped("memories.alice")
    before = alice.activation("a")
    assert store.search(ALICE, query="python")
    assert store.get(ALICE, "a") is not None
    assert alice.activation("a") == pytest.approx(before)


def test_delete_is_forget_hidden_at_once_kept_for_review(
    store: EbbStore, kuzu_brain: Brain
) -> None:
    store.put(ALICE, "a", {"content": "Alice likes Python"})
    store.delete(ALICE, "a")
    assert store.get(ALICE, "a") is None
    assert store.search(ALICE, query="python") == []
    assert store.search(ALICE) == []
    alice = kuzu_brain.scoped("memories.alice")
    assert [(i.id, i.reason) for i in alice.review_queue()] == [
        ("a", "forgotten: deleted through the LangGraph store")
    ]
    assert alice.get("a").tier == Tier.FROZEN
    (entry,) = alice.audit_log(action="forget")
    assert (entry.node_id, entry.actor) == ("a", "agent")
    store.delete(ALICE, "never-existed")  # LangGraph: deleting nothing is fine
    store.delete(ALICE, "a")  # twice is fine too
    assert len(alice.review_queue()) == 1


def test_put_after_delete_brings_the_item_back(store: EbbStore, kuzu_brain: Brain) -> None:
    store.put(ALICE, "a", {"content": "Alice likes Python"})
    store.delete(ALICE, "a")
    store.put(ALICE, "a", {"content": "Alice likes Python again"})
    item = store.get(ALICE, "a")
    assert item is not None and item.value == {"content": "Alice likes Python again"}
    alice = kuzu_brain.scoped("memories.alice")
    assert alice.review_queue() == []
    assert [e.action for e in alice.audit_log()] == ["forget", "restore", "revise"]
    assert [v.text for v in alice.history("a")] == [
        "Alice likes Python",
        "Alice likes Python again",
    ]


def test_put_on_an_existing_key_keeps_the_old_value_as_a_version(
    store: EbbStore, kuzu_brain: Brain
) -> None:
    store.put(ALICE, "diet", {"content": "Alice is vegetarian"})
    store.put(ALICE, "diet", {"content": "Alice is vegan"})
    item = store.get(ALICE, "diet")
    assert item is not None and item.value == {"content": "Alice is vegan"}
    alice = kuzu_brain.scoped("memories.alice")
    old, new = alice.history("diet")
    assert (old.text, old.current, new.text, new.current) == (
        "Alice is vegetarian",
        False,
        "Alice is vegan",
        True,
    )
    assert old.props["langgraph_value"] == {"content": "Alice is vegetarian"}
    (entry,) = alice.audit_log(action="revise")
    assert entry.node_id == "diet" and entry.actor == "agent"


def test_a_pinned_memory_cannot_be_deleted_by_an_agent(store: EbbStore, kuzu_brain: Brain) -> None:
    store.put(ALICE, "a", {"content": "Alice's allergy: peanuts"})
    kuzu_brain.scoped("memories.alice").pin("a")
    with pytest.raises(ValueError, match="pinned"):
        store.delete(ALICE, "a")
    assert store.get(ALICE, "a") is not None


def test_ttl_is_refused_and_bad_namespaces_too(store: EbbStore) -> None:
    with pytest.raises(NotImplementedError, match="decay"):
        store.batch([PutOp(ALICE, "a", {"content": "x"}, ttl=5.0)])
    with pytest.raises(NotImplementedError):
        store.put(ALICE, "a", {"content": "x"}, ttl=5.0)
    with pytest.raises(InvalidNamespaceError):
        store.batch([GetOp(("memories", "a.b"), "k")])


def test_batch_runs_ops_in_order(store: EbbStore) -> None:
    results = store.batch(
        [
            PutOp(ALICE, "a", {"content": "Alice likes Python"}),
            GetOp(ALICE, "a"),
            SearchOp(ALICE, query="python"),
            PutOp(ALICE, "a", None),
            GetOp(ALICE, "a"),
        ]
    )
    assert results[0] is None
    assert isinstance(results[1], Item) and results[1].key == "a"
    found = results[2]
    assert isinstance(found, list) and [i.key if isinstance(i, Item) else i for i in found] == ["a"]
    assert results[3] is None and results[4] is None


async def test_async_api(store: EbbStore, kuzu_brain: Brain, clock: FixedClock) -> None:
    await store.aput(ALICE, "a", {"content": "Alice likes Python"})
    clock.advance(days=10)
    alice = kuzu_brain.scoped("memories.alice")
    before = alice.activation("a")
    hits = await store.asearch(ALICE, query="python")
    assert [h.key for h in hits] == ["a"]
    assert alice.activation("a") > before
    item = await store.aget(ALICE, "a")
    assert item is not None and item.value == {"content": "Alice likes Python"}
    assert await store.alist_namespaces() == [ALICE]
    await store.adelete(ALICE, "a")
    assert await store.aget(ALICE, "a") is None
    assert [i.id for i in alice.review_queue()] == ["a"]
