"""Tables a Kùzu store made ahead of a write (``prepare_tier_moves``), kept until it is sent.

``maintain`` writes a first maintain's tier moves in batches, and makes the next batch's Python
work in a thread while this one is written (Kùzu's statements release the GIL). What the store
itself builds from a batch (its uids and per-tier tables, the audit columns) is made there too,
and kept here by the identity of the object it was made for (the moves, the audit columns):
``set_tiers`` and ``append_audit_columns`` take it if it is there, and build it otherwise.
"""

from __future__ import annotations

import threading
from typing import Any

_KEPT = 4  # batches kept at most (maintain makes one ahead; a failed write leaves its own)


class Ahead:
    """What was made ahead, by the identity of what it was made from; each taken once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[int, tuple[Any, Any]] = {}

    def put(self, source: Any, made: Any) -> None:
        with self._lock:
            # the source is kept with it, so its id cannot be another object's meanwhile
            self._made[id(source)] = (source, made)
            while len(self._made) > _KEPT:
                del self._made[next(iter(self._made))]

    def take(self, source: Any) -> Any:
        """What was made from ``source`` (this very object), or None."""
        with self._lock:
            entry = self._made.pop(id(source), None)
        return entry[1] if entry is not None and entry[0] is source else None


def ahead_of(store: Any) -> Ahead:
    """The store's :class:`Ahead` (made on first use, from any thread)."""
    made: Ahead = store.__dict__.setdefault("_ahead", Ahead())
    return made
