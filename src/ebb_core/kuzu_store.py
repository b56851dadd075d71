"""``KuzuStore``: the embedded backend (default). One database file on disk, no server."""

from __future__ import annotations

import functools
import glob
import json
import os
import re
import tempfile
import threading
import time
import warnings
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from . import _kuzu
from .clock import from_us, to_us
from .errors import (
    BackendUnavailable,
    EbbError,
    InvalidInput,
    NoStore,
    NotFound,
    StorageError,
    StoreFull,
    StoreLocked,
    StoreRebuilt,
)
from .kuzu.audit import KuzuAudit
from .kuzu.bulk import KuzuBulk
from .kuzu.copies import _BASE_COLUMNS, _ROW_KEYS, _RecallCache, _RowCache
from .kuzu.maintain import KuzuMaintain
from .kuzu.queries import (
    _MEMORY_COLUMNS,
    _SMALL,
    LINK_SEP,
    RECENT_LINKS,
    SEP,
    _arrow_types,
    _release_arrow_memory,
    uid,
)
from .kuzu.queries import FTS_INDEX as FTS_INDEX
from .kuzu.queries import INDEX_STATE as INDEX_STATE
from .kuzu.search import KuzuSearch
from .kuzu_vectors import KuzuVectors
from .model import Edge, Node, Tier
from .records import NODE_PROPERTIES, field_value, node_from_row, node_row
from .store import (
    SUPERSEDES,
    UPDATABLE_FIELDS,
    Adjustment,
    Counts,
    GraphStore,
    Incident,
    Link,
    Match,
    memory_exists,
)

SCHEMA_VERSION = "4"
STOPWORDS_TABLE = "default_english_stopwords"
STOPWORDS = 570  # rows of Kùzu 0.11.3's default English stop-word table

_NODE_COLS = (
    "id, ns, kind, text, props, created_us, updated_us, last_read_us, pinned, tier, "
    "review_reason, queued_us, base_key, key, degree"
)


def _node_ret(var: str) -> str:
    return ", ".join(f"{var}.{c.strip()}" for c in _NODE_COLS.split(","))


_SCHEMA = [
    "CREATE NODE TABLE IF NOT EXISTS Memory(uid STRING PRIMARY KEY, id STRING, ns STRING, "
    "kind STRING, text STRING, props STRING, created_us INT64, updated_us INT64, "
    "last_read_us INT64, pinned BOOLEAN, tier INT64, review_reason STRING, queued_us INT64, "
    "base_key DOUBLE, key DOUBLE, degree INT64, recent_links STRING)",
    "CREATE REL TABLE IF NOT EXISTS Link(FROM Memory TO Memory, kind STRING, weight DOUBLE, "
    "created_us INT64, reinforced_us INT64, props STRING)",
    "CREATE NODE TABLE IF NOT EXISTS Audit(uid STRING PRIMARY KEY, ns STRING, seq INT64, "
    "at_us INT64, action STRING, node_id STRING, from_tier INT64, to_tier INT64, actor STRING, "
    "reason STRING, payload STRING)",
    "CREATE NODE TABLE IF NOT EXISTS Meta(key STRING PRIMARY KEY, value STRING)",
]


_TABLES = ("Memory", "Link", "Audit", "Meta")  # what each statement of _SCHEMA creates


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


_EDGE_RET = "e.kind, e.weight, e.created_us, e.reinforced_us, e.props"


_COLUMN = {"updated_at": "updated_us", "last_read_at": "last_read_us", "queued_at": "queued_us"}


def _set_clause(deltas: Sequence[str], cols: Sequence[str], prefix: str) -> str:
    """``SET`` items adding ``d_<col>`` to counters and assigning ``v_<col>`` to fields."""
    return ", ".join(
        [f"n.{d} = n.{d} + {prefix}d_{d}" for d in deltas]
        + [f"n.{c} = {prefix}v_{c}" for c in cols]
    )


def _change_sets(
    v: str, adj: Adjustment, held: Mapping[str, Any] | None, params: dict[str, Any]
) -> list[str]:
    """``SET`` items applying ``adj`` to the node bound to ``v`` (their values go in ``params``).

    With ``held``, the store's cached row, already changed in step, the new scores are sent as
    values: ~0.2 ms cheaper per node than Kùzu adding to what it reads, and the same float
    additions, so the same numbers.
    """
    items = []
    for col, attr in _DELTA_OF.items():
        delta = getattr(adj, attr)
        if delta and held is not None:
            items.append(f"{v}.{col} = ${v}_a_{col}")
            params[f"{v}_a_{col}"] = held[col]
        elif delta:
            items.append(f"{v}.{col} = {v}.{col} + ${v}_d_{col}")
            params[f"{v}_d_{col}"] = delta
    for f, value in adj.fields.items():
        col, stored = _field_value(f, value)
        items.append(f"{v}.{col} = ${v}_v_{col}")
        params[f"{v}_v_{col}"] = stored
    return items


def _field_value(field: str, value: Any) -> tuple[str, Any]:
    return field_value(field, value)


