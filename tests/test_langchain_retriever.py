"""EbbRetriever: LangChain's standard retriever suite, plus what Ebb adds (why, tiers, reuse)."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests

from ebb_core import Brain, FixedClock, Tier
from ebb_langchain import EbbRetriever


def seed_pricing(brain: Brain) -> None:
    brain.remember("We moved to outcome-based pricing", kind="decision", id="decision:outcome")
    brain.remember("Per-seat pricing was the old model", kind="decision", id="decision:seat")
    brain.remember("Pricing page copy needs a rewrite", kind="task", id="task:pricing-page")
    brain.remember("Acme asked about pricing tiers", kind="note", id="note:acme-pricing")
    brain.remember("Lunch is at noon", kind="note", id="note:lunch")
    brain.connect("decision:outcome", "decision:seat", kind="supersedes")


class TestEbbRetrieverStandard(RetrieversIntegrationTests):
    """LangChain's own suite, run against a real Kùzu store."""

    brain: Brain

    @pytest.fixture(autouse=True)
    def _seeded(self, kuzu_brain: Brain) -> None:
        seed_pricing(kuzu_brain)
        self.brain = kuzu_brain

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return EbbRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, object]:
        return {"brain": self.brain}

    @property
    def retriever_query_example(self) -> str:
        return "pricing"


@pytest.fixture
def brain(kuzu_brain: Brain) -> Brain:
    seed_pricing(kuzu_brain)
    return kuzu_brain


def test_documents_carry_id_why_score_parts_and_timestamps(brain: Brain) -> None:
    docs = EbbRetriever(brain=brain, k=3).invoke("outcome pricing")
    top = docs[0]
    assert top.id == "decision:outcome"
    assert isinstance(top, Document)
    assert top.page_content == "We moved to outcome-based pricing"
    meta = top.metadata
    assert meta["id"] == "decision:outcome"
    assert meta["kind"] == "decision"
    assert meta["tier"] == "hot"
    assert meta["namespace"] == "test"
    assert "matched 'outcome', 'pricing'" in meta["why"]
    assert "tier hot" in meta["why"]
    parts = meta["score_parts"]
    assert set(parts) == {"text_score", "text_norm", "activation", "activation_norm"} | {
        "edges",
        "read",
        "spread",
    }
    assert parts["activation"] == pytest.approx(parts["edges"] + parts["read"] + parts["spread"])
    assert meta["score"] > 0
    assert {link["id"] for link in meta["live_links"]} == {"decision:seat"}
    assert meta["created_at"] == "2026-01-01T00:00:00+00:00"
    assert meta["last_reinforced_at"] == "2026-01-01T00:00:00+00:00"
    assert meta["matched_terms"] == ["outcome", "pricing"]


def test_k_kinds_and_per_call_overrides(brain: Brain) -> None:
    retriever = EbbRetriever(brain=brain, k=10)
    assert len(retriever.invoke("pricing")) == 4
    assert len(retriever.invoke("pricing", k=2)) == 2
    decisions = EbbRetriever(brain=brain, kinds=["decision"]).invoke("pricing")
    assert {d.id for d in decisions} == {"decision:outcome", "decision:seat"}
    assert {d.id for d in retriever.invoke("pricing", kinds=["task"])} == {"task:pricing-page"}


def test_namespace_view(brain: Brain) -> None:
    brain.scoped("other").remember("Pricing in the other team", id="note:other")
    assert "note:other" not in {d.id for d in EbbRetriever(brain=brain).invoke("pricing")}
    other = EbbRetriever(brain=brain, namespace="other").invoke("pricing")
    assert [d.id for d in other] == ["note:other"]


