"""The Kùzu store's session: one connection, prepared statements, lazily begun transactions,
room checks and checkpoints, rollback, closing, and bulk loads through Arrow.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from ..errors import (
    EbbError,
    StorageError,
    StoreFull,
)
from . import module as _kuzu
from .base import KuzuBase
from .engine import (
    _ABANDONED,
    _CHECKPOINT_WAL,
    _HELD_PER_COMMIT,
    _OPEN,
    _PREPARED_MAX,
    _ROOM,
    _UPDATES_WAL,
    Stopped,
    _all,
    _buffer_pool,
    _reads_only,
    _reshapes,
    _room_for,
    _writes,
    stop_after_failed_checkpoint,
    storage_error,
)
from .parquet_ahead import ParquetAhead, write_parquet
from .queries import (
    _release_arrow_memory,
)
from .rescored import UNKNOWN
from .tables import memory_arrow_types


class KuzuFiles(KuzuBase):
    """Bulk writes from Arrow tables and Parquet files, and reads into Arrow (the base of
    :class:`KuzuSession`)."""

    def _load(
        self,
        query: str,
        columns: Mapping[str, list[Any]],
        types: Mapping[str, str],
        *,
        solo: bool = False,
    ) -> None:
        """Run ``LOAD FROM <arrow table> <query>`` with the given columns (``solo``: see _run)."""
        import pyarrow as pa

        table = pa.table(
            {
                name: pa.array(values, type=memory_arrow_types()[types[name]])
                for name, values in columns.items()
            }
        )
        self._run(f"LOAD FROM $rows {query}", {"rows": table}, solo=solo)

    def _copy(
        self,
        name: str,
        table: Any,
        *,
        may_roll_back: bool,
        ends: tuple[str, str] | None = None,
        solo: bool = False,
    ) -> None:
        """Write an Arrow table whose columns are the table's, in order: ``COPY name FROM``,
        or, when ``may_roll_back`` (the caller's transaction may still roll back after this
        write), ``LOAD FROM … CREATE``. ``ends``: the node tables a rel table ``name`` joins
        (its first two columns are their primary keys). ``solo``: committed on its own (see
        ``_run``): a committed bulk load's ``COPY``, which a marker undoes if the import fails.

        Kùzu 0.11.3: rolling back a transaction in which a ``COPY`` succeeded damages the
        table (docs/kuzu.md, known issues; ``bench/kuzu_rollback_copy.py``): a node table's
        next writes and checkpoints grow the store file without bound (2 GB within three
        one-row writes after 80,000 rows COPYed into a 1,000-row table; a 100k store reached
        58 GB), or the next COPY aborts the process, even into a table that was empty; a rel
        table loses every committed row. A rolled-back ``LOAD FROM … CREATE`` does neither.
        So ``COPY`` only as the last write of a transaction nothing can fail after but its
        commit (or of none at all).

        A large table goes through a Parquet file beside the store, deleted after: Kùzu's
        connection keeps every Arrow table passed to it until the transaction is over (see
        _let_go_of_tables), and an import's tables are ~0.9 GB at a million memories."""
        if isinstance(table, ParquetAhead):
            try:
                self._run(f"COPY {name} FROM '{table.wait()}'", solo=solo)
            finally:
                table.discard()
            return
        folder = self._folder
        if not may_roll_back:
            create = ""
        elif ends is None:
            cols = ", ".join(f"`{c}`: `{c}`" for c in table.column_names)
            create = f"CREATE (:{name} {{{cols}}})"
        else:
            # Two MATCH clauses, each a primary-key lookup: with one ("MATCH (a …), (b …)")
            # Kùzu 0.11.3 joined every pair and 2,000 links filled a 300 MB buffer pool.
            a, b, *props = table.column_names
            cols = ", ".join(f"`{c}`: `{c}`" for c in props)
            create = (
                f"MATCH (a:{ends[0]} {{uid: `{a}`}}) MATCH (b:{ends[1]} {{uid: `{b}`}}) "
                f"CREATE (a)-[:{name} {{{cols}}}]->(b)"
            )
        if table.num_rows < _COPY_VIA_FILE or any(c in folder for c in "'\\\n"):
            if create:
                self._run(f"LOAD FROM $t {create}", {"t": table}, solo=solo)
            else:
                self._run(f"COPY {name} FROM $t", {"t": table}, solo=solo)
            return
        import tempfile  # only a bulk load needs it (and random, shutil...)

        fd, path = tempfile.mkstemp(prefix=self._copy_prefix(), suffix=".parquet", dir=folder)
        os.close(fd)
        try:
            write_parquet(table, path)
            if create:
                self._run(f"LOAD FROM '{path}' {create}", solo=solo)
            else:
                self._run(f"COPY {name} FROM '{path}'", solo=solo)
        finally:
            with suppress(OSError):
                os.unlink(path)

    def _parquet_ahead(self, table: Any, *, any_size: bool = False) -> ParquetAhead | None:
        """A Parquet file beside the store that ``table`` is written to in a thread, from its
        ``start``, for a later ``_copy`` that ``COPY``s it (not ``may_roll_back``), while the
        caller writes what comes before it; None where ``_copy`` would not go through a file
        (``any_size``: whatever its rows, where a file is possible at all)."""
        folder = self._folder
        small = table.num_rows < _COPY_VIA_FILE and not any_size
        if small or any(c in folder for c in "'\\\n"):
            return None
        import tempfile

        fd, path = tempfile.mkstemp(prefix=self._copy_prefix(), suffix=".parquet", dir=folder)
        os.close(fd)
        return ParquetAhead(table, path)

    def _copy_prefix(self) -> str:
        return f".{Path(self._path).name}.copy-"

    def _remove_copy_files(self) -> None:
        """Parquet files a killed bulk load of this store left (only the holder of the store's
        lock writes them, and this process holds it)."""
        prefix = self._copy_prefix()  # matched as text: glob costs a one-shot command an import
        for name in os.listdir(self._folder):
            if name.startswith(prefix) and name.endswith(".parquet"):
                with suppress(OSError):
                    os.unlink(os.path.join(self._folder, name))

    def _arrow(self, query: str, params: Mapping[str, Any], *, one_chunk: bool = False) -> Any:
        """The result of ``query`` as one Arrow table of single-chunk columns.

        Kùzu hands the result over in chunks of ``_ARROW_ROWS`` rows, which ``combine_chunks``
        then copies into one (a second copy of the whole result, ~0.5 GB for the row snapshot
        at 1M memories, while the first is still held): up to that many rows there is one chunk
        and no copy. ``one_chunk``: always one chunk, for results of numbers and short strings
        (a namespace's links, ~5M rows at 1M memories), whose columns cannot pass Arrow's 2 GiB
        limit on one string array.
        """
        result = self._run(query, params)
        assert not isinstance(result, list)
        try:
            return result.get_as_arrow(chunk_size=-1 if one_chunk else _ARROW_ROWS).combine_chunks()
        except RuntimeError as exc:
            raise storage_error(exc, self._path) from None