class KuzuStore(KuzuVectors, KuzuSearch, KuzuBulk, KuzuAudit, KuzuMaintain, GraphStore):
    """Embedded Kùzu backend: a single database file (plus its ``.wal``) at ``path``.

    A second process cannot open a file this process holds open: it gets :class:`StoreLocked`.
    """

    backend = "kuzu"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        snapshot: bool | None = None,
        create: bool = True,
        rebuild: bool = True,
        memory_budget: int | None = None,
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
        default), the store is rebuilt from its rows (:func:`repair.rebuild_in_place`), the
        old file kept beside it, and a :class:`StoreRebuilt` warning says where.
        """
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
        kuzu = _kuzu.load()
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
        # A leftover WAL means the last writer did not close cleanly (killed, power loss). Kùzu
        # replays the WAL, but its full-text index misses the replayed rows (checked on 0.11.3),
        # so the index is rebuilt from the table after such a recovery.
        wal = Path(self._path + ".wal")
        recovering = wal.exists() and wal.stat().st_size > 0
        if recovering and not read_only:
            # Kùzu replays and checkpoints a leftover WAL as it opens: never without room (a
            # checkpoint that runs out of space leaves a store it cannot open, see _room).
            free, need = _room_for(self._path, str(parent))
            if free < need:
                raise StoreFull(
                    f"cannot open the store {self._path}: the disk is (nearly) full ({free >> 20} "
                    f"MiB free) and opening replays its {wal.stat().st_size >> 10} KiB write-ahead "
                    f"log, which needs {need >> 20} MiB. Free some space and open it again: "
                    "nothing is lost",
                    path=self._path,
                )
        self._budget = memory_budget_from_env() if memory_budget is None else int(memory_budget)
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
        self._lock = threading.RLock()
        self._depth = 0
        self._begun = False  # the current transaction has sent BEGIN
        self._sealed = False  # ... or was committed by a final write_event
        # Prepared once per query text: measured ~30% faster than re-planning on every call.
        self._prepared: dict[str, Any] = {}
        self._cache = _RecallCache()
        self._rows_cache = _RowCache()
        self._row_reads = 0  # rows read from the table (see _row: when to take a snapshot)
        self._searches = 0  # text searches so far (see _warm: when to build the recall columns)
        self._cold_left = _COLD_CALLS  # lookups answered by queries before the cache is built
        if snapshot is None:  # EBB_KUZU_SNAPSHOT=0 keeps memory down on very large stores
            snapshot = os.environ.get("EBB_KUZU_SNAPSHOT", "1").strip().lower() not in _OFF
        self._snapshot = snapshot
        # The in-process copy of the full-text index (kuzu_text_index): built at the first warm
        # search when its postings fit in an eighth of the budget; None until then or without.
        self._text: Any = None
        self._text_skip = os.environ.get("EBB_KUZU_TEXT_COPY", "1").strip().lower() in _OFF
        self._meta: dict[str, str | None] = {}
        # old uid -> uids of the memories that supersede it (None: not read yet); only this
        # process writes the file, so the copy stays true until a write it sees changes it
        self._supersedes: dict[str, list[str]] | None = None
        self._closed = False
        self._wal_failed = False
        self._index_dropped = False  # a bulk_load has dropped the text index (see there)
        self._vec_dim, self._vec_checked = None, False  # the vector table (kuzu_vectors)
        try:
            self._conn = kuzu.Connection(self._db)
            self._held = 0  # bytes of Arrow tables the connection keeps (see _let_go_of_tables)
            for ext in ("fts", "vector"):
                self._exec(f"LOAD EXTENSION {ext}")
            if not read_only:
                self._remove_copy_files()
                self._ensure_schema()
                self._ensure_text_index(force=recovering)
        except StorageError as exc:
            self._abandon()
            # StoreFull: nothing to mend, only room to make. Otherwise the store's catalog and
            # its index storage disagree (after replaying a WAL that held a dropped index:
            # "Cannot find table catalog entry ...", or an index build that cannot succeed).
            missing_extension = "extension" in str(exc).lower() and "catalog" not in str(exc)
            if not rebuild or isinstance(exc, StoreFull) or read_only or missing_extension:
                raise
            # What cleaning up cannot mend (see _drop_text_index): every row is copied into
            # a new file, which takes the store's place; the old one is kept.
            from .repair import rebuild_in_place

            try:
                aside = rebuild_in_place(self._path)
            except RuntimeError as again:  # the rows cannot be read either
                raise storage_error(again, self._path, "open") from None
            warnings.warn(
                f"the store {self._path} was rebuilt from its rows after a crash left its "
                f"text index unrecoverable; the damaged file is kept at {aside}",
                StoreRebuilt,
                stacklevel=2,
            )
            self.__init__(  # type: ignore[misc]
                path,
                read_only=read_only,
                snapshot=snapshot,
                rebuild=False,
                memory_budget=self._budget,
            )
        except BaseException as exc:
            self._abandon()
            if isinstance(exc, RuntimeError):
                raise storage_error(exc, self._path, "open") from None
            raise

    def _abandon(self) -> None:
        """Release the engine after a failed open (never raises: the cause is what matters)."""
        self._closed = True
        if self._wal_failed:  # see close
            _ABANDONED.append((getattr(self, "_conn", None), self._db))
            return
        for thing in (getattr(self, "_conn", None), self._db):
            try:
                if thing is not None:
                    thing.close()
            except Exception:  # already failing: the first error is the one reported
                pass

    # -- plumbing ------------------------------------------------------------------------------
    @property
    def location(self) -> str:
        return self._path

    def _q(self, query: str, params: Mapping[str, Any] | None = None) -> list[list[Any]]:
        with self._lock:  # one Kùzu connection, shared by the threads async adapters use
            return self._q_locked(query, params)

    def _q_locked(
        self, query: str, params: Mapping[str, Any] | None, *, solo: bool = False
    ) -> list[list[Any]]:
        """Run a prepared ``query``; ``solo``: as its own auto-committed transaction."""
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
        self, query: Any, params: Mapping[str, Any] | None = None, *, read: bool = False
    ) -> Any:
        """Execute a statement, first opening the current transaction if it is not open yet.

        Transactions begin lazily, at their first write (``read``: the statement only reads):
        one that only reads never opens (this process is the only writer and holds the lock,
        so its reads agree), and one whose only write is a final :meth:`write_event` sends
        that write alone, committed with the statement (see ``transaction``). A read after
        the first write runs inside the transaction, so it sees that write. A Kùzu error
        comes out as an ``EbbError`` (see :func:`storage_error`).
        """
        if self._depth:
            if self._sealed:
                raise RuntimeError(  # a bug in the caller, not a storage failure
                    "a statement after a final write_event: that write is already committed"
                )
            if not self._begun and not read:
                self.check_room()
                self._exec("BEGIN TRANSACTION")
                self._begun = True
        if params:
            self._note_tables(params)
        try:
            return self._conn.execute(query, dict(params or {}))
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

    def _exec(self, query: str) -> None:
        try:
            self._conn.execute(query)
        except RuntimeError as exc:
            raise self._failed(exc) from None

    def _ensure_schema(self) -> None:
        with self._lock:
            existing = {r[0] for r in self._rows("CALL show_tables() RETURN name")}
            for name, ddl in zip(_TABLES, _SCHEMA, strict=True):
                if name not in existing:  # each DDL commits on its own (a WAL record each)
                    self._exec(ddl)
            version = self.get_meta("schema_version")
            if "Memory" not in existing or (
                version is None and not self._rows("MATCH (m:Memory) RETURN m.uid LIMIT 1")
            ):
                # A new store, or one whose creation was killed before its version was written
                # (each DDL statement commits on its own): it holds no memory yet.
                self.set_meta("schema_version", SCHEMA_VERSION)
                version = SCHEMA_VERSION
            if version != SCHEMA_VERSION:
                raise BackendUnavailable(
                    f"the store {self._path} has schema version {version!r}; this Ebb expects "
                    f"{SCHEMA_VERSION}: export it with the Ebb that wrote it and import it here"
                )

    # -- the full-text index -------------------------------------------------------------------
    # CREATE_FTS_INDEX on Kùzu 0.11.3 is a script of auto-committed statements (stop-word table,
    # a temporary table, docs and terms tables, a rel table, then the index's catalog entry),
    # and DROP_FTS_INDEX removes the entry first and the tables after. A kill in between leaves
    # internal tables behind, which make every later CREATE_FTS_INDEX fail ("Table:
    # 0_memory_text_docs already exists"): that is how a killed import used to wedge a store.
    # Every build therefore commits INDEX_STATE="building" first, drops whatever exists of the
    # index (its entry and every internal table named after it, reachable once
    # `enable_internal_catalog` is on), builds, and commits "ready". Each step can be redone, so
    # a kill at any point leaves "building" (or no index) and the next open builds again.

    def rebuild_text_index(self) -> None:
        """Drop and rebuild the full-text index from the table (after crash recovery)."""
        with self._lock:
            self._build_text_index()

    def _ensure_text_index(self, *, force: bool = False) -> bool:
        """Build the index unless it is present and its last build finished. True if built."""
        with self._lock:
            if not force and self.text_index_state() == "ready":
                return False
            self._build_text_index()
            return True

    def text_index_state(self) -> str:
        """``ready``; ``building`` (a build or bulk load did not finish); ``missing``."""
        with self._lock:
            present = self._has_text_index()
            state = self.get_meta(INDEX_STATE)
            if not present:
                return "missing"
            # No state recorded: built by an Ebb before the state was kept, whose builds
            # register the index as their last step, so a present index is complete.
            return "building" if state == "building" else "ready"

    def _build_text_index(self) -> None:
        self._text = None
        # an allowance of 1.5 KB a memory for the index tables (the whole store takes ~1.5 KB)
        self.check_room(extra=self._q("MATCH (m:Memory) RETURN count(*)")[0][0] * 1_500)
        self.set_meta(INDEX_STATE, "building")  # committed before anything is dropped
        self._drop_text_index()
        self._create_text_index()
        self.set_meta(INDEX_STATE, "ready")

    def _has_text_index(self) -> bool:
        return any(r[1] == FTS_INDEX for r in self._rows("CALL show_indexes() RETURN *"))

    def _drop_text_index(self) -> None:
        """Remove the index and everything a killed build or drop left of it."""
        self._text = None
        self._prepared.clear()
        # No entry (or a half-dropped one) fails here: the sweep below removes what is left.
        with suppress(RuntimeError):
            self._conn.execute(f"CALL DROP_FTS_INDEX('Memory', '{FTS_INDEX}')")
        for name, _kind in self.text_index_leftovers():
            self._exec_internal(f"DROP TABLE `{name}`")
        stop = self._internal_rows(f"MATCH (s:`{STOPWORDS_TABLE}`) RETURN count(*)")
        if stop is not None and stop[0][0] != STOPWORDS:  # a build killed while filling it
            self._exec_internal(f"DROP TABLE `{STOPWORDS_TABLE}`")
        # Replaying a WAL that holds a dropped index leaves the index in the table's storage but
        # not in the catalog (0.11.3): every later CREATE_FTS_INDEX fails, an insert crashes the
        # process, or statements fail with "Cannot find table catalog entry". A checkpoint now
        # takes the drop out of the WAL.
        self._exec("CHECKPOINT")

    def text_index_leftovers(self) -> list[tuple[str, str]]:
        """Kùzu's internal tables of the text index (name, NODE/REL), rel tables first.

        With the index present these are its tables; without it, what a killed build left.
        """
        table_id = self._rows("CALL show_tables() WHERE name = 'Memory' RETURN id")[0][0]
        prefix = f"{table_id}_{FTS_INDEX}_"
        rows = self._internal_rows("CALL show_tables() RETURN name, type") or []
        found = [(r[0], r[1]) for r in rows if str(r[0]).startswith(prefix)]
        return sorted(found, key=lambda r: (r[1] != "REL", r[0]))

    def _internal_rows(self, query: str) -> list[list[Any]] | None:
        """Rows of ``query`` run with Kùzu's internal tables visible; None if it failed."""
        self._exec("CALL enable_internal_catalog=true")
        try:
            result = self._conn.execute(query)
            assert not isinstance(result, list)
            return _all(result)
        except RuntimeError:
            return None
        finally:
            self._exec("CALL enable_internal_catalog=false")

    def _exec_internal(self, query: str) -> None:
        self._exec("CALL enable_internal_catalog=true")
        try:
            self._exec(query)
        finally:
            self._exec("CALL enable_internal_catalog=false")

    def _create_text_index(self) -> None:
        self._prepared.clear()
        self._exec(f"CALL CREATE_FTS_INDEX('Memory', '{FTS_INDEX}', ['text'], stemmer := 'porter')")

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
            # BEGIN waits for the first statement (see _run): Kùzu's BEGIN and COMMIT cost
            # ~1.4 ms together, a large share of a remember.
            self._depth, self._begun, self._sealed = 1, False, False
            try:
                yield
            except BaseException:
                begun, self._depth = self._begun, 0
                self._begun = self._sealed = False
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
                    self._forget_cached()
                    self._prepared.clear()
                    with suppress(EbbError):
                        self._exec("ROLLBACK")
                    raise
            if begun or sealed:  # a transaction that only read leaves the WAL as it was
                self._maybe_checkpoint()
            self._let_go_of_tables()

    def _maybe_checkpoint(self, force: bool = False) -> None:
        """Checkpoint once the WAL passes Kùzu's usual threshold (auto-checkpoints are off)...

        With Kùzu's own auto-checkpoint, a checkpoint that fails (a full disk) raised from the
        write that triggered it although that write had committed: a stored memory reported
        as not stored. Here a failed checkpoint is not the write's failure: the write is safe in
        the WAL, and the next checkpoint (or open, once there is room) folds it in.
        """
        try:
            size = os.stat(self._path + ".wal").st_size
        except OSError:
            return
        if size < _ROOM // 4 and not force:  # too little to be worth one, whatever the room
            return
        free, need = self._room()
        # ... and sooner when room runs low, so that what a write must keep free (see _room)
        # shrinks back; never without the room the checkpoint itself needs.
        if size and (force or size >= _CHECKPOINT_WAL or free < 2 * need) and free >= need:
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
        self._cache.ready = False
        self._rows_cache.clear()
        self._meta.clear()
        self._supersedes = None
        self._text = None
        self._forget_vectors()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._prepared.clear()
            if self._wal_failed:
                # Closing would flush a WAL Kùzu could not write, which aborts the process.
                # Everything committed before is on disk; the engine is left to process exit.
                _ABANDONED.append((self._conn, self._db))
                return
            self._conn.close()
            self._db.close()

    @property
    def wal_failed(self) -> bool:
        """Kùzu failed to append to the WAL in this process (a disk that filled up under
        another writer): the process should exit soon (see ``close``) and reopen the store."""
        return self._wal_failed

    # -- metadata ------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        # Only this process can write the file, so a value read once stays true until this
        # store changes it (or a rollback, which forgets every copy).
        with self._lock:
            if key not in self._meta:
                rows = self._q("MATCH (m:Meta {key: $k}) RETURN m.value", {"k": key})
                self._meta[key] = rows[0][0] if rows else None
            return self._meta[key]

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._meta.pop(key, None)
            self._q("MERGE (m:Meta {key: $k}) SET m.value = $v", {"k": key, "v": value})
            self._meta[key] = value

    # -- nodes ---------------------------------------------------------------------------------
    def get_nodes(self, namespace: str, ids: Sequence[str]) -> dict[str, Node]:
        out: dict[str, Node] = {}
        with self._lock:
            for i in dict.fromkeys(ids):
                row = self._row(uid(namespace, i))
                if row is not None:
                    out[i] = node_from_row(row)
        return out

    def _row(self, u: str, *, snapshot: bool = True) -> dict[str, Any] | None:
        """A memory's stored row, recent-link list included (so recall can explain what it
        just fetched without reading it again), from the row cache or one primary-key read.
        ``snapshot=False``: never take the row snapshot for it (a bulk read, as maintain's)."""
        row = self._known_row(u, snapshot)
        if row is not _UNREAD:
            return row  # type: ignore[no-any-return]
        return self._read_row(u)

    def _known_row(self, u: str, snapshot: bool = True) -> Any:
        """A memory's row from the in-process copies: the row, None (no such memory), or
        ``_UNREAD`` (the table must be read)."""
        row = self._rows_cache.get(u)
        if row is not None:
            return row
        cache = self._cache
        if cache.ready:  # built by recall or maintain; a one-off read does not build it
            o = cache.offset.get(u)
            if o is None:
                return None  # the offsets name every memory
            if (
                self._snapshot
                and snapshot
                and cache.base is None
                and self._row_reads >= _SNAPSHOT_AFTER
                and self._snapshot_fits()
            ):
                # This process keeps reading memories (an agent session, not one call):
                # one scan of the table now is cheaper than ~0.7 ms per read from here on.
                cache.attach(
                    self._arrow(
                        "MATCH (n:Memory) RETURN offset(id(n)) AS o, "
                        + ", ".join(f"n.{c} AS {c}" for c in _BASE_COLUMNS),
                        {},
                    )
                )
            row = cache.base_row(o)
            if row is not None:
                self._rows_cache.put(u, row)
                return row
        return _UNREAD

    def _snapshot_fits(self) -> bool:
        """Whether the row snapshot (~``_SNAPSHOT_ROW_BYTES`` a memory) fits in its share of the
        memory budget (a quarter: ~1.1M memories at the default); past that rows are read
        from the table as needed."""
        return len(self._cache.offset) * _SNAPSHOT_ROW_BYTES <= self._budget // 4

    def _read_row(self, u: str) -> dict[str, Any] | None:
        """The stored row of ``u`` read from the table (one primary-key read, ~0.3-0.7 ms:
        an ``UNWIND`` of ten keys takes Kùzu a scan, ~0.7 s at 1M), and cached."""
        found = self._q(
            f"MATCH (n:Memory {{uid: $uid}}) RETURN {_node_ret('n')}, n.recent_links", {"uid": u}
        )
        if not found:
            return None
        row = dict(zip(_ROW_KEYS, found[0], strict=True))
        self._row_reads += 1
        self._rows_cache.put(u, row)
        return row

    def existing_ids(self, namespace: str, ids: Sequence[str]) -> set[str]:
        wanted = set(ids)
        if self._cache.ready:  # every memory's uid, kept in step with every write
            return {i for i in wanted if uid(namespace, i) in self._cache.offset}
        if len(wanted) <= 64:
            return {
                i
                for i in wanted
                if self._q("MATCH (n:Memory {uid: $u}) RETURN n.id", {"u": uid(namespace, i)})
            }
        rows = self._q("MATCH (n:Memory) WHERE n.ns = $ns RETURN n.id", {"ns": namespace})
        return wanted & {r[0] for r in rows}

    def upsert_nodes(self, nodes: Sequence[Node]) -> None:
        sets = ", ".join(f"n.{c} = ${c}" for c in _node_params_keys() if c != "uid")
        with self.transaction():
            for n in nodes:
                rows = self._q(
                    f"MERGE (n:Memory {{uid: $uid}}) SET {sets} RETURN offset(id(n))",
                    _node_params(n),
                )
                if self._text is not None:
                    self._text.put(int(rows[0][0]), n.text)
                if self._cache.ready:
                    self._cache.put(int(rows[0][0]), n)
                cached = self._rows_cache.get(uid(n.namespace, n.id))
                if cached is not None:
                    cached.update(node_row(n))  # its recent-link list is kept as it was

    def insert_nodes(self, nodes: Sequence[Node]) -> None:
        # a new memory has no links yet: its recent-link list starts empty, not unset
        props = ", ".join(f"{c}: ${c}" for c in _node_params_keys())
        props += ", recent_links: ''"
        with self._creating(nodes), self.transaction():
            for n in nodes:
                rows = self._q(
                    f"CREATE (n:Memory {{{props}}}) RETURN offset(id(n))", _node_params(n)
                )
                self._rows_cache.put(uid(n.namespace, n.id), {**node_row(n), "recent_links": ""})
                if self._text is not None:
                    self._text.put(int(rows[0][0]), n.text)
                if self._cache.ready:
                    self._cache.put(int(rows[0][0]), n)

    @contextmanager
    def _creating(self, nodes: Sequence[Node]) -> Iterator[None]:
        """Around a write creating ``nodes``: Kùzu's duplicated-key error (the transaction
        rolls back as for any error) becomes :func:`memory_exists` naming the memory. Mapped
        rather than checked first: a check would cost a statement per remember (~0.5 ms)."""
        try:
            yield
        except DuplicateKey as exc:
            text = str(exc)
            for n in nodes:
                if f"value {uid(n.namespace, n.id)}, which" in text:
                    raise memory_exists(n.namespace, n.id) from None
            raise

    def update_nodes(self, namespace: str, changes: Mapping[str, Mapping[str, Any]]) -> None:
        if len(changes) <= _SMALL:
            self.adjust(namespace, {i: Adjustment(fields=f) for i, f in changes.items()})
            return
        # Many rows (maintain moving tens of thousands between tiers): grouped by which fields
        # change, one LOAD FROM per group, and the in-process copies updated column-wise.
        import numpy as np

        groups: dict[tuple[str, ...], list[str]] = {}
        for node_id, fields in changes.items():
            groups.setdefault(tuple(sorted(fields)), []).append(node_id)
        bad = set().union(*groups) - UPDATABLE_FIELDS
        if bad:
            raise InvalidInput(f"cannot update node fields {sorted(bad)}", field="fields")
        self._texts_changed(namespace, {i: f["text"] for i, f in changes.items() if "text" in f})
        tables = []
        for names, ids in groups.items():
            uids = [uid(namespace, i) for i in ids]
            table: dict[str, list[Any]] = {"u": uids}
            for f in names:
                col = _COLUMN.get(f, f)
                table[col] = [_field_value(f, changes[i][f])[1] for i in ids]
            tables.append(table)
            cache = self._cache
            if cache.ready:
                at = [cache.offset.get(u, -1) for u in uids]
                found = np.array([o >= 0 for o in at], np.bool_)
                offs = np.array(at, np.int64)[found]
                cache.stale(offs)
                for f in ("tier", "pinned", "key"):
                    if f in names:
                        getattr(cache, f)[offs] = np.array(table[f])[found]
                if "kind" in names:
                    for o, v in zip(at, table["kind"], strict=True):
                        if o >= 0:
                            cache.kind[o] = v
            for k, u in enumerate(uids):
                row = self._rows_cache.rows.get(u)
                if row is not None:
                    for name, values in table.items():
                        if name != "u":
                            row[name] = values[k]
        with self.transaction():
            for table in tables:
                cols = [c for c in table if c != "u"]
                self._load(
                    "MATCH (n:Memory {uid: u}) SET " + ", ".join(f"n.{c} = {c}" for c in cols),
                    table,
                    {"u": "uid", **{c: c for c in cols}},
                )

    def adjust(self, namespace: str, changes: Mapping[str, Adjustment]) -> None:
        # Rows are grouped by the shape of their update; small groups run as single
        # primary-key statements, large ones as one LOAD FROM over an Arrow table
        # (10k rows in ~35 ms, where 10k single statements take seconds).
        groups: dict[tuple[str, ...], list[tuple[str, Adjustment]]] = {}
        for node_id, adj in changes.items():
            bad = set(adj.fields) - UPDATABLE_FIELDS
            if bad:
                raise InvalidInput(f"cannot update node fields {sorted(bad)}", field="fields")
            deltas = tuple(col for col, attr in _DELTA_OF.items() if getattr(adj, attr))
            cols = tuple(sorted(_COLUMN.get(f, f) for f in adj.fields))
            groups.setdefault((*deltas, "|", *cols), []).append((node_id, adj))
        pushes = {i: a.push_delta for i, a in changes.items() if a.push_delta}
        self._adjust_copies(namespace, changes, bool(pushes))
        with self.transaction():
            for shape, rows in groups.items():
                cut = shape.index("|")
                deltas, cols = shape[:cut], shape[cut + 1 :]
                if not deltas and not cols:
                    continue
                if len(rows) <= _SMALL:
                    for node_id, adj in rows:
                        u = uid(namespace, node_id)
                        one: dict[str, Any] = {"n_u": u}
                        items = _change_sets("n", adj, self._rows_cache.rows.get(u), one)
                        self._q("MATCH (n:Memory {uid: $n_u}) SET " + ", ".join(items), one)
                else:
                    table = {"u": [uid(namespace, i) for i, _ in rows]}
                    for d in deltas:
                        attr = _DELTA_OF[d]
                        table[f"d_{d}"] = [getattr(a, attr) for _, a in rows]
                    for c in cols:
                        table[f"v_{c}"] = [_column_value(c, a.fields) for _, a in rows]
                    self._load(
                        "MATCH (n:Memory {uid: u}) SET " + _set_clause(deltas, cols, ""),
                        table,
                        {
                            "u": "uid",
                            **{f"d_{d}": d for d in deltas},
                            **{f"v_{c}": c for c in cols},
                        },
                    )
            if len(pushes) == 1:
                ((node_id, push),) = pushes.items()
                self._q(
                    "MATCH (s:Memory {uid: $u})-[:Link]-(m:Memory) SET m.key = m.key + $d",
                    {"u": uid(namespace, node_id), "d": float(push)},
                )
            elif pushes:
                self._load(
                    "MATCH (s:Memory {uid: u})-[:Link]-(m:Memory) "
                    "WITH m, sum(d) AS total SET m.key = m.key + total",
                    {"u": [uid(namespace, i) for i in pushes], "d": list(pushes.values())},
                    {"u": "uid", "d": "key"},
                )

    def write_event(
        self,
        namespace: str,
        *,
        new_nodes: Sequence[Node] = (),
        changes: Mapping[str, Adjustment] | None = None,
        new_edges: Sequence[Edge] = (),
        final: bool = False,
    ) -> None:
        # One statement: MATCH the existing memories by primary key, CREATE the new ones, SET
        # their changes and recent-link lists, CREATE the edges. Each statement costs Kùzu
        # ~0.5-1 ms whatever it does, and a remember with two links used to take eight.
        self._edges_written(new_edges)
        changes = dict(changes or {})
        for adj in changes.values():
            bad = set(adj.fields) - UPDATABLE_FIELDS
            if bad:
                raise InvalidInput(f"cannot update node fields {sorted(bad)}", field="fields")
        if any(a.push_delta for a in changes.values()):
            # eager spreading pushes along the edges that exist before this event
            super().write_event(
                namespace, new_nodes=new_nodes, changes=changes, new_edges=new_edges, final=final
            )
            return
        with self._creating(new_nodes), self._lock:
            new_uids = {uid(n.namespace, n.id): n for n in new_nodes}
            lists = self._merged_links(new_edges, new_uids)
            params: dict[str, Any] = {}
            parts: list[str] = []
            var: dict[str, str] = {}
            rows_of: dict[str, dict[str, Any]] = {}  # the new memories' stored rows
            ends = [uid(namespace, e) for edge in new_edges for e in (edge.src, edge.dst)]
            existing = [
                u
                for u in dict.fromkeys([*(uid(namespace, i) for i in changes), *ends])
                if u not in new_uids
            ]
            if existing:  # matched first: if one is missing, nothing at all is written
                for k, u in enumerate(existing):
                    var[u] = f"x{k}"
                    params[f"x{k}_u"] = u
                found = (f"({var[u]}:Memory {{uid: ${var[u]}_u}})" for u in existing)
                parts.append("MATCH " + ", ".join(found))
            for k, n in enumerate(new_nodes):
                v, u = f"n{k}", uid(n.namespace, n.id)
                var[u] = v
                rows_of[u] = row = {**node_row(n), "recent_links": lists.get(u, "")}
                props = ", ".join(f"{c}: ${v}_{c}" for c in ("uid", *row))
                parts.append(f"CREATE ({v}:Memory {{{props}}})")
                params.update({f"{v}_{c}": value for c, value in row.items()})
                params[f"{v}_uid"] = u
            # the copies take the change first (see _change_sets)
            self._adjust_copies(namespace, changes, False)
            sets: list[str] = []
            for node_id, adj in changes.items():
                u = uid(namespace, node_id)
                sets += _change_sets(var[u], adj, self._rows_cache.rows.get(u), params)
            for u, encoded in lists.items():
                if u not in new_uids:
                    sets.append(f"{var[u]}.recent_links = ${var[u]}_l")
                    params[f"{var[u]}_l"] = encoded
            if sets:
                parts.append("SET " + ", ".join(sets))
            if new_edges:
                links = []
                for k, e in enumerate(new_edges):
                    ep = _edge_params(e)
                    links.append(
                        f"({var[ep['a']]})-[:Link {{kind: $e{k}_kind, weight: $e{k}_w, "
                        f"created_us: $e{k}_c, reinforced_us: $e{k}_r, props: $e{k}_p}}]->"
                        f"({var[ep['b']]})"
                    )
                    params.update({f"e{k}_{x}": ep[x] for x in ("kind", "w", "c", "r", "p")})
                parts.append("CREATE " + ", ".join(links))
            offsets = [f"offset(id({var[u]}))" for u in new_uids]
            parts.append("RETURN " + ", ".join(offsets or ["1"]))
            query = " ".join(parts)
            if final and self._depth <= 1 and not self._begun:
                # Nothing was sent in this transaction and nothing will follow: the statement
                # alone is the transaction, committed by Kùzu with it (no BEGIN, no COMMIT).
                try:
                    rows = self._q_locked(query, params, solo=True)
                except BaseException:
                    self._forget_cached()  # they took the change that did not happen
                    raise
                self._sealed = self._depth == 1
            else:
                with self.transaction():
                    rows = self._q(query, params)
            if len(rows) != 1:  # the Brain checked every memory exists; this is a guard
                raise NotFound(f"a memory this change needs is missing from {namespace!r}")
            for k, (u, n) in enumerate(new_uids.items()):
                self._rows_cache.put(u, rows_of[u])
                if self._text is not None:
                    self._text.put(int(rows[0][k]), n.text)
                if self._cache.ready:
                    self._cache.put(int(rows[0][k]), n)
            for u, encoded in lists.items():
                self._cache.touched(u)
                cached = self._rows_cache.get(u)
                if cached is not None:
                    cached["recent_links"] = encoded

    def _merged_links(self, edges: Sequence[Edge], fresh: Collection[str] = ()) -> dict[str, str]:
        """The encoded recent-link lists of the ends of ``edges`` (by uid) once they exist
        (``fresh`` memories start from an empty list; unset lists stay unset, built on first
        use)."""
        lists: dict[str, list[list[Any]] | None] = {}
        for e in edges:
            for me, other, out in ((e.src, e.dst, 1), (e.dst, e.src, 0)):
                u = uid(e.namespace, me)
                if u not in lists:
                    raw = "" if u in fresh else self._recent_links(u)
                    lists[u] = None if raw is None else _decode_links(raw)
                current = lists[u]
                if current is not None:
                    lists[u] = _merge_link(
                        current, [other, e.kind, out, e.weight, to_us(e.reinforced_at)]
                    )
        return {u: _encode_links(links) for u, links in lists.items() if links is not None}

    def _adjust_copies(
        self, namespace: str, changes: Mapping[str, Adjustment], pushed: bool
    ) -> None:
        """Apply ``changes`` to the in-process copies as :meth:`adjust` applies them to the
        table (a rollback afterwards forgets every copy)."""
        self._texts_changed(
            namespace, {i: a.fields["text"] for i, a in changes.items() if "text" in a.fields}
        )
        cache = self._cache
        if cache.ready:
            if pushed:
                cache.ready = False  # neighbours' keys change: rebuilt on next use
            for node_id, adj in changes.items():
                o = cache.offset.get(uid(namespace, node_id))
                if o is None:
                    continue
                cache.fresh[o] = False
                cache.key[o] += adj.key_delta
                for f, v in adj.fields.items():
                    if f == "tier":
                        cache.tier[o] = int(v)
                    elif f == "pinned":
                        cache.pinned[o] = bool(v)
                    elif f == "key":
                        cache.key[o] = float(v)
                    elif f == "kind":
                        cache.kind[o] = v
        if pushed:
            self._rows_cache.clear()  # neighbours' keys change too: read them again
            return
        for node_id, adj in changes.items():
            row = self._rows_cache.get(uid(namespace, node_id))
            if row is None:
                continue
            row["base_key"] = (row["base_key"] or 0.0) + adj.base_delta
            row["degree"] = (row["degree"] or 0) + adj.degree_delta
            row["key"] = (row["key"] or 0.0) + adj.key_delta
            for f, v in adj.fields.items():
                col, value = _field_value(f, v)
                row[col] = value

    def _load(self, query: str, columns: Mapping[str, list[Any]], types: Mapping[str, str]) -> None:
        """Run ``LOAD FROM <arrow table> <query>`` with the given columns."""
        import pyarrow as pa

        table = pa.table(
            {
                name: pa.array(values, type=_arrow_types()[types[name]])
                for name, values in columns.items()
            }
        )
        self._run(f"LOAD FROM $rows {query}", {"rows": table})

    def delete_nodes(self, namespace: str, ids: Sequence[str]) -> None:
        self._supersedes = None
        with self.transaction():
            for i in ids:
                self._texts_changed(namespace, {i: None})
                self._cache.drop(uid(namespace, i))
                # the neighbours' recent-link lists name it: unset them, to be rebuilt
                self._q(
                    "MATCH (n:Memory {uid: $uid})-[:Link]-(m:Memory) SET m.recent_links = NULL",
                    {"uid": uid(namespace, i)},
                )
                self._q("MATCH (n:Memory {uid: $uid}) DETACH DELETE n", {"uid": uid(namespace, i)})
            self.delete_vectors(namespace, ids)
            self._rows_cache.clear()
            self._cache.ready = False  # neighbours' link lists changed: snapshot rebuilt

    def _copy(self, name: str, table: Any) -> None:
        """``COPY name FROM`` an Arrow table whose columns are the table's, in order.

        A large table goes through a Parquet file beside the store, deleted after: Kùzu's
        connection keeps every Arrow table passed to it until the transaction is over (see
        _let_go_of_tables), and an import's tables are ~0.9 GB at a million memories."""
        folder = self._folder
        if table.num_rows < _COPY_VIA_FILE or any(c in folder for c in "'\\\n"):
            self._run(f"COPY {name} FROM $t", {"t": table})
            return
        import pyarrow.parquet as pq

        fd, path = tempfile.mkstemp(prefix=self._copy_prefix(), suffix=".parquet", dir=folder)
        os.close(fd)
        try:
            pq.write_table(table, path)
            self._run(f"COPY {name} FROM '{path}'")
        finally:
            with suppress(OSError):
                os.unlink(path)

    def _copy_prefix(self) -> str:
        return f".{Path(self._path).name}.copy-"

    def _remove_copy_files(self) -> None:
        """Parquet files a killed bulk load of this store left (only the holder of the store's
        lock writes them, and this process holds it)."""
        for leftover in Path(self._folder).glob(f"{glob.escape(self._copy_prefix())}*.parquet"):
            with suppress(OSError):
                leftover.unlink()

    # -- edges ---------------------------------------------------------------------------------
    def upsert_edges(self, edges: Sequence[Edge]) -> None:
        self._edges_written(edges)
        with self.transaction():
            for e in edges:
                found = self._q(
                    "MATCH (a:Memory {uid: $a})-[e:Link]->(b:Memory {uid: $b}) "
                    "WHERE e.kind = $kind SET e.weight = $w, e.created_us = $c, "
                    "e.reinforced_us = $r, e.props = $p RETURN count(e)",
                    _edge_params(e),
                )
                if not found or not found[0][0]:
                    self.insert_edges([e])
                else:
                    self._note_links([e])

    def insert_edges(self, edges: Sequence[Edge]) -> None:
        self._edges_written(edges)
        with self.transaction():
            for e in edges:
                self._q(
                    "MATCH (a:Memory {uid: $a}), (b:Memory {uid: $b}) "
                    "CREATE (a)-[:Link {kind: $kind, weight: $w, created_us: $c, "
                    "reinforced_us: $r, props: $p}]->(b)",
                    _edge_params(e),
                )
            self._note_links(edges)

    def matches_for(self, namespace: str, ids: Sequence[str]) -> list[Match]:
        """From the in-process columns (a node read is ~0.5 ms when its row is not cached)."""
        with self._lock:
            prefix = f"{namespace}{SEP}"
            columns = self._columns_of([prefix + i for i in ids])
            out = []
            for i in dict.fromkeys(ids):
                col = columns.get(prefix + i)
                if col is not None:
                    tier, key, pinned, kind = col
                    out.append(Match(i, 0.0, key, pinned, tier, kind))
            return out

    def _edges_written(self, edges: Sequence[Edge]) -> None:
        if any(e.kind == SUPERSEDES for e in edges):
            self._supersedes = None  # read again at the next recall

    def superseded_by(
        self, namespace: str, ids: Sequence[str] | None = None
    ) -> dict[str, list[str]]:
        """From an in-process copy of every ``supersedes`` edge (one query builds it; a write
        of such an edge drops it): recall asks for its best candidates on every call, and
        per-memory reads would cost a query each."""
        with self._lock:
            if self._supersedes is None:
                found: dict[str, list[str]] = {}
                for old, new in self._q(
                    "MATCH (a:Memory)-[e:Link]->(b:Memory) WHERE e.kind = $k "
                    "RETURN b.uid, a.uid ORDER BY a.uid",
                    {"k": SUPERSEDES},
                ):
                    found.setdefault(old, []).append(new)
                self._supersedes = found
            prefix, frozen = f"{namespace}{SEP}", int(Tier.FROZEN)
            if ids is None:
                olds = [u for u in self._supersedes if u.startswith(prefix)]
            else:
                olds = [prefix + i for i in dict.fromkeys(ids) if prefix + i in self._supersedes]
            columns = self._columns_of([n for u in olds for n in self._supersedes[u]])
            out: dict[str, list[str]] = {}
            for u in olds:
                live = []
                for n in self._supersedes[u]:
                    col = columns.get(n)
                    if col is not None and col[0] < frozen:
                        live.append(n[len(prefix) :])
                if live:
                    out[u[len(prefix) :]] = sorted(live)
            return out

    def _note_links(self, edges: Sequence[Edge]) -> None:
        """Keep each end's short list of its most recently reinforced links up to date."""
        for u, encoded in self._merged_links(edges).items():
            self._set_recent_links(u, encoded)

    def _recent_links(self, u: str) -> str | None:
        """A memory's encoded recent-link list (None: never built, or no such memory)."""
        row = self._rows_cache.get(u)
        if row is not None:
            return row["recent_links"]  # type: ignore[no-any-return]
        rows = self._q("MATCH (n:Memory {uid: $u}) RETURN n.recent_links", {"u": u})
        return rows[0][0] if rows else None

    def _set_recent_links(self, u: str, encoded: str) -> None:
        self._q("MATCH (n:Memory {uid: $u}) SET n.recent_links = $l", {"u": u, "l": encoded})
        self._cache.touched(u)
        row = self._rows_cache.get(u)
        if row is not None:
            row["recent_links"] = encoded

    def get_edge(self, namespace: str, src: str, dst: str, kind: str) -> Edge | None:
        rows = self._q(
            f"MATCH (a:Memory {{uid: $a}})-[e:Link]->(b:Memory {{uid: $b}}) WHERE e.kind = $k "
            f"RETURN {_EDGE_RET}",
            {"a": uid(namespace, src), "b": uid(namespace, dst), "k": kind},
        )
        return _edge_from(namespace, src, dst, rows[0]) if rows else None

    def strongest_links(
        self,
        namespace: str,
        ids: Sequence[str],
        now_us: int,
        half_life_us: float,
        min_decayed: float,
        limit: int,
    ) -> list[Link]:
        """From each memory's list of its most recently reinforced links (a 1-hop expansion
        costs Kùzu a node-table scan per memory; this is one primary-key read each)."""
        with self._lock:
            out: list[tuple[float, Link]] = []
            prefix, frozen = f"{namespace}{SEP}", int(Tier.FROZEN)
            found: list[tuple[str, list[list[Any]]]] = []
            wanted = list(dict.fromkeys(ids))
            # a recall asks for a few dozen; maintain for every memory about to freeze (~12k
            # at 1M): past the snapshot's share of the budget, read one by one
            bulk = len(wanted) > _SNAPSHOT_AFTER and not self._snapshot_fits()
            for i in wanted:
                row = self._row(prefix + i, snapshot=not bulk)
                if row is None:
                    continue
                raw = row["recent_links"]
                if raw is None:
                    found.append((i, self._build_recent_links(namespace, i)))
                else:
                    found.append((i, _decode_links(raw)))
            columns = self._columns_of([prefix + link[0] for _, links in found for link in links])
            for i, links in found:
                for other, kind, outgoing, weight, at in links:
                    col = columns.get(prefix + other)
                    if col is None or col[0] >= frozen:
                        continue
                    dw = weight * 2.0 ** (-max(now_us - at, 0) / half_life_us)  # scoring.decay
                    if dw >= min_decayed:
                        out.append((dw, Link(i, other, kind, bool(outgoing), weight, at)))
            out.sort(key=lambda p: (-p[0], p[1].other_id))
            return [link for _, link in out[:limit]]

    def _build_recent_links(self, namespace: str, node_id: str) -> list[list[Any]]:
        u = uid(namespace, node_id)
        links: list[list[Any]] = []
        for out, pattern in ((1, "-[e:Link]->"), (0, "<-[e:Link]-")):
            links += [
                [r[0], r[1], out, float(r[2]), int(r[3])]
                for r in self._q(
                    f"MATCH (n:Memory {{uid: $u}}){pattern}(m:Memory) RETURN m.id, e.kind, "
                    "e.weight, e.reinforced_us ORDER BY e.reinforced_us DESC LIMIT $k",
                    {"u": u, "k": RECENT_LINKS},
                )
            ]
        links = sorted(links, key=lambda x: -x[4])[:RECENT_LINKS]
        self._set_recent_links(u, _encode_links(links))
        return links

    def incident(self, namespace: str, ids: Sequence[str]) -> list[Incident]:
        out: list[Incident] = []
        with self._lock:
            for i in dict.fromkeys(ids):
                u = uid(namespace, i)
                for r in self._q(
                    f"MATCH (a:Memory {{uid: $u}})-[e:Link]->(b:Memory) "
                    f"RETURN {_EDGE_RET}, {_node_ret('b')} ORDER BY b.id, e.kind",
                    {"u": u},
                ):
                    other = _row_to_node(r[5:])
                    out.append(Incident(i, _edge_from(namespace, i, other.id, r), other))
                for r in self._q(
                    f"MATCH (a:Memory {{uid: $u}})<-[e:Link]-(b:Memory) "
                    f"RETURN {_EDGE_RET}, {_node_ret('b')} ORDER BY b.id, e.kind",
                    {"u": u},
                ):
                    other = _row_to_node(r[5:])
                    out.append(Incident(i, _edge_from(namespace, other.id, i, r), other))
        return out

    # -- finding -------------------------------------------------------------------------------
    def _ensure_cache(self) -> None:
        if not self._cache.ready:
            self._cache.build(
                self._arrow(
                    "MATCH (n:Memory) RETURN offset(id(n)) AS o, n.uid AS u, n.kind AS k, "
                    "n.tier AS t, n.key AS y, n.pinned AS p",
                    {},
                )
            )

    def _texts_changed(self, namespace: str, texts: Mapping[str, str | None]) -> None:
        """Memories of ``namespace`` have new ``texts`` (None: deleted): the text copy
        follows (or is dropped, to be built again, when it cannot tell their offsets)."""
        if self._text is None or not texts:
            return
        for node_id, text in texts.items():
            o = self._cache.offset.get(uid(namespace, node_id)) if self._cache.ready else None
            if o is None:
                self._text = None
                return
            if text is None:
                self._text.drop(o)
            else:
                self._text.put(o, text)

    def _text_copy(self) -> Any:
        """The in-process copy of the full-text index (see ``kuzu_text_index``), built from
        Kùzu's index tables on first use; None when it does not fit in an eighth of the memory
        budget (or ``EBB_KUZU_TEXT_COPY=0``): Kùzu's query answers then."""
        if self._text is None and not self._text_skip:
            from .kuzu_text_index import load_from_kuzu

            def arrow(query: str, params: Mapping[str, Any] | None = None) -> Any:
                result = self._conn.execute(query, dict(params or {}))
                assert not isinstance(result, list)
                return result.get_as_arrow(chunk_size=1_000_000).combine_chunks()

            self._ensure_cache()
            self._exec("CALL enable_internal_catalog=true")
            try:
                self._text = load_from_kuzu(
                    arrow, "Memory", FTS_INDEX, self._budget // 8, self._cache.ns >= 0
                )
            except RuntimeError as exc:
                raise storage_error(exc, self._path) from None
            finally:
                self._exec("CALL enable_internal_catalog=false")
            self._text_skip = self._text is None
        return self._text

    def top_by_key(
        self, namespace: str, max_tier: Tier, limit: int, kinds: Sequence[str] = ()
    ) -> list[Node]:
        rows = self._q(
            f"MATCH (n:Memory) WHERE n.ns = $ns AND n.tier <= $mt {_kinds_filter(kinds)}"
            f"RETURN {_node_ret('n')} ORDER BY n.key DESC, n.id LIMIT $lim",
            {"ns": namespace, "mt": int(max_tier), "lim": int(limit), **_kinds_param(kinds)},
        )
        return [_row_to_node(r) for r in rows]

    def review_queue(self, namespace: str, limit: int) -> list[Node]:
        rows = self._q(
            "MATCH (n:Memory) WHERE n.ns = $ns AND n.tier = 4 "
            f"RETURN {_node_ret('n')} ORDER BY n.queued_us, n.id LIMIT $lim",
            {"ns": namespace, "lim": int(limit)},
        )
        return [_row_to_node(r) for r in rows]

    def scan_nodes(self, namespace: str, batch: int = 5000) -> Iterator[list[Node]]:
        after = ""
        while True:
            rows = self._q(
                "MATCH (n:Memory) WHERE n.ns = $ns AND n.id > $after "
                f"RETURN {_node_ret('n')} ORDER BY n.id LIMIT $lim",
                {"ns": namespace, "after": after, "lim": batch},
            )
            if not rows:
                return
            yield [_row_to_node(r) for r in rows]
            after = rows[-1][0]

    def scan_edges(self, namespace: str, batch: int = 5000) -> Iterator[list[Edge]]:
        skip = 0
        while True:
            rows = self._q(
                "MATCH (a:Memory)-[e:Link]->(b:Memory) WHERE a.ns = $ns "
                f"RETURN a.id, b.id, {_EDGE_RET} ORDER BY a.id, b.id, e.kind "
                "SKIP $skip LIMIT $lim",
                {"ns": namespace, "skip": skip, "lim": batch},
            )
            if not rows:
                return
            yield [_edge_from(namespace, r[0], r[1], r[2:]) for r in rows]
            skip += len(rows)

    def namespaces(self) -> list[str]:
        rows = self._q("MATCH (n:Memory) RETURN DISTINCT n.ns")
        rows += self._q("MATCH (a:Audit) RETURN DISTINCT a.ns")
        return sorted({r[0] for r in rows})

    def counts(self, namespace: str) -> Counts:
        by_tier = {
            int(t): int(c)
            for t, c in self._q(
                "MATCH (n:Memory) WHERE n.ns = $ns RETURN n.tier, count(*)", {"ns": namespace}
            )
        }
        pinned = self._q(
            "MATCH (n:Memory) WHERE n.ns = $ns AND n.pinned RETURN count(*)", {"ns": namespace}
        )[0][0]
        edges = self._q(
            "MATCH (a:Memory)-[e:Link]->(:Memory) WHERE a.ns = $ns RETURN count(e)",
            {"ns": namespace},
        )[0][0]
        audits = self._q("MATCH (a:Audit) WHERE a.ns = $ns RETURN count(*)", {"ns": namespace})[0][
            0
        ]
        return Counts(
            nodes=sum(by_tier.values()),
            edges=int(edges),
            by_tier=by_tier,
            pinned=int(pinned),
            audit_entries=int(audits),
        )

    def _arrow(self, query: str, params: Mapping[str, Any]) -> Any:
        result = self._run(query, params)
        assert not isinstance(result, list)
        try:
            return result.get_as_arrow(chunk_size=1_000_000).combine_chunks()
        except RuntimeError as exc:
            raise storage_error(exc, self._path) from None


