"""Ebb results as LangChain values: one place that says how a recall hit looks to LangChain."""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document

from ebb_core import Brain, RecallHit
from ebb_core.model import SCORE_PARTS


def hit_metadata(hit: RecallHit) -> dict[str, Any]:
    """JSON-friendly metadata for a recall hit: the memory, its score parts and why it surfaced."""
    flat = hit.flat()
    del flat["tier_level"]
    parts = {part.removesuffix("_part"): flat.pop(part) for part in SCORE_PARTS}
    head = {key: flat.pop(key) for key in ("id", "namespace", "kind", "tier", "pinned", "score")}
    props = flat.pop("props")
    return {**head, "why": flat.pop("why"), "score_parts": parts, **flat, "props": props}


def hit_to_document(hit: RecallHit) -> Document:
    """A recall hit as a LangChain ``Document`` whose ``id`` is the memory id."""
    return Document(page_content=hit.node.text, id=hit.node.id, metadata=hit_metadata(hit))


def view(brain: Brain, namespace: str | None) -> Brain:
    """``brain`` itself, or its view of ``namespace``."""
    if namespace is None or namespace == brain.namespace:
        return brain
    return brain.scoped(namespace)