class KuzuSession(KuzuFiles):
    """The connection and its transactions (mixed into :class:`~ebb_core.kuzu_store.KuzuStore`)."""

    @property
    def location(self) -> str:
        return self._path

    def _q(self, query: str, params: Mapping[str, Any] | None = None) -> list[list[Any]]:
        with self._lock:  # one Kùzu connection, shared by the threads async adapters use
            if not self._depth and isinstance(self._conn, Stopped) and not self._closed:
                self._reopen_after_stop()
            return self._q_locked(query, params)

    def _q_locked(
        self, query: str, params: Mapping[str, Any] | None, *, solo: bool = False
    ) -> list[list[Any]]:
        """Run a prepared ``query``; ``solo``: as its own auto-committed transaction."""
        if self.read_only and _writes(query):
            self._refuse_write()
        if _reshapes(query):
            self._reshaped = True
        stmt = self._prepared.get(query)
        if stmt is None:
            # kuzu 0.11 (its final release) deprecates prepare(); prepared statements are faster.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                stmt = self._conn.prepare(query)
            if len(self._prepared) >= _PREPARED_MAX:  # event statements vary in shape
                self._prepared.clear()
            self._prepared[query] = stmt
        if not solo:
            result = self._run(stmt, params, read=_reads_only(query))
        else:
            self.check_room()
            if self._rescored and not _reads_only(query):  # see kuzu.rescored
                self._clear_rescored()
            try:
                result = self._conn.execute(stmt, dict(params or {}))
            except RuntimeError as exc:
                raise self._failed(exc) from None
        assert not isinstance(result, list)
        try:
            return _all(result)
        except RuntimeError as exc:
            raise storage_error(exc, self._path) from None

    def _run(
        self,
        query: Any,
        params: Mapping[str, Any] | None = None,
        *,
        read: bool = False,
        solo: bool = False,
    ) -> Any:
        """Execute a statement, first opening the current transaction if it is not open yet.

        Transactions begin lazily, at their first write (``read``: the statement only reads):
        one that only reads never opens (this process is the only writer and holds the lock,
        so its reads agree), and one whose only write is a final :meth:`write_event` sends
        that write alone, committed with the statement (see ``transaction``). A read after
        the first write runs inside the transaction, so it sees that write. A Kùzu error
        comes out as an ``EbbError`` (see :func:`storage_error`). ``solo``: a write committed
        on its own, before the current transaction's first write (a committed bulk load's
        ``COPY``, see ``KuzuBulk.bulk_load``).
        """
        if solo:
            if self._begun:
                raise RuntimeError("a solo write after the transaction's first write")
            self.check_room()
        elif self._depth:
            if self._sealed:
                raise RuntimeError(  # a bug in the caller, not a storage failure
                    "a statement after a final write_event: that write is already committed"
                )
            # Read-only: every statement reads (writes are refused by their text), each in
            # its own read transaction.
            if not self._begun and not read and not self.read_only:
                self.check_room()
                self._exec("BEGIN TRANSACTION")
                self._begun = True
                if self._import_marker is not None:
                    # A committed bulk load's marker goes in the transaction that commits the
                    # rest of the import (see KuzuBulk.bulk_load).
                    self._exec_params(
                        "MATCH (m:Meta {key: $k}) DELETE m", {"k": self._import_marker}
                    )
                    self._import_marker = None
        if isinstance(query, str):
            if self.read_only and _writes(query):
                self._refuse_write()
            if _reshapes(query):
                self._reshaped = True
        if self._rescored and not read and (not isinstance(query, str) or _writes(query)):
            self._clear_rescored()  # a write: scores may change (see kuzu.rescored)
        if params:
            self._note_tables(params)
        try:
            return self._conn.execute(query, dict(params or {}))
        except RuntimeError as exc:
            raise self._failed(exc) from None

    def _exec_params(self, query: str, params: Mapping[str, Any]) -> None:
        self._reshaped = self._reshaped or _reshapes(query)
        try:
            self._conn.execute(query, dict(params))
        except RuntimeError as exc:
            raise self._failed(exc) from None

    def _note_tables(self, params: Mapping[str, Any]) -> None:
        for value in params.values():
            if hasattr(value, "nbytes") and hasattr(value, "num_rows"):  # an Arrow table
                self._held += int(value.nbytes)

    def _let_go_of_tables(self) -> None:
        """Kùzu 0.11.3's connection keeps every Arrow table passed to it (COPY FROM $t,
        LOAD FROM $rows) until it closes: ~850 MB after a 1M-memory import, and more after
        every maintain of a long-running process. Past ``_HELD_MAX`` bytes, between
        transactions, the connection is replaced by a new one (prepared statements go too)."""
        if self._held < _HELD_MAX or self._depth or self._closed or self._wal_failed:
            return
        kuzu = _kuzu.load()
        self._prepared.clear()
        self._conn.close()
        self._conn = kuzu.Connection(self._db)
        self._held = 0
        _release_arrow_memory()

    def check_room(self, extra: int = 0) -> None:
        """Refuse a write (:class:`StoreFull`) unless the disk has room for it and for the
        checkpoint that folds the WAL into the file.

        Kùzu 0.11.3 cannot survive running out of space while it appends to its WAL: the
        write fails, its in-memory state is corrupted and the process later aborts
        (``terminate called after throwing kuzu::common::IOException``), so Ebb never lets a
        write start without room. ``extra``: bytes the write itself may need beyond 4 MiB.
        """
        free, need = self._room(extra)
        if free < need:
            raise StoreFull(
                f"the disk holding the store {self._path} is (nearly) full: {free >> 20} MiB "
                f"free, a write needs {need >> 20} MiB with its checkpoint. Nothing was "
                "written; free some space and retry (everything stored so far is kept)",
                path=self._path,
            )

    def _room(self, extra: int = 0) -> tuple[int, int]:
        """(free bytes, bytes a write of ``extra`` bytes and the next checkpoint may need).

        A checkpoint writes the changed column chunks to new pages of the file and copies the
        pages it changes in place into the ``.shadow`` file, and Kùzu 0.11.3 does not notice
        when that copy runs out of space: it logs the checkpoint as done and leaves a store it
        cannot open. Measured on a 20 MB tmpfs: folding 1 MB of WAL from remembers into a 4 MB
        store grew it by 10.8 MB with a 5.3 MB shadow. So the room kept is the store's size
        (the most a checkpoint can rewrite) plus 16 times the WAL plus 4 MiB.
        """
        return _room_for(self._path, self._folder, extra)

    def _failed(self, exc: RuntimeError) -> StorageError:
        """The EbbError for a Kùzu error; notes a failed WAL append, after which Kùzu's state
        in this process cannot be trusted (see ``close``)."""
        err = storage_error(exc, self._path)
        if ".wal" in str(exc) and "write" in str(exc).lower():
            self._wal_failed = True
        return err

    def _refuse_write(self) -> None:
        """A write on a store opened read-only, refused before Kùzu sees it: Kùzu 0.11.3 takes
        some writes in read-only mode as far as its files, fails there ("Cannot write to
        file") and leaves a ``.wal`` and ``.shadow`` behind."""
        raise StorageError(
            f"the store {self._path} was opened for reading only (only_reads=True): this "
            "write was refused and nothing was written; open it without only_reads to write",
            path=self._path,
        )

    def _exec(self, query: str) -> None:
        if self.read_only and _writes(query):
            self._refuse_write()
        self._reshaped = self._reshaped or _reshapes(query)
        try:
            self._conn.execute(query)
        except RuntimeError as exc:
            err = self._failed(exc)
            if query == "CHECKPOINT" and "buffer pool is full" in str(exc).lower():
                # Never used again here: see engine.stop_after_failed_checkpoint
                self._conn = self._db = stop_after_failed_checkpoint(
                    self._conn, self._db, self._path, self._budget
                )
                self._forget_cached()
                self._prepared.clear()
                err = self._conn.error
            raise err from None
        if query == "CHECKPOINT":
            self._reshaped, self._commits = False, 0  # the WAL is folded into the file

    def _rows(self, query: str) -> list[list[Any]]:
        result = self._run(query)
        assert not isinstance(result, list)
        try:
            return _all(result)
        except RuntimeError as exc:
            raise storage_error(exc, self._path) from None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            if isinstance(self._conn, Stopped) and not self._closed:
                self._reopen_after_stop()
            # BEGIN waits for the first statement (see _run): Kùzu's BEGIN and COMMIT cost
            # ~1.4 ms together, a large share of a remember.
            self._depth, self._begun, self._sealed = 1, False, False
            gate: Any = None
            copied = 0
            try:
                yield
                if self._at_commit:
                    copied = sum(t.num_rows for ts in self._at_commit.values() for t in ts)
                    # The last write: a Ctrl-C from here waits for the commit (see _copy_at_commit)
                    gate = _hold_interrupts()
                    self._flush_deferred(at_commit=True)
            except BaseException:
                begun, self._depth = self._begun, 0
                self._begun = self._sealed = False
                self._at_commit.clear()
                _let_interrupts_go(gate, raise_held=False)
                self._rollback(begun)
                raise
            begun, sealed, self._depth = self._begun, self._sealed, 0
            self._begun = self._sealed = False
            if begun:
                try:
                    self._exec("COMMIT")
                except BaseException:
                    # Nothing was committed (Kùzu rolls back a failed commit): the in-process
                    # copies, written through during the transaction, are dropped too.
                    _let_interrupts_go(gate, raise_held=False)
                    self._forget_cached()
                    self._prepared.clear()
                    with suppress(EbbError):
                        self._exec("ROLLBACK")
                    raise
            if begun or sealed:  # a transaction that only read leaves the WAL as it was
                self._maybe_checkpoint()
            self._let_go_of_tables()
            if copied >= _RELEASE_AFTER_COPIED:
                # A large COPY at the commit (a first maintain's 809k audit rows at 1M): what
                # its columns freed goes back to the system now, not at the next replaced
                # connection (see _RELEASE_AFTER_COPIED).
                _release_arrow_memory()
            _let_interrupts_go(gate, raise_held=True)  # a Ctrl-C held till the commit, now

    def _copy_at_commit(self, name: str, table: Any) -> None:
        """Write the Arrow ``table`` into the node table ``name`` with ``COPY``, as the last
        statement of the current transaction, just before its commit.

        ``COPY`` costs Kùzu about half the CPU of ``LOAD FROM … CREATE`` (a first maintain at
        1M writes ~800k audit rows), but a rolled-back ``COPY`` damages the table (:meth:`_copy`).
        Sent last, with a Ctrl-C held from it until the commit has ended (then raised), only a
        failure of the ``COPY`` or of the commit itself (a full disk) can still roll it back, as
        for an import past the buffer pool (``KuzuBulk.bulk_rollback_safe``). A read of the
        table before then writes the rows at once, rollback-safe (:meth:`_flush_deferred`)."""
        if self._sealed:
            raise RuntimeError(  # a bug in the caller, not a storage failure
                "a statement after a final write_event: that write is already committed"
            )
        if not self._depth:
            with self.transaction():
                self._copy_at_commit(name, table)
            return
        self._at_commit.setdefault(name, []).append(table)

    def _flush_deferred(self, *, at_commit: bool = False) -> None:
        """Write what :meth:`_copy_at_commit` kept, one table each: at the commit the last by
        ``COPY``, otherwise (a read of those tables: it sees the transaction's own writes) by
        ``LOAD FROM … CREATE``, which rolls back cleanly."""
        if not self._at_commit:
            return
        import pyarrow as pa

        # only audit rows wait for the commit: they change no score (see kuzu.rescored)
        with self._lock, self.keys_kept():
            while self._at_commit:
                name, tables = self._at_commit.popitem()
                safe = not at_commit or bool(self._at_commit)
                self._copy(name, pa.concat_tables(tables), may_roll_back=safe)

    def _maybe_checkpoint(self, force: bool = False) -> None:
        """Checkpoint once the WAL passes Kùzu's usual threshold (auto-checkpoints are off), or
        ``_UPDATES_WAL`` while it holds updates alone (``_reshaped`` false: no memory, link,
        vector or table created or deleted since the last checkpoint), whose in-memory copies
        Kùzu keeps till then, or once the commits since the last one may hold half the buffer
        pool at ``_HELD_PER_COMMIT`` each (both: see ``engine.memory_budget_from_env``)...

        With Kùzu's own auto-checkpoint, a checkpoint that fails (a full disk) raised from the
        write that triggered it although that write had committed: a stored memory reported
        as not stored. Here a failed checkpoint is not the write's failure: the write is safe in
        the WAL, and the next checkpoint (or open, once there is room) folds it in.
        """
        try:
            size = os.stat(self._path + ".wal").st_size
        except OSError:  # none: nothing is pending (Kùzu checkpoints a large COPY itself)
            self._reshaped, self._commits = False, 0
            return
        self._commits += 1
        force = force or self._commits * _HELD_PER_COMMIT >= _buffer_pool(self._budget) // 2
        limit = _CHECKPOINT_WAL if self._reshaped else _UPDATES_WAL
        if size < min(limit, _ROOM // 4) and not force:  # too little to be worth one
            return
        free, need = self._room()
        # ... and sooner when room runs low, so that what a write must keep free (see _room)
        # shrinks back; never without the room the checkpoint itself needs.
        if size and (force or size >= limit or free < 2 * need) and free >= need:
            with suppress(StorageError):
                self._exec("CHECKPOINT")

    def _rollback(self, begun: bool = True) -> None:
        self._forget_cached()
        self._prepared.clear()
        if not begun:  # nothing was sent, or only a final write, which failed on its own
            return
        try:
            self._exec("ROLLBACK")
        except StorageError as exc:
            # A failed statement already aborted the transaction inside Kùzu.
            if "no active transaction" not in str(exc).lower():
                raise
        # kuzu 0.11.3 sometimes reports a write-write conflict on the next update of a row the
        # rolled-back transaction had updated; a checkpoint clears the stale version marks.
        # (On a full disk it cannot run; the error that caused the rollback is the one raised.)
        with suppress(StoreFull):
            self._exec("CHECKPOINT")

    def _forget_cached(self) -> None:
        """Drop every in-process copy of stored data (after a change the copies cannot follow)."""
        self._mirror.invalidate()  # the vector copy too
        self._rescored = UNKNOWN  # read again (a rollback may have restored it)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            _OPEN.discard(self)
            self._prepared.clear()
            if self._wal_failed:
                # Closing would flush a WAL Kùzu could not write, which aborts the process.
                # Everything committed before is on disk; the engine is left to process exit.
                _ABANDONED.append((self._conn, self._db))
                return
            # The copies go first: Kùzu checkpoints the WAL as it closes, which needs memory
            # (a 1M store's peak RSS was reached there, with the copies still held).
            self._mirror.release()
            _release_arrow_memory()
            self._conn.close()
            self._db.close()

    @property
    def wal_failed(self) -> bool:
        """Kùzu failed to append to the WAL in this process (a disk that filled up under
        another writer): the process should exit soon (see ``close``) and reopen the store."""
        return self._wal_failed


def _hold_interrupts() -> Any:
    """A Ctrl-C from now on is held until :func:`_let_interrupts_go` (in the main thread)."""
    from ..import_job import _InterruptGate

    gate = _InterruptGate().__enter__()
    gate.hold()
    return gate


def _let_interrupts_go(gate: Any, *, raise_held: bool) -> None:
    """Ctrl-C handled as before :func:`_hold_interrupts`; one held meanwhile is raised now
    (``raise_held``) or dropped (an error is on its way out already)."""
    if gate is None:
        return
    gate.__exit__(None, None, None)
    if raise_held:
        gate.release()


_ARROW_ROWS = 1 << 21  # rows per chunk of an Arrow result (see KuzuSession._arrow)
_COPY_VIA_FILE = 200_000  # rows from which a bulk load goes through a Parquet file
#: Rows a transaction COPYs at its commit (its ``_at_commit`` tables) from which the commit
#: hands the memory their columns freed back to the system (``_release_arrow_memory``). Past
#: it, the release pays: bench_core's 1M peak RSS, reached in the recalls after a first
#: maintain that COPYs 809k audit rows, was 3,121 MB without it, 2,967 MB with it (efc6f8b);
#: below it, it costs: at 100k (82k rows) the recalls after it were slower with the release.
#: Any value between the two would do; 200k, the Parquet threshold's, was the one measured.
_RELEASE_AFTER_COPIED = 200_000
_HELD_MAX = 64 << 20  # Arrow bytes a connection may keep before it is replaced
