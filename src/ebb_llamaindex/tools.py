"""``EbbToolSpec``: remember, recall, connect and forget as LlamaIndex function tools."""

# No ``from __future__ import annotations`` here: LlamaIndex reads the tool signatures at runtime.
from typing import Annotated, Any

from llama_index.core.tools import ToolMetadata
from llama_index.core.tools.tool_spec.base import SPEC_FUNCTION_TYPE, BaseToolSpec
from llama_index.core.tools.utils import create_schema_from_function

from ebb_core import Brain
from ebb_core.engine import validate_k

# Descriptions are written for the model that picks the tool, not for the programmer.
DESCRIPTIONS = {
    "remember": (
        "Store something worth keeping across conversations in long-term memory: a fact, "
        "decision, preference, person, client or note. Use it when the user tells you "
        "something they will expect you to know later. Give it an id such as 'client:acme' "
        "when other memories will refer to it; storing again under an existing id stores a "
        "new version (the old text is kept). When a fact or decision changed, pass the old "
        "memory's id in supersedes: it then ranks below the new one. Returns the memory's id."
    ),
    "recall": (
        "Search long-term memory. Use it before answering anything that may depend on what "
        "was said or decided in earlier conversations. Returns the most relevant memories, "
        "best first, each with its id, kind, text and why it surfaced (matched words, how "
        "recently it was used). Memories you recall count as used and stay fresh."
    ),
    "connect": (
        "Link two memories by their ids, e.g. a decision to the client it concerns, so that "
        "recalling one keeps the other alive. Kind 'supersedes' says the source replaces the "
        "target (which then ranks below it). Linking them again refreshes the link."
    ),
    "forget": (
        "Ask for a memory to be deleted because it is wrong, outdated or unwanted. It is "
        "hidden from recall at once and waits in a review queue until a person approves the "
        "deletion or restores it; you cannot delete anything yourself. Pinned memories cannot "
        "be forgotten."
    ),
}


class EbbToolSpec(BaseToolSpec):
    """Ebb's agent tools on one :class:`~ebb_core.Brain` namespace.

    ``to_tool_list()`` gives ``FunctionTool``s named ``remember``, ``recall``, ``connect`` and
    ``forget``, with argument schemas and descriptions written for a model. There is no
    delete tool: ``forget`` only queues a memory for human review.

    >>> agent = FunctionAgent(tools=EbbToolSpec(brain).to_tool_list(), llm=llm)
    ... # doctest: +SKIP
    """

    def __init__(
        self, brain: Brain, *, k: int = 5, reinforce: bool = True, embed_model: Any = None
    ) -> None:
        if embed_model is not None:  # a LlamaIndex BaseEmbedding (or any embedder Ebb takes)
            brain.set_embedder(embed_model)
        self.spec_functions: list[SPEC_FUNCTION_TYPE] = ["remember", "recall", "connect", "forget"]
        self.brain = brain
        self.k = validate_k(k)
        self.reinforce = reinforce

    def get_metadata_from_fn_name(
        self, fn_name: str, spec_functions: list[SPEC_FUNCTION_TYPE] | None = None
    ) -> ToolMetadata | None:
        """Each tool's model-facing name, description and argument schema."""
        fn = getattr(self, fn_name)
        return ToolMetadata(
            name=fn_name,
            description=DESCRIPTIONS[fn_name],
            fn_schema=create_schema_from_function(fn_name, fn),
        )

    def remember(
        self,
        text: Annotated[str, "What to remember, as one self-contained statement."],
        kind: Annotated[
            str | None,
            "What sort of memory: note, fact, decision, preference, person, client... "
            "(default note; an existing memory keeps its kind)",
        ] = None,
        id: Annotated[
            str | None, "Optional stable id like 'client:acme'; omit to get one made up."
        ] = None,
        links: Annotated[list[str] | None, "Ids of existing memories this one refers to."] = None,
        supersedes: Annotated[
            list[str] | None, "Ids of memories this one replaces (outdated facts, decisions)."
        ] = None,
    ) -> str:
        """Store a memory; returns its id."""
        node = self.brain.remember(
            text, kind=kind, id=id, links=links or (), supersedes=supersedes or ()
        )
        linked = f", linked to {', '.join(links)}" if links else ""
        replaced = f", superseding {', '.join(supersedes)}" if supersedes else ""
        return f"Remembered {node.id} ({node.kind}){linked}{replaced}."

    def recall(
        self,
        query: Annotated[str, "What to look for, in a few words."],
        k: Annotated[int | None, "How many memories to return (default 5)."] = None,
        include_archived: Annotated[
            bool, "Also search archived (warm and cold) memories; use when nothing fresh fits."
        ] = False,
    ) -> str:
        """Recall memories relevant to ``query``, best first."""
        hits = self.brain.recall(
            query,
            k if k is not None else self.k,
            depth=3 if include_archived else None,
            reinforce=self.reinforce,
        )
        if not hits:
            return "No memories match that query."
        return "\n".join(
            f"{n}. [{h.id}] ({h.node.kind}, {h.why.tier.label}"
            + (
                f", OUTDATED: superseded by {', '.join(h.why.superseded_by)}"
                if h.why.superseded_by
                else ""
            )
            + f") {h.node.text}\n   why: {h.why.summary}"
            for n, h in enumerate(hits, 1)
        )

    def connect(
        self,
        source_id: Annotated[str, "Id of the memory the link starts from."],
        target_id: Annotated[str, "Id of the memory it points to."],
        kind: Annotated[
            str, "What the link means, e.g. related, about, supersedes, works_at."
        ] = "related",
    ) -> str:
        """Link two memories."""
        edge = self.brain.connect(source_id, target_id, kind=kind)
        return f"Linked {edge.src} -{edge.kind}-> {edge.dst}."

    def forget(
        self,
        id: Annotated[str, "Id of the memory to forget."],
        reason: Annotated[str, "Why it should go, for the person who reviews it."] = "",
    ) -> str:
        """Queue a memory for deletion after human review."""
        item = self.brain.forget(id, reason, actor="agent")
        return (
            f"{item.id} is hidden from recall and waits in the review queue; a person will "
            "approve its deletion or restore it."
        )
