"""Agent tools: remember, recall, connect and forget, with schemas written for a model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from langchain_core.runnables.config import run_in_executor
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field, ValidationError

from ebb_core import Brain, EbbError

from ._convert import hit_metadata, view

KIND_PATTERN = r"^[a-z][a-z0-9_-]{0,39}$"

T = TypeVar("T")


class RememberInput(BaseModel):
    text: str = Field(
        description="The memory, as one short self-contained statement that will make sense "
        "on its own later, e.g. 'Acme's contract renews on 1 June 2026.'",
        min_length=1,
    )
    kind: str | None = Field(
        default=None,
        pattern=KIND_PATTERN,
        description="What sort of memory this is, one lowercase word: note, fact, decision, "
        "preference, person, client, meeting, task... (default: note; an existing memory "
        "keeps its kind)",
    )
    links: list[str] = Field(
        default_factory=list,
        description="Ids of existing memories this one is about or follows from (ids come "
        "from recall results, e.g. 'client:acme'). Linked memories keep each other relevant.",
    )
    id: str | None = Field(
        default=None,
        description="Only to update an existing memory: its id from recall (the old text is "
        "kept as an earlier version). Leave empty to create a new memory (an id is made "
        "for you).",
    )
    supersedes: list[str] = Field(
        default_factory=list,
        description="Ids of memories this one replaces (an outdated fact, a reversed "
        "decision): they stay, but rank below this one from now on.",
    )


class RecallInput(BaseModel):
    query: str = Field(
        description="What to look for, in a few keywords, e.g. 'Acme renewal date'.",
    )
    k: int = Field(default=5, ge=1, le=50, description="How many memories to return.")
    include_archived: bool = Field(
        default=False,
        description="Also search memories archived because they were not used for a long "
        "time. Use it only when the normal search finds nothing useful.",
    )


class ConnectInput(BaseModel):
    src_id: str = Field(description="Id of the memory the link starts from.")
    dst_id: str = Field(description="Id of the memory the link points to.")
    relation: str = Field(
        default="related",
        pattern=KIND_PATTERN,
        description="The kind of link, one lowercase word: related, supersedes, part_of, "
        "about, decided_in, works_for...",
    )


class ForgetInput(BaseModel):
    id: str = Field(description="Id of the memory to forget (from recall results).")
    reason: str = Field(
        default="",
        max_length=2000,
        description="Why it should go, for the person who reviews it: e.g. 'user says this "
        "is wrong', 'duplicate of fact:acme-renewal'.",
    )


def create_ebb_tools(
    brain: Brain,
    *,
    namespace: str | None = None,
    depth: int | None = None,
    actor: str = "agent",
    embedder: Any = None,
) -> list[BaseTool]:
    """The tools ``remember``, ``recall``, ``connect`` and ``forget`` on ``brain``.

    Errors Ebb raises on purpose (an unknown id, a memory waiting for review...) come back to
    the model as the tool's answer, so it can correct itself. ``recall`` reinforces what it
    returns and also gives the hits' metadata as the tool message's artifact. ``forget`` never
    deletes: the memory waits in the review queue for a person.

    ``embedder`` (a LangChain ``Embeddings``, a callable, ``"minilm"``) makes ``recall`` find
    memories by meaning too (set on the brain; ``None`` keeps its own).

    >>> agent = create_agent(model, create_ebb_tools(brain))   # doctest: +SKIP
    """
    if embedder is not None:
        brain.set_embedder(embedder)
    mem = view(brain, namespace)
    archive_depth = 3

    def remember(
        text: str,
        kind: str | None = None,
        links: list[str] | None = None,
        id: str | None = None,
        supersedes: list[str] | None = None,
    ) -> str:
        node = _ebb(
            lambda: mem.remember(
                text,
                kind=kind,
                id=id or None,
                links=links or (),
                supersedes=supersedes or (),
                actor=actor,
            )
        )
        linked = f", linked to {', '.join(links)}" if links else ""
        replaced = f", superseding {', '.join(supersedes)}" if supersedes else ""
        return f"Remembered {node.id} ({node.kind}{linked}{replaced})."

    def recall(
        query: str, k: int = 5, include_archived: bool = False
    ) -> tuple[str, list[dict[str, Any]]]:
        hits = _ebb(
            lambda: mem.recall(query, k=k, depth=archive_depth if include_archived else depth)
        )
        if not hits:
            return "No memories found.", []
        lines = [
            f"{i}. [{h.node.id}] ({h.node.kind}, {h.why.tier.label}"
            + (
                f", OUTDATED: superseded by {', '.join(h.why.superseded_by)}"
                if h.why.superseded_by
                else ""
            )
            + f") {h.node.text}\n   why: {h.why.summary}"
            for i, h in enumerate(hits, 1)
        ]
        return "\n".join(lines), [hit_metadata(h) for h in hits]

    def connect(src_id: str, dst_id: str, relation: str = "related") -> str:
        edge = _ebb(lambda: mem.connect(src_id, dst_id, kind=relation, actor=actor))
        return f"Linked {edge.src} -{edge.kind}-> {edge.dst}."

    def forget(id: str, reason: str = "") -> str:
        item = _ebb(lambda: mem.forget(id, reason, actor=actor))
        return (
            f"Forgot {item.id}: it no longer appears in recall. It waits in the review queue; "
            "only a person can approve deleting it or restore it."
        )

    return [
        _tool(
            remember,
            RememberInput,
            "Save something worth keeping across conversations to long-term memory: a fact, a "
            "user preference, a decision, a person. One statement per memory. When something "
            "changed, remember the new statement with `supersedes` naming the old memory's id "
            "(or pass the old id to update it; the old text is kept as a version).",
        ),
        _tool(
            recall,
            RecallInput,
            "Search long-term memory. Returns the most relevant memories, most relevant first, "
            "each with its id, kind, text and why it surfaced (text match, how recently and "
            "strongly it is used). Prefer the top result when memories disagree. Call this "
            "before answering questions about the user, past conversations or earlier "
            "decisions.",
            artifact=True,
        ),
        _tool(
            connect,
            ConnectInput,
            "Link two memories by their ids, e.g. a decision to the meeting it was made in. "
            "relation 'supersedes' says src replaces dst: dst then ranks below src. Linking "
            "again reinforces the link.",
        ),
        _tool(
            forget,
            ForgetInput,
            "Forget a memory that is wrong or no longer wanted. It disappears from recall at "
            "once but is not deleted: a person reviews it and approves the deletion.",
        ),
    ]


def _ebb(call: Callable[[], T]) -> T:
    """Run an Ebb call; its deliberate errors become tool errors the model gets to read."""
    try:
        return call()
    except EbbError as exc:
        raise ToolException(str(exc)) from exc


def _explain_invalid(error: Exception) -> str:
    """Tell the model which argument was wrong and how, so it can call again."""
    if isinstance(error, ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in error.errors()
        )
        return f"Invalid arguments ({problems}). Fix them and call the tool again."
    return f"Invalid arguments: {error}. Fix them and call the tool again."


def _tool(
    func: Callable[..., Any], schema: type[BaseModel], description: str, *, artifact: bool = False
) -> BaseTool:
    async def coroutine(**kwargs: Any) -> Any:
        return await run_in_executor(None, func, **kwargs)

    return StructuredTool.from_function(
        func=func,
        coroutine=coroutine,
        name=func.__name__,
        description=description,
        args_schema=schema,
        response_format="content_and_artifact" if artifact else "content",
        handle_tool_error=True,
        handle_validation_error=_explain_invalid,
    )
