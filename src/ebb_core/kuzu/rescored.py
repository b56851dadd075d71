"""Whether a namespace's stored scores are exact: the watermark that lets ``maintain`` skip its
re-score.

The Kùzu scoring pass (:mod:`.maintain`) reads a whole namespace's memories and links to check
every stored base, degree, key and recent-link list (~3 s at 1M memories / 5M links), although
after an import into empty namespaces (which stores the keys it computed from the file) or
after a pass with nothing written since, it has nothing to write. The ``Meta`` row
``rescored`` holds, as JSON, the namespaces whose stored scores are exactly what a full pass
computes, each with the scoring parameters they were computed with (epoch, half-life, read
bonus, spread: :func:`signature`); ``recompute_keys`` skips the read when the namespace's entry
matches its own parameters (a rebase, or a changed configuration, does not match).

It is kept true by one rule of the session rather than by each write path: every statement
that may write (by its text, the test of read-only stores) deletes the row first, in the same
transaction (a statement committed on its own: just before it, on its own), unless it is sent
inside :meth:`KuzuRescored.keys_kept`: the writes that change no score (tier moves, audit
entries, ``Meta`` rows, vectors, and the pass itself). A write path added later clears the
row without knowing of it; at worst a write is wrongly taken for one that changes scores, and
the next pass reads everything, as before. Whether the row exists is kept in process (one
read, after the open or a rollback), so a write costs nothing more while there is none.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any

from .base import KuzuBase

#: The ``Meta`` key of the watermark.
WATERMARK = "rescored"
#: ``KuzuStore._rescored`` before the row has been read (after the open or a rollback).
UNKNOWN: Any = object()

_READ = "MATCH (m:Meta {key: $k}) RETURN m.value"
_DELETE = "MATCH (m:Meta {key: $k}) DELETE m"


def signature(epoch_us: int, half_life_us: float, read_bonus: float, spread: float) -> str:
    """What stored scores were computed with (as Neo4j's ``rescore.signature``)."""
    return json.dumps([int(epoch_us), float(half_life_us), float(read_bonus), float(spread)])


def stored_signature(epoch: str | None, settings: str | None) -> str | None:
    """The signature of the store's own epoch and scoring settings (the ``Meta`` rows
    ``epoch_us`` and ``scoring`` a Brain keeps), or ``None`` without them: what an import into
    empty namespaces, which computes its keys from the file with them, stores."""
    from ..scoring import US_PER_DAY

    if epoch is None or settings is None:
        return None
    cfg = json.loads(settings)
    return signature(
        int(epoch), cfg["half_life_days"] * US_PER_DAY, cfg["read_bonus"], cfg["spread"]
    )


class KuzuRescored(KuzuBase):
    """The watermark's reads and writes (mixed into :class:`~ebb_core.kuzu_store.KuzuStore`);
    the session calls :meth:`_clear_rescored` before each statement that may write."""

    def keys_kept(self) -> AbstractContextManager[None]:
        """Writes sent inside change no memory's base, degree, key, read clock or links, and
        no link (see the module): they leave the watermark as it is."""
        return _KeysKept(self)

    def _rescored_now(self) -> dict[str, str]:
        """The watermark's entries (namespace: signature), read once (the caller holds the
        lock; inside the current transaction, if one has begun)."""
        if self._rescored is UNKNOWN:
            from .engine import _all

            try:
                rows = _all(self._conn.execute(_READ, {"k": WATERMARK}))
            except RuntimeError as exc:
                raise self._failed(exc) from None
            self._rescored = json.loads(rows[0][0]) if rows and rows[0][0] else {}
        found: dict[str, str] = self._rescored
        return found

    def rescored(self, namespace: str, sig: str) -> bool:
        """Whether ``namespace``'s stored scores are those a full pass with ``sig`` computes."""
        with self._lock:
            return self._rescored_now().get(namespace) == sig

    def _mark_rescored(self, namespaces: Iterable[str], sig: str) -> None:
        """Record that these namespaces' stored scores are exact for ``sig`` (in the current
        transaction: a rollback forgets it, see ``_forget_cached``)."""
        with self._lock, self.keys_kept():
            marks = {**self._rescored_now(), **dict.fromkeys(namespaces, sig)}
            self._run(
                "MERGE (m:Meta {key: $k}) SET m.value = $v",
                {"k": WATERMARK, "v": json.dumps(marks, sort_keys=True)},
            )
            self._rescored = marks

    def _clear_rescored(self) -> None:
        """Delete the watermark before a statement that may write (the session's next one)
        unless it is known to be absent or the write keeps keys (see the module)."""
        if self._keys_kept:
            return
        if not self._rescored_now():
            return
        self._rescored = {}
        try:
            self._exec_params(_DELETE, {"k": WATERMARK})
        except BaseException:
            self._rescored = UNKNOWN
            raise


class _KeysKept(AbstractContextManager[None]):
    """:meth:`KuzuRescored.keys_kept`: the store's lock held, its count of such blocks up."""

    def __init__(self, store: KuzuRescored) -> None:
        self._store = store

    def __enter__(self) -> None:
        self._store._lock.acquire()
        self._store._keys_kept += 1

    def __exit__(self, *exc: object) -> None:
        self._store._keys_kept -= 1
        self._store._lock.release()
