"""EbbRetriever: sync and async retrieval, node metadata, reinforcement, query engine and tool."""

from __future__ import annotations

import threading
from datetime import datetime

import pytest
from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ToolCallBlock
from llama_index.core.llms import ChatMessage, MessageRole, MockLLM
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import MetadataMode, QueryBundle
from llama_index.core.tools import QueryEngineTool

from ebb_core import Brain, FixedClock, InvalidInput, RecallHit
from ebb_llamaindex import EbbRetriever

FACT = "fact:acme-renewal"


@pytest.fixture
def brain(kuzu_brain: Brain) -> Brain:
    kuzu_brain.remember("Acme Corp, a logistics client", kind="client", id="client:acme")
    kuzu_brain.remember(
        "Acme renews its contract on March 14", kind="fact", id=FACT, links=["client:acme"]
    )
    kuzu_brain.remember("We moved to outcome-based pricing", kind="decision")
    return kuzu_brain


def test_is_a_llamaindex_retriever(brain: Brain) -> None:
    assert isinstance(EbbRetriever(brain), BaseRetriever)


def test_retrieve_returns_scored_text_nodes_carrying_the_memory(brain: Brain) -> None:
    results = EbbRetriever(brain, k=2).retrieve("When does Acme renew its contract?")

    assert [r.node.node_id for r in results] == [FACT, "client:acme"]
    top = results[0]
    assert top.node.get_content() == "Acme renews its contract on March 14"
    assert top.score is not None and top.score > results[1].score  # type: ignore[operator]
    meta = top.node.metadata
    assert meta["memory_id"] == FACT
    assert meta["kind"] == "fact"
    assert meta["tier"] == "hot" and meta["tier_level"] == 1
    assert meta["namespace"] == "test"
    assert meta["score"] == pytest.approx(top.score)
    for part in (
        "text_score",
        "text_norm",
        "activation",
        "activation_norm",
        "edges_part",
        "read_part",
        "spread_part",
    ):
        assert isinstance(meta[part], float)
    assert meta["activation"] > 0
    assert "renew" in meta["matched_terms"]
    assert meta["live_links"] == ["client:acme"]
    assert "matched" in meta["why"] and "tier hot" in meta["why"]
    for stamp in ("created_at", "updated_at", "last_read_at", "last_reinforced_at"):
        assert datetime.fromisoformat(meta[stamp]).year == 2026


def test_a_model_sees_text_id_and_kind_but_not_the_score_parts(brain: Brain) -> None:
    node = EbbRetriever(brain, k=1).retrieve("Acme contract")[0].node

    seen = node.get_content(metadata_mode=MetadataMode.LLM)

    assert "Acme renews its contract on March 14" in seen
    assert f"memory_id: {FACT}" in seen and "kind: fact" in seen
    assert "activation" not in seen and "why" not in seen


async def test_aretrieve_matches_retrieve_and_runs_on_a_worker_thread(brain: Brain) -> None:
    threads: list[int] = []

    class Recording(EbbRetriever):
        def recall(self, query: str) -> list[RecallHit]:
            threads.append(threading.get_ident())
            return super().recall(query)

    retriever = Recording(brain, k=3, reinforce=False)
    sync_ids = [r.node.node_id for r in retriever.retrieve("Acme renews")]
    async_ids = [r.node.node_id for r in await retriever.aretrieve("Acme renews")]

    assert async_ids == sync_ids
    assert threads[0] == threading.get_ident()
    assert threads[1] != threading.get_ident()


def test_retrieving_raises_the_activation_of_what_it_returned(
    brain: Brain, clock: FixedClock
) -> None:
    clock.advance(days=20)
    before = brain.activation(FACT)
    untouched = brain.activation("decision:we-moved-to-outcome-based-pricing")

    ids = [r.node.node_id for r in EbbRetriever(brain, k=1).retrieve("Acme renews")]

    assert ids == [FACT]
    assert brain.activation(FACT) > before
    assert brain.activation("decision:we-moved-to-outcome-based-pricing") == untouched


