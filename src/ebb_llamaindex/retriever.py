"""``EbbRetriever``: Ebb's recall as a LlamaIndex retriever."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle

from ebb_core import Brain, RecallHit
from ebb_core.validation import validate_k, validate_kind

from ._nodes import hit_to_node


class EbbRetriever(BaseRetriever):
    """Retrieve memories from a :class:`~ebb_core.Brain`, ranked by Ebb's blend of text match and
    recency-weighted activation.

    Each result is a ``NodeWithScore`` over a ``TextNode`` whose id is the memory id and whose
    metadata carries the kind, tier, score parts, the "why" summary and timestamps. Every
    retrieval reinforces what it returned (those memories count as just read), unless
    ``reinforce=False``. By default every live tier is searched, hot first; ``depth`` limits it:
    1 searches hot memories, 2 adds warm, 3 adds cold.

    >>> retriever = EbbRetriever(brain, k=3)                    # doctest: +SKIP
    >>> engine = RetrieverQueryEngine.from_args(retriever, llm=llm)   # doctest: +SKIP
    """

    def __init__(
        self,
        brain: Brain,
        *,
        k: int = 5,
        depth: int | None = None,
        kinds: Sequence[str] = (),
        reinforce: bool = True,
        namespace: str | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        embed_model: Any = None,
    ) -> None:
        if embed_model is not None:  # a LlamaIndex BaseEmbedding (or any embedder Ebb takes)
            brain.set_embedder(embed_model)
        self.brain = brain.scoped(namespace) if namespace is not None else brain
        self.k = validate_k(k)
        self.depth = depth
        self.kinds = [validate_kind(x, "kinds") for x in kinds]
        self.reinforce = reinforce
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def recall(self, query: str) -> list[RecallHit]:
        """The raw recall hits for ``query`` with this retriever's settings (reinforcing them)."""
        return self.brain.recall(
            query, self.k, depth=self.depth, kinds=self.kinds, reinforce=self.reinforce
        )

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [hit_to_node(hit) for hit in self.recall(query_bundle.query_str)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # The store is blocking I/O: run it on a worker thread so the event loop stays free.
        hits = await asyncio.to_thread(self.recall, query_bundle.query_str)
        return [hit_to_node(hit) for hit in hits]
