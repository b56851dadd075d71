"""Neo4j hubs' link lists (``ebb_core.neo4j.hubs``): recall reads a hub's links from its stored
list, and answers as the full expansion does wherever the list's bound is not reached; the
write paths keep the list holding, other changes make it stale (then the full expansion
answers), and a store from before the lists gets them at open.

Needs the Neo4j test server (``make test`` starts one); skipped without it, failed under CI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ebb_core import Brain, FixedClock
from ebb_core.neo4j import Neo4jStore, hubs

pytestmark = pytest.mark.neo4j

HUB = "note:hub"


@pytest.fixture
def small_hubs(monkeypatch: pytest.MonkeyPatch) -> int:
    """Hubs from 170 links (above what a recall asks of one memory, 160), to keep it quick."""
    monkeypatch.setattr(hubs, "HUB_LINKS", 170)
    return 170


def _hub_state(store: Neo4jStore, node_id: str = HUB) -> dict[str, Any]:
    rows = store._read(
        "MATCH (s:Memory {id: $i}) RETURN s.hub_deg AS deg, size(s.hub_links) AS listed, "
        "s.hub_sup AS sup, COUNT { (s)-[:LINK]-() } AS links",
        {"i": node_id},
    )
    return dict(rows[0])


def _answers(brain: Brain, now_us: int) -> list[Any]:
    """What recall and the reads it makes answer, in plain values."""
    store, ns = brain.store, brain.namespace
    h = brain.config.half_life_us
    out: list[Any] = [
        store.strongest_links(ns, [HUB, "note:l7"], now_us, h, 0.0, 160),
        store.strongest_links(ns, [HUB], now_us, h, 0.1, 100),
        store.superseded_by(ns, [HUB, "note:l3"]),
    ]
    for query in ("hub garden", "leaf roses", "roses tulips", "garden"):
        for hit in brain.recall(query, k=10, reinforce=False):
            out.append((hit.id, round(hit.score, 12), hit.why.model_dump(mode="json")))
    return out


def _invalidate(store: Neo4jStore) -> None:
    store._run("MATCH (s:Memory {id: $i}) SET s.hub_deg = -1", {"i": HUB})


def test_a_hub_answers_from_its_list_as_from_all_its_links(
    neo4j_uri: str, clock: FixedClock, small_hubs: int
) -> None:
    store = Neo4jStore(neo4j_uri, retry_seconds=5.0)
    brain = Brain(store, namespace="hubs", clock=clock, embedder=False)
    try:
        brain.remember("the hub of the garden", id=HUB)
        for i in range(small_hubs + 20):
            words = ("leaf roses", "leaf tulips", "garden leaf")[i % 3]
            brain.remember(
                f"{words} {i}", id=f"note:l{i}", links=[HUB], weight=0.5 + (i * 7919 % 13) / 10
            )
            clock.advance(hours=7)
        brain.connect("note:l3", HUB, kind="supersedes")
        brain.forget("note:l5")  # a frozen neighbour: filtered after the list
        state = _hub_state(store)  # made by the write that took it past the bound
        assert state["deg"] == state["links"] == small_hubs + 21
        assert small_hubs <= state["listed"] <= 2 * small_hubs  # made, then appended to
        assert state["sup"] == ["note:l3"]
        now = brain._now_us()
        with_list = _answers(brain, now)
        _invalidate(store)
        assert _answers(brain, now) == with_list
        store.refresh_hubs("hubs", brain.config.half_life_us)

        # New links through the write paths keep the list holding, strongest ones listed.
        for i in range(3):
            brain.remember(f"garden leaf new {i}", id=f"note:n{i}", links=[HUB], weight=3.0)
        brain.connect("note:l9", HUB, weight=4.0)  # an existing link made the strongest
        state = _hub_state(store)
        assert state["deg"] == state["links"] == small_hubs + 24
        assert state["listed"] <= 2 * small_hubs
        now = brain._now_us()
        with_list = _answers(brain, now)
        strongest = {link.other_id for link in with_list[0][:4]}
        assert strongest == {"note:n0", "note:n1", "note:n2", "note:l9"}
        _invalidate(store)
        assert _answers(brain, now) == with_list
    finally:
        brain.close()


def test_links_added_by_an_import_make_the_list_stale_until_refreshed(
    neo4j_uri: str, clock: FixedClock, small_hubs: int, tmp_path: Path
) -> None:
    store = Neo4jStore(neo4j_uri, retry_seconds=5.0)
    brain = Brain(store, namespace="hubs", clock=clock, embedder=False)
    try:
        brain.remember("the hub of the garden", id=HUB)
        for i in range(small_hubs + 5):
            brain.remember(f"leaf roses {i}", id=f"note:l{i}", links=[HUB], weight=1 + i % 5)
            clock.advance(hours=5)
        assert _hub_state(store)["deg"] == small_hubs + 6 - 1
        # Links written past the write paths (a bulk insert into the namespace): stale.
        us = brain._now_us()
        node: dict[str, Any] = {
            "namespace": "hubs",
            "id": "note:x",
            "kind": "note",
            "text": "roses x",
        }
        node.update(props="{}", created_us=us, updated_us=us, last_read_us=None, pinned=False)
        node.update(tier=1, review_reason=None, queued_us=None)
        link: dict[str, Any] = {"namespace": "hubs", "src": "note:x", "dst": HUB, "kind": "related"}
        link.update(weight=5.0, created_us=us, reinforced_us=us, props=None)
        store.bulk_insert({c: [v] for c, v in node.items()}, {c: [v] for c, v in link.items()})
        state = _hub_state(store)
        assert state["deg"] == small_hubs + 5 != state["links"]  # stale: expanded again
        now = brain._now_us()
        stale = _answers(brain, now)
        assert stale[0][0].other_id == "note:x"  # the full expansion finds the new link
        assert store.refresh_hubs("hubs", brain.config.half_life_us) == 1
        assert _hub_state(store)["deg"] == small_hubs + 6
        assert _answers(brain, now) == stale
        # Deleting a neighbour makes the list again; a memory no longer a hub loses it.
        brain.forget("note:l4")
        brain.approve_deletion(["note:l4"], approved_by="tester")
        state = _hub_state(store)
        assert state["deg"] == state["links"] == small_hubs + 5
        gone = [f"note:l{i}" for i in range(5, 12)]
        for gone_id in gone:
            brain.forget(gone_id)
        brain.approve_deletion(gone, approved_by="tester")
        assert _hub_state(store)["deg"] is None
    finally:
        brain.close()


def test_a_store_from_before_the_lists_gets_them_at_open(
    neo4j_uri: str, clock: FixedClock, small_hubs: int
) -> None:
    store = Neo4jStore(neo4j_uri, retry_seconds=5.0)
    brain = Brain(store, namespace="hubs", clock=clock, embedder=False)
    brain.remember("the hub of the garden", id=HUB)
    for i in range(small_hubs + 2):
        brain.remember(f"leaf roses {i}", id=f"note:l{i}", links=[HUB])
    brain.maintain()
    assert _hub_state(store)["deg"] == small_hubs + 2
    # As an Ebb from before the lists left it: no list, no marker.
    store._run(
        "MATCH (s:Memory) REMOVE s.hub_links, s.hub_min, s.hub_h, s.hub_deg, s.hub_sup "
        "WITH count(*) AS c MATCH (m:Meta {key: $k}) DELETE m",
        {"k": hubs.HUB_META},
    )
    assert store.get_meta(hubs.HUB_META) is None
    brain.close()
    again = Neo4jStore(neo4j_uri, retry_seconds=5.0)
    try:
        assert again.get_meta(hubs.HUB_META) == hubs.HUB_VERSION
        assert _hub_state(again)["deg"] == small_hubs + 2
    finally:
        again.close()


def test_an_import_makes_the_lists_of_its_own_hubs_without_a_pass_over_all(
    neo4j_uri: str, clock: FixedClock, small_hubs: int, tmp_path: Path, monkeypatch: Any
) -> None:
    from ebb_core.kuzu_store import KuzuStore

    src = Brain(KuzuStore(tmp_path / "kuzu"), namespace="src", clock=clock, embedder=False)
    src.remember("the hub of the garden", id=HUB)
    for i in range(small_hubs + 3):
        src.remember(f"leaf roses {i}", id=f"note:l{i}", links=[HUB], weight=1 + i % 4)
        clock.advance(hours=2)
    path = tmp_path / "export.jsonl"
    src.export(path)
    src.close()

    store = Neo4jStore(neo4j_uri, retry_seconds=5.0)

    def whole_store(*args: Any, **kwargs: Any) -> int:
        raise AssertionError("the import looked for hubs among every memory")

    monkeypatch.setattr(store, "refresh_hubs", whole_store)
    brain = Brain(store, namespace="imported", clock=clock, embedder=False)
    try:
        brain.import_(path, namespace="imported")
        rows = store._read(
            "MATCH (s:Memory {ns: 'imported'}) WHERE s.hub_deg IS NOT NULL "
            "RETURN s.id AS id, s.hub_deg AS deg, size(s.hub_links) AS listed, "
            "COUNT { (s)-[:LINK]-() } AS links"
        )
        assert [dict(r) for r in rows] == [
            {"id": HUB, "deg": small_hubs + 3, "listed": small_hubs, "links": small_hubs + 3}
        ]
        now = brain._now_us()
        with_list = _answers(brain, now)
        store._run("MATCH (s:Memory {ns: 'imported', id: $i}) SET s.hub_deg = -1", {"i": HUB})
        assert _answers(brain, now) == with_list
    finally:
        brain.close()


def test_links_tied_at_the_bound_are_listed_in_recalls_order(
    neo4j_uri: str, clock: FixedClock, small_hubs: int
) -> None:
    store = Neo4jStore(neo4j_uri, retry_seconds=5.0)
    brain = Brain(store, namespace="hubs", clock=clock, embedder=False)
    try:
        brain.remember("the hub of the garden", id=HUB)
        # Every link the same weight at the same time: one key, broken by the other end's id.
        ids = [f"note:l{i}" for i in range(small_hubs + 8)]
        for i in reversed(range(small_hubs + 8)):
            brain.remember(f"leaf roses {i}", id=ids[i], links=[HUB])
        _invalidate(store)  # made again from all its links (as an import's end makes it)
        assert store.refresh_hubs("hubs", brain.config.half_life_us) == 1
        listed = store._read(
            "MATCH (s:Memory {ns: 'hubs', id: $i}) UNWIND s.hub_links AS r "
            "MATCH ()-[e:LINK]->() WHERE elementId(e) = r "
            "RETURN CASE WHEN startNode(e) = s THEN endNode(e).id ELSE startNode(e).id END AS m",
            {"i": HUB},
        )
        assert sorted(r["m"] for r in listed) == sorted(ids)[:small_hubs]
        now = brain._now_us()
        with_list = _answers(brain, now)
        _invalidate(store)
        assert _answers(brain, now) == with_list
    finally:
        brain.close()