_COPY_VIA_FILE = 200_000  # rows from which a bulk load goes through a Parquet file
_HELD_MAX = 64 << 20  # Arrow bytes a connection may keep before it is replaced
_SNAPSHOT_AFTER = 64  # rows read one by one before the recall snapshot is taken
_SNAPSHOT_ROW_BYTES = 600  # the row snapshot's size per memory (measured ~0.5 KB; see attach)
_UNREAD = object()  # see _known_row
_COLD_CALLS = 16  # most lookups answered by queries before the recall columns are built
_OFF = ("0", "false", "no", "off")

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
    """
    raw = os.environ.get("EBB_MEMORY_BUDGET", "").strip()
    return parse_memory_budget(raw) if raw else DEFAULT_MEMORY_BUDGET


_MIN_BUDGET = 64 << 20


def _buffer_pool(budget: int) -> int:
    return max(budget * 3 // 5, 32 << 20)


_DELTA_OF = {"base_key": "base_delta", "degree": "degree_delta", "key": "key_delta"}
_PREPARED_MAX = 512  # prepared statements kept (one per query text)
_CHECKPOINT_WAL = 16 << 20  # WAL bytes that trigger a checkpoint (Kùzu's default threshold)
_ROOM = 4 << 20  # free bytes every write keeps in hand beyond its WAL's checkpoint
_ABANDONED: list[Any] = []  # engines not closed after a failed WAL append (see close)
_TIERS = {int(t): t for t in Tier}


def _column_value(column: str, fields: Mapping[str, Any]) -> Any:
    for f, v in fields.items():
        col, value = _field_value(f, v)
        if col == column:
            return value
    raise KeyError(column)


def _encode_links(links: list[list[Any]]) -> str:
    return LINK_SEP.join(_encode_link(x) for x in links)


def _decode_links(raw: str) -> list[list[Any]]:
    return [_decode_link(x) for x in raw.split(LINK_SEP)] if raw else []


def _encode_link(link: list[Any]) -> str:
    other, kind, out, weight, at = link
    return SEP.join((other, kind, str(int(out)), repr(float(weight)), str(int(at))))


def _decode_link(entry: str) -> list[Any]:
    other, kind, out, weight, at = entry.split(SEP)
    return [other, kind, int(out), float(weight), int(at)]


def _merge_link(links: list[list[Any]], new: list[Any]) -> list[list[Any]]:
    """Put ``[other, kind, out, weight, reinforced_us]`` into a most-recent-first list."""
    kept = [x for x in links if (x[0], x[1], x[2]) != (new[0], new[1], new[2])]
    return sorted([*kept, new], key=lambda x: -x[4])[:RECENT_LINKS]


def _kinds_filter(kinds: Sequence[str]) -> str:
    # An empty list parameter has no element type in Kùzu, so the filter is left out instead.
    return "AND list_contains($kinds, n.kind) " if kinds else ""


def _kinds_param(kinds: Sequence[str]) -> dict[str, Any]:
    return {"kinds": list(kinds)} if kinds else {}


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


@functools.lru_cache(maxsize=_PREPARED_MAX)
def _reads_only(query: str) -> bool:
    """Whether statement ``query`` (one of this module's, never user text) only reads: it
    starts with MATCH, UNWIND or a read-only CALL and has no writing clause. Anything else
    counts as a write (and opens the transaction)."""
    return bool(_READ_START.match(query)) and not _WRITE_WORD.search(query)


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


def _node_params_keys() -> list[str]:
    return [c for c in _MEMORY_COLUMNS if c != "recent_links"]  # kept by the store itself


#: The Memory table's columns and their types (named by pyarrow's type factories).
