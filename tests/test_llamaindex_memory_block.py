"""EbbMemoryBlock inside a real llama_index.core.memory.Memory, and Brain.mentioned_in under it."""

from __future__ import annotations

import pytest
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.memory import BaseMemoryBlock, Memory
from llama_index.core.storage.chat_store.base_db import MessageStatus
from llama_index.core.utils import get_tokenizer

from ebb_core import Brain, FixedClock, Node
from ebb_llamaindex import EbbMemoryBlock

FACT = "fact:acme-renewal"


@pytest.fixture
def brain(kuzu_brain: Brain) -> Brain:
    kuzu_brain.remember("Acme Corp, a logistics client", kind="client", id="client:acme")
    kuzu_brain.remember(
        "Acme renews its contract on March 14", kind="fact", id=FACT, links=["client:acme"]
    )
    return kuzu_brain


def user(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


def messages_in(brain: Brain) -> list[Node]:
    return sorted(brain.top(100, kinds=["message"]), key=lambda n: n.id)


def links(brain: Brain, id: str, kind: str) -> list[str]:
    return sorted(
        n.node.id for n in brain.neighbors(id) if n.edge.kind == kind and n.edge.src == id
    )


def test_is_a_memory_block(brain: Brain) -> None:
    block = EbbMemoryBlock(brain=brain)
    assert isinstance(block, BaseMemoryBlock)
    assert block.name == "ebb_memory" and block.priority == 1


async def test_flushed_messages_become_memories_linked_in_order_and_to_what_they_mention(
    brain: Brain,
) -> None:
    memory = Memory.from_defaults(
        session_id="s1", token_limit=60, memory_blocks=[EbbMemoryBlock(brain=brain)]
    )
    turns = [
        user("Hello there, I am Dana from the sales team"),
        assistant("Nice to meet you Dana"),
        user("Acme called about the renewal, see fact:acme-renewal"),
        assistant("Noted, I will keep that in mind"),
        user("Bye for now, talk tomorrow"),
        assistant("Goodbye"),
    ]
    for message in turns:
        await memory.aput(message)

    stored = messages_in(brain)
    active = await memory.aget_all(status=MessageStatus.ACTIVE)
    assert len(stored) >= 3, "the small token limit should have flushed the first turns"
    assert len(stored) + len(active) == len(turns)
    by_text = {n.text: n for n in stored}
    first, second, third = (by_text[m.content or ""] for m in turns[:3])
    assert first.props == {"role": "user", "session_id": "s1", "index": 0}
    assert second.props == {"role": "assistant", "session_id": "s1", "index": 1}
    assert (first.id, second.id) == ("message:s1:000000", "message:s1:000001")
    assert links(brain, second.id, "follows") == [first.id]
    assert links(brain, third.id, "follows") == [second.id]
    # The third message names the fact by id and Acme by the words of its id.
    assert links(brain, third.id, "mentions") == ["client:acme", FACT]
    assert links(brain, first.id, "mentions") == []


async def test_order_links_carry_across_flushes_and_sessions_stay_apart(brain: Brain) -> None:
    block = EbbMemoryBlock(brain=brain)

    await block.aput([user("first note about Acme")], session_id="a")
    await block.aput([user("second note, other session")], session_id="b")
    await block.aput([assistant("third note about Acme")], session_id="a")

    by_text = {n.text: n.id for n in messages_in(brain)}
    assert links(brain, by_text["third note about Acme"], "follows") == [
        by_text["first note about Acme"]
    ]
    assert links(brain, by_text["second note, other session"], "follows") == []


async def test_no_order_link_to_a_message_forgotten_in_between(brain: Brain) -> None:
    block = EbbMemoryBlock(brain=brain)
    await block.aput([user("first note about Acme")], session_id="a")
    [first] = messages_in(brain)
    brain.forget(first.id, "not needed")

    await block.aput([user("second note about Acme")], session_id="a")

    [second] = messages_in(brain)
    assert second.text == "second note about Acme"
    assert links(brain, second.id, "follows") == []


async def test_repeated_messages_stay_separate_memories(brain: Brain) -> None:
    block = EbbMemoryBlock(brain=brain)

    await block.aput([user("thanks"), assistant("welcome"), user("thanks")])

    stored = messages_in(brain)
    assert sorted(n.text for n in stored) == ["thanks", "thanks", "welcome"]
    assert all(n.id.startswith("message:") for n in stored)


async def test_only_text_from_the_chosen_roles_is_stored(brain: Brain) -> None:
    block = EbbMemoryBlock(brain=brain)

    await block.aput(
        [
            ChatMessage(role=MessageRole.TOOL, content="1. [fact:x] tool output"),
            ChatMessage(role=MessageRole.ASSISTANT, content=""),
            ChatMessage(role=MessageRole.SYSTEM, content="You are helpful"),
            user("the only one worth storing"),
        ]
    )

    assert [n.text for n in messages_in(brain)] == ["the only one worth storing"]


async def test_reading_memory_recalls_what_the_latest_messages_are_about_and_reinforces_it(
    brain: Brain, clock: FixedClock
) -> None:
    clock.advance(days=20)
    before = brain.activation(FACT)
    memory = Memory.from_defaults(
        session_id="s1", token_limit=2000, memory_blocks=[EbbMemoryBlock(brain=brain, k=2)]
    )
    await memory.aput(user("When does Acme renew its contract?"))

    chat = await memory.aget()

    assert chat[0].role == MessageRole.SYSTEM
    system = chat[0].content or ""
    assert "<ebb_memory>" in system
    assert f"- [{FACT}] Acme renews its contract on March 14" in system
    assert system.index(FACT) < system.index("- [client:acme]")
    assert chat[1].content == "When does Acme renew its contract?"
    assert brain.activation(FACT) > before


async def test_reinforcement_can_be_switched_off(brain: Brain, clock: FixedClock) -> None:
    clock.advance(days=20)
    before = brain.activation(FACT)
    block = EbbMemoryBlock(brain=brain, reinforce=False)

    content = await block.aget([user("Acme renewal")])

    assert content and brain.activation(FACT) == before


async def test_nothing_to_say_gives_an_empty_block(brain: Brain) -> None:
    block = EbbMemoryBlock(brain=brain)
    assert await block.aget([]) == []
    assert await block.aget([ChatMessage(role=MessageRole.ASSISTANT, content="")]) == []


async def test_template_shapes_each_memory(brain: Brain) -> None:
    block = EbbMemoryBlock(brain=brain, k=1, template="{kind}/{tier}: {text} ({id})")

    content = await block.aget([user("Acme renews")])

    assert [b.text for b in content] == [  # type: ignore[union-attr]
        f"fact/hot: Acme renews its contract on March 14 ({FACT})"
    ]


async def _seed_many(brain: Brain) -> None:
    for n in range(6):
        brain.remember(f"Acme meeting note number {n} about the renewal terms and pricing")


async def test_memory_truncates_a_prioritised_block_from_its_least_relevant_end(
    brain: Brain,
) -> None:
    await _seed_many(brain)
    block = EbbMemoryBlock(brain=brain, k=8, priority=1, reinforce=False)
    question = user("Acme renewal terms?")
    full = [b.text for b in await block.aget([question])]  # type: ignore[union-attr]
    tokens = get_tokenizer()
    needed = sum(len(tokens(t)) for t in full)
    memory = Memory.from_defaults(session_id="s1", token_limit=needed // 2, memory_blocks=[block])
    await memory.aput(question)

    system = (await memory.aget())[0].content or ""

    kept = [line for line in full if line in system]
    assert 0 < len(kept) < len(full)
    assert kept == full[: len(kept)], "the most relevant memories survive, in order"


async def test_priority_zero_is_never_truncated(brain: Brain) -> None:
    await _seed_many(brain)
    block = EbbMemoryBlock(brain=brain, k=8, priority=0, reinforce=False)
    question = user("Acme renewal terms?")
    full = [b.text for b in await block.aget([question])]  # type: ignore[union-attr]
    memory = Memory.from_defaults(session_id="s1", token_limit=40, memory_blocks=[block])
    await memory.aput(question)

    system = (await memory.aget())[0].content or ""

    assert all(line in system for line in full)


async def test_atruncate_frees_at_least_the_tokens_asked_for(brain: Brain) -> None:
    await _seed_many(brain)
    block = EbbMemoryBlock(brain=brain, k=6, reinforce=False)
    content = await block.aget([user("Acme renewal terms")])
    one = len(block.tokenizer_fn(content[-1].text))  # type: ignore[union-attr]

    assert await block.atruncate(content, one) == content[:-1]
    assert await block.atruncate(content, one + 1) == content[:-2]
    assert await block.atruncate(content, 10_000) is None
    assert await block.atruncate([], 5) is None


# -- Brain.mentioned_in, which the block relies on -------------------------------------------
def test_mentioned_in_finds_ids_and_slug_phrases_without_reinforcing(
    brain: Brain, clock: FixedClock
) -> None:
    brain.remember("We price by outcome now", kind="decision", id="decision:outcome-pricing")
    clock.advance(days=5)
    before = brain.activation("client:acme")

    found = brain.mentioned_in(
        "Did Acme's team accept outcome pricing? (see fact:acme-renewal, fact:missing)"
    )

    assert found[0].id == FACT, "ids written in the text come first"
    assert {n.id for n in found} == {FACT, "client:acme", "decision:outcome-pricing"}
    assert brain.activation("client:acme") == before


def test_mentioned_in_skips_excluded_kinds_frozen_memories_and_stop_word_slugs(
    brain: Brain,
) -> None:
    brain.remember("the", kind="note", id="note:the")
    brain.forget(FACT, "wrong date")

    assert brain.mentioned_in("the Acme thing, fact:acme-renewal") == [brain.get("client:acme")]
    assert brain.mentioned_in("Acme", exclude_kinds=["client"]) == []
    assert brain.mentioned_in("") == []
