"""The Kùzu store's primary key, recent-link encoding and the constants and helpers its modules
share."""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import suppress
from typing import Any

from ..clock import from_us, to_us
from ..model import Edge, Node
from ..records import EDGE_PROPERTIES, NODE_PROPERTIES, node_from_row, node_row
from .tables import MEMORY_COLUMNS

# Meta key recording the full-text index's state: "building" is committed before an index build
# (or a bulk load that drops the index) starts and "ready" after it ends, so a store opened after
# a kill at any point of the build knows to clean up and build again (see _ensure_text_index).
INDEX_STATE = "text_index"
FTS_INDEX = "memory_text"
SEP = "\x1f"  # joins namespace and id into the primary key; control chars are refused in both
RECENT_LINKS = 8  # links kept per memory for recall's explanations
LINK_SEP = "\x1e"  # between links in a recent-link list (fields are joined by SEP)
_SMALL = 32  # up to this many rows, single statements beat one LOAD FROM (~5-20 ms fixed)


def uid(namespace: str, id: str) -> str:
    return f"{namespace}{SEP}{id}"


def _release_arrow_memory() -> None:
    """Hand freed memory back to the system: Arrow's allocator and the C library's keep freed
    pages for reuse (after a 1M-memory import the process held 2.3 GB, 1.2 GB once they let
    go), which a large store's next pass would add to."""
    import sys

    pa = sys.modules.get("pyarrow")
    if pa is not None:
        pa.default_memory_pool().release_unused()
    if sys.platform.startswith("linux"):
        with suppress(OSError, AttributeError):
            import ctypes

            ctypes.CDLL("libc.so.6").malloc_trim(0)


def _node_ret(var: str) -> str:
    """A RETURN list of a memory's stored properties, in ``NODE_PROPERTIES`` order."""
    return ", ".join(f"{var}.{c}" for c in NODE_PROPERTIES)


def _row_to_node(r: Sequence[Any]) -> Node:
    return node_from_row(dict(zip(NODE_PROPERTIES, r, strict=False)))


def _node_params(n: Node) -> dict[str, Any]:
    return {"uid": uid(n.namespace, n.id), **node_row(n)}


def _edge_from(ns: str, src: str, dst: str, r: Sequence[Any]) -> Edge:
    return Edge(
        namespace=ns,
        src=src,
        dst=dst,
        kind=r[0],
        weight=float(r[1]),
        created_at=from_us(r[2]),
        reinforced_at=from_us(r[3]),
        props=json.loads(r[4]) if r[4] else {},
    )


def _edge_params(e: Edge) -> dict[str, Any]:
    return {
        "a": uid(e.namespace, e.src),
        "b": uid(e.namespace, e.dst),
        "kind": e.kind,
        "w": e.weight,
        "c": to_us(e.created_at),
        "r": to_us(e.reinforced_at),
        "p": json.dumps(e.props, sort_keys=True),
    }


_EDGE_RET = ", ".join(f"e.{c}" for c in EDGE_PROPERTIES)


def _node_params_keys() -> list[str]:
    return [c for c in MEMORY_COLUMNS if c != "recent_links"]  # kept by the store itself
