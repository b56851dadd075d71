"""``EbbRetriever``: Ebb's recall as a LangChain retriever."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables.config import run_in_executor
from pydantic import ConfigDict, Field

from ebb_core import Brain

from ._convert import hit_to_document, view


class EbbRetriever(BaseRetriever):
    """Retrieve memories from an Ebb :class:`~ebb_core.Brain` with its recall.

    Each ``Document`` has the memory id as ``id`` and its text as ``page_content``; its metadata
    holds the kind, tier, score and score parts, the ``why`` summary, live links and timestamps.
    What is returned is reinforced (its read clock resets), so memories the chain keeps using
    stay live; set ``reinforce=False`` to look without touching.

    ``k``, ``depth`` and ``kinds`` can also be given per call::

        retriever = EbbRetriever(brain=brain, k=4)
        docs = retriever.invoke("pricing decision", k=2)
        docs[0].metadata["why"]   # "matched 'pricing'; activation 1.843 (...); tier hot"
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    brain: Brain = Field(exclude=True)
    """The store to recall from."""
    k: int = 4
    """How many memories to return."""
    depth: int | None = None
    """A limit on the tiers searched: 1 hot, 2 hot and warm, 3 also cold (archived). ``None``
    searches every live tier, hot first (recall's fall-through). Frozen never."""
    namespace: str | None = None
    """Recall in this namespace instead of the brain's own."""
    kinds: list[str] = Field(default_factory=list)
    """Only memories of these kinds (``["decision", "fact"]``); empty means every kind."""
    reinforce: bool = True
    """Reinforce what is returned (the reinforce hook). ``False`` leaves activations alone."""
    embedder: Any = Field(default=None, exclude=True)
    """A LangChain ``Embeddings`` (or any embedder Ebb takes) to recall by meaning too; it is
    set on the brain (see ``Brain.set_embedder``). ``None`` keeps the brain's own."""

    def model_post_init(self, context: Any, /) -> None:
        if self.embedder is not None:
            self.brain.set_embedder(self.embedder)

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        depth: int | None = None,
        kinds: Sequence[str] | None = None,
    ) -> list[Document]:
        brain = view(self.brain, self.namespace)
        hits = brain.recall(
            query,
            k=self.k if k is None else k,
            depth=self.depth if depth is None else depth,
            kinds=self.kinds if kinds is None else kinds,
            reinforce=self.reinforce,
        )
        return [hit_to_document(h) for h in hits]

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        depth: int | None = None,
        kinds: Sequence[str] | None = None,
    ) -> list[Document]:
        # The engine is in-process and synchronous: run it off the event loop.
        return await run_in_executor(
            None,
            self._get_relevant_documents,
            query,
            run_manager=run_manager.get_sync(),
            k=k,
            depth=depth,
            kinds=kinds,
        )
