"""The Kùzu store's bulk path: ``bulk_load`` (the text index dropped and rebuilt around a large
load) and ``bulk_insert`` (an import's columns written as Arrow tables with ``LOAD FROM …
CREATE``, which Kùzu 0.11.3 rolls back cleanly, while the import fits in the buffer pool;
``COPY`` beyond, with a Ctrl-C held until the commit: see ``KuzuBulk.bulk_rollback_safe``;
memories so while the index is dropped, one ``CREATE`` a memory otherwise)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ..errors import EbbError
from ..records import NODE_COLUMNS
from .base import KuzuBase
from .engine import _buffer_pool
from .maintain import _recent_link_lists
from .mirror import Reloaded
from .queries import INDEX_STATE, SEP, _release_arrow_memory
from .tables import link_arrow_types, memory_arrow_types

_ROW_VS_BUILD = 30  # a bulk load under 1/30 of the table keeps the text index (see bulk_load)
# What a memory and its links (about five) hold of the buffer pool while a LOAD FROM … CREATE
# waits for its commit: a 1M import (1M memories, 5M links) filled the default 1.5 GiB pool at
# its memories alone (2026-12-02), a 100k one (500k links) fit.
_LOAD_BYTES_PER_MEMORY = 4_000


class KuzuBulk(KuzuBase):
    """The bulk-load half of ``KuzuStore``."""

    _bulk_fits = True  # this bulk load's rows fit in the pool (bulk_load sets it)
    _rollback_said: bool | None = None

    @property
    def bulk_rollback_safe(self) -> bool:
        """True outside a bulk load, and inside one whose rows fit in half the buffer pool (at
        ``_LOAD_BYTES_PER_MEMORY``: ~196,000 memories at the default 2.5 GiB budget): its
        writes go through LOAD FROM … CREATE, which Kùzu 0.11.3 rolls back cleanly (a
        rolled-back COPY damages the table: see KuzuSession._copy). A larger import would fill
        the pool with rows waiting for the commit (a 1M import failed so), so it is written
        with COPY and this says False: the import then holds a Ctrl-C from its first row to
        its commit (transfer._load); only a failure after its COPY (a full disk, no memory)
        is still exposed. A caller may set it False (its own caution), not make COPY safe."""
        said = self._rollback_said
        return self._bulk_fits if said is None else said and self._bulk_fits

    @bulk_rollback_safe.setter
    def bulk_rollback_safe(self, value: bool) -> None:
        self._rollback_said = value

    @contextmanager
    def bulk_load(self, rows: int) -> Iterator[None]:
        # Kùzu 0.11.3 cannot COPY into Memory while its full-text index is in place once rows
        # of it were revised or deleted: the COPY fails with "Found duplicated primary key
        # value N" (the index's own table) and the rollback after it can crash the process.
        # (The bulk write is LOAD FROM … CREATE now, see KuzuSession._copy; it keeps the same
        # rule, not measured with the index in place.)
        # So bulk_insert bulk-writes memories only between the drop and the rebuild here, and
        # otherwise creates them row by row (~0.7 ms each). A load under 1/_ROW_VS_BUILD of
        # the table goes row by row; a larger one drops the index and rebuilds it afterwards
        # (~90 µs a memory). Kùzu only allows this outside a transaction, hence a context of
        # its own. The index state is "building" from before the drop until the rebuild ends,
        # so a store opened after a kill in between rebuilds it from what the load committed.
        with self._lock:
            total = self._q("MATCH (m:Memory) RETURN count(*)")[0][0]
            # ~1.5 KB a memory on disk with its links and index entries (measured: 50k
            # memories with 100k links grow the file by ~75 MB), counted 2.7 times
            self.check_room(extra=rows * 4_000)
            rebuild = rows > 0 and rows * _ROW_VS_BUILD >= total and not self._depth
            fits = rows * _LOAD_BYTES_PER_MEMORY <= _buffer_pool(self._budget) // 2
            self._bulk_fits = fits  # read by the import (transfer._load), below
            if rebuild:
                self.set_meta(INDEX_STATE, "building")
                self._drop_text_index()
                self._index_dropped = True
            failed = False
            try:
                yield
            except BaseException:
                failed = True
                raise
            finally:
                self._bulk_fits = True
                self._let_go_of_tables()  # the loaded columns, before the index build
                _release_arrow_memory()
                if rebuild:
                    self._index_dropped = False
                    try:
                        if not failed:  # the loaded rows out of the WAL and its buffers first
                            self._maybe_checkpoint(force=True)
                        self._create_text_index()
                        self.set_meta(INDEX_STATE, "ready")
                    except EbbError:
                        # Left "building": rebuilt on the next open. An error of the load
                        # itself is the one to report.
                        if not failed:
                            raise
                self._maybe_checkpoint()
                if rebuild:
                    _release_arrow_memory()  # what the index build freed

    def bulk_insert(
        self, nodes: Mapping[str, Sequence[Any]], edges: Mapping[str, Sequence[Any]]
    ) -> None:
        """Write an import's memory and link columns: memories (one LOAD FROM … CREATE while the
        text index is dropped, else one CREATE each), then the links (LOAD FROM … MATCH …
        CREATE): the caller's transaction may still roll back (KuzuSession._copy). COPY when
        the bulk load does not fit in the buffer pool (``bulk_rollback_safe`` false).

        Each big column is released as soon as nothing after needs it (the memories' before
        the links' write, the edge-end indices before the link table), for peak memory at 1M.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        self._mirror.apply(Reloaded())
        n, m = len(nodes["id"]), len(edges["src"])
        node_uids = _uids(nodes["namespace"], nodes["id"]) if n else pa.array([], pa.string())
        src = _uids(edges["namespace"], edges["src"]) if m else pa.array([], pa.string())
        dst = _uids(edges["namespace"], edges["dst"]) if m else pa.array([], pa.string())
        a, b = pc.index_in(src, value_set=node_uids), pc.index_in(dst, value_set=node_uids)
        inside = m == 0 or (a.null_count == 0 and b.null_count == 0)
        recent = _new_recent_links(nodes, edges, n, m, inside, a, b)
        with self.transaction():
            if n:
                table = _memory_table(nodes, node_uids, recent, n)
                if self._index_dropped:
                    self._copy("Memory", table, may_roll_back=self._bulk_fits)
                else:  # see bulk_load: no bulk write into Memory while its text index is there
                    self._create_rows(table)
                del table
            # What only the memories needed goes before the links' write, which needs memory of
            # its own: at 1M memories the link lists alone are ~0.4 GB.
            del recent, node_uids
            if m:
                if not inside:
                    self._unset_recent_links(src, dst, a, b)
                del a, b
                table = _link_table(src, dst, edges)
                self._copy("Link", table, may_roll_back=self._bulk_fits, ends=("Memory", "Memory"))
                del table

    def _unset_recent_links(self, src: Any, dst: Any, a: Any, b: Any) -> None:
        """Unset the recent-link lists of the memories already stored that gain links (an end
        whose index among the new memories, ``a`` or ``b``, is null): they are rebuilt from all
        their edges, by maintain or on first use."""
        import pyarrow.compute as pc

        older = set(src.filter(pc.is_null(a)).to_pylist())
        older |= set(dst.filter(pc.is_null(b)).to_pylist())
        self._load(
            "MATCH (n:Memory {uid: u}) SET n.recent_links = NULL",
            {"u": sorted(older)},
            {"u": "uid"},
        )

    def _create_rows(self, table: Any) -> None:
        """Insert an Arrow table of Memory rows with one parameterised CREATE each."""
        props = ", ".join(f"{c}: ${c}" for c in table.column_names)
        query = f"CREATE (n:Memory {{{props}}})"
        for lo in range(0, table.num_rows, 10_000):
            for row in table.slice(lo, 10_000).to_pylist():
                self._q(query, row)


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
    recent = pa.nulls(n, pa.string()) if m else pa.array([""] * n, pa.string())
    if n and m and inside:
        # Every edge joins two of these new memories: their recent-link lists follow
        # from the columns, as maintain would build them.
        recent = _recent_link_lists(
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


def _memory_table(nodes: Mapping[str, Sequence[Any]], node_uids: Any, recent: Any, n: int) -> Any:
    """The Memory rows of an import as one Arrow table."""
    import pyarrow as pa

    types = memory_arrow_types()

    def scores(name: str, zero: float) -> Any:
        # the Brain may send final scores with an import; otherwise they are recomputed
        typ = types[name]
        return _col(nodes[name], typ) if name in nodes else pa.array([zero] * n, typ)

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
