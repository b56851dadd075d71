"""EbbToolSpec: remember / recall / connect / forget as LlamaIndex FunctionTools."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ToolCallBlock
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool

from ebb_core import Brain, FixedClock, NotFound, Tier
from ebb_llamaindex import EbbToolSpec


@pytest.fixture
def tools(kuzu_brain: Brain) -> dict[str, FunctionTool]:
    return {t.metadata.name or "": t for t in EbbToolSpec(kuzu_brain).to_tool_list()}


def test_four_tools_with_model_facing_schemas_and_no_delete(
    tools: dict[str, FunctionTool],
) -> None:
    assert sorted(tools) == ["connect", "forget", "recall", "remember"]
    required = {
        name: t.metadata.get_parameters_dict().get("required", []) for name, t in tools.items()
    }
    assert required == {
        "remember": ["text"],
        "recall": ["query"],
        "connect": ["src", "dst"],
        "forget": ["id"],
    }
    for tool in tools.values():
        params = tool.metadata.get_parameters_dict()["properties"]
        assert all(p.get("description") for p in params.values()), tool.metadata.name
        assert len(tool.metadata.description) > 80
        assert "(" not in tool.metadata.description.split()[0], "no Python signature leaks"
    assert "review" in tools["forget"].metadata.description
    assert tools["remember"].metadata.get_parameters_dict()["properties"]["links"]["anyOf"][0] == {
        "items": {"type": "string"},
        "type": "array",
    }


def test_remember_stores_a_linked_memory(kuzu_brain: Brain, tools: dict[str, FunctionTool]) -> None:
    kuzu_brain.remember("Acme Corp, a logistics client", kind="client", id="client:acme")

    out = tools["remember"].call(
        text="Acme renews on March 14", kind="fact", id="fact:acme-renewal", links=["client:acme"]
    )

    assert "fact:acme-renewal" in out.content and not out.is_error
    node = kuzu_brain.get("fact:acme-renewal")
    assert (node.kind, node.text) == ("fact", "Acme renews on March 14")
    assert [n.node.id for n in kuzu_brain.neighbors("fact:acme-renewal")] == ["client:acme"]


def test_remember_makes_up_an_id(kuzu_brain: Brain, tools: dict[str, FunctionTool]) -> None:
    out = tools["remember"].call(text="Dana prefers email")
    assert "note:dana-prefers-email" in out.content
    assert kuzu_brain.get("note:dana-prefers-email").kind == "note"


async def test_recall_lists_ids_and_why_and_reinforces(
    kuzu_brain: Brain, clock: FixedClock, tools: dict[str, FunctionTool]
) -> None:
    kuzu_brain.remember("Acme renews on March 14", kind="fact", id="fact:acme-renewal")
    clock.advance(days=15)
    before = kuzu_brain.activation("fact:acme-renewal")

    out = await tools["recall"].acall(query="Acme renewal")

    assert out.content.startswith("1. [fact:acme-renewal] (fact, hot) Acme renews on March 14")
    assert "why: matched 'acme'" in out.content
    assert kuzu_brain.activation("fact:acme-renewal") > before
    assert tools["recall"].call(query="zebra").content == "No memories found."


def test_recall_without_reinforcement(kuzu_brain: Brain, clock: FixedClock) -> None:
    kuzu_brain.remember("Acme renews on March 14", kind="fact", id="fact:acme-renewal")
    clock.advance(days=15)
    before = kuzu_brain.activation("fact:acme-renewal")
    recall = EbbToolSpec(kuzu_brain, reinforce=False).to_tool_list(["recall"])[0]

    recall.call(query="Acme")

    assert kuzu_brain.activation("fact:acme-renewal") == before


def test_recall_reaches_archived_memories_on_request(
    kuzu_brain: Brain, clock: FixedClock, tools: dict[str, FunctionTool]
) -> None:
    kuzu_brain.remember("Globex asked about seat licences", id="note:globex")
    clock.advance(days=100)
    kuzu_brain.remember("Fresh note that keeps the namespace active")
    kuzu_brain.maintain()
    assert kuzu_brain.get("note:globex").tier in (Tier.WARM, Tier.COLD)

    # nothing hot matches: recall falls through to the archived memory, and says so
    found = tools["recall"].call(query="Globex").content
    assert "note:globex" in found and "no hot memory scored as high" in found
    assert "note:globex" in tools["recall"].call(query="Globex", include_archived=True).content
    assert "No memories" in tools["recall"].call(query="zeppelin").content


def test_connect_links_two_memories(kuzu_brain: Brain, tools: dict[str, FunctionTool]) -> None:
    kuzu_brain.remember("Acme Corp", kind="client", id="client:acme")
    kuzu_brain.remember("Dana", kind="person", id="person:dana")

    out = tools["connect"].call(src="person:dana", dst="client:acme", kind="works_on")

    assert out.content == "Linked person:dana -works_on-> client:acme."
    [link] = kuzu_brain.neighbors("person:dana")
    assert (link.node.id, link.edge.kind) == ("client:acme", "works_on")
    with pytest.raises(NotFound):
        tools["connect"].call(src="person:dana", dst="client:nobody")


def test_forget_only_queues_for_human_review(
    kuzu_brain: Brain, tools: dict[str, FunctionTool]
) -> None:
    kuzu_brain.remember("Acme renews on March 1", kind="fact", id="fact:old-date")

    out = tools["forget"].call(id="fact:old-date", reason="the date was wrong")

    assert "review queue" in out.content
    assert [i.id for i in kuzu_brain.review_queue()] == ["fact:old-date"]
    assert kuzu_brain.get("fact:old-date").text == "Acme renews on March 1"  # still stored
    assert "No memories" in tools["recall"].call(query="Acme").content
    [entry] = kuzu_brain.audit_log(action="forget")
    assert (entry.actor, entry.reason) == ("agent", "the date was wrong")


async def test_an_agent_uses_the_tools_and_sees_errors_as_tool_output(kuzu_brain: Brain) -> None:
    script = iter(
        [
            ("remember", {"text": "Dana looks after Acme", "kind": "fact", "id": "fact:dana"}),
            ("connect", {"src": "fact:dana", "dst": "client:nobody"}),
            ("forget", {"id": "fact:dana", "reason": "test"}),
        ]
    )

    def fake_model(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        """A scripted fake: one tool call per step, then a final answer."""
        step = next(script, None)
        if step is None:
            return ChatMessage(role=MessageRole.ASSISTANT, content="done")
        name, args = step
        call = ToolCallBlock(tool_call_id=f"fake-{name}", tool_name=name, tool_kwargs=args)
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])

    agent = FunctionAgent(
        tools=[*EbbToolSpec(kuzu_brain).to_tool_list()],
        llm=MockFunctionCallingLLM(response_generator=fake_model),
    )
    handler = agent.run("go")
    results = [ev async for ev in handler.stream_events() if isinstance(ev, ToolCallResult)]
    assert str(await handler) == "done"

    assert [(r.tool_name, r.tool_output.is_error) for r in results] == [
        ("remember", False),
        ("connect", True),
        ("forget", False),
    ]
    assert "client:nobody" in results[1].tool_output.content
    assert [i.id for i in kuzu_brain.review_queue()] == ["fact:dana"]


def test_remember_supersedes_and_recall_marks_the_outdated(
    kuzu_brain: Brain, tools: dict[str, FunctionTool]
) -> None:
    tools["remember"].call(text="Invoices go out monthly", kind="policy", id="policy:invoices")
    out = tools["remember"].call(
        text="Invoices go out weekly", kind="policy", supersedes=["policy:invoices"]
    )
    assert "superseding policy:invoices" in out.content and not out.is_error
    text = tools["recall"].call(query="invoices go out").content
    lines = text.split("\n")
    assert "weekly" in lines[0] and "OUTDATED" not in lines[0]
    assert "OUTDATED: superseded by" in lines[2] and "policy:invoices" in lines[2]
    tools["remember"].call(text="Invoices go out every 30 days", id="policy:invoices")
    assert kuzu_brain.get("policy:invoices").kind == "policy"
    assert len(kuzu_brain.history("policy:invoices")) == 2
