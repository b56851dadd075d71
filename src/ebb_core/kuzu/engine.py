"""Opening the Kùzu database, its errors as ``EbbError`` exceptions, reading results, and
the memory budget: the module-level plumbing under :class:`~ebb_core.kuzu.session.KuzuSession`.
"""

from __future__ import annotations

import functools
import os
import re
import time
import weakref
from contextlib import suppress
from pathlib import Path
from typing import Any

from ..errors import (
    InvalidInput,
    StorageError,
    StoreFull,
)

DEFAULT_MEMORY_BUDGET = 5 << 29
"""An embedded store's memory budget by default (2.5 GiB): see :func:`memory_budget_from_env`."""
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_memory_budget(raw: str, field: str = "EBB_MEMORY_BUDGET") -> int:
    """Bytes from ``"3G"``, ``"512M"``, ``"1.5g"``, ``"800MiB"`` or a plain number of bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", raw.lower())
    value = float(m.group(1)) * _UNITS[m.group(2)] if m else 0.0
    if value < _MIN_BUDGET:
        raise InvalidInput(
            f"{field}={raw!r} is not a memory size of at least {_MIN_BUDGET >> 20} MiB: give "
            "bytes or a number with K, M or G (e.g. 2G, 512M)",
            field=field,
        )
    return int(value)


def memory_budget_from_env() -> int:
    """The memory budget of an embedded store: ``EBB_MEMORY_BUDGET`` (e.g. ``3G``, ``512M``),
    else :data:`DEFAULT_MEMORY_BUDGET`.

    60% goes to Kùzu's buffer pool (its page cache: Kùzu's own default is 80% of the
    machine's memory, which a large store fills), the rest to this process: the recall
    columns (~0.3 KB a memory: ids, offsets, tiers, keys) always, the row snapshot (~0.5 KB a
    memory) only while it fits in a quarter of the budget, the copy of the full-text index (~8
    bytes a posting) only while it fits in an eighth. Past that recall reads the rows it
    needs from the table, one primary-key read each (~0.3 ms): the store works at any size,
    only slower.

    Outside those shares, Kùzu 0.11.3 keeps what every committed update changed in memory
    until the next checkpoint, at ~600 times its WAL record: a recall's reinforcement holds
    ~0.5 MB that way at any store size (at 100k memories: 24 MB more every 50 recalls, freed
    by a checkpoint; at 1M, bench_core's 610 recalls left 0.24 GB more of the C heap in use
    with Kùzu's 16 MiB threshold). So a WAL of updates alone is checkpointed from
    ``_UPDATES_WAL`` (128 KiB: ~160 recalls, ~80 MB held at most; ~20 ms at 100k), and an
    import ends with a checkpoint. A WAL with memories, links or vectors created or deleted
    since the last checkpoint waits for the 16 MiB: such a checkpoint rewrites the tables
    around them (~1-2 s at 100k, seconds at 1M: docs/benchmarks.md), too costly every few
    hundred remembers, so remembers hold ~0.7 MB each until then. Closing drops the copies
    before Kùzu's closing checkpoint, and the C heap is handed back to the system after
    the row snapshot is taken and the text copy built (what Kùzu's result and the index's
    tables as read had taken stayed resident otherwise).

    Part of what Kùzu keeps until a checkpoint is taken from the buffer pool (~70 KB a
    remember at 2,000 memories, more in larger stores), so a long run of remembers below the
    16 MiB filled the pool and every write failed with "the buffer pool is full" (~1,900
    remembers at a 64 MiB budget; ~8,000 remembers linking older memories at 100k and the
    default budget). The store also checkpoints once its commits since the last checkpoint
    reach half the pool at ``_HELD_PER_COMMIT`` (1 MiB) each: 768 commits at the default
    budget, 19 at the smallest.
    """
    raw = os.environ.get("EBB_MEMORY_BUDGET", "").strip()
    return parse_memory_budget(raw) if raw else DEFAULT_MEMORY_BUDGET


_MIN_BUDGET = 64 << 20


def _buffer_pool(budget: int) -> int:
    return max(budget * 3 // 5, 32 << 20)


_PREPARED_MAX = 512  # prepared statements kept (one per query text)
_CHECKPOINT_WAL = 16 << 20  # WAL bytes that trigger a checkpoint (Kùzu's default threshold)
_UPDATES_WAL = 128 << 10  # ... when the WAL holds updates alone (see KuzuSession._maybe_checkpoint)
_HELD_PER_COMMIT = 1 << 20  # what a commit may leave held until a checkpoint (ibid.), with margin
_ROOM = 4 << 20  # free bytes every write keeps in hand beyond its WAL's checkpoint
_ABANDONED: list[Any] = []  # engines not closed after a failed WAL append (see close)
_OPEN: weakref.WeakSet[Any] = weakref.WeakSet()  # stores open in this process (see open_stores)


_FULL = ("no space left", "disk full", "file too large", "errno 28", "errno 27", "enospc", "efbig")


_HANDOVER_TRIES = 5
"""Attempts at opening while another process may be closing the store (see _open_database)."""


def _open_database(kuzu: Any, path: str, read_only: bool, buffer_pool: int) -> tuple[Any, bool]:
    """``kuzu.Database`` on ``path``, tried again briefly when it trips over the write-ahead log
    (or shadow file) of another process that is closing the store just then.

    Kùzu lets a process in as the previous one releases the store, while that one may still be
    removing its ``.wal``: the opener then fails on the log vanishing under it ("Error removing
    ... .wal", "Reading past the end of the file ... .wal with size 0"). Seen about once in a
    hundred hand-overs between ``ebb mcp`` and an ``ebb`` command, more often the faster opening
    is. A log that is really damaged fails every attempt and is reported as before.

    ``buffer_pool`` is Kùzu's page cache (see :func:`memory_budget_from_env`): Kùzu's own
    default, 80 % of the machine's memory, also cost every open ~85 ms and every close ~5 ms
    on a 23 GB machine (135 ms to open a 1k store against 49 ms with 4 GiB).

    Returns the database and whether a non-empty write-ahead log was there as the attempt that
    succeeded began (what Kùzu replayed: see ``recovering`` in :class:`KuzuStore`).
    """
    logs = (path + ".wal", path + ".shadow")
    for attempt in range(_HANDOVER_TRIES):
        try:
            try:
                replayed = os.path.getsize(logs[0]) > 0
            except OSError:  # no log (or it went just now)
                replayed = False
            db = kuzu.Database(
                path, read_only=read_only, auto_checkpoint=False, buffer_pool_size=buffer_pool
            )
            return db, replayed
        except RuntimeError as exc:
            if attempt + 1 == _HANDOVER_TRIES or not any(f in str(exc) for f in logs):
                raise
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


def _room_for(path: str, folder: str, extra: int = 0) -> tuple[int, int]:
    """(free bytes, bytes needed): see ``KuzuStore._room``."""
    try:
        st = os.statvfs(folder)
        size = os.stat(path).st_size
    except OSError:
        return 1 << 62, 0
    free = st.f_bavail * st.f_frsize
    try:
        wal = os.stat(path + ".wal").st_size
    except OSError:
        wal = 0
    return free, size + 16 * wal + extra + _ROOM


def open_stores() -> int:
    """How many embedded stores this process has open (opened and not yet closed): a process
    may skip the interpreter's teardown only with none (see ``ebb_core.cli.app``)."""
    return len(_OPEN)


def abandoned_engines() -> int:
    """How many engines this process left unclosed after a failed WAL append (see
    ``KuzuStore.close``); a process with any should end with ``os._exit``."""
    return len(_ABANDONED)


def _held_elsewhere(path: str) -> bool:
    """Whether another process holds the store's file lock (Kùzu takes a POSIX lock on it)."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        return False
    finally:
        os.close(fd)


class DuplicateKey(StorageError):
    """Kùzu refused a row whose primary key is taken. Where Ebb creates memories it becomes
    :func:`~ebb_core.store.memory_exists` (bad input); anywhere else it is a store fault."""


def storage_error(exc: BaseException, path: str, doing: str = "") -> StorageError:
    """The ``EbbError`` for an error Kùzu raised on the store at ``path``.

    A full disk (or a file-size limit) is :class:`StoreFull`; anything else the engine reports
    is a :class:`StorageError` naming the store and the way out (``ebb doctor`` / ``ebb
    repair``). Kùzu reports every failure as a bare ``RuntimeError``, so the text decides.
    """
    msg = str(exc).strip() or type(exc).__name__
    low = msg.lower()
    what = f"cannot {doing} the store {path}" if doing else f"the store {path} failed"
    if any(f in low for f in _FULL):
        return StoreFull(
            f"{what}: the disk is full ({msg}); the write that hit it was not stored. Free "
            "some space (or raise the file-size limit) and retry: the store opens again once "
            "there is room",
            path=path,
        )
    if "duplicated primary key" in low:  # the caller knows which memory (see _creating)
        return DuplicateKey(f"{what}: {msg}", path=path)
    if "buffer pool is full" in low:
        return StorageError(
            f"{what}: the memory budget is too small for this operation on a store this size "
            f"({msg}). Raise EBB_MEMORY_BUDGET (e.g. 4G; the default is "
            f"{DEFAULT_MEMORY_BUDGET / (1 << 30):g}G) and retry: what was committed before is "
            "kept, and a text index left unbuilt is built when the store is next opened",
            path=path,
        )
    return StorageError(
        f"{what}: {msg}. Check it with `ebb --db {path} doctor`; `ebb --db {path} repair` "
        "fixes what it can without losing a committed memory",
        path=path,
    )


_READ_START = re.compile(r"\s*(MATCH|UNWIND|CALL QUERY_FTS_INDEX|CALL show_)", re.IGNORECASE)
_WRITE_WORD = re.compile(r"\b(CREATE|MERGE|SET|DELETE|DETACH|REMOVE|COPY|LOAD|DROP|ALTER)\b", re.I)
_RESHAPE_WORD = re.compile(r"\b(CREATE|MERGE|DELETE|COPY|DROP|ALTER)(\b|_)", re.I)
_TABLE_NAMED = re.compile(r"(?:[(\[]\s*\w*\s*:|\bCOPY\s)\s*`?(\w+)", re.I)  # (x:T [:T COPY T
_LOG_TABLES = frozenset(("Audit", "Meta"))  # rows no other table's structure depends on


@functools.lru_cache(maxsize=_PREPARED_MAX)
def _reshapes(query: str) -> bool:
    """Whether statement ``query`` (one of this package's, never user text) may create or
    delete memories, links or vectors, or tables or indexes, not only set values or add
    audit and metadata rows: what makes the next checkpoint costly (see
    ``KuzuSession._maybe_checkpoint``). A statement that names no table counts."""
    if _RESHAPE_WORD.search(query) is None:
        return False
    tables = set(_TABLE_NAMED.findall(query))
    return not tables or not tables <= _LOG_TABLES


@functools.lru_cache(maxsize=_PREPARED_MAX)
def _reads_only(query: str) -> bool:
    """Whether statement ``query`` (one of this module's, never user text) only reads: it
    starts with MATCH, UNWIND or a read-only CALL and has no writing clause. Anything else
    counts as a write (and opens the transaction)."""
    return bool(_READ_START.match(query)) and not _WRITE_WORD.search(query)


def _writes(query: str) -> bool:
    """Whether statement ``query`` (one of this package's, never user text) may write: a
    writing clause, a transaction or checkpoint, or a procedure that creates or drops. Loading
    an extension and the session's own switches do not."""
    head = query.lstrip().upper()
    if head.startswith(("LOAD EXTENSION", "CALL ENABLE_INTERNAL_CATALOG")):
        return False
    return (
        head.startswith(("BEGIN", "COMMIT", "ROLLBACK", "CHECKPOINT"))
        or "CREATE_" in head
        or "DROP_" in head
        or _WRITE_WORD.search(query) is not None
    )


def _all(result: Any) -> list[list[Any]]:
    # The engine's own cursor: the public has_next()/get_next() re-check that the result is
    # open on every row, which doubles the cost of reading a few hundred full-text hits.
    # kuzu 0.11.3 is a final release, so this attribute is fixed.
    raw = getattr(result, "_query_result", result)
    if raw is result:
        has_next, get_next = result.has_next, result.get_next
    else:
        has_next, get_next = raw.hasNext, raw.getNext
    rows: list[list[Any]] = []
    while has_next():
        rows.append(get_next())
    return rows


def pool_given(budget: int) -> str:
    """The buffer pool a budget gives, as error messages say it."""
    return f"EBB_MEMORY_BUDGET={budget >> 20}M gives it {_buffer_pool(budget) >> 20:,} MB"


# Beside a store whose last writer stopped after a failed checkpoint (see
# stop_after_failed_checkpoint): its next writing open copies it into a fresh file.
CHECKPOINT_FAILED = ".checkpoint-failed"


class CopyInstead(StorageError):
    """An open that must copy the store into a new file (``salvage.rebuild_in_place``) to go
    on, raised before anything is changed; ``why`` is what the warning then says of the copy
    (``store._connect``)."""

    def __init__(self, message: str, *, path: str, why: str) -> None:
        super().__init__(message, path=path)
        self.why = why


class Stopped:
    """What stands for a Kùzu connection and database that this process must not use again
    (see :func:`stop_after_failed_checkpoint`): every call raises ``error``, closing does
    nothing."""

    def __init__(self, error: StorageError) -> None:
        self.error = error

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        raise StorageError(str(self.error), path=self.error.path)

    prepare = execute

    def close(self) -> None:
        pass


def stop_after_failed_checkpoint(conn: Any, db: Any, path: str, budget: int) -> Stopped:
    """After a ``CHECKPOINT`` that ran out of buffer pool: Kùzu 0.11.3's state in this
    process is then wrong (every text of the Memory table read back empty), and a later
    checkpoint, the one Kùzu makes as it closes included, writes that into the file
    (measured 2026-12-04: 250 revised texts in a 40 MB pool emptied all 100k texts). What was
    committed is in the write-ahead log, and the file is as the last good checkpoint left it
    (the same store opened from them in a new process read every text, the revisions too).
    So ``conn`` and ``db`` are never used, closed or released again in this process (their
    references are leaked, so that not even the interpreter's exit runs their close), and
    the :class:`Stopped` returned stands for both. A marker beside the store
    (``CHECKPOINT_FAILED``) has the store's next call or open copy it into a fresh file
    (``KuzuStore._reopen_after_stop``, ``_copy_if_stopped``)."""
    import ctypes
    import json

    for thing in (conn, db):
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(thing))
    _ABANDONED.append((conn, db))
    with suppress(OSError):  # the next open copies the store (store._copy_if_stopped)
        Path(path + CHECKPOINT_FAILED).write_text(json.dumps({"budget": budget}) + "\n")
    return Stopped(
        StorageError(
            f"Kùzu could not checkpoint the store {path} (folding its write-ahead log into the "
            f"file ran out of the buffer pool: {pool_given(budget)}), after which it cannot "
            "go on safely with that engine: Ebb stopped using it. Nothing committed is "
            "lost: it is in the write-ahead log. The store's next call (outside a unit of "
            "work), or its next open, copies it into a fresh file, which resets what revised "
            "texts cost each checkpoint, and goes on there (a larger EBB_MEMORY_BUDGET makes "
            "that rarer)",
            path=path,
        )
    )
