"""How Ebb's recall hits and LlamaIndex's nodes and messages map onto each other."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.llms import ChatMessage
from llama_index.core.schema import NodeWithScore, TextNode

from ebb_core import RecallHit

# What a model reading a retrieved node sees besides its text; the rest is for programs.
LLM_METADATA_KEYS = ("memory_id", "kind", "created_at")


def hit_to_node(hit: RecallHit) -> NodeWithScore:
    """A recall hit as a scored ``TextNode`` whose id is the memory id.

    Metadata (``RecallHit.metadata()``, the keys LangChain's documents carry too):
    ``memory_id`` and ``id``, ``namespace``, ``kind``, ``tier`` (label) and ``tier_level``,
    ``pinned``, ``props``, the score and its parts (``text_score``, ``text_norm``, ``activation``,
    ``activation_norm``, ``edges_part``, ``read_part``, ``spread_part``, and nested in
    ``score_parts``), ``matched_terms``, ``live_links`` (ids, as before; LangChain's are dicts)
    and ``live_link_ids``, ``why`` (the one-line summary) and the timestamps as ISO strings.
    """
    meta = hit.metadata()
    metadata: dict[str, Any] = {"memory_id": meta.pop("memory_id"), **meta}
    metadata["live_links"] = meta["live_link_ids"]
    hidden = [key for key in metadata if key not in LLM_METADATA_KEYS]
    text_node = TextNode(
        id_=hit.node.id,
        text=hit.node.text,
        metadata=metadata,
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=hidden,
    )
    return NodeWithScore(node=text_node, score=hit.score)


def message_text(message: ChatMessage) -> str:
    """The text of a chat message (its text blocks joined), or ``""`` when it has none."""
    return (message.content or "").strip()


def query_from(messages: Sequence[ChatMessage], last: int) -> str:
    """The text of the ``last`` messages that have any, oldest first, as one recall query."""
    texts = [t for t in (message_text(m) for m in messages) if t]
    return "\n".join(texts[-last:])
