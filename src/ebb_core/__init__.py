"""Ebb: long-term memory for AI agents, kept as a graph.

Relevance is recency-weighted connection strength; unused knowledge decays into archive tiers and
nothing is deleted until a human signs off. Start with :class:`Brain`::

    from ebb_core import Brain
    with Brain.open("./ebb_db") as brain:
        brain.remember("We moved to outcome-based pricing", kind="decision")
        for hit in brain.recall("pricing"):
            print(hit.id, hit.why.summary)
"""

from .backends import open_store
from .clock import Clock, FixedClock, SystemClock
from .engine import Brain
from .errors import BackendUnavailable, EbbError, InvalidInput, NotFound, StoreLocked
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
    Why,
)
from .scoring import Config
from .store import GraphStore

__version__ = "0.1.0"

# EBB_LOG=debug: each Brain call, its store and its timing on standard error (see logs.py).
from .logs import configure_from_env as _configure_logging
from .logs import instrument as _instrument

_instrument(Brain)
_configure_logging()

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
    "Node",
    "NotFound",
    "RecallHit",
    "ReviewItem",
    "Stats",
    "StoreLocked",
    "SystemClock",
    "Tier",
    "Why",
    "__version__",
    "open_store",
]
