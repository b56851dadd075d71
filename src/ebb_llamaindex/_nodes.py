"""How Ebb's recall hits and LlamaIndex's nodes and messages map onto each other."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from llama_index.core.llms import ChatMessage
from llama_index.core.schema import NodeWithScore, TextNode

from ebb_core import RecallHit

# What a model reading a retrieved node sees besides its text; the rest is for programs.
LLM_METADATA_KEYS = ("memory_id", "kind", "created_at")


def hit_to_node(hit: RecallHit) -> NodeWithScore:
    """A recall hit as a scored ``TextNode`` whose id is the memory id.

    Metadata: ``memory_id``, ``namespace``, ``kind``, ``tier`` (label) and ``tier_level``,
    ``pinned``, ``props``, the score and its parts (``text_score``, ``text_norm``, ``activation``,
    ``activation_norm``, ``edges_part``, ``read_part``, ``spread_part``), ``matched_terms``,
    ``live_links`` (ids), ``why`` (the one-line summary) and the timestamps as ISO strings.
    """
    node, why = hit.node, hit.why
    metadata: dict[str, Any] = {
        "memory_id": node.id,
        "namespace": node.namespace,
        "kind": node.kind,
        "tier": why.tier.label,
        "tier_level": int(why.tier),
        "pinned": node.pinned,
        "props": dict(node.props),
        "score": hit.score,
        "text_score": why.text_score,
        "text_norm": why.text_norm,
        "activation": why.activation,
        "activation_norm": why.activation_norm,
        "edges_part": why.edges_part,
        "read_part": why.read_part,
        "spread_part": why.spread_part,
        "matched_terms": list(why.matched_terms),
        "superseded_by": list(why.superseded_by),
        "spread_from": list(why.spread_from),
        "reached": why.reached,
        "live_links": [link.id for link in why.live_links],
        "why": why.summary,
        "created_at": _iso(node.created_at),
        "updated_at": _iso(node.updated_at),
        "last_read_at": _iso(node.last_read_at),
        "last_reinforced_at": _iso(why.last_reinforced_at),
    }
    hidden = [key for key in metadata if key not in LLM_METADATA_KEYS]
    text_node = TextNode(
        id_=node.id,
        text=node.text,
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


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()
