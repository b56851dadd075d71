"""EbbChatMessageHistory: sessions kept as linked memories that decay, recall and reinforce."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from ebb_core import Brain, FixedClock, Tier
from ebb_langchain import EbbChatMessageHistory

CONVERSATION: list[BaseMessage] = [
    SystemMessage("You are a helpful assistant."),
    HumanMessage("When does client:acme renew?"),
    AIMessage(
        "",
        tool_calls=[{"name": "recall", "args": {"query": "acme renewal"}, "id": "call-1"}],
    ),
    ToolMessage("[fact:acme-renewal] Acme renews in June", tool_call_id="call-1"),
    AIMessage("Acme renews in June (fact:acme-renewal)."),
    HumanMessage(content=[{"type": "text", "text": "Thanks!"}]),
]


@pytest.fixture
def brain(kuzu_brain: Brain) -> Brain:
    kuzu_brain.remember("Acme Corp, our biggest client", kind="client", id="client:acme")
    kuzu_brain.remember("Acme renews in June", kind="fact", id="fact:acme-renewal")
    return kuzu_brain


def test_messages_round_trip_in_order(brain: Brain) -> None:
    history = EbbChatMessageHistory(brain, "s1")
    assert history.messages == []
    history.add_messages(CONVERSATION[:3])
    history.add_messages(CONVERSATION[3:])
    assert history.messages == CONVERSATION
    assert EbbChatMessageHistory(brain, "s2").messages == []


def test_messages_survive_reopening_the_store(tmp_path: Path, clock: FixedClock) -> None:
    path = tmp_path / "chat.kuzu"
    with Brain.open(path, namespace="u1", clock=clock) as first:
        EbbChatMessageHistory(first, "s1").add_messages(CONVERSATION)
    with Brain.open(path, namespace="u1", clock=clock) as second:
        assert EbbChatMessageHistory(second, "s1").messages == CONVERSATION


def test_messages_are_memories_linked_in_order_and_to_what_they_mention(brain: Brain) -> None:
    history = EbbChatMessageHistory(brain, "s1")
    history.add_messages(CONVERSATION)
    first_question = brain.get(history.message_id(1))
    assert first_question.kind == "message"
    assert first_question.text == "When does client:acme renew?"
    assert first_question.props["session_id"] == "s1"

    def links(i: int) -> set[tuple[str, str]]:
        mid = history.message_id(i)
        return {(n.edge.kind, n.node.id) for n in brain.neighbors(mid) if n.edge.src == mid}

    assert links(0) == set()
    assert links(1) == {("follows", history.message_id(0)), ("mentions", "client:acme")}
    # By id, and by name: "Acme" is the name in client:acme's id.
    acme = {("mentions", "fact:acme-renewal"), ("mentions", "client:acme")}
    assert links(3) == {("follows", history.message_id(2))} | acme
    assert links(4) == {("follows", history.message_id(3))} | acme
    assert links(5) == {("follows", history.message_id(4))}
    assert brain.neighbors("session:s1") == []  # the session keeps count; it is not a hub


def test_only_live_memories_count_as_mentions(brain: Brain) -> None:
    brain.forget("fact:acme-renewal", "wrong")
    brain.forget("client:acme", "gone")
    history = EbbChatMessageHistory(brain, "s1")
    history.add_messages([HumanMessage("Is fact:acme-renewal or note:nowhere right about Acme?")])
    assert brain.neighbors(history.message_id(0)) == []


def test_a_message_naming_a_memory_links_to_it(brain: Brain) -> None:
    history = EbbChatMessageHistory(brain, "s1")
    history.add_messages([HumanMessage("How is Acme doing these days?")])
    linked = [(n.edge.kind, n.node.id) for n in brain.neighbors(history.message_id(0))]
    assert linked == [("mentions", "client:acme")]


def test_turns_take_part_in_recall(brain: Brain) -> None:
    EbbChatMessageHistory(brain, "s1").add_messages(
        [HumanMessage("Our Globex contact prefers email over calls")]
    )
    hits = brain.recall("Globex contact")
    assert [h.id for h in hits] == ["message:s1:000000"]
    assert hits[0].node.kind == "message"


def test_reading_the_history_raises_activation(brain: Brain, clock: FixedClock) -> None:
    history = EbbChatMessageHistory(brain, "s1")
    history.add_messages(CONVERSATION[:2])
    clock.advance(days=10)
    ids = [history.message_id(0), history.message_id(1)]
    before = [brain.activation(i) for i in ids]
    unrelated = brain.activation("fact:acme-renewal")
    assert len(history.messages) == 2
    after = [brain.activation(i) for i in ids]
    assert all(a > b for a, b in zip(after, before, strict=True))
    assert brain.activation("fact:acme-renewal") == pytest.approx(unrelated)


def test_reinforce_switch_off_leaves_activation(brain: Brain, clock: FixedClock) -> None:
    EbbChatMessageHistory(brain, "s1").add_messages(CONVERSATION[:2])
    clock.advance(days=10)
    looker = EbbChatMessageHistory(brain, "s1", reinforce=False)
    before = brain.activation(looker.message_id(0))
    assert len(looker.messages) == 2
    assert brain.activation(looker.message_id(0)) == pytest.approx(before)


def test_clear_forgets_into_the_review_queue(brain: Brain) -> None:
    history = EbbChatMessageHistory(brain, "s1")
    history.add_messages(CONVERSATION[:3])
    brain.pin(history.message_id(0))
    history.clear()
    assert history.messages == [CONVERSATION[0]]  # a pinned message stays until a person unpins
    queued = {item.id for item in brain.review_queue()}
    assert queued == {history.message_id(1), history.message_id(2)}
    assert brain.get(history.message_id(1)).tier == Tier.FROZEN  # kept, not deleted
    history.add_messages([HumanMessage("Starting over")])
    assert history.messages == [CONVERSATION[0], HumanMessage("Starting over")]
    assert history.message_id(3) == "message:s1:000003"
    assert brain.get(history.message_id(3)).text == "Starting over"


def test_a_session_that_froze_resumes(brain: Brain) -> None:
    history = EbbChatMessageHistory(brain, "s1")
    history.add_messages(CONVERSATION[:2])
    brain.forget("session:s1", "stale")
    history.add_messages([HumanMessage("I am back")])
    assert brain.get("session:s1").tier == Tier.HOT
    assert [m.text for m in history.messages][-1] == "I am back"


def test_namespace_keeps_sessions_apart(brain: Brain) -> None:
    EbbChatMessageHistory(brain, "s1", namespace="alice").add_messages([HumanMessage("hi")])
    assert EbbChatMessageHistory(brain, "s1").messages == []
    assert EbbChatMessageHistory(brain, "s1", namespace="alice").messages == [HumanMessage("hi")]


async def test_async_methods(brain: Brain, clock: FixedClock) -> None:
    history = EbbChatMessageHistory(brain, "s1")
    await history.aadd_messages(CONVERSATION[:2])
    clock.advance(days=5)
    before = brain.activation(history.message_id(1))
    assert await history.aget_messages() == CONVERSATION[:2]
    assert brain.activation(history.message_id(1)) > before
    await history.aclear()
    assert await history.aget_messages() == []
    assert len(brain.review_queue()) == 2


def test_works_with_runnable_with_message_history(brain: Brain) -> None:
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )

    def count_turns(messages: list[BaseMessage]) -> AIMessage:
        return AIMessage(f"I can see {len(messages)} messages.")

    chain = prompt | RunnableLambda(lambda value: count_turns(value.to_messages()))
    with pytest.warns(DeprecationWarning):  # LangChain marks the runnable deprecated in 1.x
        with_history = RunnableWithMessageHistory(
            chain,
            lambda session_id: EbbChatMessageHistory(brain, session_id),
            input_messages_key="question",
            history_messages_key="history",
        )
    config: RunnableConfig = {"configurable": {"session_id": "s9"}}
    first = with_history.invoke({"question": "Hello"}, config=config)
    second = with_history.invoke({"question": "Still there?"}, config=config)
    assert first.content == "I can see 1 messages."
    assert second.content == "I can see 3 messages."
    stored = EbbChatMessageHistory(brain, "s9").messages
    assert [m.content for m in stored] == [
        "Hello",
        "I can see 1 messages.",
        "Still there?",
        "I can see 3 messages.",
    ]
    assert [m.type for m in stored] == ["human", "ai", "human", "ai"]
