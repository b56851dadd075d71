"""Ebb results as LangChain values: one place that says how a recall hit looks to LangChain."""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document

from ebb_core import Brain, RecallHit


def hit_metadata(hit: RecallHit) -> dict[str, Any]:
    """JSON-friendly metadata for a recall hit: the memory, its score parts and why it surfaced.

    ``RecallHit.metadata()``, the keys LlamaIndex's nodes carry too: ``id`` and ``memory_id``,
    ``score_parts`` (nested) and each part under its own name (``edges_part``...), ``tier`` and
    ``tier_level``, ``live_links`` (dicts of id, kind, direction, decayed weight) and
    ``live_link_ids``, ``why``, the timestamps."""
    meta = hit.metadata()
    head = ("id", "memory_id", "namespace", "kind", "tier", "pinned", "score", "why", "score_parts")
    first = {key: meta.pop(key) for key in head}
    props = meta.pop("props")
    return {**first, **meta, "props": props}


def hit_to_document(hit: RecallHit) -> Document:
    """A recall hit as a LangChain ``Document`` whose ``id`` is the memory id."""
    return Document(page_content=hit.node.text, id=hit.node.id, metadata=hit_metadata(hit))


def view(brain: Brain, namespace: str | None) -> Brain:
    """``brain`` itself, or its view of ``namespace``."""
    if namespace is None or namespace == brain.namespace:
        return brain
    return brain.scoped(namespace)
