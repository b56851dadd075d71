"""Ebb: long-term memory for AI agents, kept as a graph.

Relevance is recency-weighted connection strength; unused knowledge decays into archive tiers and
nothing is deleted until a human signs off. Start with :class:`Brain`::

    from ebb_core import Brain
    with Brain.open("./ebb_db") as brain:
        brain.remember("We moved to outcome-based pricing", kind="decision")
        for hit in brain.recall("pricing"):
            print(hit.id, hit.why.summary)
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backends import open_store
    from .clock import Clock, FixedClock, SystemClock
    from .engine import Brain
    from .errors import (
        BackendUnavailable,
        EbbError,
        InvalidInput,
        NoStore,
        NotFound,
        StorageError,
        StoreFull,
        StoreLocked,
    )
    from .model import (
        AuditEntry,
        Edge,
        LiveLink,
        MaintainReport,
        Neighbor,
        Node,
        RecallHit,
        ReviewItem,
        Stats,
        Tier,
        Version,
        Why,
    )
    from .scoring import Config
    from .store import GraphStore
    from .transcript import Transcript, Turn

# Each public name is imported from its module on first use (PEP 562), so `import ebb_core`
# (and `ebb --help`, which imports ebb_core.cli) does not load pydantic or the storage engine.
_WHERE = {
    "open_store": "backends",
    "Clock": "clock",
    "FixedClock": "clock",
    "SystemClock": "clock",
    "Brain": "engine",
    "BackendUnavailable": "errors",
    "EbbError": "errors",
    "InvalidInput": "errors",
    "NoStore": "errors",
    "NotFound": "errors",
    "StorageError": "errors",
    "StoreFull": "errors",
    "StoreLocked": "errors",
    "AuditEntry": "model",
    "Edge": "model",
    "LiveLink": "model",
    "MaintainReport": "model",
    "Neighbor": "model",
    "Node": "model",
    "RecallHit": "model",
    "ReviewItem": "model",
    "Stats": "model",
    "Tier": "model",
    "Version": "model",
    "Why": "model",
    "Config": "scoring",
    "GraphStore": "store",
    "Transcript": "transcript",
    "Turn": "transcript",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'ebb_core' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})


__version__ = "0.1.0"

#: True only in a one-shot `ebb recall` / `ebb stats` process, set before anything imports
#: ebb_core.model: its result types are then the plain classes of ebb_core.model_plain (same
#: fields and JSON, no pydantic import). Never set for a library, a test or a server.
_plain_models = False

__all__ = [
    "AuditEntry",
    "BackendUnavailable",
    "Brain",
    "Clock",
    "Config",
    "EbbError",
    "Edge",
    "FixedClock",
    "GraphStore",
    "InvalidInput",
    "LiveLink",
    "MaintainReport",
    "Neighbor",
    "NoStore",
    "Node",
    "NotFound",
    "RecallHit",
    "ReviewItem",
    "Stats",
    "StorageError",
    "StoreFull",
    "StoreLocked",
    "SystemClock",
    "Tier",
    "Transcript",
    "Turn",
    "Version",
    "Why",
    "__version__",
    "open_store",
]
