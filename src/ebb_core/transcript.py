"""``Transcript``: one conversation kept as memories, written the same way by every adapter.

A session's turns are memories of kind ``message`` with ids ``message:<session>:<n>`` (``n`` from
0, six digits), each linked to the turn before it (``follows``) and to the live memories it
mentions (``mentions``, see :meth:`Brain.mentioned_in`). One ``session:<session>`` memory keeps
the count. Every turn carries the props ``role``, ``session_id`` and ``index``; an adapter may
add its own (LangChain keeps its exact message so it comes back unchanged).

LangChain's ``EbbChatMessageHistory`` and LlamaIndex's ``EbbMemoryBlock`` both write through
here, so a conversation written through one is read by the other.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import InvalidInput, NotFound
from .model import Node, Tier
from .validation import id_problem

if TYPE_CHECKING:
    from .engine import Brain

MESSAGE_KIND = "message"
SESSION_KIND = "session"
MAX_ROLE_LEN = 40


@dataclass(frozen=True)
class Turn:
    """One message to append: its text, who said it, and props an adapter keeps beside them.

    ``role`` is ``user``, ``assistant``, ``system``, ``tool`` or a framework's own (one word).

    ``context`` is further text searched for mentions but not stored as the memory's text
    (e.g. the arguments of a model's tool calls).
    """

    text: str
    role: str = "user"
    props: Mapping[str, Any] = field(default_factory=dict)
    context: str = ""


class Transcript:
    """The turns of one session of ``brain``, in order.

    ``append`` writes a batch of turns as one unit of work: all of them (with the session's
    count and every link) or none. Reading returns the live turns in order and reinforces them
    unless ``reinforce=False``; turns forgotten into the review queue drop out.
    """

    def __init__(
        self,
        brain: Brain,
        session: str,
        *,
        message_kind: str = MESSAGE_KIND,
        session_kind: str = SESSION_KIND,
        link_mentions: bool = True,
    ) -> None:
        if not isinstance(session, str) or not session:
            raise InvalidInput("a session id must be a non-empty string", field="session_id")
        problem = id_problem(f"{session_kind}:{session}")
        if problem is not None:
            raise InvalidInput(
                f"session id {session!r} cannot name memories: {problem}", field="session_id"
            )
        self.brain = brain
        self.session_id = session
        self.message_kind = message_kind
        self.session_kind = session_kind
        self.session_node_id = f"{session_kind}:{session}"
        self.link_mentions = link_mentions
        self._lock = threading.Lock()

    def message_id(self, index: int) -> str:
        """The memory id of the ``index``-th turn (from 0) of this session."""
        return f"{self.message_kind}:{self.session_id}:{index:06d}"

    # -- reading -------------------------------------------------------------------------------
    def count(self) -> int:
        """How many turns were ever appended (forgotten ones included: ids are never reused)."""
        session = self._session()
        return _count(session)

    def messages(self, *, reinforce: bool = True) -> list[Node]:
        """The session's live turns in order (reinforced unless ``reinforce=False``)."""
        ids = [self.message_id(i) for i in range(self.count())]
        return self.brain.read(ids, reinforce=reinforce) if ids else []

    def _session(self) -> Node | None:
        try:
            return self.brain.get(self.session_node_id)
        except NotFound:
            return None

    # -- writing -------------------------------------------------------------------------------
    def append(self, turns: Sequence[Turn]) -> list[Node]:
        """Append ``turns`` as one unit of work; returns their memories in order."""
        for turn in turns:
            if not isinstance(turn.text, str) or not turn.text.strip():
                raise InvalidInput("a turn needs text (the memory's text)", field="text")
            role = turn.role
            if (
                not isinstance(role, str)
                or not role
                or len(role) > MAX_ROLE_LEN
                or (any(c.isspace() for c in role))
            ):
                raise InvalidInput(
                    f"role {role!r} is not a role: one word such as 'user' or 'assistant'",
                    field="role",
                )
        if not turns:
            return []
        brain = self.brain
        with self._lock, brain.batch():
            session = self._session()
            start = _count(session)
            if session is not None and session.tier == Tier.FROZEN:
                # Resuming a session that decayed into the review queue brings it back.
                brain.restore(self.session_node_id, actor="agent")
            brain.remember(
                f"chat session {self.session_id}",
                kind=self.session_kind,
                id=self.session_node_id,
                props={"session_id": self.session_id, "messages": start + len(turns)},
            )
            previous = self.message_id(start - 1) if start else None
            if previous is not None and not brain.read([previous], reinforce=False):
                previous = None  # forgotten or deleted since: no order link to it
            out = []
            for offset, turn in enumerate(turns):
                index = start + offset
                mid = self.message_id(index)
                props = dict(turn.props)
                props.update(role=turn.role, session_id=self.session_id, index=index)
                node = brain.remember(
                    turn.text,
                    kind=self.message_kind,
                    id=mid,
                    props=props,
                    links=self._mentioned(turn, mid),
                    link_kind="mentions",
                )
                if previous is not None:
                    brain.connect(mid, previous, kind="follows")
                previous = mid
                out.append(node)
            return out

    def _mentioned(self, turn: Turn, own_id: str) -> list[str]:
        if not self.link_mentions:
            return []
        text = f"{turn.text} {turn.context}".strip()
        nodes = self.brain.mentioned_in(text, exclude_kinds=[self.message_kind, self.session_kind])
        return [n.id for n in nodes if n.id != own_id]

    def clear(self, *, reason: str = "chat history cleared", actor: str = "agent") -> int:
        """Forget every live turn: hidden at once, kept for human review. Returns how many.

        Pinned turns stay (a person pinned them; a person must unpin them).
        """
        with self._lock, self.brain.batch():
            forgotten = 0
            for node in self.messages(reinforce=False):
                if not node.pinned:
                    self.brain.forget(node.id, reason, actor=actor)
                    forgotten += 1
            return forgotten


def _count(session: Node | None) -> int:
    return int(session.props.get("messages", 0)) if session else 0