async def test_async_retrieval_raises_activation_too(brain: Brain, clock: FixedClock) -> None:
    clock.advance(days=20)
    before = brain.activation(FACT)

    await EbbRetriever(brain, k=1).aretrieve(QueryBundle("Acme renews"))

    assert brain.activation(FACT) > before


def test_reinforcement_can_be_switched_off(brain: Brain, clock: FixedClock) -> None:
    clock.advance(days=20)
    before = brain.activation(FACT)

    EbbRetriever(brain, k=1, reinforce=False).retrieve("Acme renews")

    assert brain.activation(FACT) == before


def test_kinds_namespace_and_k(brain: Brain) -> None:
    assert [r.node.node_id for r in EbbRetriever(brain, kinds=["client"]).retrieve("Acme")] == [
        "client:acme"
    ]
    assert len(EbbRetriever(brain, k=1).retrieve("Acme")) == 1
    assert EbbRetriever(brain, namespace="someone-else").retrieve("Acme") == []
    with pytest.raises(InvalidInput):
        EbbRetriever(brain, k=0)


def test_depth_reaches_archived_memories(brain: Brain, clock: FixedClock) -> None:
    old = brain.remember("Globex asked about seat licences", kind="note").id
    clock.advance(days=100)
    brain.remember("Fresh note that keeps the namespace active", kind="note")
    brain.maintain()
    tier = brain.get(old).tier
    assert 1 < tier < 4, "the old note should have been archived but not frozen"

    found = {
        depth: [r.node.node_id for r in EbbRetriever(brain, depth=depth).retrieve("Globex")]
        for depth in (1, 2, 3)
    }

    assert found == {d: ([old] if d >= tier else []) for d in (1, 2, 3)}


def test_works_in_a_retriever_query_engine(brain: Brain, clock: FixedClock) -> None:
    clock.advance(days=10)
    before = brain.activation(FACT)
    # MockLLM is LlamaIndex's fake model: it echoes the prompt, so the answer shows the context.
    engine = RetrieverQueryEngine.from_args(EbbRetriever(brain, k=2), llm=MockLLM())

    response = engine.query("When does Acme renew?")

    assert [n.node.node_id for n in response.source_nodes] == [FACT, "client:acme"]
    assert "Acme renews its contract on March 14" in str(response)
    assert brain.activation(FACT) > before


async def test_works_as_a_query_engine_tool_in_a_function_agent(
    brain: Brain, clock: FixedClock
) -> None:
    clock.advance(days=10)
    before = brain.activation(FACT)
    engine = RetrieverQueryEngine.from_args(EbbRetriever(brain, k=2), llm=MockLLM())
    tool = QueryEngineTool.from_defaults(
        engine, name="ebb_memory", description="Long-term memory: ask it about past facts."
    )

    def fake_model(messages: list[ChatMessage], **kwargs: object) -> ChatMessage:
        """A scripted fake: ask the memory tool, then repeat what it said."""
        last = messages[-1]
        if last.role == MessageRole.TOOL:
            return ChatMessage(role=MessageRole.ASSISTANT, content=f"Memory says: {last.content}")
        call = ToolCallBlock(
            tool_call_id="fake-1", tool_name="ebb_memory", tool_kwargs={"input": last.content}
        )
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])

    agent = FunctionAgent(tools=[tool], llm=MockFunctionCallingLLM(response_generator=fake_model))
    handler = agent.run("When does Acme renew?")
    results = [ev async for ev in handler.stream_events() if isinstance(ev, ToolCallResult)]
    answer = str(await handler)

    assert [r.tool_name for r in results] == ["ebb_memory"]
    assert not results[0].tool_output.is_error
    assert "Acme renews its contract on March 14" in answer
    assert brain.activation(FACT) > before
    assert "Acme renews its contract on March 14" in tool.call(input="Acme renewal").content
