"""``EbbMemoryBlock``: Ebb as a long-term memory block of LlamaIndex's ``Memory``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.base.llms.types import ContentBlock, TextBlock
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms import ChatMessage
from llama_index.core.memory import BaseMemoryBlock
from llama_index.core.utils import get_tokenizer

from ebb_core import Brain, RecallHit, Transcript, Turn

from ._nodes import message_text, query_from

DEFAULT_TEMPLATE = "- [{id}] {text}"


class EbbMemoryBlock(BaseMemoryBlock[list[ContentBlock]]):
    """A memory block for ``llama_index.core.memory.Memory`` backed by a :class:`~ebb_core.Brain`.

    Messages that ``Memory`` flushes out of its short-term queue are appended to the session's
    :class:`~ebb_core.Transcript` (the ``Memory``'s ``session_id``, else ``session_id`` here):
    memories of kind ``message_kind`` with ids ``message:<session>:<n>``, each linked to the one
    before it in the same session (``follows``) and to the memories it mentions (``mentions``,
    see :meth:`Brain.mentioned_in`); one flush is one transaction. LangChain's
    ``EbbChatMessageHistory`` writes the same transcript, so either reads what the other wrote.
    When
    ``Memory`` is read, the block recalls the ``k`` memories most relevant to the latest
    messages, reinforces them (unless ``reinforce=False``) and returns one text block per
    memory, best first, formatted with ``template`` (fields ``id``, ``kind``, ``text``,
    ``tier``, ``score``, ``why``).

    Priority and truncation follow ``Memory``: ``priority=0`` keeps the block whole; any other
    priority lets ``Memory`` truncate it when memory blocks and chat history together exceed
    the token limit (lower numbers first), and the block then drops its least relevant
    memories first. What was recalled was reinforced even if truncation later dropped it.

    >>> memory = Memory.from_defaults(session_id="s1", token_limit=4000,
    ...                               memory_blocks=[EbbMemoryBlock(brain=brain)])
    ... # doctest: +SKIP
    """

    name: str = Field(default="ebb_memory", description="The name of the memory block.")
    description: str | None = Field(
        default="Long-term memories recalled from Ebb, most relevant first.",
        description="A description of the memory block.",
    )
    priority: int = Field(
        default=1,
        description="0 = never truncate; otherwise Memory truncates lower numbers first.",
    )
    brain: Brain = Field(exclude=True, description="The Ebb brain (namespace) to use.")
    embed_model: Any = Field(
        default=None,
        exclude=True,
        description="A LlamaIndex BaseEmbedding (or any embedder Ebb takes) to recall by "
        "meaning too; set on the brain. None keeps the brain's own.",
    )
    k: int = Field(default=5, ge=1, le=1000, description="How many memories to recall.")
    depth: int | None = Field(
        default=None,
        ge=1,
        le=3,
        description="A limit: 1 hot, 2 adds warm, 3 adds cold; None searches every live "
        "tier, hot first.",
    )
    kinds: list[str] = Field(default_factory=list, description="Recall only these kinds.")
    reinforce: bool = Field(default=True, description="Reinforce what is recalled.")
    query_messages: int = Field(
        default=3, ge=1, description="How many of the latest messages form the recall query."
    )
    message_kind: str = Field(default="message", description="Kind of stored chat messages.")
    session_id: str = Field(
        default="default",
        description="The transcript session of messages that Memory did not tag with its own.",
    )
    roles: list[str] = Field(
        default_factory=lambda: ["user", "assistant"],
        description="Roles whose flushed messages are stored (tool output is not, by default).",
    )
    link_mentions: bool = Field(
        default=True, description="Link each stored message to the memories it mentions."
    )
    template: str = Field(default=DEFAULT_TEMPLATE, description="Format of one recalled memory.")
    tokenizer_fn: Callable[[str], list[Any]] = Field(
        default_factory=get_tokenizer,
        exclude=True,
        description="Counts tokens when truncating (the same default as Memory's).",
    )

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        if self.embed_model is not None:
            self.brain.set_embedder(self.embed_model)

    async def _aget(
        self, messages: list[ChatMessage] | None = None, **block_kwargs: Any
    ) -> list[ContentBlock]:
        query = query_from(messages or [], self.query_messages)
        if not query:
            return []
        hits = await asyncio.to_thread(self._recall, query)
        return [TextBlock(text=self._format(hit)) for hit in hits]

    async def _aput(self, messages: list[ChatMessage]) -> None:
        if messages:
            await asyncio.to_thread(self._store, messages)

    async def atruncate(
        self, content: list[ContentBlock], tokens_to_truncate: int
    ) -> list[ContentBlock] | None:
        """Drop the least relevant memories (the last blocks) until enough tokens are freed."""
        kept = list(content)
        freed = 0
        while kept and freed < tokens_to_truncate:
            block = kept.pop()
            if isinstance(block, TextBlock):
                freed += len(self.tokenizer_fn(block.text))
        return kept or None

    def _recall(self, query: str) -> list[RecallHit]:
        return self.brain.recall(
            query, self.k, depth=self.depth, kinds=self.kinds, reinforce=self.reinforce
        )

    def _format(self, hit: RecallHit) -> str:
        node = hit.node
        return self.template.format(
            id=node.id,
            kind=node.kind,
            text=node.text,
            tier=node.tier.label,
            score=hit.score,
            why=hit.why.summary,
        )

    def _store(self, messages: Sequence[ChatMessage]) -> None:
        sessions: dict[str, list[Turn]] = {}
        for message in messages:
            text = message_text(message)
            if not text or message.role.value not in self.roles:
                continue
            session = str(message.additional_kwargs.get("session_id") or self.session_id)
            sessions.setdefault(session, []).append(Turn(text, role=message.role.value))
        for session, turns in sessions.items():
            Transcript(
                self.brain,
                session,
                message_kind=self.message_kind,
                link_mentions=self.link_mentions,
            ).append(turns)
