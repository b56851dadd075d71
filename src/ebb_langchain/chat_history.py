"""``EbbChatMessageHistory``: a conversation kept as memories, so its turns decay and recall."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, message_to_dict, messages_from_dict
from langchain_core.runnables.config import run_in_executor

from ebb_core import Brain, Node, NotFound, Tier

from ._convert import view

MESSAGE_KIND = "message"
SESSION_KIND = "session"


class EbbChatMessageHistory(BaseChatMessageHistory):
    """The messages of one chat session, kept in an Ebb :class:`~ebb_core.Brain`.

    Every message is a memory of kind ``message`` (id ``message:<session>:<n>``) linked to the
    one before it (``follows``) and to the memories it mentions by id or by name (``mentions``,
    see :meth:`~ebb_core.Brain.mentioned_in`), so turns take part in decay and recall like any
    other memory. A ``session:<session>`` memory keeps the count. Reading the history reinforces
    its messages (``reinforce=False`` to just look); messages that decayed or were forgotten into
    the review queue drop out of it.

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
        self.session_id = session_id
        self.reinforce = reinforce
        self.session_node_id = f"{SESSION_KIND}:{session_id}"
        self._lock = threading.Lock()

    def message_id(self, index: int) -> str:
        """The memory id of the ``index``-th message (from 0) of this session."""
        return f"{MESSAGE_KIND}:{self.session_id}:{index:06d}"

    # -- reading ---------------------------------------------------------------------------------
    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's messages in order (reinforcing them unless ``reinforce=False``)."""
        count = self._count()
        nodes = self.brain.read(
            [self.message_id(i) for i in range(count)], reinforce=self.reinforce
        )
        return [_to_message(n) for n in nodes if "message" in n.props]

    async def aget_messages(self) -> list[BaseMessage]:
        return await run_in_executor(None, lambda: self.messages)

    def _session(self) -> Node | None:
        try:
            return self.brain.get(self.session_node_id)
        except NotFound:
            return None

    def _count(self, session: Node | None = None) -> int:
        session = session or self._session()
        return int(session.props.get("messages", 0)) if session else 0

    # -- writing ---------------------------------------------------------------------------------
    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append messages: each becomes a memory linked to the previous one and its mentions."""
        if not messages:
            return
        with self._lock:
            session = self._session()
            start = self._count(session)
            if session is not None and session.tier == Tier.FROZEN:
                # Resuming a session that decayed into the review queue brings it back.
                self.brain.restore(self.session_node_id, actor="agent")
            # Reserve the ids first: a failure half-way leaves a gap, never a reused id.
            self.brain.remember(
                f"chat session {self.session_id}",
                kind=SESSION_KIND,
                id=self.session_node_id,
                props={"session_id": self.session_id, "messages": start + len(messages)},
            )
            previous = self.message_id(start - 1) if start else None
            for offset, message in enumerate(messages):
                mid = self.message_id(start + offset)
                text, props = _to_memory(message)
                props.update(session_id=self.session_id, index=start + offset)
                mentions = [i for i in self._mentioned(message, text) if i != mid]
                self.brain.remember(
                    text,
                    kind=MESSAGE_KIND,
                    id=mid,
                    props=props,
                    links=mentions,
                    link_kind="mentions",
                )
                if previous is not None and self.brain.read([previous], reinforce=False):
                    self.brain.connect(mid, previous, kind="follows")
                previous = mid

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await run_in_executor(None, self.add_messages, messages)

    def _mentioned(self, message: BaseMessage, text: str) -> list[str]:
        """Ids of live memories the message mentions (its text and its tool-call arguments)."""
        if isinstance(message, AIMessage) and message.tool_calls:
            text += " " + " ".join(json.dumps(c["args"]) for c in message.tool_calls)
        nodes = self.brain.mentioned_in(text, exclude_kinds=[MESSAGE_KIND, SESSION_KIND])
        return [n.id for n in nodes]

    def clear(self) -> None:
        """Forget every message of the session: hidden at once, kept for human review.

        Pinned messages stay (a person pinned them; a person must unpin them).
        """
        with self._lock:
            ids = [self.message_id(i) for i in range(self._count())]
            for node in self.brain.read(ids, reinforce=False):
                if not node.pinned:
                    self.brain.forget(node.id, "chat history cleared", actor="agent")

    async def aclear(self) -> None:
        await run_in_executor(None, self.clear)


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
    data = copy.deepcopy(node.props["message"])
    if node.props.get("content_in_text"):
        data["data"]["content"] = node.text
    return messages_from_dict([data])[0]
