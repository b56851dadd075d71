"""Transcript: one conversation model for every adapter, written one batch per transaction."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from llama_index.core.llms import ChatMessage, MessageRole

from ebb_core import Brain, InvalidInput, NotFound, Transcript, Turn
from ebb_langchain import EbbChatMessageHistory
from ebb_llamaindex import EbbMemoryBlock


@pytest.fixture
def seeded(brain: Brain) -> Brain:
    brain.remember("Acme Corp, a logistics client", kind="client", id="client:acme")
    return brain


def follows(brain: Brain, id: str) -> list[str]:
    return [n.node.id for n in brain.neighbors(id) if n.edge.kind == "follows" and n.edge.src == id]


def test_turns_are_numbered_linked_in_order_and_to_what_they_mention(seeded: Brain) -> None:
    chat = Transcript(seeded, "s1")
    chat.append([Turn("Hello, I am Dana"), Turn("Hi Dana", role="assistant")])
    chat.append([Turn("Acme called about the renewal")])

    nodes = chat.messages(reinforce=False)
    assert [n.id for n in nodes] == ["message:s1:000000", "message:s1:000001", "message:s1:000002"]
    assert [n.props["role"] for n in nodes] == ["user", "assistant", "user"]
    assert [n.props["index"] for n in nodes] == [0, 1, 2]
    assert all(n.props["session_id"] == "s1" for n in nodes)
    assert follows(seeded, "message:s1:000002") == ["message:s1:000001"]
    assert follows(seeded, "message:s1:000000") == []
    mentions = [
        n.node.id for n in seeded.neighbors("message:s1:000002") if n.edge.kind == "mentions"
    ]
    assert mentions == ["client:acme"]
    assert chat.count() == 3 and seeded.get("session:s1").props["messages"] == 3


def test_a_batch_that_fails_half_way_leaves_nothing(seeded: Brain) -> None:
    chat = Transcript(seeded, "s1")
    chat.append([Turn("the first turn")])
    bad: dict[str, Any] = {"not json": object()}

    with pytest.raises(InvalidInput):
        chat.append([Turn("kept only with the rest"), Turn("broken", props=bad)])

    assert chat.count() == 1
    assert [n.text for n in chat.messages(reinforce=False)] == ["the first turn"]
    with pytest.raises(NotFound):
        seeded.get("message:s1:000001")
    # and the next batch takes the next number, linked to the last turn that exists
    [node] = chat.append([Turn("the second turn")])
    assert node.id == "message:s1:000001"
    assert follows(seeded, node.id) == ["message:s1:000000"]


def test_clear_forgets_live_turns_into_review_and_numbers_are_never_reused(seeded: Brain) -> None:
    chat = Transcript(seeded, "s1")
    chat.append([Turn("one"), Turn("two", role="assistant")])
    seeded.pin("message:s1:000001")

    assert chat.clear() == 1
    assert [n.text for n in chat.messages(reinforce=False)] == ["two"]
    assert [i.id for i in seeded.review_queue()] == ["message:s1:000000"]
    [three] = chat.append([Turn("three")])
    assert three.id == "message:s1:000002"


@pytest.mark.parametrize(
    ("session", "turn", "field"),
    [
        ("", Turn("x"), "session_id"),
        ("my chat", Turn("x"), "session_id"),
        ("s1", Turn("   "), "text"),
        ("s1", Turn("x", role="a role"), "role"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(
    seeded: Brain, session: str, turn: Turn, field: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        Transcript(seeded, session).append([turn])
    assert err.value.field == field
    assert seeded.top(10, kinds=["message", "session"]) == []


async def test_langchain_reads_what_llamaindex_wrote_and_back(seeded: Brain) -> None:
    block = EbbMemoryBlock(brain=seeded)
    await block.aput(
        [
            ChatMessage(role=MessageRole.USER, content="Where is Acme based?"),
            ChatMessage(role=MessageRole.ASSISTANT, content="Acme is in Rotterdam"),
        ],
        session_id="s1",
    )
    history = EbbChatMessageHistory(seeded, "s1")
    assert history.messages == [
        HumanMessage("Where is Acme based?"),
        AIMessage("Acme is in Rotterdam"),
    ]

    history.add_messages([HumanMessage("And who is our contact there?")])
    await block.aput(
        [ChatMessage(role=MessageRole.ASSISTANT, content="Dana, since March")], session_id="s1"
    )

    nodes = Transcript(seeded, "s1").messages(reinforce=False)
    assert [n.text for n in nodes] == [
        "Where is Acme based?",
        "Acme is in Rotterdam",
        "And who is our contact there?",
        "Dana, since March",
    ]
    assert follows(seeded, nodes[3].id) == [nodes[2].id]
    assert [m.content for m in history.messages][-2:] == [
        "And who is our contact there?",
        "Dana, since March",
    ]
    # and the block recalls turns that LangChain wrote
    blocks = await block.aget([ChatMessage(role=MessageRole.USER, content="contact at Acme")])
    assert any("And who is our contact there?" in b.text for b in blocks)  # type: ignore[union-attr]
