"""The Kùzu store's bulk path: ``bulk_load`` (the text index dropped and rebuilt around a large
load) and ``bulk_insert`` (an import's columns written as Arrow tables: ``COPY`` while the index
is dropped, one ``CREATE`` a memory otherwise)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ..errors import EbbError
from .base import KuzuBase
from .maintain import _recent_link_lists
from .mirror import Reloaded
from .queries import INDEX_STATE, SEP, _arrow_types, _release_arrow_memory

_ROW_VS_BUILD = 30  # a bulk load under 1/30 of the table keeps the text index (see bulk_load)


class KuzuBulk(KuzuBase):
    """The bulk-load half of ``KuzuStore``."""

    @contextmanager
    def bulk_load(self, rows: int) -> Iterator[None]:
        # Kùzu 0.11.3 cannot COPY into Memory while its full-text index is in place once rows
        # of it were revised or deleted: the COPY fails with "Found duplicated primary key
        # value N" (the index's own table) and the rollback after it can crash the process.
        # So bulk_insert COPYs memories only between the drop and the rebuild here, and
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
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        self._mirror.apply(Reloaded())

        def col(values: Any, typ: Any) -> Any:
            if isinstance(values, (pa.Array, pa.ChunkedArray)):
                return values.cast(typ)
            return pa.array(values, type=typ)

        def uids(ns: Any, ids: Any) -> Any:
            return pc.binary_join_element_wise(col(ns, pa.string()), col(ids, pa.string()), SEP)

        n, m = len(nodes["id"]), len(edges["src"])
        node_uids = uids(nodes["namespace"], nodes["id"]) if n else pa.array([], pa.string())
        src = uids(edges["namespace"], edges["src"]) if m else pa.array([], pa.string())
        dst = uids(edges["namespace"], edges["dst"]) if m else pa.array([], pa.string())
        a, b = pc.index_in(src, value_set=node_uids), pc.index_in(dst, value_set=node_uids)
        inside = m == 0 or (a.null_count == 0 and b.null_count == 0)
        # No links in this load: the new memories have none, so their lists are known (empty);
        # unset, a recall reaching them would build and write each one (a write per read).
        recent = pa.nulls(n, pa.string()) if m else pa.array([""] * n, pa.string())
        if n and m and inside:
            # Every edge joins two of these new memories: their recent-link lists follow
            # from the columns, as maintain would build them.
            recent = _recent_link_lists(
                pa.table({"i": col(nodes["id"], pa.string())}),
                pa.table(
                    {
                        "a": a,
                        "b": b,
                        "t": col(edges["reinforced_us"], pa.int64()),
                        "k": col(edges["kind"], pa.string()),
                        "w": col(edges["weight"], pa.float64()),
                    }
                ),
                np.arange(n),
            )

        def scores(name: str, typ: Any, zero: Any) -> Any:
            # the Brain may send final scores with an import; otherwise they are recomputed
            return col(nodes[name], typ) if name in nodes else pa.array([zero] * n, typ)

        with self.transaction():
            if n:
                table = pa.table(
                    {
                        "uid": node_uids,
                        "id": col(nodes["id"], pa.string()),
                        "ns": col(nodes["namespace"], pa.string()),
                        **{
                            c: col(nodes[c], _arrow_types()[c])
                            for c in (
                                "kind",
                                "text",
                                "props",
                                "created_us",
                                "updated_us",
                                "last_read_us",
                                "pinned",
                                "tier",
                                "review_reason",
                                "queued_us",
                            )
                        },
                        "base_key": scores("base_key", pa.float64(), 0.0),
                        "key": scores("key", pa.float64(), 0.0),
                        "degree": scores("degree", pa.int64(), 0),
                        "recent_links": recent,
                    }
                )
                if self._index_dropped:
                    self._copy("Memory", table)
                else:  # see bulk_load: no COPY into Memory while its text index is there
                    self._create_rows(table)
                del table
            # What only the memories needed goes before the links' COPY, which needs memory of
            # its own: at 1M memories the link lists alone are ~0.4 GB.
            del recent, node_uids
            if m:
                if not inside:
                    # Memories already stored gain links: their recent-link lists are unset,
                    # to be rebuilt from all their edges (by maintain, or on first use).
                    older = set(src.filter(pc.is_null(a)).to_pylist())
                    older |= set(dst.filter(pc.is_null(b)).to_pylist())
                    self._load(
                        "MATCH (n:Memory {uid: u}) SET n.recent_links = NULL",
                        {"u": sorted(older)},
                        {"u": "uid"},
                    )
                del a, b
                table = pa.table(
                    {
                        "from": src,
                        "to": dst,
                        "kind": col(edges["kind"], pa.string()),
                        "weight": col(edges["weight"], pa.float64()),
                        "created_us": col(edges["created_us"], pa.int64()),
                        "reinforced_us": col(edges["reinforced_us"], pa.int64()),
                        "props": col(edges["props"], pa.string()),
                    }
                )
                self._copy("Link", table)
                del table

    def _create_rows(self, table: Any) -> None:
        """Insert an Arrow table of Memory rows with one parameterised CREATE each."""
        props = ", ".join(f"{c}: ${c}" for c in table.column_names)
        query = f"CREATE (n:Memory {{{props}}})"
        for lo in range(0, table.num_rows, 10_000):
            for row in table.slice(lo, 10_000).to_pylist():
                self._q(query, row)
