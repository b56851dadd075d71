"""``KuzuStore``: the embedded backend (default). One database file on disk, no server.

It opens the store and holds its state; what it does is the mixins' of this package (see
:mod:`ebb_core.kuzu`). ``ebb_core.kuzu_store`` is its import path.
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from pathlib import Path
from typing import Any

from ..errors import (
    InvalidInput,
    NoStore,
    StorageError,
    StoreFull,
    StoreLocked,
    StoreRebuilt,
)
from ..model import Tier
from ..store import GraphStore
from . import module as _kuzu
from .audit import KuzuAudit
from .bulk import KuzuBulk
from .engine import (
    _ABANDONED,
    _OPEN,
    CHECKPOINT_FAILED,
    CopyInstead,
    _buffer_pool,
    _held_elsewhere,
    _open_database,
    _room_for,
    memory_budget_from_env,
    pool_given,
    storage_error,
)
from .links import KuzuLinks
from .maintain import KuzuMaintain, moves_per_transaction
from .meta import KuzuMeta
from .mirror import Mirror
from .queries import INDEX_STATE
from .reads import KuzuReads
from .rescored import UNKNOWN, KuzuRescored
from .schema import KuzuSchema
from .search import KuzuSearch
from .session import KuzuSession
from .vectors import OLD_TAIL_PREFIX, KuzuVectorScans
from .writes import KuzuWrites


class KuzuStore(
    KuzuWrites,
    KuzuLinks,
    KuzuReads,
    KuzuMeta,
    KuzuSchema,
    KuzuSession,
    KuzuVectorScans,
    KuzuSearch,
    KuzuBulk,
    KuzuAudit,
    KuzuMaintain,
    KuzuRescored,
    GraphStore,
):
    """Embedded Kùzu backend: a single database file (plus its ``.wal``) at ``path``.

    A second process cannot open a file this process holds open: it gets :class:`StoreLocked`.
    """

    backend = "kuzu"
    # The file the last copy into a fresh one kept aside, and whether that copy read every
    # table (see _reopen_after_stop)
    _kept_copy: tuple[Path, bool] | None = None
    _copy_asked: str | None = None  # why the next open copies the store (_reopen_after_stop)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        snapshot: bool | None = None,
        create: bool = True,
        rebuild: bool = True,
        memory_budget: int | None = None,
        mirror: bool | None = None,
        only_reads: bool = False,
    ) -> None:
        """Open (or, unless ``create`` is false, create) the store file at ``path``.

        Opening cleans up after a writer killed at any point: Kùzu replays its WAL, and a
        full-text index that a kill left missing, half-built or stale is dropped (with every
        internal table of it) and rebuilt from the committed rows. Errors are ``EbbError``s:
        :class:`StoreLocked`, :class:`NoStore` (``create=False``), :class:`StoreFull` and
        :class:`StorageError` (the store cannot be read: ``ebb doctor`` / ``ebb repair``).
        ``memory_budget`` (bytes; default ``EBB_MEMORY_BUDGET``, else
        :data:`DEFAULT_MEMORY_BUDGET`) bounds what the store keeps in memory: Kùzu's buffer
        pool and the in-process copies (see :func:`memory_budget`).
        If a kill left the index in the one state Kùzu cannot clean up (``rebuild``, the
        default), the store is rebuilt from its rows (:func:`salvage.rebuild_in_place`), the
        old file kept beside it, and a :class:`StoreRebuilt` warning says where.
        ``mirror=False`` (default: ``EBB_KUZU_MIRROR``, on) keeps no in-process copy of the
        tables between writes (see :mod:`ebb_core.kuzu.mirror`): slower, for tests.
        ``only_reads``: the caller will only read (``ebb stats``, ``ebb recall --no-reinforce``):
        a store that needs nothing done (no write-ahead log to replay, current schema, text
        index ready) is opened read-only, which writes nothing to disk (no log, no checkpoint,
        no sync on open or close); any other store is opened read-write and cleaned up as above.
        """
        self._check_path(path, create)
        kuzu = _kuzu.load()
        if only_reads and not read_only and self._clean_on_disk():
            try:
                self._open_read_only(kuzu, snapshot, memory_budget, mirror)
                return
            except _NotClean:
                pass  # opened read-write below, which recovers it
        recovering = self._leftover_log(read_only)
        self._budget = memory_budget_from_env() if memory_budget is None else int(memory_budget)
        self.tier_moves_per_transaction = moves_per_transaction(self._budget)
        recovering = self._open_engine(kuzu, read_only, recovering)
        if mirror is None:  # EBB_KUZU_MIRROR=0: no in-process copy kept (see kuzu.mirror)
            mirror = os.environ.get("EBB_KUZU_MIRROR", "1").strip().lower() not in _OFF
        self._init_state(snapshot, mirror)
        self.read_only = read_only
        self._connect(kuzu, path, read_only, recovering, self._snapshot, rebuild)
        if read_only:
            # (An only_reads open needs no look: an import's marker lives only while the text
            # index is "building", which _ready_for_reading sends to a writing open.)
            self._refuse_interrupted_import()

    def _clean_on_disk(self) -> bool:
        """Whether the store file is there and no write-ahead log or checkpoint file is left
        beside it (what a writer killed before it closed leaves)."""
        try:
            if os.stat(self._path).st_size == 0:
                return False
        except OSError:
            return False
        for leftover in (".wal", ".shadow", CHECKPOINT_FAILED):
            try:
                if os.stat(self._path + leftover).st_size > 0:
                    return False
            except OSError:
                pass
        return True

    def _open_read_only(
        self, kuzu: Any, snapshot: bool | None, memory_budget: int | None, mirror: bool | None
    ) -> None:
        """Open a clean store read-only (see ``only_reads``); :class:`_NotClean` (closed again)
        if it needs a writer after all."""
        self._budget = memory_budget_from_env() if memory_budget is None else int(memory_budget)
        self.tier_moves_per_transaction = moves_per_transaction(self._budget)
        self._open_engine(kuzu, True, False)
        if mirror is None:
            mirror = os.environ.get("EBB_KUZU_MIRROR", "1").strip().lower() not in _OFF
        self._init_state(snapshot, mirror)
        self._connect(kuzu, self._path, True, False, self._snapshot, False)
        self.read_only = True
        # Checked with the store's lock held, so no writer can have come and gone since
        # _clean_on_disk: a log now is one Kùzu replayed only in memory, which leaves the text
        # index without its rows; a writer replays it, rebuilds the index and checkpoints.
        if not self._clean_on_disk() or not self._ready_for_reading():
            self.close()
            raise _NotClean

    def _check_path(self, path: str | os.PathLike[str], create: bool) -> None:
        """Set ``_path`` and ``_folder``, refusing a path that cannot hold a store."""
        if os.fspath(path) in ("", ":memory:"):
            # Kùzu's in-memory mode has no file to lock, hand over or repair; without this
            # check the path was made absolute and a file named ':memory:' appeared in the
            # working directory.
            raise InvalidInput(
                f"{os.fspath(path)!r} is not a store path: Ebb keeps an embedded store in one "
                "file and has no in-memory mode; pass a file path (one in a temporary folder "
                "for a throwaway store)",
                field="path",
            )
        self._path = str(Path(path).expanduser().absolute())
        parent = Path(self._path).parent
        self._folder = str(parent)
        if not create and not Path(self._path).exists():
            raise NoStore(
                f"there is no Ebb store at {self._path} (nothing was created): point --db or "
                "EBB_DB_PATH at an existing store, or create one by writing to it "
                "(`ebb remember TEXT`, `ebb import FILE`)",
                path=self._path,
            )
        if not parent.exists():
            raise InvalidInput(
                f"cannot create the store at {self._path}: folder {parent} does not exist",
                field="path",
            )
        if Path(self._path).is_dir():
            raise InvalidInput(
                f"{self._path} is a folder; a Kùzu store is a single file: choose a file path",
                field="path",
            )

    def _leftover_log(self, read_only: bool) -> bool:
        """Whether a non-empty WAL is there (the last writer did not close cleanly); refuses
        to replay one without room for its checkpoint (:class:`StoreFull`)."""
        # A leftover WAL means the last writer did not close cleanly (killed, power loss). Kùzu
        # replays the WAL, but its full-text index misses the replayed rows (checked on 0.11.3),
        # so the index is rebuilt from the table after such a recovery.
        wal = Path(self._path + ".wal")
        recovering = wal.exists() and wal.stat().st_size > 0
        if recovering and not read_only:
            # Kùzu replays and checkpoints a leftover WAL as it opens: never without room (a
            # checkpoint that runs out of space leaves a store it cannot open, see _room).
            free, need = _room_for(self._path, self._folder)
            if free < need:
                raise StoreFull(
                    f"cannot open the store {self._path}: the disk is (nearly) full ({free >> 20} "
                    f"MiB free) and opening replays its {wal.stat().st_size >> 10} KiB write-ahead "
                    f"log, which needs {need >> 20} MiB. Free some space and open it again: "
                    "nothing is lost",
                    path=self._path,
                )
        return recovering

    def _open_engine(self, kuzu: Any, read_only: bool, recovering: bool) -> bool:
        """Open the database (``_db``); True if Kùzu replayed a leftover WAL."""
        try:
            # Checkpoints are taken by this store (see _maybe_checkpoint), never inside a write.
            self._db, replayed = _open_database(
                kuzu, self._path, read_only, _buffer_pool(self._budget)
            )
            # A WAL seen before a retried open may have been the closing process's own, gone
            # by the attempt that succeeded: only a log Kùzu replayed calls for the rebuild.
            recovering = recovering and replayed
        except RuntimeError as exc:
            msg = str(exc)
            # A writer closing elsewhere checkpoints through a ".shadow" file; opening just
            # then reads it half-written. Both are "busy right now": callers may wait and retry.
            if "lock" in msg.lower() or (".shadow" in msg and _held_elsewhere(self._path)):
                raise StoreLocked(
                    f"the store {self._path} is open for writing in another process "
                    "(an `ebb mcp` call in progress, or another program): try again in a "
                    "moment, or stop that process",
                    path=self._path,
                ) from None
            raise storage_error(exc, self._path, "open") from None
        return recovering

    def _init_state(self, snapshot: bool | None, mirror: bool) -> None:
        """The session's state and the in-process copies, all empty."""
        self._lock = threading.RLock()
        self._depth = 0
        self._begun = False  # the current transaction has sent BEGIN
        self._sealed = False  # ... or was committed by a final write_event
        self._at_commit: dict[str, list[Any]] = {}  # COPYs sent just before the commit
        # Prepared once per query text: measured ~30% faster than re-planning on every call.
        self._prepared: dict[str, Any] = {}
        self._mirror = Mirror(enabled=mirror)  # every in-process copy (see kuzu.mirror)
        self._row_reads = 0  # rows read from the table (see _row: when to take a snapshot)
        self._searches = 0  # text searches so far (see _warm: when to build the recall columns)
        self._cold_left = _COLD_CALLS  # lookups answered by queries before the cache is built
        if snapshot is None:  # EBB_KUZU_SNAPSHOT=0 keeps memory down on very large stores
            snapshot = os.environ.get("EBB_KUZU_SNAPSHOT", "1").strip().lower() not in _OFF
        self._snapshot = snapshot
        # The in-process copy of the full-text index (kuzu.text_index): built at the first warm
        # search when its postings fit in an eighth of the budget; never with the mirror off.
        text_copy = os.environ.get("EBB_KUZU_TEXT_COPY", "1").strip().lower() not in _OFF
        self._text_skip = not (text_copy and mirror)
        self._closed = False
        self._wal_failed = False
        self._reshaped = False  # rows created or deleted since the last checkpoint (see there)
        self._commits = 0  # commits since the last checkpoint (see _maybe_checkpoint)
        self._index_dropped = False  # a bulk_load has dropped the text index (see there)
        self._import_marker: str | None = None  # deleted by the next BEGIN (KuzuBulk.bulk_load)
        self._rescored = UNKNOWN  # the scores' watermark, read at the first write (kuzu.rescored)
        self._keys_kept = 0  # inside KuzuRescored.keys_kept: writes that change no score
        self._vec_dim, self._vec_checked = None, False  # the vector table (kuzu/vectors)
        _OPEN.add(self)  # until close (or _abandon)

    def _connect(
        self,
        kuzu: Any,
        path: str | os.PathLike[str],
        read_only: bool,
        recovering: bool,
        snapshot: bool | None,
        rebuild: bool,
    ) -> None:
        """Connect, load the extensions, and (writing) make sure of the schema and text index;
        a store whose index a crash left unrecoverable is rebuilt from its rows (``rebuild``)."""
        try:
            self._conn = kuzu.Connection(self._db)
            self._held = 0  # bytes of Arrow tables the connection keeps (see _let_go_of_tables)
            for ext in ("fts", "vector"):
                self._exec(f"LOAD EXTENSION {ext}")
            if not read_only:
                self._remove_copy_files()
                existing = self._ensure_schema()
                if existing is None or any(t.startswith(OLD_TAIL_PREFIX) for t in existing):
                    self._upgrade_vector_tails()  # an older store's tails (kuzu.vector_rows)
                # Before anything reads: an import killed after its first COPY is removed.
                self._finish_interrupted_import()
                self._copy_if_stopped(recovering)
                self._ensure_text_index(force=recovering)
        except StorageError as exc:
            self._abandon()
            # StoreFull: nothing to mend, only room to make. Otherwise the store's catalog and
            # its index storage disagree (after replaying a WAL that held a dropped index:
            # "Cannot find table catalog entry ...", or an index build that cannot succeed).
            missing_extension = "extension" in str(exc).lower() and "catalog" not in str(exc)
            if not rebuild or isinstance(exc, StoreFull) or read_only or missing_extension:
                raise
            kept = self._rebuild_from_rows(exc)
            self.__init__(  # type: ignore[misc]
                path,
                read_only=read_only,
                snapshot=snapshot,
                rebuild=False,
                memory_budget=self._budget,
                mirror=self._mirror.enabled,
            )
            if isinstance(exc, CopyInstead):  # see _reopen_after_stop
                self._kept_copy = kept
        except BaseException as exc:
            self._abandon()
            if isinstance(exc, RuntimeError):
                raise storage_error(exc, self._path, "open") from None
            raise

    def _rebuild_from_rows(self, exc: StorageError) -> tuple[Path, bool]:
        """``_connect``'s rebuild of a store it could not open as it is (``exc``): copied into
        a new file, which takes its place, and a ``StoreRebuilt`` warning; returns where the
        old file was kept, and whether the copy read every table."""
        # What cleaning up cannot mend (see _drop_text_index), or a store the open must copy
        # (CopyInstead: an index this budget cannot build at once, a stopped writer): every
        # row is copied into a new file, which builds the index in steps if it must and
        # takes the store's place; the old one is kept.
        from ..repair import Report
        from ..salvage import rebuild_in_place, salvaged_whole

        report = Report(self._path)
        try:
            aside = rebuild_in_place(
                self._path,
                memory_budget=self._budget,
                kept_as="before-rebuild" if isinstance(exc, CopyInstead) else "damaged",
                report=report,
            )
        except RuntimeError as again:  # the rows cannot be read either
            raise storage_error(again, self._path, "open") from None
        if isinstance(exc, CopyInstead):
            Path(self._path + CHECKPOINT_FAILED).unlink(missing_ok=True)  # done
            said = (
                f"the store {self._path} was copied into a new file {exc.why}. Nothing "
                "was lost; the file as it was (every row of which is in the new one: "
                "delete it once the store works; a later copy in this process replaces "
                f"it) is kept at {aside}"
            )
        else:
            said = (
                f"the store {self._path} was rebuilt from its rows after a crash left its "
                f"text index unrecoverable; the damaged file is kept at {aside}"
            )
        warnings.warn(said, StoreRebuilt, stacklevel=4)  # 4: the caller of __init__
        return aside, salvaged_whole(report)

    def _reopen_after_stop(self, copy_why: str | None = None) -> None:
        """Called with the lock held, outside any unit of work, once a checkpoint that ran out
        of the buffer pool has stopped the engine (``engine.Stopped``), or with ``copy_why``
        (``rebuild_text_index``): the store is opened again in this process, which copies it
        into a fresh file (``_copy_if_stopped``), and the call goes on there. A stopped
        engine is never touched again (its references are leaked); a second engine on the
        same file is Kùzu's to allow in one process (a file lock is the process's), and reads
        the file and its WAL as a new process would. The lock object is kept, so that
        threads waiting on it go on in turn."""
        lock, before = self._lock, self._kept_copy
        if copy_why is not None:
            self._copy_asked = copy_why
            self.close()  # a working engine: closed as a process would close it
        try:
            self.__init__(  # type: ignore[misc]
                self._path,
                snapshot=self._snapshot,
                memory_budget=self._budget,
                mirror=self._mirror.enabled,
            )
        finally:
            self._lock, self._copy_asked = lock, None
        # One kept copy, not one a round: the file an earlier copy kept holds nothing that
        # the file copied now did not (when that copy read every table), nor does this one.
        now = self._kept_copy
        if before is not None and now is not None and now is not before and now[1]:
            for suffix in ("", ".wal", ".shadow"):
                Path(f"{before[0]}{suffix}").unlink(missing_ok=True)

    def _copy_if_stopped(self, recovering: bool) -> None:
        """The last writer stopped after a checkpoint ran out of the buffer pool (a marker
        beside the store: engine.stop_after_failed_checkpoint): the open copies the store into
        a fresh file (CopyInstead), since Kùzu 0.11.3 makes each checkpoint after revised
        texts need more of the pool, in proportion to all of them, until the table is copied
        (a 10k-memory store under 64M stopped after 1,080 revisions, again after 40 more once
        reopened, and after 1,060 once copied)."""
        asked, self._copy_asked = self._copy_asked, None
        if asked is not None:  # rebuild_text_index: the open made for it copies the store
            raise CopyInstead(asked, path=self._path, why=asked)
        marker = Path(self._path + CHECKPOINT_FAILED)
        try:
            budget = int(json.loads(marker.read_text())["budget"])
        except FileNotFoundError:
            return
        except (OSError, ValueError, KeyError, TypeError):
            budget = self._budget  # unreadable: the copy is what matters
        if recovering:  # the file kept aside says its index misses the replayed rows
            self.set_meta(INDEX_STATE, "building")
        raise CopyInstead(
            f"cannot open the store {self._path} as it is: the process that last wrote it "
            "stopped after a checkpoint ran out of the buffer pool, and opening it with its "
            "rebuild on (the default) copies it into a fresh file first. Nothing is lost",
            path=self._path,
            why="after a checkpoint ran out of the buffer pool in the process that last wrote "
            f"it ({pool_given(budget)}): a fresh file resets what revised texts cost "
            "each checkpoint",
        )

    def _abandon(self) -> None:
        """Release the engine after a failed open (never raises: the cause is what matters)."""
        self._closed = True
        _OPEN.discard(self)
        if self._wal_failed:  # see close
            _ABANDONED.append((getattr(self, "_conn", None), self._db))
            return
        for thing in (getattr(self, "_conn", None), self._db):
            try:
                if thing is not None:
                    thing.close()
            except Exception:  # already failing: the first error is the one reported
                pass


class _NotClean(Exception):
    """A store opened read-only turned out to need a writer (see ``KuzuStore._open_read_only``)."""


_COLD_CALLS = 16  # most lookups answered by queries before the recall columns are built
_OFF = ("0", "false", "no", "off")

_TIERS = {int(t): t for t in Tier}
