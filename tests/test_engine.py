"""Engine behaviour on every backend: same inputs, clock and results. What every store must do
alike is in the published contract suite (ebb_core.testing, run by tests/test_store_contract.py)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from ebb_core import Brain, Config, FixedClock, InvalidInput, NotFound, Tier
from ebb_core.testing._base import scores as _keys
from ebb_core.testing._base import small_graph as _small_graph


def test_remember_generates_kind_slug_ids(brain: Brain) -> None:
    a = brain.remember("Seat pricing: $40 per user!", kind="decision")
    b = brain.remember("Seat pricing: $40 per user!", kind="decision")
    assert a.id == "decision:seat-pricing-40-per-user"
    assert b.id == "decision:seat-pricing-40-per-user-2"
    assert brain.get(a.id).text == "Seat pricing: $40 per user!"


def test_new_memory_starts_hot_with_read_bonus(brain: Brain) -> None:
    n = brain.remember("fresh fact", kind="fact", id="fact:x")
    assert n.tier is Tier.HOT
    assert brain.activation("fact:x") == pytest.approx(brain.config.read_bonus)


def test_recall_explains_and_reinforces(brain: Brain, clock: FixedClock) -> None:
    _small_graph(brain, clock)
    clock.advance(days=20)
    before = brain.activation("decision:outcome")
    hits = brain.recall("how do we bill Acme?", k=3)
    assert hits[0].id == "decision:outcome"
    why = hits[0].why
    assert set(why.matched_terms) >= {"bill", "acme"}
    assert why.tier is Tier.HOT
    assert {link.id for link in why.live_links} == {"client:acme", "person:maya"}
    assert why.activation == pytest.approx(why.edges_part + why.read_part + why.spread_part)
    assert "matched" in why.summary and "tier hot" in why.summary
    assert brain.activation("decision:outcome") > before
    assert brain.get("decision:outcome").last_read_at == clock.now()


def test_recall_without_reinforce_changes_nothing(brain: Brain, clock: FixedClock) -> None:
    _small_graph(brain, clock)
    clock.advance(days=20)
    before = _keys(brain)
    hits = brain.recall("Acme", reinforce=False)
    assert hits
    assert _keys(brain) == before


def test_recall_ranks_fresh_over_stale_with_equal_text(brain: Brain, clock: FixedClock) -> None:
    brain.remember("pricing decision alpha", kind="decision", id="decision:old")
    clock.advance(days=120)
    brain.remember("pricing decision beta", kind="decision", id="decision:new")
    ids = [h.id for h in brain.recall("pricing decision", k=2, reinforce=False)]
    assert ids == ["decision:new", "decision:old"]


def test_recall_respects_tiers(brain: Brain, clock: FixedClock) -> None:
    brain.remember("hub of pricing", kind="note", id="note:hub")
    for i in range(5):
        brain.remember(f"spoke {i}", kind="note", id=f"note:s{i}", links=["note:hub"])
    brain.remember("ancient pricing memo", kind="note", id="note:ancient")
    clock.advance(days=400)
    for i in range(5):
        brain.reinforce(f"note:s{i}")
    brain.maintain()
    # decay alone archives it to cold (nothing replaced it): never out of recall's reach
    assert brain.get("note:ancient").tier is Tier.COLD
    # an explicit depth is a limit
    assert "note:ancient" not in [h.id for h in brain.recall("memo", depth=1, reinforce=False)]
    assert "note:ancient" not in [h.id for h in brain.recall("memo", depth=2, reinforce=False)]
    assert "note:ancient" in [h.id for h in brain.recall("memo", depth=3, reinforce=False)]
    # by default recall falls through to cold when hot and warm hold no match
    (hit,) = brain.recall("memo", reinforce=False)
    assert hit.id == "note:ancient" and hit.why.tier is Tier.COLD
    assert hit.why.reached.startswith("cold: no hot memory scored as high")
    assert "note:ancient" in [
        h.id for h in brain.recall("memo", include_archived=True, reinforce=False)
    ]
    brain.forget("note:ancient")
    assert not brain.recall("memo", include_archived=True)


def test_recall_promotes_a_used_archived_memory(brain: Brain, clock: FixedClock) -> None:
    brain.remember("hub", kind="note", id="note:hub")
    brain.remember("rarely used memo about invoices", kind="note", id="note:memo")
    brain.store.update_nodes(brain.namespace, {"note:memo": {"tier": Tier.COLD}})
    hits = brain.recall("invoices", include_archived=True)
    assert [h.id for h in hits] == ["note:memo"]
    assert brain.get("note:memo").tier is Tier.HOT
    assert brain.audit_log(action="promote")[-1].node_id == "note:memo"


def test_pinned_memories_never_archive(brain: Brain, clock: FixedClock) -> None:
    brain.remember("company values", kind="fact", id="fact:values", pinned=True)
    clock.advance(days=900)
    brain.remember("something new", kind="note")
    brain.maintain()
    assert brain.get("fact:values").tier is Tier.HOT
    with pytest.raises(InvalidInput, match="pinned"):
        brain.forget("fact:values")
    brain.unpin("fact:values")
    brain.maintain()
    assert brain.get("fact:values").tier is Tier.COLD  # archived; decay alone never freezes


def test_decay_freezes_only_what_was_replaced(brain: Brain, clock: FixedClock) -> None:
    """Decay archives; a decayed memory is queued for deletion only when it was superseded or
    everything it links to was (the support of a replaced decision)."""
    brain.remember("Maya, head of product", kind="person", id="person:maya")
    brain.remember("Per-seat pricing", kind="decision", id="decision:seats")
    brain.remember("Seat analysis", id="note:analysis", links=["decision:seats"])
    brain.remember("Seat survey", id="note:survey", links=["decision:seats"])
    brain.remember("Seat notes", id="note:notes", links=["decision:seats", "person:maya"])
    brain.remember("Kickoff with Maya", id="note:kickoff")
    brain.connect("note:kickoff", "person:maya")
    clock.advance(days=300)
    brain.remember("Outcome pricing", kind="decision", id="decision:outcome")
    brain.remember("Outcome rollout", id="note:rollout", links=["decision:outcome"])
    report = brain.maintain()
    assert report.newly_queued == []  # decayed, but nothing replaced anything yet
    assert brain.get("decision:seats").tier is Tier.COLD
    clock.advance(days=300)
    brain.remember("Outcome pricing v2", kind="decision", id="decision:outcome2")
    brain.supersede("decision:seats", "decision:outcome2")
    clock.advance(days=200)
    brain.reinforce("decision:outcome2")
    report = brain.maintain()
    names = ("note:analysis", "note:survey", "note:notes", "note:kickoff", "person:maya")
    tiers = {i: brain.get(i).tier for i in names}
    # the replaced decision itself stays archived: its replacement's share keeps it above
    # the cold cut-off (it is findable, below what replaced it)
    assert brain.get("decision:seats").tier is Tier.COLD
    assert tiers == {
        "note:analysis": Tier.FROZEN,  # its only link leads to a superseded decision
        "note:survey": Tier.FROZEN,
        "note:notes": Tier.COLD,  # also linked to Maya, who was not replaced
        "note:kickoff": Tier.COLD,
        "person:maya": Tier.COLD,
    }
    reasons = {q.id: q.reason for q in brain.review_queue()}
    assert sorted(reasons) == ["note:analysis", "note:survey"]
    assert reasons["note:analysis"].endswith(
        "everything it links to was superseded (decision:seats)"
    )


def test_forget_review_approve_flow(brain: Brain, clock: FixedClock) -> None:
    _small_graph(brain, clock)
    item = brain.forget("note:seats", "superseded by outcome pricing")
    assert item.reason == "forgotten: superseded by outcome pricing"
    assert brain.get("note:seats").tier is Tier.FROZEN
    assert "note:seats" not in [h.id for h in brain.recall("seat pricing notes", depth=3)]
    with pytest.raises(InvalidInput, match="not in the review queue"):
        brain.approve_deletion(["client:acme"], approved_by="ana")
    with pytest.raises(InvalidInput, match="approved_by"):
        brain.approve_deletion(["note:seats"], approved_by=" ")
    assert brain.approve_deletion(["note:seats"], approved_by="ana", note="ok") == ["note:seats"]
    with pytest.raises(NotFound, match="note:seats"):
        brain.get("note:seats")
    entry = brain.audit_log(action="delete")[-1]
    assert entry.actor == "ana" and entry.payload is not None
    assert entry.payload["node"]["text"] == "Old seat pricing notes"
    assert entry.payload["edges"][0]["dst"] == "client:acme"
    assert [e.action for e in brain.audit_log()] == ["forget", "delete"]


def test_restore_brings_back_to_hot(brain: Brain, clock: FixedClock) -> None:
    _small_graph(brain, clock)
    brain.forget("note:seats")
    node = brain.restore("note:seats")
    assert node.tier is Tier.HOT and node.review_reason is None and node.queued_at is None
    assert brain.review_queue() == []
    assert brain.audit_log()[-1].action == "restore"


def test_connect_reinforces_existing_edge(brain: Brain, clock: FixedClock) -> None:
    _small_graph(brain, clock)
    clock.advance(days=30)
    edge = brain.connect("decision:outcome", "client:acme", kind="related")
    assert edge.reinforced_at == clock.now()
    assert edge.weight == 1.0
    assert len([n for n in brain.neighbors("client:acme") if n.node.id == "decision:outcome"]) == 1
    brain.connect("decision:outcome", "client:acme", kind="related", weight=3.0)
    top = brain.neighbors("client:acme")[0]
    assert top.node.id == "decision:outcome" and top.edge.weight == 3.0


def test_neighbors_strongest_decayed_first(brain: Brain, clock: FixedClock) -> None:
    _small_graph(brain, clock)
    rows = brain.neighbors("client:acme")
    assert [r.node.id for r in rows] == ["note:seats", "decision:outcome"]
    assert rows[0].decayed_weight > rows[1].decayed_weight


def test_errors_name_what_was_wrong(brain: Brain) -> None:
    with pytest.raises(NotFound, match="note:missing"):
        brain.reinforce("note:missing")
    with pytest.raises(InvalidInput) as e:
        brain.remember("x", weight=-1, links=[])
    assert e.value.field == "weight"
    with pytest.raises(InvalidInput) as e:
        brain.recall("x", k=0)
    assert e.value.field == "k"
    with pytest.raises(InvalidInput) as e:
        brain.remember("")
    assert e.value.field == "text"
    with pytest.raises(InvalidInput) as e:
        brain.remember("x" * 200_001)
    assert e.value.field == "text"
    with pytest.raises(InvalidInput) as e:
        brain.remember("x", kind="Bad Kind")
    assert e.value.field == "kind"
    with pytest.raises(InvalidInput):
        brain.scoped("")
    with pytest.raises(NotFound):
        brain.remember("links to nothing", links=["note:nowhere"])
    assert brain.stats().nodes == 0  # the failed remember left nothing behind


def test_import_rejects_malformed_lines(brain: Brain) -> None:
    bad = '{"type": "node", "id": "x"}\n'
    with pytest.raises(InvalidInput, match="line 1"):
        brain.import_(io.StringIO(bad))
    with pytest.raises(InvalidInput, match="line 1"):
        brain.import_(io.StringIO("not json\n"))
    assert brain.stats().nodes == 0


def test_export_records_are_json_lines(brain: Brain, clock: FixedClock) -> None:
    _small_graph(brain, clock)
    buf = io.StringIO()
    n = brain.export(buf)
    lines = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert len(lines) == n
    assert lines[0]["type"] == "ebb-export"
    assert {x["type"] for x in lines[1:]} == {"node", "edge"}


def test_repeated_text_gets_distinct_ids_without_long_probing(brain: Brain) -> None:
    ids = [brain.remember("thanks", kind="message").id for _ in range(8)]
    assert ids[:3] == ["message:thanks", "message:thanks-2", "message:thanks-3"]
    assert len(set(ids)) == 8
    assert all(
        i.startswith("message:thanks-") and len(i) == len("message:thanks-") + 8 for i in ids[3:]
    )


def test_lazy_spreading_is_exact_for_touched_nodes_and_after_maintain(
    brain: Brain, clock: FixedClock
) -> None:
    assert not brain.config.eager_spreading
    _small_graph(brain, clock)
    clock.advance(days=3)
    before = brain.activation("decision:outcome")
    brain.recall("bill Acme ticket", k=1)
    brain.connect("note:seats", "person:maya", kind="mentions")
    touched = _keys(brain)
    brain.maintain()
    exact = _keys(brain)
    assert brain.activation("decision:outcome") > before
    for i in ("decision:outcome", "note:seats", "person:maya"):  # own base and degree: exact
        assert touched[i][0] == pytest.approx(exact[i][0], rel=1e-9), i
        assert touched[i][2] == exact[i][2], i
    # a neighbour of the touched memories catches up with its share only at maintain
    assert touched["client:acme"][1] != pytest.approx(exact["client:acme"][1], rel=1e-6)


# -- issue 11: fall-through, supersession, versions, spreading, reinforcement by rank ----------
def _archive(brain: Brain, ids: list[str], tier: Tier) -> None:
    brain.store.update_nodes(brain.namespace, {i: {"tier": tier} for i in ids})


def test_fall_through_ranks_hot_first_and_explains_deeper_hits(brain: Brain) -> None:
    brain.remember("quarterly invoice review with Globex", id="note:hot")
    brain.remember("Globex invoice dispute settled in March", id="note:warm")
    brain.remember("unrelated", id="note:other")
    _archive(brain, ["note:warm"], Tier.WARM)
    hits = brain.recall("Globex invoice dispute", k=5, reinforce=False)
    ids = [h.id for h in hits]
    # the warm memory matches much better: hot holds nothing comparably strong
    assert ids[0] == "note:warm"
    assert hits[0].why.tier is Tier.WARM and hits[0].why.reached.startswith("warm:")
    assert "from warm" in hits[0].why.summary
    assert hits[1].why.reached == "hot"
    # a warm match only as good as a hot one comes after it (hot first)
    brain.remember("Globex invoice dispute", id="note:hot2")
    top = brain.recall("Globex invoice dispute", k=2, reinforce=False)[0]
    assert top.id == "note:hot2"
    assert "note:warm" not in [h.id for h in brain.recall("Globex dispute", depth=1)]


def test_frozen_memories_stay_out_of_fall_through(brain: Brain) -> None:
    brain.remember("Initech contract terms", id="note:terms")
    brain.forget("note:terms")
    assert brain.recall("Initech contract terms", reinforce=False) == []


def _stale_and_current(brain: Brain, clock: FixedClock) -> None:
    """A stale decision with many references, replaced by a newer one with one."""
    brain.remember("We store billing data in Postgres", kind="decision", id="decision:pg")
    for i in range(8):
        brain.remember(
            f"Billing notes {i}: Postgres tuning", id=f"note:pg{i}", links=["decision:pg"]
        )
    clock.advance(days=20)
    brain.remember(
        "We store billing data in Cassandra now",
        kind="decision",
        id="decision:cass",
        supersedes=["decision:pg"],
    )


@pytest.mark.parametrize("depth", [None, 1, 2, 3])
def test_superseded_memory_ranks_below_its_replacement_at_every_depth(
    brain: Brain, clock: FixedClock, depth: int | None
) -> None:
    _stale_and_current(brain, clock)
    kwargs: dict[str, Any] = {} if depth is None else {"depth": depth}
    hits = brain.recall("where do we store billing data", k=10, reinforce=False, **kwargs)
    ids = [h.id for h in hits]
    assert ids.index("decision:cass") < ids.index("decision:pg")
    old = hits[ids.index("decision:pg")]
    assert old.why.superseded_by == ["decision:cass"]
    assert "superseded by decision:cass" in old.why.summary
    # after maintain, the old decision has left hot, and the ranking still holds
    clock.advance(days=1)
    brain.maintain()
    assert brain.get("decision:pg").tier is Tier.WARM
    ids = [h.id for h in brain.recall("billing data Postgres", k=10, reinforce=False, **kwargs)]
    if depth != 1:  # at depth 1 both may have left hot by now
        assert "decision:cass" in ids  # brought in by the memory it replaced
    if "decision:pg" in ids:
        assert ids.index("decision:cass") < ids.index("decision:pg")
    entry = brain.audit_log(node_id="decision:pg", action="supersede")[-1]
    assert entry.reason == "superseded by decision:cass"
    moved = brain.audit_log(node_id="decision:pg", action="demote")[-1]
    assert moved.reason == "superseded by decision:cass"


def test_supersede_links_existing_memories_and_survives_repeated_recall(
    brain: Brain, clock: FixedClock
) -> None:
    brain.remember("Seat pricing at $40 per user", kind="decision", id="decision:seats")
    for i in range(6):
        brain.remember(f"pricing review {i}", id=f"note:r{i}", links=["decision:seats"])
    clock.advance(days=5)
    brain.remember("Outcome pricing per resolved ticket", kind="decision", id="decision:outcome")
    edge = brain.supersede("decision:seats", "decision:outcome")
    assert (edge.src, edge.dst, edge.kind) == ("decision:outcome", "decision:seats", "supersedes")
    for _ in range(5):  # weekly recalls that return both
        clock.advance(days=7)
        ids = [h.id for h in brain.recall("pricing decision", k=10)]
        assert ids.index("decision:outcome") < ids.index("decision:seats")
    brain.maintain()
    assert brain.get("decision:seats").tier is not Tier.HOT
    with pytest.raises(InvalidInput):
        brain.supersede("decision:seats", "decision:seats")
    with pytest.raises(NotFound):
        brain.supersede("decision:nope", "decision:outcome")


def test_forgetting_the_replacement_ends_the_supersession(brain: Brain, clock: FixedClock) -> None:
    _stale_and_current(brain, clock)
    brain.forget("decision:cass")
    (hit, *_) = brain.recall("store billing data Postgres", k=3, reinforce=False)
    assert hit.id == "decision:pg" and hit.why.superseded_by == []


def test_new_text_under_an_existing_id_is_a_version_not_an_overwrite(
    brain: Brain, clock: FixedClock
) -> None:
    brain.remember(
        "Deploys go out on Tuesdays", kind="decision", id="decision:deploys", props={"team": "ops"}
    )
    clock.advance(days=3)
    node = brain.remember("Deploys go out on Thursdays", id="decision:deploys")
    assert node.text == "Deploys go out on Thursdays"
    assert node.kind == "decision"  # the default kind does not change an existing memory
    assert node.props == {"team": "ops"}  # props left out are kept
    versions = brain.history("decision:deploys")
    assert [(v.version, v.text, v.current) for v in versions] == [
        (1, "Deploys go out on Tuesdays", False),
        (2, "Deploys go out on Thursdays", True),
    ]
    assert versions[0].kind == "decision" and versions[0].props == {"team": "ops"}
    assert versions[0].replaced_at == clock.now()
    (entry,) = brain.audit_log(node_id="decision:deploys", action="revise")
    assert entry.payload is not None and entry.payload["text"] == "Deploys go out on Tuesdays"
    # the same text again is no new version; an explicit kind is
    brain.remember("Deploys go out on Thursdays", id="decision:deploys")
    assert len(brain.history("decision:deploys")) == 2
    brain.remember("Deploys go out on Thursdays", id="decision:deploys", kind="policy")
    assert [v.kind for v in brain.history("decision:deploys")] == [
        "decision",
        "decision",
        "policy",
    ]
    with pytest.raises(NotFound):
        brain.history("decision:nope")


def test_spreading_surfaces_a_linked_memory_with_no_shared_word(brain: Brain) -> None:
    brain.remember("Maya", kind="person", id="person:maya")
    brain.remember("The Zephyr launch slipped to May", id="note:launch", links=["person:maya"])
    for i in range(5):
        brain.remember(f"filler memory {i} about lunch", id=f"note:f{i}")
    hits = brain.recall("Zephyr launch", k=5, reinforce=False)
    ids = [h.id for h in hits]
    assert ids[0] == "note:launch"
    maya = hits[ids.index("person:maya")]
    assert maya.why.matched_terms == []
    assert maya.why.spread_from == ["note:launch"] and maya.why.spread_text > 0
    assert "linked to matches note:launch" in maya.why.summary
    off = Brain(
        brain.store, namespace=brain.namespace, clock=brain.clock, config=Config(spread_share=0.0)
    )
    assert "person:maya" not in [h.id for h in off.recall("Zephyr launch", k=5)]


def test_spreading_takes_a_second_hop_from_what_the_first_reached(brain: Brain) -> None:
    # question -> reply -> follow-up: only the question matches; the follow-up is two links on
    brain.remember("Where did the Zephyr team go?", id="turn:1")
    brain.remember("Oh, we went somewhere nice", id="turn:2", links=["turn:1"])
    brain.remember("Lisbon, by the river", id="turn:3", links=["turn:2"])
    brain.remember("an unrelated aside", id="turn:4", links=["turn:3"])
    for i in range(5):
        brain.remember(f"filler memory {i} about lunch", id=f"note:f{i}")
    hits = brain.recall("Zephyr team", k=5, reinforce=False)
    ids = [h.id for h in hits]
    assert ids[:3] == ["turn:1", "turn:2", "turn:3"]  # the match, then one hop, then two
    third = hits[2]
    assert third.why.matched_terms == [] and third.why.spread_from == ["turn:2"]
    # the share of what the relay received (no embedder: nothing discounted)
    relayed = brain.config.spread_second_hop * hits[1].why.spread_text
    assert third.why.spread_text == pytest.approx(relayed) and relayed > 0
    assert "turn:4" not in ids  # three links away: never reached
    # its why names the relay as a relay, not as a match; the one-hop memory keeps the match
    assert "two links from a match, through turn:2" in third.why.summary
    assert "linked to matches" not in third.why.summary
    assert "linked to matches turn:1" in hits[1].why.summary
    one_hop = Brain(
        brain.store,
        namespace=brain.namespace,
        clock=brain.clock,
        config=Config(spread_second_hop=0.0),
    )
    assert [h.id for h in one_hop.recall("Zephyr team", k=5, reinforce=False)][:2] == [
        "turn:1",
        "turn:2",
    ]
    assert "turn:3" not in [h.id for h in one_hop.recall("Zephyr team", k=5, reinforce=False)]


def test_recall_reinforces_by_rank(brain: Brain, clock: FixedClock) -> None:
    for i in range(4):
        brain.remember(f"kiwi report {'kiwi ' * (4 - i)}", id=f"note:k{i}")
    clock.advance(days=60)
    hits = brain.recall("kiwi", k=4)
    now = clock.now()
    reads = [brain.get(h.id).last_read_at for h in hits]
    assert reads[0] == now  # the top hit fully
    tail = [r for r in reads[1:] if r is not None]
    assert len(tail) == 3 and all(r < now for r in tail)
    assert tail[0] > tail[1] > tail[2]  # the tail less and less
    acts = [brain.activation(h.id) for h in hits]
    cfg = brain.config
    assert acts[0] == pytest.approx(cfg.read_bonus)
    # rank r gets 1 / (1 + reinforce_tail * r) of the way from its old read term to full
    old = cfg.read_bonus * 2 ** (-60 / cfg.half_life_days)
    for r in (1, 2, 3):
        share = 1 / (1 + cfg.reinforce_tail * r)
        assert acts[r] == pytest.approx(old + share * (cfg.read_bonus - old), rel=1e-3)


def test_recall_leaves_the_far_tail_unreinforced(brain: Brain, clock: FixedClock) -> None:
    for i in range(8):
        brain.remember(f"plum report {'plum ' * (8 - i)}", id=f"note:p{i}")
    clock.advance(days=10)
    before = {f"note:p{i}": brain.get(f"note:p{i}").last_read_at for i in range(8)}
    hits = brain.recall("plum", k=8)
    cfg = brain.config
    for rank, h in enumerate(hits):
        moved = brain.get(h.id).last_read_at != before[h.id]
        # shares 1, 1/2, ..., 1/5 are written; 1/6 and below are not (a write each)
        assert moved is (1 / (1 + cfg.reinforce_tail * rank) >= cfg.reinforce_min_share), rank
