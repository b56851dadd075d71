"""The Kùzu store's scoring passes and tier moves, run by ``maintain``.

``recompute_keys`` reads a namespace's memories and links as Arrow columns, scores them with the
pure functions of :mod:`ebb_core.scoring` in numpy and writes back only the rows that changed
(one ``LOAD FROM``); the tier reference and the tier moves are computed on the recall columns
(kept equal to the table) rather than by sorting the namespace in Kùzu.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from itertools import repeat
from typing import Any, NamedTuple

from ..clock import to_us
from ..errors import InvalidInput
from ..model import Tier
from ..store import TierMove, TierMoveColumns
from .base import KuzuBase
from .engine import _buffer_pool
from .mirror import KeysSet
from .queries import _SMALL, LINK_SEP, RECENT_LINKS, SEP, _release_arrow_memory
from .reads import RECALL_COLUMNS
from .rescored import signature

_AUDIT_ROW_POOL = 1 << 10
"""Bytes of Kùzu's buffer pool one tier move took until its transaction committed when its audit
row was written with ``LOAD FROM ... CREATE``, which waits in the transaction's local storage,
kept in the buffer pool by Kùzu 0.11.3 (measured on raw Kùzu: 800k audit rows need more than a
256 MiB pool; a first maintain of 82k moves failed with the pool of a 128 MiB budget and passed
with that of 192 MiB). A batch of 50,000 rows or more now goes in by ``COPY`` just before the
commit (``KuzuSession._copy_at_commit``, ``kuzu.audit.COPY_AUDIT_MIN``), but smaller ones and a
read of the log inside the transaction still write them that way, and the moves' own updates
wait in the pool too: the batches stay."""


_COPIED_MOVE_POOL = 700
"""Bytes of Kùzu's buffer pool one tier move takes until its transaction commits when its
batch's audit rows go in by ``COPY`` at the commit (``kuzu.audit.COPY_AUDIT_MIN`` rows or more):
82,286 moves in one transaction failed with a 38 MiB pool and passed with 58 MiB, ~0.5-0.7 KB
a move (docs/benchmarks.md)."""


def moves_per_transaction(budget: int) -> int:
    """Tier moves ``maintain`` commits per transaction on a Kùzu store with this memory budget.

    Batches whose audit rows are written with ``LOAD FROM ... CREATE`` (fewer than
    ``COPY_AUDIT_MIN``) hold as many moves as fit their audit rows in an eighth of the buffer
    pool, so a first maintain that moves most of a million memories never fails with a small
    budget ("the buffer pool is full"). When that bound already reaches ``COPY_AUDIT_MIN`` (a
    budget of ~0.7 GiB or more), the audit rows go in by ``COPY`` and half the pool at
    ``_COPIED_MOVE_POOL`` bytes a move bounds the batch instead (~1.15M moves at the default
    2.5 GiB): a first maintain of 809k moves at 1M is one transaction, one ``COPY`` and one
    commit rather than five (each ``COPY`` commit checkpoints the store: ~0.3-0.6 s apiece).
    Each batch's moves and their audit entries commit together (see
    ``ScoringStore.tier_moves_per_transaction``)."""
    from .audit import COPY_AUDIT_MIN

    pool = _buffer_pool(budget)
    rowwise = max(1_000, pool // 8 // _AUDIT_ROW_POOL)
    if rowwise < COPY_AUDIT_MIN:
        return rowwise
    return max(rowwise, pool // 2 // _COPIED_MOVE_POOL)


class KuzuMaintain(KuzuBase):
    """The scoring half of ``KuzuStore``: keys, the tier reference, tier moves."""

    def recompute_keys(
        self,
        namespace: str,
        epoch_us: int,
        half_life_us: float,
        read_bonus: float,
        spread: float,
        *,
        spreading: str = "default",
    ) -> int:
        _check_spreading(spreading)
        sig = signature(epoch_us, half_life_us, read_bonus, spread)
        if self.rescored(namespace, sig):
            # Nothing that changes a score was written since the scores were made exact (an
            # import's, or the last pass's): no read of the namespace (see kuzu.rescored).
            with self._lock:
                self._ensure_cache()
                c = self._cache
                return int((c.ns == c.ns_code(namespace)).sum())
        scanned = self._recompute_keys(
            namespace, epoch_us, half_life_us, read_bonus, spread, sig=sig
        )
        _release_arrow_memory()  # the pass's columns (~0.5 GB at 1M), before the re-tiering
        return scanned

    def _recompute_keys(
        self,
        namespace: str,
        epoch_us: int,
        half_life_us: float,
        read_bonus: float,
        spread: float,
        *,
        sig: str,
    ) -> int:
        """The pass itself: read the namespace's columns, score them, write back the changes,
        and mark the namespace's scores exact for ``sig`` (see kuzu.rescored).

        A vectorised pass: read the namespace's edges as Arrow, score with the same pure
        functions in numpy, write base/key/degree back with one LOAD FROM. (The same sums as
        Cypher aggregations took ~6 s at 100k memories / 500k edges; this takes well under 1.)
        """
        import numpy as np

        # Only numeric columns are read (no text: at 1M memories / 5M links the uids, ids and
        # link kinds were ~0.3 GB of strings): rows are written back by the uids the recall
        # columns hold, and ids and link kinds are read only to build unset recent-link lists.
        # The pass's columns (~0.3 GB at 1M memories / 5M links) take the row snapshot's place
        # (~0.5 GB): holding both made a maintain the process's peak. A read that needs the
        # snapshot takes it again (a maintain leaves most of it stale anyway).
        self._mirror.drop_snapshot()
        with self.transaction(), self.keys_kept(), _CacheBuild(self) as building:
            nodes = self._arrow(
                "MATCH (n:Memory) WHERE n.ns = $ns RETURN offset(id(n)) AS o, "
                "n.last_read_us AS r, n.base_key AS b0, n.key AS k0, "
                "n.degree AS d0, n.recent_links IS NULL AS nl",
                {"ns": namespace},
                one_chunk=True,
            )
            if nodes.num_rows == 0:
                self._mark_rescored([namespace], sig)
                return 0
            unset = nodes["nl"].to_numpy(zero_copy_only=False)
            edges = self._arrow(
                "MATCH (a:Memory)-[e:Link]->(b:Memory) WHERE a.ns = $ns "
                "RETURN offset(id(a)) AS a, offset(id(b)) AS b, e.weight AS w, "
                "e.reinforced_us AS t" + (", e.kind AS k" if unset.any() else ""),
                {"ns": namespace},
                one_chunk=True,
            )
            offsets = nodes["o"].to_numpy()
            size = int(offsets.max()) + 1
            src = edges["a"].to_numpy() if edges.num_rows else np.zeros(0, np.int64)
            dst = edges["b"].to_numpy() if edges.num_rows else np.zeros(0, np.int64)
            base, key, degree = _score_columns(
                nodes, edges, offsets, size, src, dst, epoch_us, half_life_us, read_bonus, spread
            )
            building.wait()
            uid_at = self._cache.uid
            stale = self._write_changed_keys(nodes, offsets, base, key, degree, uid_at)
            # Recent-link lists are kept current by every write; only unset ones (after a bulk
            # load, or around a deleted memory) are built here, from their memories' edges.
            if unset.any():
                self._write_unset_recent_links(
                    namespace, nodes, edges, offsets, size, src, dst, unset, uid_at
                )
            self._mark_rescored([namespace], sig)
            scanned = int(nodes.num_rows)
            offsets = offsets.copy()  # not a view keeping the node columns alive
            # let go of the columns before the commit and its checkpoint, which need memory
            del nodes, edges, src, dst, base, degree
            _release_arrow_memory()
        self._mirror.apply(KeysSet(offsets, key, offsets[stale | unset], size))
        return scanned

    def _write_changed_keys(
        self, nodes: Any, offsets: Any, base: Any, key: Any, degree: Any, uid_at: Any
    ) -> Any:
        """Write back the base/key/degree of the rows whose stored values differ; return the
        boolean mask of those rows (in ``nodes`` row order).

        Only rows whose stored values differ are written: between maintains most keys are exact
        already (every event keeps its own nodes exact), and writing 100k rows back costs Kùzu
        seconds. Float noise from incremental sums is not a change.
        """
        import numpy as np
        import pyarrow as pa

        from .. import scoring

        b_new, k_new, d_new = base[offsets], key[offsets], degree[offsets]
        b_old = nodes["b0"].fill_null(np.nan).to_numpy()
        k_old = nodes["k0"].fill_null(np.nan).to_numpy()
        d_old = nodes["d0"].fill_null(-1).to_numpy()
        stale = scoring.keys_changed(b_new, b_old, k_new, k_old, d_new, d_old)
        rows = np.flatnonzero(stale)
        if len(rows):
            self._run(
                "LOAD FROM $rows MATCH (n:Memory {uid: u}) SET n.base_key = b, n.key = k, "
                "n.degree = d",
                {
                    "rows": pa.table(
                        {
                            "u": _uid_column(uid_at, offsets, rows),
                            "b": pa.array(b_new[rows], pa.float64()),
                            "k": pa.array(k_new[rows], pa.float64()),
                            "d": pa.array(d_new[rows], pa.int64()),
                        }
                    )
                },
            )
        return stale

    def _write_unset_recent_links(
        self,
        namespace: str,
        nodes: Any,
        edges: Any,
        offsets: Any,
        size: int,
        src: Any,
        dst: Any,
        unset: Any,
        uid_at: Any,
    ) -> None:
        """Build the recent-link lists of the memories that have none (``unset``, in ``nodes``
        row order) from the edges touching them, and write them with one ``LOAD FROM``."""
        import numpy as np
        import pyarrow as pa

        flag = np.zeros(size, np.bool_)
        flag[offsets[unset]] = True
        near = flag[src] | flag[dst]
        part = edges.filter(pa.array(near)) if edges.num_rows else edges
        cut = len(namespace) + len(SEP)
        ids = pa.array([uid_at[o][cut:] for o in offsets.tolist()], pa.string())
        recent = _recent_link_lists(nodes.append_column("i", ids), part, offsets)
        rows = np.flatnonzero(unset)
        self._run(
            "LOAD FROM $rows MATCH (n:Memory {uid: u}) SET n.recent_links = l",
            {
                "rows": pa.table(
                    {"u": _uid_column(uid_at, offsets, rows), "l": recent.take(pa.array(rows))}
                )
            },
        )

    def scale_keys(self, factor: float) -> None:
        self._mirror.apply(KeysSet())  # every stored base and key changes
        with self.transaction():
            self._q(
                "MATCH (n:Memory) SET n.key = n.key * $f, n.base_key = n.base_key * $f",
                {"f": float(factor)},
            )

    def reference_key(self, namespace: str, quantile: float) -> tuple[float, int]:
        # From the recall columns (kept equal to the table): ORDER BY key SKIP rank over the
        # live memories is a sort of the whole namespace in Kùzu; here it is one partition.
        from .. import scoring

        with self._lock:
            self._ensure_cache()
            return scoring.reference_of(self._cache.key[self._cache.live(namespace)], quantile)

    def tier_moves(
        self,
        namespace: str,
        reference: float,
        hot_ratio: float,
        warm_ratio: float,
        cold_ratio: float,
    ) -> list[TierMove]:
        return self.tier_move_columns(
            namespace, reference, hot_ratio, warm_ratio, cold_ratio
        ).moves()

    def tier_move_columns(
        self,
        namespace: str,
        reference: float,
        hot_ratio: float,
        warm_ratio: float,
        cold_ratio: float,
    ) -> TierMoveColumns:
        # The rule of neo4j.queries.TIER_MOVES, vectorised over the recall columns.
        import numpy as np

        from .. import scoring

        with self._lock:
            self._ensure_cache()
            c = self._cache
            at = np.flatnonzero((c.ns == c.ns_code(namespace)) & (c.tier < int(Tier.FROZEN)))
            keys = c.key[at]
            ratios = keys / reference if reference > 0 else np.ones(len(at))
            target = scoring.tiers_for(ratios, c.pinned[at], hot_ratio, warm_ratio, cold_ratio)
            moved = np.flatnonzero(target != c.tier[at])
            prefix = len(namespace) + 1
            names = [c.uid[o][prefix:] for o in at[moved].tolist()]
            order = np.argsort(np.array(names, dtype=str), kind="stable") if names else moved
            ids = np.empty(len(names), dtype=object)
            ids[:] = names
            rows = moved[order]
            return TierMoveColumns(
                ids[order],
                c.tier[at[rows]].astype(np.int64),
                target[rows].astype(np.int64),
                ratios[rows].astype(np.float64),
            )

    def set_tiers(
        self,
        namespace: str,
        moves: TierMoveColumns,
        review_reasons: Mapping[str, str],
        queued_at: datetime,
    ) -> None:
        with self.keys_kept():  # a tier changes no score (see kuzu.rescored)
            self._set_tiers(namespace, moves, review_reasons, queued_at)

    def _set_tiers(
        self,
        namespace: str,
        moves: TierMoveColumns,
        review_reasons: Mapping[str, str],
        queued_at: datetime,
    ) -> None:
        if len(moves) <= _SMALL:
            super().set_tiers(namespace, moves, review_reasons, queued_at)
            return
        # One LOAD FROM per target tier (the tier a constant of the statement), and the
        # in-process copies updated column-wise: no dict of fields per memory.
        import numpy as np
        import pyarrow as pa

        prefix = f"{namespace}{SEP}"
        uids = [prefix + i for i in moves.ids.tolist()]
        to = moves.to_tier
        queued_us = to_us(queued_at)
        frozen = int(Tier.FROZEN)
        with self._lock:
            cache = self._cache
            if cache.ready:
                at = np.fromiter(map(cache.offset.get, uids, repeat(-1)), np.int64, len(uids))
                found = at >= 0
                cache.stale(at[found])
                cache.tier[at[found]] = to[found]
            rows = self._rows_cache.rows
            # a lookup per move only when some rows are cached (none after an import)
            for u, t in zip(uids, to.tolist(), strict=True) if rows else ():
                row = rows.get(u)
                if row is not None:
                    row["tier"] = t
                    if t == frozen:
                        row["review_reason"] = review_reasons[u[len(prefix) :]]
                        row["queued_us"] = queued_us
            with self.transaction():
                for tier in np.unique(to).tolist():
                    picked = np.flatnonzero(to == tier)
                    table = {"u": pa.array([uids[k] for k in picked.tolist()], pa.string())}
                    sets = f"n.tier = {int(tier)}"
                    if tier == frozen:
                        table["r"] = pa.array(
                            [review_reasons[i] for i in moves.ids[picked].tolist()], pa.string()
                        )
                        sets += f", n.review_reason = r, n.queued_us = {int(queued_us)}"
                    self._run(
                        f"LOAD FROM $rows MATCH (n:Memory {{uid: u}}) SET {sets}",
                        {"rows": pa.table(table)},
                    )


class _CacheBuild:
    """The recall columns built (when not built yet) in a thread of their own while the pass
    reads the namespace from Kùzu, which releases the GIL: at 1M memories the build is ~0.8 s
    of Python and the reads ~2 s of Kùzu, one after the other before. Its rows are read first,
    in the pass's transaction; ``wait`` (and leaving the block, error or not) joins the thread
    and raises what the build raised. The store's lock is held throughout (the transaction),
    so no other thread sees the columns half built."""

    def __init__(self, store: KuzuMaintain) -> None:
        self._store = store
        self._thread: Any = None
        self._error: BaseException | None = None

    def __enter__(self) -> _CacheBuild:
        cache = self._store._cache
        if not cache.ready:
            import threading

            table = self._store._arrow(RECALL_COLUMNS, {})

            def build() -> None:
                try:
                    cache.build(table)
                except BaseException as exc:  # raised again by wait(), in the caller's thread
                    self._error = exc

            self._thread = threading.Thread(target=build, name="ebb-recall-columns")
            self._thread.start()
        return self

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if exc[0] is None:
            self.wait()


class _Doubled(NamedTuple):
    """What :func:`_recent_link_lists` builds before it sorts, the same for every slice of
    the memories: each node offset's row in ``nodes`` (-1: none), the links' end offsets and
    times, and the memories' rows of the doubled edge list (each link at its source, then
    each at its destination). Rows as int32: half the bytes of int64."""

    pos: Any
    src: Any
    dst: Any
    t: Any
    me: Any


def _doubled_links(nodes: Any, edges: Any, offsets: Any) -> _Doubled:
    import numpy as np

    pos = np.full(int(offsets.max()) + 1, -1, np.int32)
    pos[offsets] = np.arange(nodes.num_rows)
    src, dst, t = edges["a"].to_numpy(), edges["b"].to_numpy(), edges["t"].to_numpy()
    return _Doubled(pos, src, dst, t, pos[np.concatenate([src, dst])])


def _entries(me: Any, t: Any, rows: tuple[int, int] | None) -> tuple[Any, Any, Any]:
    """The doubled edge list's entries of the memories in ``rows`` (None: all): their memories'
    rows, their times (entry k is link k % m's), their positions in it (None: all)."""
    import numpy as np

    if rows is None:
        return me, np.concatenate([t, t]), None
    sel = np.flatnonzero((me >= rows[0]) & (me < rows[1]))
    return me[sel], np.take(t, sel, mode="wrap") if len(t) else t[:0], sel


def _recent_link_lists(
    nodes: Any,
    edges: Any,
    offsets: Any,
    rows: tuple[int, int] | None = None,
    doubled: _Doubled | None = None,
) -> Any:
    """Every memory's list of its most recently reinforced links, as one Arrow list column in
    ``nodes`` row order, built without a Python loop over edges (the strings in slices of
    memories: at 1M memories and 5M links, all at once took ~1 GB more at its peak). The
    doubled edge list is ordered by memory, then newest first, with Arrow's stable multi-key
    sort (numpy's ``lexsort``, the same order, took 6.3 against 3.2 s CPU for 10M entries);
    each memory's entries are joined with their separators and cut into lists by offsets.
    ``rows`` (lo, hi): only those rows' lists, the others empty (an import's two threads);
    ``doubled``: :func:`_doubled_links` of the same arguments, built once for both threads
    (without it, built here and let go once sorted)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = nodes.num_rows
    pos, src, dst, t, me = doubled if doubled is not None else _doubled_links(nodes, edges, offsets)
    m = len(src)
    me, t2, sel = _entries(me, t, rows)
    keys = pa.table({"me": me, "t": t2})
    order = pc.sort_indices(keys, sort_keys=[("me", "ascending"), ("t", "descending")])
    order = order.to_numpy()
    grouped = me[order]
    del keys, t2, me
    if sel is not None:  # positions in the doubled edge list
        order = sel[order]
    starts = np.r_[0, np.flatnonzero(np.diff(grouped)) + 1] if len(order) else np.zeros(0, int)
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    keep = order[rank < RECENT_LINKS]  # entries of the doubled edge list, by memory
    owner = grouped[rank < RECENT_LINKS]
    del order, grouped, rank, starts
    edge = keep % m if m else keep  # the link of each kept entry...
    outgoing = keep < m  # ...and which end the memory is
    other = pos[np.where(outgoing, dst[edge], src[edge])]
    del keep, pos
    ids = nodes["i"].combine_chunks() if hasattr(nodes["i"], "combine_chunks") else nodes["i"]
    kinds = edges["k"].combine_chunks() if hasattr(edges["k"], "combine_chunks") else edges["k"]
    weights = edges["w"].to_numpy()
    counts = np.bincount(owner, minlength=n)
    bounds = np.r_[0, np.cumsum(counts)]
    # an entry ends with LINK_SEP unless it is its memory's last
    last = np.zeros(len(owner), np.bool_)
    last[bounds[1:][counts > 0] - 1] = True
    direction = pa.array(["0", "1"], pa.string())
    tail = pa.array([LINK_SEP, ""], pa.string())
    pieces = []
    step = 100_000
    for lo in range(0, n, step):
        hi = min(lo + step, n)
        a, b = int(bounds[lo]), int(bounds[hi])
        e = edge[a:b]
        entries = pc.binary_join_element_wise(
            pc.take(ids, pa.array(other[a:b])),
            pc.take(kinds, pa.array(e)),
            pc.take(direction, pa.array(outgoing[a:b].astype(np.int8))),
            pc.cast(pa.array(weights[e]), pa.string()),
            pc.binary_join_element_wise(
                pc.cast(pa.array(t[e]), pa.string()),
                pc.take(tail, pa.array(last[a:b].astype(np.int8))),
                "",
            ),
            SEP,
        )
        # The entries of a memory are consecutive and carry their separators: its list is
        # their bytes, from the offset of its first entry to that of the next memory's.
        _, offs, data = entries.buffers()
        at = np.frombuffer(offs, np.int32)[entries.offset : entries.offset + len(entries) + 1]
        ends = pa.py_buffer(at[bounds[lo : hi + 1] - a].copy())
        if data is None:
            data = pa.py_buffer(b"")
        pieces.append(pa.StringArray.from_buffers(hi - lo, ends, data))
    if not pieces:
        return pa.array([], pa.string())
    return pa.concat_arrays(pieces)


def _check_spreading(spreading: str) -> None:
    """Refuse a spreading mode other than 'default', which is all the Kùzu backend has."""
    if spreading != "default":
        raise InvalidInput(
            f"spreading {spreading!r} is not available on the embedded Kùzu backend, which "
            "has 'default' (one damped hop); 'pagerank' needs Neo4j with Graph Data Science",
            field="spreading",
        )


def _score_columns(
    nodes: Any,
    edges: Any,
    offsets: Any,
    size: int,
    src: Any,
    dst: Any,
    epoch_us: int,
    half_life_us: float,
    read_bonus: float,
    spread: float,
) -> tuple[Any, Any, Any]:
    """Every memory's (base, key, degree) by node offset, from the namespace's Arrow columns,
    with :func:`ebb_core.scoring.graph_keys`."""
    import numpy as np

    from .. import scoring

    read_us, has_read = np.zeros(size, np.int64), np.zeros(size, np.bool_)
    read_us[offsets] = nodes["r"].fill_null(0).to_numpy()
    has_read[offsets] = nodes["r"].is_valid().to_numpy(zero_copy_only=False)
    return scoring.graph_keys(
        size,
        src,
        dst,
        edges["w"].to_numpy() if edges.num_rows else np.zeros(0),
        edges["t"].to_numpy() if edges.num_rows else np.zeros(0, np.int64),
        read_us,
        has_read,
        epoch_us,
        half_life_us,
        read_bonus,
        spread,
    )


def _uid_column(uid_at: Any, offsets: Any, rows: Any) -> Any:
    """The uids of ``rows`` (indices into ``offsets``) as an Arrow string column."""
    import pyarrow as pa

    return pa.array([uid_at[o] for o in offsets[rows].tolist()], pa.string())