def test_depth_reaches_archived_tiers_and_use_promotes(
    kuzu_brain: Brain, clock: FixedClock
) -> None:
    kuzu_brain.remember("Invoice schema for Globex", id="note:globex")
    clock.advance(days=45)
    kuzu_brain.remember("Invoice reminders for Initech", id="note:initech")
    clock.advance(days=105)
    kuzu_brain.remember("Fresh note", id="note:fresh")
    kuzu_brain.maintain()
    # Aged 150 and 105 days against a fresh note: one falls to cold, one to warm.
    assert kuzu_brain.get("note:globex").tier == Tier.COLD
    assert kuzu_brain.get("note:initech").tier == Tier.WARM

    assert EbbRetriever(brain=kuzu_brain, depth=1).invoke("invoice") == []
    # by default recall falls through: warm before cold when nothing hot matches
    fallen = EbbRetriever(brain=kuzu_brain, reinforce=False).invoke("invoice")
    assert [d.id for d in fallen] == ["note:initech", "note:globex"]
    assert fallen[1].metadata["reached"].startswith("cold:")
    warm = EbbRetriever(brain=kuzu_brain, depth=2, reinforce=False).invoke("invoice")
    assert [d.id for d in warm] == ["note:initech"]
    assert warm[0].metadata["tier"] == "warm"
    everything = EbbRetriever(brain=kuzu_brain, depth=3).invoke("invoice")
    assert {d.id for d in everything} == {"note:globex", "note:initech"}
    # Being retrieved is use: both come straight back to hot.
    assert kuzu_brain.get("note:globex").tier == Tier.HOT
    assert kuzu_brain.get("note:initech").tier == Tier.HOT


def test_retrieval_raises_activation_of_what_it_returned(brain: Brain, clock: FixedClock) -> None:
    clock.advance(days=20)
    before = {i: brain.activation(i) for i in ("decision:outcome", "note:lunch")}
    docs = EbbRetriever(brain=brain, k=1).invoke("outcome")
    assert [d.id for d in docs] == ["decision:outcome"]
    assert brain.activation("decision:outcome") > before["decision:outcome"]
    assert brain.activation("note:lunch") == pytest.approx(before["note:lunch"])


async def test_async_retrieval_raises_activation(brain: Brain, clock: FixedClock) -> None:
    clock.advance(days=20)
    before = brain.activation("task:pricing-page")
    docs = await EbbRetriever(brain=brain).ainvoke("rewrite", k=1)
    assert [d.id for d in docs] == ["task:pricing-page"]
    assert brain.activation("task:pricing-page") > before


def test_reinforce_switch_off_leaves_activation(brain: Brain, clock: FixedClock) -> None:
    clock.advance(days=20)
    before = brain.activation("decision:outcome")
    docs = EbbRetriever(brain=brain, reinforce=False).invoke("outcome")
    assert docs[0].id == "decision:outcome"
    assert brain.activation("decision:outcome") == pytest.approx(before)


def test_langchain_and_llamaindex_metadata_carry_the_same_hit(brain: Brain) -> None:
    """Both adapters give ``RecallHit.metadata()``: the same keys with the same values, each
    adapter's old names included (LangChain's ``id`` and nested ``score_parts``, LlamaIndex's
    ``memory_id`` and flat ``*_part``); only ``live_links`` keeps each one's shape (dicts /
    ids), and ``live_link_ids`` reads the same in both."""
    from ebb_llamaindex import EbbRetriever as LlamaRetriever

    brain.connect("decision:outcome", "task:pricing-page", kind="related")
    lc = EbbRetriever(brain=brain, k=3).invoke("outcome pricing")[0].metadata
    li = LlamaRetriever(brain, k=3, reinforce=False).retrieve("outcome pricing")[0].node.metadata
    assert lc["id"] == li["memory_id"] == "decision:outcome"
    assert lc["memory_id"] == li["id"] == "decision:outcome"
    assert li["tier_level"] == lc["tier_level"] == 1
    for part, value in lc["score_parts"].items():
        assert li[part if part.endswith(("score", "norm", "activation")) else f"{part}_part"] == (
            value
        )
    assert [link["id"] for link in lc["live_links"]] == li["live_links"]
    assert lc["live_link_ids"] == li["live_link_ids"] == li["live_links"]
    assert len(li["live_links"]) == 2
    assert set(lc) == set(li)
    same = set(lc) - {"live_links"}
    assert {key: li[key] for key in same} == {key: lc[key] for key in same}
