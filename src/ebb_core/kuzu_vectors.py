"""Vectors in the Kùzu store: a ``MemoryVector_<h>`` table per namespace with an HNSW index.

Kept apart from ``kuzu_store`` (mixed into :class:`~ebb_core.kuzu_store.KuzuStore`): a store
without an embedder never creates one. A namespace's table (``<h>``: a digest of the namespace,
so no user text reaches the DDL) is made on its first vector, with the embedder's dimension
(``FLOAT[dim]``), and its index with Kùzu's bundled ``vector`` extension
(cosine metric), which follows inserts and deletes, and (unlike Kùzu's full-text index) holds
the rows a write-ahead log replay brings back (checked on 0.11.3; ``DROP_VECTOR_INDEX`` leaves
its name behind there, so the index is never dropped and re-made under the same name). Kùzu
cannot ``SET`` an indexed vector, so replacing one is delete + insert. One index per namespace:
with one shared index, a 200-memory namespace beside a 10,000-memory one had to search it
thousands deep for its own neighbours (recall p50 230 ms, measured); now no namespace's size
changes another's search.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, suppress
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import EbbError
from .model import Tier
from .store import Match

PREFIX = "MemoryVector_"


def _uid(namespace: str, id: str) -> str:
    from .kuzu_store import uid

    return uid(namespace, id)


def _names(namespace: str) -> tuple[str, str]:
    """The vector table and index of ``namespace`` (a digest: only hex reaches the DDL)."""
    h = hashlib.sha1(namespace.encode("utf-8")).hexdigest()[:20]
    return f"{PREFIX}{h}", f"memory_vec_{h}"


class KuzuVectors:
    """The vector half of ``KuzuStore`` (uses its ``_q``, ``_rows``, ``_exec``, ``_lock``)."""

    supports_vectors = True
    _vec_dim: int | None = None
    _vec_checked = False
    _vec_tables: set[str] | None = None

    if TYPE_CHECKING:  # provided by KuzuStore
        _lock: Any
        _prepared: dict[str, Any]

        def _q(self, query: str, params: Mapping[str, Any] | None = None) -> list[list[Any]]: ...
        def _rows(self, query: str) -> list[list[Any]]: ...
        def _exec(self, query: str) -> None: ...
        def matches_for(self, namespace: str, ids: Sequence[str]) -> list[Match]: ...
        def transaction(self) -> AbstractContextManager[None]: ...
        def _run(
            self, query: Any, params: Mapping[str, Any] | None = None, *, read: bool = False
        ) -> Any: ...

    # -- the tables ----------------------------------------------------------------------------
    def _tables(self) -> set[str]:
        if self._vec_tables is None or not self._vec_checked:
            with self._lock:
                rows = self._rows("CALL show_tables() RETURN name")
                self._vec_tables = {r[0] for r in rows if str(r[0]).startswith(PREFIX)}
                self._vec_dim = None
                for name in sorted(self._vec_tables)[:1]:
                    for r in self._rows(f"CALL table_info('{name}') RETURN *"):
                        if r[1] == "vec":
                            self._vec_dim = int(str(r[2]).rsplit("[", 1)[1].rstrip("]"))
                self._vec_checked = True
        return self._vec_tables

    def _vector_dim(self) -> int | None:
        self._tables()
        return self._vec_dim

    def _table(self, namespace: str) -> str | None:
        """The namespace's vector table, None when it has none yet."""
        table, _ = _names(namespace)
        return table if table in self._tables() else None

    def ensure_vectors(self, dim: int) -> None:
        """Check that ``dim`` is this store's vector dimension (tables are made per namespace
        on their first vector, outside transactions: DDL commits on its own)."""
        have = self._vector_dim()
        if have is not None and have != dim:
            from .embeddings import EmbedderError

            raise EmbedderError(
                f"this store's vectors have dimension {have}, the embedder's have {dim}: "
                "re-embed with `ebb embed --rebuild`"
            )

    def _ensure_table(self, namespace: str, dim: int) -> str:
        self.ensure_vectors(dim)
        table, index = _names(namespace)
        tables = self._tables()
        if table in tables:
            return table
        with self._lock:
            self._exec(
                f"CREATE NODE TABLE IF NOT EXISTS {table}(uid STRING PRIMARY KEY, ns STRING, "
                f"vec FLOAT[{int(dim)}])"
            )
            present = any(r[1] == index for r in self._rows("CALL show_indexes() RETURN *"))
            if not present:
                self._exec(
                    f"CALL CREATE_VECTOR_INDEX('{table}', '{index}', 'vec', metric := 'cosine')"
                )
            tables.add(table)
            self._vec_dim = dim
        return table

    def drop_vectors(self) -> None:
        with self._lock:
            self._prepared.clear()
            for table in sorted(self._tables()):
                _, index = _names_of_table(table)
                with suppress(EbbError):
                    self._exec(f"CALL DROP_VECTOR_INDEX('{table}', '{index}')")
                self._exec(f"DROP TABLE {table}")
            self._vec_tables, self._vec_dim, self._vec_checked = set(), None, True

    # -- rows --------------------------------------------------------------------------------
    def put_vectors(
        self, namespace: str, ids: Sequence[str], vectors: Any, *, new: bool = False
    ) -> None:
        mat = np.asarray(vectors, dtype=np.float32)
        if len(ids) == 0:
            return
        table = self._ensure_table(namespace, int(mat.shape[1]))
        uids = [_uid(namespace, i) for i in ids]
        with self.transaction():
            if not new:
                self._delete_uids(table, uids)
            if len(uids) <= 32:
                for u, row in zip(uids, mat, strict=True):
                    self._q(
                        f"CREATE (:{table} {{uid: $u, ns: $ns, vec: $v}})",
                        {"u": u, "ns": namespace, "v": row.tolist()},
                    )
            else:
                import pyarrow as pa

                rows = pa.table(
                    {
                        "u": pa.array(uids, type=pa.string()),
                        "v": pa.FixedSizeListArray.from_arrays(
                            pa.array(mat.reshape(-1), type=pa.float32()), int(mat.shape[1])
                        ),
                    }
                )
                self._run(
                    f"LOAD FROM $rows CREATE (:{table} {{uid: u, ns: $ns, vec: v}})",
                    {"rows": rows, "ns": namespace},
                )

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
        with self.transaction():
            self._delete_uids(table, [_uid(namespace, i) for i in ids])

    def vectors_of(self, namespace: str, ids: Sequence[str]) -> dict[str, Any]:
        table = self._table(namespace)
        if table is None or not ids:
            return {}
        out: dict[str, Any] = {}
        for start in range(0, len(ids), 1000):
            chunk = list(ids[start : start + 1000])
            rows = self._q(
                f"MATCH (v:{table}) WHERE v.uid IN $us RETURN v.uid, v.vec",
                {"us": [_uid(namespace, i) for i in chunk]},
            )
            by_uid = {r[0]: r[1] for r in rows}
            for i in chunk:
                vec = by_uid.get(_uid(namespace, i))
                if vec is not None:
                    out[i] = np.asarray(vec, dtype=np.float32)
        return out

    def vector_matches(
        self, namespace: str, vector: Any, pool: int, max_tier: Tier, kinds: Sequence[str] = ()
    ) -> list[tuple[Match, float]]:
        table = self._table(namespace)
        if table is None or pool <= 0:
            return []
        _, index = _names(namespace)
        q = np.asarray(vector, dtype=np.float32).tolist()
        want = max(pool, 20)
        rows = self._q(
            # efs (the search's candidate list; Kùzu's default is 200): 2 × k, at least 100,
            # measured 4.6 → 3.0 ms a query at 1,500 memories
            f"CALL QUERY_VECTOR_INDEX('{table}', '{index}', $q, $k, "
            f"efs := {max(100, 2 * want)}) RETURN node.uid, distance",
            {"q": q, "k": want},
        )
        rows.sort(key=lambda r: (r[1], r[0]))
        rows = rows[:pool]
        skip = len(namespace) + 1  # uid = namespace, separator, id
        # what recall blends on, from the store's in-process columns (no join per row)
        found = {m.id: m for m in self.matches_for(namespace, [r[0][skip:] for r in rows])}
        out = []
        for u, distance in rows:
            m = found.get(u[skip:])
            if m is None or m.tier > int(max_tier) or (kinds and m.kind not in kinds):
                continue
            out.append((m, 1.0 - float(distance)))
        return out

    def without_vectors(
        self, namespace: str, after: str = "", limit: int = 256
    ) -> list[tuple[str, str]]:
        table = self._table(namespace)
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
            if table is not None:
                got = {
                    r[0]
                    for r in self._q(
                        f"MATCH (v:{table}) WHERE v.uid IN $us RETURN v.uid",
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
        return int(self._q(f"MATCH (v:{table}) RETURN count(*)")[0][0])


def _names_of_table(table: str) -> tuple[str, str]:
    h = table[len(PREFIX) :]
    return table, f"memory_vec_{h}"
