"""The Kùzu store's text index built in steps during a large import (``KuzuIndexSteps``,
a part of ``KuzuBulk``): when the Memory table's words would pass what the buffer pool can
build at once, the memories that fit are ``COPY``ed, the index is built over them, and the rest
is ``COPY``ed into it in steps (see ``KuzuIndexSteps._copy_memories``)."""

from __future__ import annotations

import math
from contextlib import suppress
from typing import Any

from ..errors import EbbError, StorageError
from .base import KuzuBase
from .engine import _buffer_pool, pool_given
from .parquet_ahead import ParquetAhead
from .queries import _release_arrow_memory

# What building the text index holds of the buffer pool per word it indexes: Kùzu 0.11.3's
# CREATE_FTS_INDEX over 12.0M words (1M memories) failed in a 1,350 MB pool and fit in 1,400
# (113-117 bytes a word); over 6.0M (500k memories) it failed in 700 MB and fit in 725
# (117-121); the same 12.0M words in 500k memories needed what 1M did (2026-12-04). Counted
# with a margin, which a default budget's pool (1.5 GiB) still builds 1M such memories in.
_INDEX_BYTES_PER_WORD = 128
_INDEX_STEP = 100_000  # memories a COPY into the built index takes at most (see _copy_memories)
_INDEX_STEP_SHARE = 16  # ... and words: at most 1/16 of what the pool could build
# The share of that an early build takes (see _copy_memories): a 1M import under a 1G budget
# (a 614 MB pool) failed building its first 5.0M words, the whole pool's at 128 bytes a word;
# with 3/4 of them it completed (79.6 s, 2026-12-04).
_EARLY_SHARE = 0.75
# What a memory and its links (about five) hold of the buffer pool while a LOAD FROM … CREATE
# waits for its commit: a 1M import (1M memories, 5M links) filled the default 1.5 GiB pool at
# its memories alone (2026-12-02), a 100k one (500k links) fit.
_LOAD_BYTES_PER_MEMORY = 4_000


class _Stage:
    """A committed bulk load (see ``KuzuBulk.bulk_load``): where its memories start (the Memory
    table's offset, once its marker is committed) and the uids it has written so far."""

    def __init__(self, words: int = 0, *, keep: bool = False) -> None:
        self.keep = keep  # the index is kept: memories created into it in parts (_create_parts)
        self.start: int | None = None
        self.uids: list[Any] = []
        self.words = words  # what the text index's build would index: the table's words
        self.indexed = False  # the index was built during the load (see _copy_memories)
        self.steps: list[Any] = []  # memories to COPY once it is built (_build_and_step)


