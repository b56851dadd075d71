"""Vectors in the Kùzu store: per namespace, searched in process up to a cap, an HNSW index past it.

Mixed into :class:`~ebb_core.kuzu_store.KuzuStore`; a store without an embedder never creates
one. A namespace (``<h>``: a digest of it, so no user text reaches the DDL) has two tables, made
on its first vector:

- ``MemoryVectorTail_<h>`` ``(uid, ns, vb STRING)``, without an index: where every new vector
  goes (``remember``, imports, ``ebb embed``), as the base64 of its float32 bytes (see
  :mod:`ebb_core.kuzu.vector_rows`: Kùzu's Python binding made a 384-float list parameter cost
  more than the rest of a ``remember``'s statement; older stores are converted on open).
  Recall searches it in process: a numpy copy (the vectors and their packed sign bits), loaded
  on first use and kept in step with this process's writes (a rollback drops it). Up to
  ``EXACT_MAX`` (20,000) vectors the search is exact (one matrix-vector product); above, the
  rows whose sign bits differ least from the query's (a shortlist of 10 × the pool, at least
  ``SHORTLIST_MIN`` = 500) are re-ranked by their exact cosine.
- ``MemoryVector_<h>`` ``(uid, ns, vec FLOAT[dim])``, with an HNSW index (Kùzu's bundled
  ``vector`` extension, cosine), used only once the namespace holds more than
  :meth:`KuzuVectors.in_process_cap` vectors (``IN_PROCESS_MAX`` = 200,000, fewer when they
  would not fit in an eighth of the store's memory budget, ``EBB_MEMORY_BUDGET``; ~1.7 KB a
  384-dimensional vector). A move into it decodes the tail's strings.

Why: Kùzu 0.11.3's HNSW index takes ~65-130 384-dimensional vectors a second here (a remember with
a vector was 3.6x a text-only one, an import ~20x slower), while searching 100,000 in process
through the shortlist costs a few milliseconds. Past the cap, :meth:`KuzuVectors.index_vectors`
(run by ``maintain``) moves the tail into the index: the namespace's first move takes the whole
tail and builds the index once over the moved rows (``CREATE_VECTOR_INDEX`` after the rows are in,
rather than an insert per row); later ones move a tail of ``TAIL_MIN`` or more, at most
``INDEX_BATCH`` at a time. Each move is one transaction (a kill leaves every vector in one table or
the other); rows of an indexed table whose index is not built yet (a kill between the move and the
build) are searched in process with the tail until the next move builds it.

The index is never dropped and re-made under the same name (``DROP_VECTOR_INDEX`` leaves its
name behind on 0.11.3). Kùzu cannot ``SET`` an indexed vector, so replacing one is delete +
insert (into the tail); a new memory's vector is inserted with no delete before it
(``put_vectors(new=True)``). A table pair per namespace: no namespace's size changes another's
search (one shared index made a 200-memory namespace search thousands deep: p50 230 ms).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext, suppress
from typing import TYPE_CHECKING, Any

from ..errors import EbbError
from ..model import Tier
from ..store import Match
from .mirror import VectorsRemoved, VectorsReset, VectorsWritten
from .queries import uid as _uid
from .tail import _Tail
from .vector_rows import COLUMN, encode, move_rows, read_rows, upgrade_tail

if TYPE_CHECKING:  # numpy is imported where vectors are read: a one-shot command may need none
    from .mirror import Mirror

PREFIX = "MemoryVector_"
TAIL_PREFIX = "MemoryVectorTail64_"
#: the tails of stores written before the base64 form: ``vec FLOAT[dim]`` (converted on open)
OLD_TAIL_PREFIX = "MemoryVectorTail_"
#: ``maintain`` moves a namespace's tail into its HNSW index once it holds this many vectors
#: (below it, an exact search of the tail costs less than the index's query)
TAIL_MIN = 1000
#: ... and at most this many per ``maintain`` (Kùzu indexes ~65-130 vectors a second here)
INDEX_BATCH = 2000
#: a namespace's vectors all stay in process (no HNSW index) up to this many (``in_process_cap``)
IN_PROCESS_MAX = 200_000


def _names(namespace: str) -> tuple[str, str, str]:
    """``namespace``'s indexed vector table, its index and its tail (a digest: only hex in DDL)."""
    import hashlib  # a store without vectors never asks

    h = hashlib.sha1(namespace.encode("utf-8")).hexdigest()[:20]
    return f"{PREFIX}{h}", f"memory_vec_{h}", f"{TAIL_PREFIX}{h}"


