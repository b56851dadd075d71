"""The Kùzu store's bulk path: ``bulk_load`` (the text index dropped and rebuilt around a large
load, whose ``COPY``s commit one by one behind a marker that a failure, or the next open after a
kill, undoes) and ``bulk_insert`` (an import's columns written as Arrow tables: ``COPY``ed in
such a load; otherwise with ``LOAD FROM … CREATE``, which Kùzu 0.11.3 rolls back cleanly, in the
caller's transaction, and memories one ``CREATE`` each while the index is in place)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

from ..errors import EbbError, StorageError
from ..records import NODE_COLUMNS, repeated
from .engine import _buffer_pool
from .index_steps import _EARLY_SHARE, _LOAD_BYTES_PER_MEMORY, KuzuIndexSteps, _discard, _Stage
from .maintain import _doubled_links, _recent_link_lists
from .mirror import Reloaded
from .queries import INDEX_STATE, SEP, _release_arrow_memory
from .rescored import stored_signature
from .tables import link_arrow_types, memory_arrow_types

_ROW_VS_BUILD = 30  # a bulk load under 1/30 of the table keeps the text index (see bulk_load)
# Meta key of a committed bulk load in progress (see KuzuBulk.bulk_load): JSON with "start",
# the Memory table's first offset it writes, and what it holds.
IMPORT_PENDING = "import:pending"
_UNDO_STEP = 100_000  # memories deleted per statement when an import is undone
_ENDS = ("Memory", "Memory")
log = logging.getLogger(__name__)


class KuzuBulk(KuzuIndexSteps):
    """The bulk-load half of ``KuzuStore``."""

    _bulk_fits = True  # this bulk load's rows may go through LOAD FROM (bulk_load sets it)
    _rollback_said: bool | None = None

    @property
    def bulk_rollback_safe(self) -> bool:
        """True outside a bulk load and inside one: a bulk load outside any transaction commits
        each ``COPY`` on its own behind a marker and, if the import fails or is interrupted,
        deletes what they wrote (see ``bulk_load``); one inside a unit of work writes with
        ``LOAD FROM … CREATE``, which Kùzu 0.11.3 rolls back cleanly, while its rows fit in
        half the buffer pool (``_LOAD_BYTES_PER_MEMORY``: ~196,000 memories at the default
        2.5 GiB budget). Only a larger one inside a unit of work is ``COPY``ed into the
        caller's transaction (a rolled-back COPY damages the table: see KuzuSession._copy)
        and says False: the import then holds a Ctrl-C from its first row to its commit
        (transfer._load). A caller may set it False (its own caution), not make COPY safe."""
        said = self._rollback_said
        return self._bulk_fits if said is None else said and self._bulk_fits

    @bulk_rollback_safe.setter
    def bulk_rollback_safe(self, value: bool) -> None:
        self._rollback_said = value

    @contextmanager
    def bulk_load(self, rows: int) -> Iterator[None]:
        """A large load: outside any transaction, the text index is dropped, the load's rows
        are ``COPY``ed, each ``COPY`` committed on its own, and the index is rebuilt after.

        Kùzu 0.11.3 damages a table when a transaction whose ``COPY`` succeeded rolls back
        (KuzuSession._copy), so a ``COPY`` is never rolled back here: before the first one, a
        marker (``Meta`` key ``import:pending``: the Memory table's first offset the load
        writes) is committed; the ``COPY``s commit one by one; the marker is deleted by the
        caller's transaction that commits the rest of the import (its audit entries and
        keys: the first write after the ``COPY``s begins it, see KuzuSession._run). If the
        import fails or is interrupted, its memories (offsets from the marker's) are deleted
        with their links, each step committed, then the marker; a kill at any point leaves the
        marker, and the next open (writing) does the same before anything reads the store
        (``_finish_interrupted_import``). So a store holds the whole import or none of it.

        Kùzu 0.11.3 also cannot COPY into Memory while its full-text index is in place once
        rows of it were revised or deleted ("Found duplicated primary key value N", and the
        rollback after it can crash the process). So memories are bulk-written only between
        the index's drop and its rebuild: a load under 1/_ROW_VS_BUILD of the table that fits
        in the pool keeps the index, creates its memories one by one (~0.7 ms each) and writes
        its links with LOAD FROM in the caller's transaction; so does any load inside a unit of
        work (where the index cannot be dropped), with COPY past the pool (see
        ``bulk_rollback_safe``). The index state is "building" from before the drop until the
        rebuild ends, so a store opened after a kill in between rebuilds it. A store whose index
        this pool could not build again keeps it, and a load past the caller's transaction
        creates its memories in committed parts behind the marker (``_create_parts``).
        """
        with self._lock:
            total = self._q("MATCH (m:Memory) RETURN count(*)")[0][0]
            # ~1.5 KB a memory on disk with its links and index entries (measured: 50k
            # memories with 100k links grow the file by ~75 MB), counted 2.7 times
            self.check_room(extra=rows * 4_000)
            fits = rows * _LOAD_BYTES_PER_MEMORY <= _buffer_pool(self._budget) // 2
            staged = rows > 0 and not self._depth and (rows * _ROW_VS_BUILD >= total or not fits)
            # A store whose index this pool cannot build again keeps it (_create_parts)
            keep = bool(staged and total and self._index_past_pool(_EARLY_SHARE) is not None)
            staged = staged and not (keep and fits)  # ... in the caller's transaction if it fits
            self._bulk_fits = fits or staged  # read by the import (transfer._load), below
            stage = self._stage = (
                _Stage(0 if keep else self._table_words(total), keep=keep) if staged else None
            )
            if staged and not keep:
                self.set_meta(INDEX_STATE, "building")
                self._drop_text_index()
                self._index_dropped = True
            failed = False
            try:
                yield
                if stage is not None and self._import_marker is not None:
                    # nothing was written after the COPYs: the marker goes on its own
                    self._drop_import_marker()
            except BaseException:
                failed = True
                if stage is not None and stage.start is not None:
                    self._undo_import(stage.start)
                raise
            finally:
                if stage is not None:
                    _discard(stage.steps)
                self._stage, self._import_marker = None, None
                self._bulk_fits = True
                if not self._closed:
                    built = stage is not None and stage.indexed
                    self._after_bulk_load(staged and not keep, failed, built=built)

    def _after_bulk_load(self, rebuild: bool, failed: bool, *, built: bool = False) -> None:
        """After a bulk load: the text index rebuilt if the load dropped it (``rebuild``) and
        did not build it already (``built``: see _copy_memories; a failed load leaves such an
        index "building", so the next open builds it again, as after a kill)."""
        self._let_go_of_tables()  # the loaded columns, before the index build
        _release_arrow_memory()
        if rebuild:
            self._index_dropped = False
            try:
                if built:
                    if not failed:
                        self.set_meta(INDEX_STATE, "ready")
                else:
                    if not failed:  # the loaded rows out of the WAL and its buffers first
                        self._maybe_checkpoint(force=True)
                    self._create_text_index()
                    self.set_meta(INDEX_STATE, "ready")
            except EbbError:
                # Left "building": rebuilt on the next open. An error of the load
                # itself is the one to report.
                if not failed:
                    raise
        # The load's rows folded in now, not at the next 16 MiB of WAL, so that the updates
        # after it (recalls) are checkpointed early again (see _maybe_checkpoint): the same
        # checkpoint a closing store would make. Not inside a caller's unit of work.
        self._maybe_checkpoint(force=not failed and not self._depth)
        if rebuild:
            _release_arrow_memory()  # what the index build freed

    def _drop_import_marker(self) -> None:
        self._run("MATCH (m:Meta {key: $k}) DELETE m", {"k": IMPORT_PENDING}, solo=True)
        self._import_marker = None

    def _undo_import(self, start: int, *, opening: bool = False) -> None:
        """Delete the memories a committed bulk load wrote (Memory offsets from ``start``: Kùzu
        never reuses a deleted row's offset) with their links, then its marker. Each statement
        commits on its own and can be redone. If it cannot finish (a full disk, Ctrl-C), the
        marker is left for the next open, and the engine is closed, so that this process reads
        no half import (``opening``: the error is raised instead, see store._connect)."""
        self._mirror.invalidate()
        self._import_marker = None
        try:
            if self._wal_failed:
                raise StorageError("the store's write-ahead log failed", path=self._path)
            if not self._q("MATCH (m:Meta {key: $k}) RETURN m.key", {"k": IMPORT_PENDING}):
                return  # the import's transaction committed (an error came after it)
            top = self._q("MATCH (m:Memory) RETURN max(offset(id(m)))")[0][0]
            end = -1 if top is None else int(top)
            for lo in range(start, end + 1, _UNDO_STEP):
                self._run(
                    "MATCH (m:Memory) WHERE offset(id(m)) >= $lo AND offset(id(m)) < $hi "
                    "DETACH DELETE m",
                    {"lo": lo, "hi": lo + _UNDO_STEP},
                    solo=True,
                )
            self._drop_import_marker()
            self._maybe_checkpoint(force=True)
        except BaseException as exc:
            if opening:
                raise
            log.warning(
                "could not remove the failed import's rows from %s (%s): the store is closed; "
                "opening it again removes them",
                self._path,
                exc,
            )
            self.close()

    def _finish_interrupted_import(self) -> None:
        """On open: remove an import killed after its first COPY (see ``bulk_load``)."""
        rows = self._q("MATCH (m:Meta {key: $k}) RETURN m.value", {"k": IMPORT_PENDING})
        if not rows:
            return
        info = json.loads(rows[0][0])
        log.warning(
            "%s: removing an import of %s memories that was interrupted (started %s)",
            self._path,
            info.get("memories"),
            info.get("started"),
        )
        self._undo_import(int(info["start"]), opening=True)

    def _refuse_interrupted_import(self) -> None:
        """A read-only open of a store that holds an interrupted import: refused (it would
        read half an import); a writing open removes it first."""
        try:
            pending = self._q("MATCH (m:Meta {key: $k}) RETURN m.value", {"k": IMPORT_PENDING})
        except StorageError:  # no Meta table (a store whose creation was killed): no import
            self._prepared.clear()
            return
        if pending:
            self.close()
            raise StorageError(
                f"the store {self._path} holds an import that was interrupted: open it for "
                "writing once (any `ebb` command that writes, or `ebb repair`), which removes "
                "it, before reading it",
                path=self._path,
            )

    def _start_stage(self, stage: _Stage, n: int, m: int) -> None:
        """Commit the marker of a committed bulk load, before its first COPY."""
        top = self._q("MATCH (m:Memory) RETURN max(offset(id(m)))")[0][0]
        stage.start = 0 if top is None else int(top) + 1
        info = {
            "start": stage.start,
            "memories": n,
            "links": m,
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        self._run(
            "MERGE (m:Meta {key: $k}) SET m.value = $v",
            {"k": IMPORT_PENDING, "v": json.dumps(info)},
            solo=True,
        )
        self._import_marker = IMPORT_PENDING

    def bulk_insert(
        self,
        nodes: Mapping[str, Sequence[Any]],
        edges: Mapping[str, Sequence[Any]],
        *,
        ends: tuple[Any, Any] | None = None,
    ) -> None:
        """Write an import's memory and link columns: inside a committed bulk load (before
        the caller's transaction has written anything), each ``COPY``ed and committed on its
        own (see ``bulk_load``; links between two memories stored before go in the caller's
        transaction); otherwise memories with one LOAD FROM … CREATE while the text index is
        dropped, else one CREATE each, and links with LOAD FROM … MATCH … CREATE, in the
        caller's transaction (KuzuSession._copy), or COPY past the pool (``bulk_rollback_safe``
        false).

        Each big column is released as soon as nothing after needs it (the memories' before
        the links' write, the edge-end indices before the link table), for peak memory at 1M.
        In a committed load whose links all join its new memories, the links' Parquet file is
        written in a thread while the lists are made (in two threads) and the memories'
        file is written and ``COPY``ed, and the links' uids (~0.5 GB at 5M links) are let go
        before the links' ``COPY``.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        self._mirror.apply(Reloaded())
        n, m = len(nodes["id"]), len(edges["src"])
        node_uids = _uids(nodes["namespace"], nodes["id"]) if n else pa.array([], pa.string())
        src = _uids(edges["namespace"], edges["src"]) if m else pa.array([], pa.string())
        dst = _uids(edges["namespace"], edges["dst"]) if m else pa.array([], pa.string())
        if ends is not None:  # matched by the caller (see the contract's bulk_insert)
            a, b = ends
        else:
            a, b = pc.index_in(src, value_set=node_uids), pc.index_in(dst, value_set=node_uids)
        inside = m == 0 or (a.null_count == 0 and b.null_count == 0)
        stage = self._stage
        solo = stage is not None and not self._begun and (n > 0 or m > 0)
        # A committed load whose links all join its new memories: their Parquet file is
        # written in a thread from now on, while the lists are made and the memories written,
        # and the links' uids are let go once it is written (nothing else here needs them).
        # Started after the lists instead, it was no faster and held the uids ~430 MB longer
        # at 1M (a 33-character namespace, 2026-12-03).
        ahead = self._parquet_ahead(_link_table(src, dst, edges)) if solo and inside else None
        if ahead is not None:
            ahead.start()
        held = [node_uids, src, dst, a, b]  # _insert takes them: held nowhere else
        del node_uids, src, dst, a, b
        try:
            self._insert(nodes, edges, held, n, m, inside, ahead)
        finally:
            if ahead is not None:
                ahead.discard()

    def _insert(
        self,
        nodes: Mapping[str, Sequence[Any]],
        edges: Mapping[str, Sequence[Any]],
        held: list[Any],
        n: int,
        m: int,
        inside: bool,
        ahead: Any,
    ) -> None:
        """``bulk_insert``'s writes: ``held`` the uids of the memories and of the links' ends
        and the ends' indices among the memories (taken out of the list); ``ahead`` the links'
        Parquet file being written, if it is."""

        node_uids, src, dst, a, b = held
        held.clear()
        if ahead is not None:
            src = dst = None  # in the file
        recent = _new_recent_links(nodes, edges, n, m, inside, a, b)
        stage = self._stage
        solo = stage is not None and not self._begun and (n > 0 or m > 0)
        with self.transaction():
            if solo:
                assert stage is not None
                if stage.start is None:
                    self._start_stage(stage, n, m)
                if n:
                    stage.uids.append(node_uids)
            if n:
                rows = [_memory_table(nodes, node_uids, recent, n)]  # taken by the write
                if solo:
                    assert stage is not None
                    self._copy_memories(rows, stage)
                elif self._index_dropped:
                    self._copy("Memory", rows.pop(), may_roll_back=self._bulk_fits)
                else:  # see bulk_load: no bulk write into Memory while its text index is there
                    self._create_rows(rows.pop())
                del rows
            # What only the memories needed goes before the links' write, which needs memory of
            # its own: at 1M memories the link lists alone are ~0.4 GB.
            del recent, node_uids
            if solo and stage is not None and stage.steps:
                self._build_and_step(stage)
            ends = [src, dst, a, b]
            del src, dst, a, b  # the links' write below lets them go as soon as it can
            self._write_links(ends, edges, m, inside=inside, solo=solo, ahead=ahead)
            if "key" in nodes and n:
                # Into empty namespaces, with the keys the import computed from the file with
                # this store's epoch and settings: exact, the first maintain need not check
                # them (kuzu.rescored).
                sig = stored_signature(self.get_meta("epoch_us"), self.get_meta("scoring"))
                if sig is not None:
                    self._mark_rescored(_distinct(nodes["namespace"]), sig)

    def _write_links(
        self,
        ends: list[Any],
        edges: Mapping[str, Sequence[Any]],
        m: int,
        *,
        inside: bool,
        solo: bool,
        ahead: Any,
    ) -> None:
        """``_insert``'s links: from the Parquet file written ahead if there is one, else from
        ``ends`` (their ends' uids and indices among the new memories, taken out of the list
        and let go before the ``COPY``). It returns to ``_insert``, whatever path it took, so
        what ``_insert`` does after the links (the scores' watermark) cannot be skipped."""
        import pyarrow as pa
        import pyarrow.compute as pc

        src, dst, a, b = ends
        ends.clear()
        if ahead is not None:
            del src, dst, a, b
            ahead.wait()  # the links' uids go with the written table
            _release_arrow_memory()
            self._copy("Link", ahead, may_roll_back=False, ends=_ENDS, solo=True)
            return
        if not m:
            return
        if not inside:
            self._unset_recent_links(src, dst, a, b, solo=solo)
        del a, b
        table = _link_table(src, dst, edges)
        if solo and not inside:
            stage = self._stage
            assert stage is not None
            chunks = [c for u in stage.uids for c in getattr(u, "chunks", [u])]
            known = pa.concat_arrays(chunks) if chunks else pa.array([], pa.string())
            new = pc.or_(pc.is_in(src, value_set=known), pc.is_in(dst, value_set=known))
            if not pc.all(new).as_py():  # links between two memories stored before
                old = table.filter(pc.invert(new))
                table = table.filter(new)
                self._copy("Link", table, may_roll_back=False, ends=_ENDS, solo=True)
                self._copy("Link", old, may_roll_back=True, ends=_ENDS)
                return
        self._copy("Link", table, may_roll_back=not solo and self._bulk_fits, ends=_ENDS, solo=solo)

    def _unset_recent_links(self, src: Any, dst: Any, a: Any, b: Any, *, solo: bool) -> None:
        """Unset the recent-link lists of the memories already stored that gain links (an end
        whose index among the new memories, ``a`` or ``b``, is null): they are rebuilt from all
        their edges, by maintain or on first use (so unsetting them is harmless if the import
        is undone: ``solo`` commits it on its own, see ``bulk_load``)."""
        import pyarrow.compute as pc

        from .links import unset_lists

        older = set(src.filter(pc.is_null(a)).to_pylist())
        older |= set(dst.filter(pc.is_null(b)).to_pylist())
        self._load(
            "MATCH (n:Memory {uid: u}) " + unset_lists("n"),
            {"u": sorted(older)},
            {"u": "uid"},
            solo=solo,
        )


def _distinct(values: Any) -> list[str]:
    """The distinct values of an import column (an Arrow array or a list)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return [str(v) for v in pc.unique(values).to_pylist()]
    return sorted(set(values))


def _col(values: Any, typ: Any) -> Any:
    """An import column as an Arrow array of type ``typ``."""
    import pyarrow as pa

    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values.cast(typ)
    return pa.array(values, type=typ)


def _uids(ns: Any, ids: Any) -> Any:
    """The uids (namespace, SEP, id) of two import columns."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.binary_join_element_wise(_col(ns, pa.string()), _col(ids, pa.string()), SEP)


def _new_recent_links(
    nodes: Mapping[str, Sequence[Any]],
    edges: Mapping[str, Sequence[Any]],
    n: int,
    m: int,
    inside: bool,
    a: Any,
    b: Any,
) -> Any:
    """The new memories' recent-link lists as far as the load's columns tell them: empty when
    the load has no links, built from the links when every one joins two new memories (``a``
    and ``b`` their ends' indices), unset (null) otherwise."""
    import numpy as np
    import pyarrow as pa

    # No links in this load: the new memories have none, so their lists are known (empty);
    # unset, a recall reaching them would build and write each one (a write per read).
    recent = pa.nulls(n, pa.string()) if m else repeated("", n)
    if n and m and inside:
        # Every edge joins two of these new memories: their recent-link lists follow
        # from the columns, as maintain would build them.
        recent = _lists_in_halves(
            pa.table({"i": _col(nodes["id"], pa.string())}),
            pa.table(
                {
                    "a": a,
                    "b": b,
                    "t": _col(edges["reinforced_us"], pa.int64()),
                    "k": _col(edges["kind"], pa.string()),
                    "w": _col(edges["weight"], pa.float64()),
                }
            ),
            np.arange(n),
        )
    return recent


def _lists_in_halves(nodes: Any, edges: Any, offsets: Any) -> Any:
    """``_recent_link_lists`` of the first and of the second half of the memories, each in a
    thread of its own: Arrow's sort and numpy's array work release the GIL, and the whole list
    built on one core took ~6 s of a 1M-memory import (2026-12-03). The same lists. What both
    halves read (``_doubled_links``) is built once: each building its own took ~10% more wall
    and CPU time at 1M memories and 5M links, and held two copies at once."""
    from concurrent.futures import ThreadPoolExecutor
    from functools import partial

    import pyarrow as pa

    n = nodes.num_rows
    halves = [(0, n // 2), (n // 2, n)]
    half = partial(
        _recent_link_lists, nodes, edges, offsets, doubled=_doubled_links(nodes, edges, offsets)
    )
    with ThreadPoolExecutor(2, thread_name_prefix="ebb-lists") as pool:
        parts = list(pool.map(half, halves))
    del half  # what both halves share, before they are joined (a copy of every list)
    kept = [part.slice(lo, hi - lo) for part, (lo, hi) in zip(parts, halves, strict=True)]
    return pa.concat_arrays(kept)


def _memory_table(nodes: Mapping[str, Sequence[Any]], node_uids: Any, recent: Any, n: int) -> Any:
    """The Memory rows of an import as one Arrow table."""
    import pyarrow as pa

    types = memory_arrow_types()

    def scores(name: str, zero: float) -> Any:
        # the Brain may send final scores with an import; otherwise they are recomputed
        typ = types[name]
        return _col(nodes[name], typ) if name in nodes else repeated(zero, n, typ)

    return pa.table(
        {
            "uid": node_uids,
            "id": _col(nodes["id"], types["id"]),
            "ns": _col(nodes["namespace"], types["ns"]),
            **{c: _col(nodes[c], types[c]) for c in NODE_COLUMNS if c not in ("namespace", "id")},
            "base_key": scores("base_key", 0.0),
            "key": scores("key", 0.0),
            "degree": scores("degree", 0),
            "recent_links": recent,
        }
    )


def _link_table(src: Any, dst: Any, edges: Mapping[str, Sequence[Any]]) -> Any:
    """The Link rows of an import (``src``/``dst`` their ends' uids) as one Arrow table."""
    import pyarrow as pa

    props = {c: _col(edges[c], t) for c, t in link_arrow_types().items()}
    return pa.table({"from": src, "to": dst, **props})
