"""The Kùzu store's schema (its tables and version) and its full-text index: built, dropped and
cleaned up after a kill at any point of a build.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from ..errors import (
    BackendUnavailable,
    StorageError,
)
from .base import KuzuBase
from .engine import (
    CopyInstead,
    _all,
    pool_given,
)
from .index_steps import _INDEX_BYTES_PER_WORD
from .queries import (
    FTS_INDEX,
    INDEX_STATE,
)
from .tables import SCHEMA

SCHEMA_VERSION = "5"  # of the tables in kuzu.tables: a changed CREATE statement is a new one
#: Versions an open brings up to this one by creating the tables they lack (4: no LinkList).
MIGRATES_FROM = ("4",)
STOPWORDS_TABLE = "default_english_stopwords"
STOPWORDS = 570  # rows of Kùzu 0.11.3's default English stop-word table


class KuzuSchema(KuzuBase):
    """The tables and the full-text index (mixed into :class:`~ebb_core.kuzu_store.KuzuStore`)."""

    def _ensure_schema(self) -> set[str] | None:
        """Make the missing tables; returns the names of the tables that were there, or
        ``None`` for a store already at this schema version (its tables were not listed)."""
        with self._lock:
            if self._current_version():
                return None
            existing = {r[0] for r in self._rows("CALL show_tables() RETURN name")}
            for name, ddl in SCHEMA:
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
            if version in MIGRATES_FROM:  # the missing tables were created above
                self.set_meta("schema_version", SCHEMA_VERSION)
                version = SCHEMA_VERSION
            if version != SCHEMA_VERSION:
                raise BackendUnavailable(
                    f"the store {self._path} has schema version {version!r}; this Ebb expects "
                    f"{SCHEMA_VERSION}: export it with the Ebb that wrote it and import it here"
                )
            return existing

    def _ready_for_reading(self) -> bool:
        """Whether a store opened read-only needs nothing a writer's open does: every table
        there, the current schema version, and a finished text index."""
        with self._lock:
            return self._current_version() and self.text_index_state() == "ready"

    def _current_version(self) -> bool:
        """Whether the store has this Ebb's schema: its version is written only after every
        table of it was created, so a current version needs no look at the tables (which
        costs a one-shot command ~10 ms)."""
        try:
            return self.get_meta("schema_version") == SCHEMA_VERSION
        except StorageError:  # no Meta table: a new store, or one whose creation was killed
            self._prepared.clear()  # the statement prepared against a missing table
            return False

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

    def rebuild_text_index(self, *, or_keep: bool = False) -> bool:
        """Drop and rebuild the full-text index from the table; True if rebuilt.

        A finished index is not dropped when this budget's buffer pool could not build it
        again (``KuzuIndexSteps._index_past_pool``). The store is then copied into a fresh
        file instead, whose index is built in steps (``KuzuStore._reopen_after_stop``: the
        old file is kept as ``<store>.before-rebuild-<time>``, and a ``StoreRebuilt``
        warning says so); with ``or_keep`` (``ebb repair``) the index is kept as it is and
        False returned; inside a unit of work the ``StorageError`` naming the budget that
        can build it in place is raised, nothing changed."""
        with self._lock:
            words = self._index_past_pool()
            if words is not None:
                if or_keep:
                    return False
                if self._depth:
                    raise self._too_small_to_rebuild(words, "rebuild the text index")
                self._reopen_after_stop(
                    "that built its text index in steps, as rebuild_text_index asked: "
                    f"{pool_given(self._budget)}, too little to build it in place "
                    f"({words:,} indexed words)"
                )
                return True
            self._build_text_index()
            return True

    def _ensure_text_index(self, *, force: bool = False) -> bool:
        """Build the index unless it is present and its last build finished. True if built."""
        with self._lock:
            if not force and self.text_index_state() == "ready":
                return False
            words = self._build_past_pool()
            if words is not None:  # nothing dropped: the open copies the store (_connect)
                # a replayed log's rows are missing from it: the file, kept aside by the
                # rebuild, says so to whatever opens it next
                self.set_meta(INDEX_STATE, "building")
                raise CopyInstead(
                    f"cannot open the store {self._path} as it is: its text index must be "
                    f"built again (after a crash, or a build that did not finish), and its "
                    f"{words:,} words need ~{words * _INDEX_BYTES_PER_WORD >> 20:,} MB of the "
                    f"buffer pool to build at once, where {pool_given(self._budget)}. "
                    "Opening it with its rebuild on (the default) copies it into a new file "
                    "that builds the index in steps; or open it once with a larger "
                    "EBB_MEMORY_BUDGET. Nothing is lost",
                    path=self._path,
                    why="that built its text index in steps: the index had to be built again "
                    f"(after a crash, or a build that did not finish) and "
                    f"{pool_given(self._budget)}, too little to build it at once",
                )
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
        self._mirror.invalidate()  # the text copy goes with the index
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
        self._mirror.invalidate()  # the text copy goes with the index
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
        prefix = self._text_index_prefix()
        rows = self._internal_rows("CALL show_tables() RETURN name, type") or []
        found = [(r[0], r[1]) for r in rows if str(r[0]).startswith(prefix)]
        return sorted(found, key=lambda r: (r[1] != "REL", r[0]))

    def _text_index_prefix(self) -> str:
        """What the names of the text index's internal tables start with (the Memory table's
        id and the index's name): ``<prefix>docs``, ``<prefix>terms``, ..."""
        table_id = self._rows("CALL show_tables() WHERE name = 'Memory' RETURN id")[0][0]
        return f"{table_id}_{FTS_INDEX}_"

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