class KuzuVectors:
    """The vector half of ``KuzuStore`` (uses its ``_q``, ``_rows``, ``_exec``, ``_lock``)."""

    supports_vectors = True
    _vec_dim: int | None = None
    _vec_checked = False
    _vec_tables: set[str] | None = None
    _vec_indexed: set[str] | None = None

    if TYPE_CHECKING:  # provided by KuzuStore
        _mirror: Mirror  # owns the in-process tails (``Mirror.vectors``)
        _lock: Any
        _budget: int
        _prepared: dict[str, Any]

        def _q(self, query: str, params: Mapping[str, Any] | None = None) -> list[list[Any]]: ...
        def _rows(self, query: str) -> list[list[Any]]: ...
        def _exec(self, query: str) -> None: ...

        _depth: int  # transactions open (KuzuSession.transaction)

        def _copy(self, name: str, table: Any, *, may_roll_back: bool) -> None: ...
        def matches_for(self, namespace: str, ids: Sequence[str]) -> list[Match]: ...
        def vector_count(self, namespace: str) -> int: ...  # KuzuVectorScans
        def transaction(self) -> AbstractContextManager[None]: ...
        def keys_kept(self) -> AbstractContextManager[None]: ...  # KuzuRescored
        def _run(
            self, query: Any, params: Mapping[str, Any] | None = None, *, read: bool = False
        ) -> Any: ...

    # -- the tables ----------------------------------------------------------------------------
    def _tables(self) -> set[str]:
        """Every vector table (indexed and tail) of the store."""
        if self._vec_tables is None or not self._vec_checked:
            with self._lock:
                rows = self._rows("CALL show_tables() RETURN name")
                self._vec_tables = {
                    r[0]
                    for r in rows
                    if str(r[0]).startswith((PREFIX, TAIL_PREFIX, OLD_TAIL_PREFIX))
                }
                self._vec_indexed = {
                    str(r[0])
                    for r in self._rows("CALL show_indexes() RETURN *")
                    if str(r[0]).startswith(PREFIX)
                }
                self._vec_dim = None
                # from an indexed table (made with every tail; an old tail has FLOAT[dim] too)
                for name in sorted(self._vec_tables, key=lambda t: not t.startswith(PREFIX)):
                    for r in self._rows(f"CALL table_info('{name}') RETURN *"):
                        if r[1] == "vec" and self._vec_dim is None:
                            self._vec_dim = int(str(r[2]).rsplit("[", 1)[1].rstrip("]"))
                    if self._vec_dim is not None:
                        break
                self._vec_checked = True
        return self._vec_tables

    def in_process_cap(self, dim: int | None = None) -> int:
        """How many vectors a namespace keeps in process, searched there without an HNSW index:
        ``IN_PROCESS_MAX``, or fewer when they would not fit in an eighth of the memory budget
        (a vector costs ``4 dim`` bytes, its sign bits ``dim / 8``, its uid and row ~160)."""
        dim = dim or self._vec_dim or 384
        per = 4 * dim + 8 * ((dim + 63) // 64) + 160
        return max(TAIL_MIN, min(IN_PROCESS_MAX, (self._budget // 8) // per))

    def _vector_dim(self) -> int | None:
        self._tables()
        return self._vec_dim

    def _table(self, namespace: str) -> str | None:
        """The namespace's indexed vector table, None when it has no vectors yet."""
        table, _, _ = _names(namespace)
        return table if table in self._tables() else None

    def _indexed(self, table: str) -> bool:
        self._tables()
        return table in (self._vec_indexed or set())

    def ensure_vectors(self, dim: int) -> None:
        """Check that ``dim`` is this store's vector dimension (tables are made per namespace
        on their first vector, outside transactions: DDL commits on its own)."""
        have = self._vector_dim()
        if have is not None and have != dim:
            from ..embeddings import EmbedderError

            raise EmbedderError(
                f"this store's vectors have dimension {have}, the embedder's have {dim}: "
                "re-embed with `ebb embed --rebuild`"
            )

    def prepare_vectors(self, namespace: str, dim: int) -> None:
        """The namespace's tables made now if missing (DDL, outside transactions), so that
        ``remember`` writes a memory and its vector in one transaction."""
        self._ensure_table(namespace, dim)

    def _ensure_table(self, namespace: str, dim: int) -> tuple[str, str]:
        """The namespace's indexed table and tail, made if missing (the index is built at the
        first move into it, see ``index_vectors``)."""
        self.ensure_vectors(dim)
        table, _, tail = _names(namespace)
        tables = self._tables()
        if table in tables and tail in tables:
            return table, tail
        with self._lock:
            for name, column in ((table, f"vec FLOAT[{int(dim)}]"), (tail, f"{COLUMN} STRING")):
                if name not in tables:
                    self._exec(
                        f"CREATE NODE TABLE IF NOT EXISTS {name}(uid STRING PRIMARY KEY, "
                        f"ns STRING, {column})"
                    )
                    tables.add(name)
            self._vec_dim = dim
        return table, tail

    def drop_vectors(self) -> None:
        with self._lock:
            self._prepared.clear()
            indexed = self._vec_indexed or set()
            for table in sorted(self._tables()):
                if table in indexed:
                    _, index = _names_of_table(table)
                    with suppress(EbbError):
                        self._exec(f"CALL DROP_VECTOR_INDEX('{table}', '{index}')")
                self._exec(f"DROP TABLE {table}")
            self._vec_tables, self._vec_dim, self._vec_checked = set(), None, True
            self._vec_indexed = set()
            self._mirror.apply(VectorsReset(None))

    # -- rows --------------------------------------------------------------------------------
    def put_vectors(
        self, namespace: str, ids: Sequence[str], vectors: Any, *, new: bool = False
    ) -> None:
        """Store vectors in the namespace's tail (replacing any the memories had)."""
        import numpy as np

        mat = np.asarray(vectors, dtype=np.float32)
        if len(ids) == 0:
            return
        table, tail = self._ensure_table(namespace, int(mat.shape[1]))
        uids = [_uid(namespace, i) for i in ids]
        # Inside a caller's transaction this write may still be rolled back (LOAD FROM);
        # in its own, a COPY is its last statement (see KuzuSession._copy), and a Ctrl-C from
        # the COPY to the commit waits for the commit (`ebb embed` is often interrupted).
        nested = self._depth > 0
        copying = new and not nested and len(uids) > 32
        gate: Any = nullcontext()
        if copying:
            from ..import_job import _InterruptGate

            gate = _InterruptGate()
        with gate, self.transaction():
            if not new:
                self._delete_uids(table, uids)
                self._delete_uids(tail, uids)
            if len(uids) <= 32:
                for u, enc in zip(uids, encode(mat), strict=True):
                    self._q(
                        f"CREATE (:{tail} {{uid: $u, ns: $ns, {COLUMN}: $v}})",
                        {"u": u, "ns": namespace, "v": enc},
                    )
            else:
                import pyarrow as pa

                vecs = pa.array(encode(mat), type=pa.string())
                if new:  # a bulk load: measured ~1,000 vectors/s created row by row
                    if copying:
                        gate.hold()
                    self._copy(
                        tail,
                        pa.table(
                            {
                                "uid": pa.array(uids, type=pa.string()),
                                "ns": pa.array([namespace] * len(uids), type=pa.string()),
                                COLUMN: vecs,
                            }
                        ),
                        may_roll_back=nested,
                    )
                else:
                    self._run(
                        f"LOAD FROM $rows CREATE (:{tail} {{uid: u, ns: $ns, {COLUMN}: v}})",
                        {
                            "rows": pa.table({"u": pa.array(uids, type=pa.string()), "v": vecs}),
                            "ns": namespace,
                        },
                    )
            # written through (a uid already there is replaced); a rollback drops the copy
            self._mirror.apply(VectorsWritten(namespace, uids, mat))
        if copying:
            gate.release()  # a Ctrl-C during the COPY or the commit is raised now, after it

    def _vector_creates(
        self, namespace: str, uids: Sequence[str], vectors: Any, params: dict[str, Any]
    ) -> tuple[list[str], Any]:
        """``CREATE`` items putting new memories' vectors (rows of ``vectors``, for ``uids``)
        into the namespace's tail, for :meth:`write_event` to fold into its one statement (the
        parameters added to ``params``), and the float32 matrix for the in-process copy.
        The tail must exist (``prepare_vectors``): one dropped since (``embed --rebuild``
        between the two) is refused with a clear error, nothing written."""
        import numpy as np

        mat = np.asarray(vectors, dtype=np.float32).reshape(len(uids), -1)
        _, _, tail = _names(namespace)
        if tail not in self._tables() or self._vec_dim != int(mat.shape[1]):
            raise EbbError(
                "the store's vectors were dropped or changed while this memory was written "
                "(`ebb embed --rebuild`?); nothing was stored: write it again"
            )
        items = []
        params["vns"] = namespace
        for k, (u, enc) in enumerate(zip(uids, encode(mat), strict=True)):
            items.append(f"(:{tail} {{uid: $v{k}_u, ns: $vns, {COLUMN}: $v{k}_v}})")
            params[f"v{k}_u"], params[f"v{k}_v"] = u, enc
        return items, mat

    def _delete_uids(self, table: str, uids: Sequence[str]) -> None:
        if len(uids) <= 32:
            for u in uids:
                self._q(f"MATCH (v:{table} {{uid: $u}}) DELETE v", {"u": u})
        else:
            self._q(f"MATCH (v:{table}) WHERE v.uid IN $us DELETE v", {"us": list(uids)})

    def delete_vectors(self, namespace: str, ids: Sequence[str]) -> None:
        table = self._table(namespace)
        if table is None or not ids:
            return
        _, _, tail = _names(namespace)
        uids = [_uid(namespace, i) for i in ids]
        with self.transaction():
            self._delete_uids(table, uids)
            if tail in self._tables():
                self._delete_uids(tail, uids)
            self._mirror.apply(VectorsRemoved(namespace, uids))

    def vectors_of(self, namespace: str, ids: Sequence[str]) -> dict[str, Any]:
        table = self._table(namespace)
        if table is None or not ids:
            return {}
        tail = self._read_tail(namespace)
        tables = [t for t in (table, tail) if t in self._tables()]
        out: dict[str, Any] = {}
        for start in range(0, len(ids), 1000):
            chunk = list(ids[start : start + 1000])
            by_uid: dict[str, Any] = {}
            for name in tables:
                got, mat = self._vector_rows(name, [_uid(namespace, i) for i in chunk])
                by_uid.update(zip(got, mat, strict=True))
            for i in chunk:
                vec = by_uid.get(_uid(namespace, i))
                if vec is not None:
                    out[i] = vec
        return out

    def _read_tail(self, namespace: str) -> str:
        """The namespace's tail to read: an older store's ``FLOAT[dim]`` one while it is there
        (opened read-only, or its conversion not finished), else the base64 one."""
        _, _, tail = _names(namespace)
        old = OLD_TAIL_PREFIX + tail[len(TAIL_PREFIX) :]
        return old if old in self._tables() else tail

    def _vector_rows(self, name: str, uids: Sequence[str] | None = None) -> tuple[list[str], Any]:
        """The uids and float32 vectors (a matrix) of the vector table ``name``'s rows (those
        of ``uids`` only, when given), whichever form it keeps them in."""
        column = COLUMN if name.startswith(TAIL_PREFIX) else "vec"
        return read_rows(self, name, column, int(self._vec_dim or 0), uids)

    def _unindexed(self, namespace: str) -> _Tail | None:
        """The namespace's vectors outside any built index (its tail, and the indexed table's
        rows if its index is not built yet), in process; None when it has none."""
        table, _, _ = _names(namespace)
        tail = self._read_tail(namespace)
        tables = self._tables()
        got = self._mirror.vectors.get(namespace)
        if got is not None:
            return got
        dim = self._vec_dim
        if dim is None:
            return None
        got = _Tail(dim)
        names = [tail] if tail in tables else []
        if table in tables and not self._indexed(table):
            names.append(table)
        for name in names:
            uids, mat = self._vector_rows(name)
            if uids:
                got.add(uids, mat)
        self._mirror.vectors_read(namespace, got)  # kept while the mirror is on
        return got

    def vector_matches(
        self, namespace: str, vector: Any, pool: int, max_tier: Tier, kinds: Sequence[str] = ()
    ) -> list[tuple[Match, float]]:
        import numpy as np

        table = self._table(namespace)
        if table is None or pool <= 0:
            return []
        _, index, _ = _names(namespace)
        q = np.asarray(vector, dtype=np.float32)
        want = max(pool, 20)
        found: list[tuple[str, float]] = []
        with self._lock:
            if self._indexed(table):
                rows = self._q(
                    # efs (the search's candidate list; Kùzu's default is 200): 2 × k, at least
                    # 100, measured 4.6 → 3.0 ms a query at 1,500 memories
                    f"CALL QUERY_VECTOR_INDEX('{table}', '{index}', $q, $k, "
                    f"efs := {max(100, 2 * want)}) RETURN node.uid, distance",
                    {"q": q.tolist(), "k": want},
                )
                found = [(r[0], 1.0 - float(r[1])) for r in rows]
            tail = self._unindexed(namespace)
            if tail is not None:
                found += tail.search(q, want)
        found.sort(key=lambda r: (-r[1], r[0]))
        found = found[:pool]
        skip = len(namespace) + 1  # uid = namespace, separator, id
        # what recall blends on, from the store's in-process columns (no join per row)
        by_id = {m.id: m for m in self.matches_for(namespace, [u[skip:] for u, _ in found])}
        out = []
        for u, sim in found:
            m = by_id.get(u[skip:])
            if m is None or m.tier > int(max_tier) or (kinds and m.kind not in kinds):
                continue
            out.append((m, sim))
        return out

    def vector_tail_count(self, namespace: str) -> int:
        """How many of the namespace's vectors wait outside its index (searched exactly)."""
        with self._lock:
            if self._table(namespace) is None:
                return 0
            tail = self._unindexed(namespace)
            return len(tail) if tail is not None else 0

    def index_vectors(
        self, namespace: str, *, limit: int | None = None, min_tail: int | None = None
    ) -> int:
        """Move the namespace's tail vectors into its HNSW index when it holds at least
        ``min_tail``; returns how many moved. A namespace without an index gets one only once
        it holds more than :meth:`in_process_cap` vectors (below, its vectors are all searched
        in process; an explicit ``min_tail`` overrides this). Once the index exists, at most
        ``limit`` move (Kùzu inserts them one by one); the namespace's first move takes the
        whole tail and builds the index once over it (``limit`` 0: only that first move). Each
        batch moves in one transaction (a kill leaves each vector in one table or the other); a
        kill before the build leaves the moved rows searched exactly until the next call builds
        it. Defaults: ``INDEX_BATCH`` and ``TAIL_MIN``."""
        limit = INDEX_BATCH if limit is None else limit
        table, index, tail = _names(namespace)
        with self._lock, self.keys_kept():  # vector tables only: no score (kuzu.rescored)
            if table not in self._tables():
                return 0
            indexed = self._indexed(table)
            if min_tail is None and not indexed:
                min_tail = self.in_process_cap() + 1
                loaded = namespace in self._mirror.vectors
                if not loaded and self.vector_count(namespace) < min_tail:
                    return 0  # counted by a query, not loaded for nothing (an import's end)
            min_tail = TAIL_MIN if min_tail is None else min_tail
            unindexed = self._unindexed(namespace)
            waiting = len(unindexed) if unindexed is not None else 0
            if waiting == 0 or waiting < min_tail or (indexed and limit <= 0):
                return 0
            moved = 0
            if tail in self._tables():
                take = "" if not indexed else f" LIMIT {int(limit)}"
                uids = [r[0] for r in self._q(f"MATCH (v:{tail}) RETURN v.uid{take}")]
                for start in range(0, len(uids), 5000):
                    part = uids[start : start + 5000]
                    with self.transaction():  # the rows' strings decoded into FLOAT[dim]
                        got, mat = self._vector_rows(tail, part)
                        move_rows(self, namespace, table, tail, got, mat)
                    moved += len(part)
                    self._mirror.apply(VectorsRemoved(namespace, part))
            if not indexed:
                present = any(r[1] == index for r in self._rows("CALL show_indexes() RETURN *"))
                if not present:
                    self._exec(
                        f"CALL CREATE_VECTOR_INDEX('{table}', '{index}', 'vec', metric := 'cosine')"
                    )
                assert self._vec_indexed is not None
                self._vec_indexed.add(table)
                self._mirror.apply(VectorsReset(namespace))  # its table's rows are indexed
            return moved


class KuzuVectorScans(KuzuVectors):
    """Counting a namespace's vectors and finding its memories without one (``ebb embed``,
    an import's end), converting an older store's tails: whole-table work kept apart from the
    vector writes and search."""

    def _upgrade_vector_tails(self) -> None:
        """Convert an older store's ``FLOAT[dim]`` tails to base64 ones (a store opened for
        writing: see :mod:`ebb_core.kuzu.vector_rows`)."""
        old = sorted(t for t in self._tables() if t.startswith(OLD_TAIL_PREFIX))
        if not old or self._vec_dim is None:
            return
        with self._lock:
            for name in old:
                upgrade_tail(self, name, TAIL_PREFIX + name[len(OLD_TAIL_PREFIX) :])
            self._vec_checked = False  # read again: every tail is of the new form
            self._mirror.apply(VectorsReset(None))

    def without_vectors(
        self, namespace: str, after: str = "", limit: int = 256
    ) -> list[tuple[str, str]]:
        table = self._table(namespace)
        tail = self._read_tail(namespace)
        tables = [t for t in (table, tail) if t is not None and t in self._tables()]
        out: list[tuple[str, str]] = []
        cursor = after
        while len(out) < limit:
            rows = self._q(
                "MATCH (n:Memory) WHERE n.ns = $ns AND n.id > $after "
                "RETURN n.id, n.text, n.uid ORDER BY n.id LIMIT $lim",
                {"ns": namespace, "after": cursor, "lim": 4 * limit},
            )
            if not rows:
                break
            got: set[str] = set()
            for name in tables:
                got |= {
                    r[0]
                    for r in self._q(
                        f"MATCH (v:{name}) WHERE v.uid IN $us RETURN v.uid",
                        {"us": [r[2] for r in rows]},
                    )
                }
            out += [(r[0], r[1]) for r in rows if r[2] not in got]
            cursor = rows[-1][0]
        return out[:limit]

    def vector_count(self, namespace: str) -> int:
        table = self._table(namespace)
        if table is None:
            return 0
        tail = self._read_tail(namespace)
        return sum(
            int(self._q(f"MATCH (v:{name}) RETURN count(*)")[0][0])
            for name in (table, tail)
            if name in self._tables()
        )


def _names_of_table(table: str) -> tuple[str, str]:
    h = table[len(PREFIX) :]
    return table, f"memory_vec_{h}"
