"""``EbbChatMessageHistory``: a conversation kept as memories, so its turns decay and recall."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.runnables.config import run_in_executor

from ebb_core import Brain, Node, Transcript, Turn

from ._convert import view

# LangChain's message types and the roles every Ebb transcript records.
_ROLE = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


class EbbChatMessageHistory(BaseChatMessageHistory):
    """The messages of one chat session, kept in an Ebb :class:`~ebb_core.Brain`.

    A :class:`~ebb_core.Transcript`: every message is a memory of kind ``message`` (id
    ``message:<session>:<n>``) linked to the one before it (``follows``) and to the memories it
    mentions by id or by name (``mentions``, see :meth:`~ebb_core.Brain.mentioned_in`), so turns
    take part in decay and recall like any other memory. A ``session:<session>`` memory keeps
    the count. One ``add_messages`` call is one transaction: all of its messages or none.
    Reading the history reinforces its messages (``reinforce=False`` to just look); messages
    that decayed or were forgotten into the review queue drop out of it. LlamaIndex's
    ``EbbMemoryBlock`` writes the same transcript, so either reads what the other wrote
    (messages written there come back as Human/AI/System messages with their text).

    ``clear()`` forgets the messages (they wait in the review queue for a person; nothing is
    deleted). Works with ``RunnableWithMessageHistory``::

        RunnableWithMessageHistory(chain, lambda sid: EbbChatMessageHistory(brain, sid))
    """

    def __init__(
        self,
        brain: Brain,
        session_id: str,
        *,
        namespace: str | None = None,
        reinforce: bool = True,
    ) -> None:
        super().__init__()
        self.brain = view(brain, namespace)
        self.transcript = Transcript(self.brain, session_id)
        self.session_id = session_id
        self.reinforce = reinforce
        self.session_node_id = self.transcript.session_node_id

    def message_id(self, index: int) -> str:
        """The memory id of the ``index``-th message (from 0) of this session."""
        return self.transcript.message_id(index)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's messages in order (reinforcing them unless ``reinforce=False``)."""
        return [_to_message(n) for n in self.transcript.messages(reinforce=self.reinforce)]

    async def aget_messages(self) -> list[BaseMessage]:
        return await run_in_executor(None, lambda: self.messages)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append messages: each becomes a memory linked to the previous one and its mentions."""
        self.transcript.append([_to_turn(m) for m in messages])

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await run_in_executor(None, self.add_messages, messages)

    def clear(self) -> None:
        """Forget every message of the session: hidden at once, kept for human review.

        Pinned messages stay (a person pinned them; a person must unpin them).
        """
        self.transcript.clear()

    async def aclear(self) -> None:
        await run_in_executor(None, self.clear)


def _to_turn(message: BaseMessage) -> Turn:
    """A message as a transcript turn whose props restore it exactly."""
    text, props = _to_memory(message)
    context = ""
    if isinstance(message, AIMessage) and message.tool_calls:
        context = " ".join(json.dumps(c["args"]) for c in message.tool_calls)
    return Turn(text, role=_ROLE.get(message.type, "user"), props=props, context=context)


def _to_memory(message: BaseMessage) -> tuple[str, dict[str, Any]]:
    """A message as memory text plus props that restore it exactly."""
    data = message_to_dict(message)
    content = message.content
    if isinstance(content, str) and content.strip():
        del data["data"]["content"]  # it is the memory's text: keep it once
        return content, {"message": data, "content_in_text": True}
    return _describe(message), {"message": data}


def _describe(message: BaseMessage) -> str:
    """Readable text for a message whose content is not plain text (tool calls, blocks)."""
    text = message.text.strip()
    if text:
        return text
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = ", ".join(
            f"{c['name']}({json.dumps(c['args'], ensure_ascii=False)})" for c in message.tool_calls
        )
        return f"called {calls}"
    return f"({message.type} message without text)"


def _to_message(node: Node) -> BaseMessage:
    if "message" not in node.props:  # written by another adapter: rebuilt from role and text
        role = node.props.get("role", "user")
        if role == "user":
            return HumanMessage(node.text)
        if role == "assistant":
            return AIMessage(node.text)
        if role == "system":
            return SystemMessage(node.text)
        return ChatMessage(content=node.text, role=str(role))
    data = copy.deepcopy(node.props["message"])
    if node.props.get("content_in_text"):
        data["data"]["content"] = node.text
    return messages_from_dict([data])[0]
