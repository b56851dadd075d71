"""Ebb results as LangChain values: one place that says how a recall hit looks to LangChain."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from langchain_core.documents import Document

from ebb_core import Brain, RecallHit


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()


def hit_metadata(hit: RecallHit) -> dict[str, Any]:
    """JSON-friendly metadata for a recall hit: the memory, its score parts and why it surfaced."""
    node, why = hit.node, hit.why
    return {
        "id": node.id,
        "namespace": node.namespace,
        "kind": node.kind,
        "tier": why.tier.label,
        "pinned": node.pinned,
        "score": hit.score,
        "why": why.summary,
        "score_parts": {
            "text_score": why.text_score,
            "text_norm": why.text_norm,
            "activation": why.activation,
            "activation_norm": why.activation_norm,
            "edges": why.edges_part,
            "read": why.read_part,
            "spread": why.spread_part,
        },
        "matched_terms": list(why.matched_terms),
        "superseded_by": list(why.superseded_by),
        "spread_from": list(why.spread_from),
        "reached": why.reached,
        "live_links": [
            {
                "id": link.id,
                "kind": link.kind,
                "direction": link.direction,
                "decayed_weight": link.decayed_weight,
            }
            for link in why.live_links
        ],
        "created_at": _iso(node.created_at),
        "updated_at": _iso(node.updated_at),
        "last_read_at": _iso(node.last_read_at),
        "last_reinforced_at": _iso(why.last_reinforced_at),
        "props": dict(node.props),
    }


def hit_to_document(hit: RecallHit) -> Document:
    """A recall hit as a LangChain ``Document`` whose ``id`` is the memory id."""
    return Document(page_content=hit.node.text, id=hit.node.id, metadata=hit_metadata(hit))


def view(brain: Brain, namespace: str | None) -> Brain:
    """``brain`` itself, or its view of ``namespace``."""
    if namespace is None or namespace == brain.namespace:
        return brain
    return brain.scoped(namespace)