class KuzuIndexSteps(KuzuBase):
    """The stepped index build of ``KuzuBulk``'s committed bulk loads."""

    _stage: _Stage | None = None  # the committed bulk load in progress (see KuzuBulk.bulk_load)

    def copy_rows(self, name: str, table: Any) -> None:
        """``COPY`` an Arrow table whose columns are the node or rel table ``name``'s, in
        order, inside a ``bulk_load`` of a store with no rows in its way (a salvage into a new
        file, ``salvage.salvage``), each committed on its own. Memories go as an import's do
        (``_copy_memories``): when their words pass what the buffer pool can index in one
        build, the index is built over those that fit and the rest ``COPY``ed into it in
        steps, so that a store larger than the budget is copied, only slower. Called again,
        later tables of memories go on into the index as it stands."""
        stage = self._stage
        if stage is None or self._begun:
            raise RuntimeError("copy_rows outside a bulk_load, or inside a transaction")
        if name != "Memory":
            self._copy(name, table, may_roll_back=False, solo=True)
            return
        # named as the table's columns (a query's "m.text" as "text")
        rows = [table.rename_columns([c.rsplit(".", 1)[-1] for c in table.column_names])]
        del table  # taken by the write
        self._copy_memories(rows, stage)
        if stage.steps:
            self._build_and_step(stage)

    def _table_words(self, total: int) -> int:
        """The words of the Memory table's texts (what a build of its index indexes)."""
        if not total:
            return 0
        q = "MATCH (m:Memory) RETURN sum(size(string_split(m.text, ' ')))"
        return int(self._q(q)[0][0] or 0)

    def _copy_memories(self, rows: list[Any], stage: _Stage) -> None:
        """``COPY`` a committed bulk load's memories (the Arrow table in ``rows``, taken out of
        the list; its text index dropped: see bulk_load), so that the index's build fits the
        buffer pool.

        Kùzu 0.11.3 builds the index (CREATE_FTS_INDEX) in the pool, at ~113-121 bytes per
        indexed word (``_INDEX_BYTES_PER_WORD``): a pool too small for the whole table fails
        the build ("buffer pool is full"), while a COPY into the built index holds much less.
        So when the table's words would pass what the pool can build, the memories that fit
        are COPYed, the index is built over them once the caller has let go of what only the
        memories' write needed (``_build_and_step``), and the rest is COPYed into it in steps
        (each committed on its own and checkpointed) of at most ``_INDEX_STEP`` memories and
        1/``_INDEX_STEP_SHARE`` of the words the pool could build: a step's COPY holds the pool
        in proportion to its words, plus a share that grows with the index (in a 300 MB pool,
        steps of 50k memories failed past 950k memories, steps of 10k reached 1M).

        An import past what the budget can build thus completes, only slower, and the index
        answers as one built at once (the same hits; BM25 scores within 1e-13, recall's within
        1e-6). Measured 2026-12-04 (``bench_core``, 1M memories): imports of 81 s under a 1G
        budget and 59 s under 2G, against 40 s at the default; steps of 100k memories into a
        400k index at ~60 µs a memory, against ~18 µs in a build; steps of 10k into a growing
        index in a 300 MB pool at 60 to 180 µs. The early build also runs while the import's
        columns are still held: 1M memories built that way at the default budget peaked at
        3.0 GB of RSS against 2.3 GB built after the load, so one build at the end stays the
        path wherever the pool holds it. Words are counted as spaces plus one per memory
        (``_word_counts``). A table whose memories stored before already
        pass what the pool can build fails with the error that says to raise the budget,
        nothing lost.
        """
        import pyarrow.compute as pc

        table = rows.pop()
        if stage.keep:
            self._create_parts(table)
            return
        room = self._index_room()
        if stage.indexed:  # an earlier batch of this load built it
            self._copy_steps(self._steps(table, _word_counts(table), room, to_files=False))
            return
        words = _word_counts(table)  # ~0.2 s at 1M
        total = stage.words + (pc.sum(words).as_py() or 0)
        if total <= room:
            self._copy("Memory", table, may_roll_back=False, solo=True)
            stage.words = total
            return
        # The memories whose words fit in _EARLY_SHARE of it (none if the table's alone do
        # not: its build may then fail with the error that says to raise the budget, nothing
        # lost): a build that fills the pool leaves the steps' pages nowhere.
        early = int(room * _EARLY_SHARE) - stage.words
        fit = int(pc.sum(pc.less_equal(pc.cumulative_sum(words), early)).as_py())
        if fit:
            self._copy("Memory", table.slice(0, fit), may_roll_back=False, solo=True)
        stage.steps = self._steps(table.slice(fit), words.slice(fit), room, to_files=True)
        stage.indexed = True  # by _build_and_step, which the caller runs next

    def _create_parts(self, table: Any) -> None:
        """A committed bulk load's memories (an Arrow table) created into the text index as it
        stands, when the index's words pass ``_EARLY_SHARE`` of what this pool can build again
        (``_index_past_pool``; dropping it for a ``COPY`` would leave it unbuildable): one
        ``CREATE`` each (~0.7 ms), in parts that each commit on their own, so that a part's
        transaction holds at most half the pool (``_LOAD_BYTES_PER_MEMORY``), each
        checkpointed after. The load's marker undoes them if it fails (see bulk_load). Before
        the twenty-third session such a load was refused (20k memories into the 100k store
        under ``128M``: "import it in parts of at most 10,066 memories")."""
        part = max(1_000, _buffer_pool(self._budget) // 2 // _LOAD_BYTES_PER_MEMORY)
        for lo in range(0, table.num_rows, part):
            self._exec("BEGIN TRANSACTION")
            try:
                self._create_rows(table.slice(lo, part), solo=True)  # in the part's transaction
                self._exec("COMMIT")
            except BaseException:
                with suppress(EbbError):
                    self._exec("ROLLBACK")
                raise
            self._maybe_checkpoint(force=True)

    def _create_rows(self, table: Any, *, solo: bool = False) -> None:
        """Insert an Arrow table of Memory rows with one parameterised CREATE each: in the
        caller's transaction, or (``solo``) sent as they are, in one the caller began."""
        props = ", ".join(f"{c}: ${c}" for c in table.column_names)
        query = f"CREATE (n:Memory {{{props}}})"
        for lo in range(0, table.num_rows, 10_000):
            for row in table.slice(lo, 10_000).to_pylist():
                if solo:
                    self._q_locked(query, row, solo=True)
                else:
                    self._q(query, row)

    def _steps(self, table: Any, words: Any, room: int, *, to_files: bool) -> list[Any]:
        """``table`` (its rows' ``words``) cut in the steps of _copy_memories: Arrow slices, or
        (``to_files``, where the store's folder allows it) Parquet files written now, so that
        the caller can let go of the table (~0.5 GB at 1M) before the index's build."""
        import pyarrow.compute as pc

        n = table.num_rows
        per_row = (pc.sum(words).as_py() or 0) / n if n else 1
        step = max(1_000, min(_INDEX_STEP, int(room / _INDEX_STEP_SHARE / per_row)))
        steps: list[Any] = []
        try:
            for lo in range(0, n, step):
                part = table.slice(lo, step)
                ahead = self._parquet_ahead(part, any_size=True) if to_files else None
                if ahead is not None:
                    ahead.wait()  # written now
                steps.append(part if ahead is None else ahead)
                del part, ahead
        except BaseException:
            _discard(steps)
            raise
        return steps

    def _index_room(self) -> int:
        """The words one build of the text index can index in this store's buffer pool."""
        return _buffer_pool(self._budget) // _INDEX_BYTES_PER_WORD

    def _index_past_pool(self, share: float = 1.0) -> int | None:
        """The words the finished text index holds (its documents' lengths: stop words left
        out, so fewer than _table_words counts) when building them again would pass
        ``share`` of what the pool can build; None otherwise, or without a finished index."""
        if self.text_index_state() != "ready":
            return None
        docs = f"`{self._text_index_prefix()}docs`"
        got = self._internal_rows(f"MATCH (d:{docs}) RETURN sum(d.len)")
        words = None if not got or got[0][0] is None else int(got[0][0])
        return words if words is not None and words > self._index_room() * share else None

    def _build_past_pool(self) -> int | None:
        """The words a build of the whole text index would index, when they pass what this
        budget's pool can build; None when they fit. A finished index counts its own
        (``_index_past_pool``); a missing or unfinished one, the table's (``_table_words``,
        stop words and all: ~0.5 s at 1M)."""
        if self.text_index_state() == "ready":
            return self._index_past_pool()
        total = self._q("MATCH (m:Memory) RETURN count(*)")[0][0]
        words = self._table_words(total)
        return words if words > self._index_room() else None

    def _too_small_to_rebuild(self, words: int, doing: str) -> StorageError:
        """The error for ``doing`` when it would rebuild a text index of ``words`` (which
        a build holds in the pool, see _INDEX_BYTES_PER_WORD) that this budget's pool cannot
        hold: it names the budget that can."""
        need = words * _INDEX_BYTES_PER_WORD
        budget = math.ceil(need * 5 / 3 / (1 << 29)) / 2  # in GiB, rounded up to 0.5
        return StorageError(
            f"cannot {doing} in the store {self._path}: that rebuilds its text index, whose "
            f"{words:,} indexed words need ~{need >> 20:,} MB of the buffer pool to build, "
            f"and {pool_given(self._budget)}. Nothing was changed, and the store "
            f"works as it is. Run this once with EBB_MEMORY_BUDGET={budget:g}G (or more), "
            "after which the store works under the smaller budget again",
            path=self._path,
        )

    def _build_and_step(self, stage: _Stage) -> None:
        """Build the text index over the memories COPYed so far, then COPY the load's other
        memories into it (see _copy_memories), once the caller let go of what only the
        memories' write needed: the build holds the pool, and Kùzu memory beside it."""
        steps, stage.steps = stage.steps, []
        try:
            _release_arrow_memory()
            self._maybe_checkpoint(force=True)  # the rows out of the WAL before the build
            self._create_text_index()
            self._index_dropped = False
            self._copy_steps(steps)
        finally:
            _discard(steps)

    def _copy_steps(self, steps: list[Any]) -> None:
        """COPY each step (taken out of the list), each committed and checkpointed."""
        while steps:
            self._copy("Memory", steps.pop(0), may_roll_back=False, solo=True)
            self._maybe_checkpoint(force=True)


def _word_counts(table: Any) -> Any:
    """Each row's words as the stepped build counts them: its text's spaces, plus one."""
    import pyarrow.compute as pc

    return pc.add(pc.count_substring(table["text"], " "), 1)


def _discard(steps: list[Any]) -> None:
    """Delete the Parquet files of steps not COPYed (a killed process leaves them to
    ``_remove_copy_files``)."""
    for left in steps:
        if isinstance(left, ParquetAhead):
            left.discard()
    steps.clear()
