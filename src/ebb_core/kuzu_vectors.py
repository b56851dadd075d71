"""Vectors in the Kùzu store: a ``MemoryVector`` table beside ``Memory`` with an HNSW index.

Kept apart from ``kuzu_store`` (mixed into :class:`~ebb_core.kuzu_store.KuzuStore`): a store
without an embedder never creates the table. The table is made on the first vector, with the
embedder's dimension (``FLOAT[dim]``), and its index with Kùzu's bundled ``vector`` extension
(cosine metric), which follows inserts and deletes, and (unlike Kùzu's full-text index) holds
the rows a write-ahead log replay brings back (checked on 0.11.3; ``DROP_VECTOR_INDEX`` leaves
its name behind there, so the index is never dropped and re-made under the same name). Kùzu
cannot ``SET`` an indexed vector, so replacing one is delete + insert. A namespace's nearest
neighbours come from the shared index searched deeper until it yields enough of that
namespace's (never a scan).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, suppress
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import EbbError
from .model import Tier
from .store import Match

TABLE = "MemoryVector"
INDEX = "memory_vec"


def _uid(namespace: str, id: str) -> str:
    from .kuzu_store import uid

    return uid(namespace, id)


class KuzuVectors:
    """The vector half of ``KuzuStore`` (uses its ``_q``, ``_rows``, ``_exec``, ``_lock``)."""

    supports_vectors = True
    _vec_dim: int | None = None
    _vec_checked = False

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

    # -- the table ---------------------------------------------------------------------------
    def _vector_dim(self) -> int | None:
        """The dimension of the vector table, None when there is none."""
        if not self._vec_checked:
            with self._lock:
                rows = self._rows("CALL show_tables() RETURN name")
                if any(r[0] == TABLE for r in rows):
                    info = self._rows(f"CALL table_info('{TABLE}') RETURN *")
                    for r in info:
                        if r[1] == "vec":
                            self._vec_dim = int(str(r[2]).rsplit("[", 1)[1].rstrip("]"))
                self._vec_checked = True
        return self._vec_dim

    def ensure_vectors(self, dim: int) -> None:
        """Create the vector table and its index for ``dim``-dimensional vectors (outside any
        transaction: DDL commits on its own). A table of another dimension is an error."""
        have = self._vector_dim()
        if have == dim:
            return
        if have is not None:
            from .embeddings import EmbedderError

            raise EmbedderError(
                f"this store's vectors have dimension {have}, the embedder's have {dim}: "
                "re-embed with `ebb embed --rebuild`"
            )
        with self._lock:
            self._exec(
                f"CREATE NODE TABLE IF NOT EXISTS {TABLE}(uid STRING PRIMARY KEY, ns STRING, "
                f"vec FLOAT[{int(dim)}])"
            )
            self._ensure_vector_index()
            self._vec_dim, self._vec_checked = dim, True

    def _ensure_vector_index(self) -> None:
        present = any(
            r[0] == TABLE and r[1] == INDEX for r in self._rows("CALL show_indexes() RETURN *")
        )
        if not present:
            self._exec(f"CALL CREATE_VECTOR_INDEX('{TABLE}', '{INDEX}', 'vec', metric := 'cosine')")

    def drop_vectors(self) -> None:
        with self._lock:
            if self._vector_dim() is None:
                return
            self._prepared.clear()
            with suppress(EbbError):
                self._exec(f"CALL DROP_VECTOR_INDEX('{TABLE}', '{INDEX}')")
            self._exec(f"DROP TABLE {TABLE}")
            self._vec_dim, self._vec_checked = None, True

    # -- rows --------------------------------------------------------------------------------
    def put_vectors(
        self, namespace: str, ids: Sequence[str], vectors: Any, *, new: bool = False
    ) -> None:
        mat = np.asarray(vectors, dtype=np.float32)
        if len(ids) == 0:
            return
        self.ensure_vectors(int(mat.shape[1]))
        uids = [_uid(namespace, i) for i in ids]
        with self.transaction():
            if not new:
                self._delete_uids(uids)
            if len(uids) <= 32:
                for u, row in zip(uids, mat, strict=True):
                    self._q(
                        f"CREATE (:{TABLE} {{uid: $u, ns: $ns, vec: $v}})",
                        {"u": u, "ns": namespace, "v": row.tolist()},
                    )
            else:
                import pyarrow as pa

                table = pa.table(
                    {
                        "u": pa.array(uids, type=pa.string()),
                        "v": pa.FixedSizeListArray.from_arrays(
                            pa.array(mat.reshape(-1), type=pa.float32()), int(mat.shape[1])
                        ),
                    }
                )
                self._run(
                    f"LOAD FROM $rows CREATE (:{TABLE} {{uid: u, ns: $ns, vec: v}})",
                    {"rows": table, "ns": namespace},
                )

    def _delete_uids(self, uids: Sequence[str]) -> None:
        if len(uids) <= 32:
            for u in uids:
                self._q(f"MATCH (v:{TABLE} {{uid: $u}}) DELETE v", {"u": u})
        else:
            self._q(f"MATCH (v:{TABLE}) WHERE v.uid IN $us DELETE v", {"us": list(uids)})

    def delete_vectors(self, namespace: str, ids: Sequence[str]) -> None:
        if self._vector_dim() is None or not ids:
            return
        with self.transaction():
            self._delete_uids([_uid(namespace, i) for i in ids])

    def vectors_of(self, namespace: str, ids: Sequence[str]) -> dict[str, Any]:
        if self._vector_dim() is None or not ids:
            return {}
        out: dict[str, Any] = {}
        for start in range(0, len(ids), 1000):
            chunk = list(ids[start : start + 1000])
            rows = self._q(
                f"MATCH (v:{TABLE}) WHERE v.uid IN $us RETURN v.uid, v.vec",
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
        if self._vector_dim() is None or pool <= 0:
            return []
        q = np.asarray(vector, dtype=np.float32).tolist()
        want = max(pool, 20)
        total = None
        while True:
            rows = self._q(
                # efs (the search's candidate list; Kùzu's default is 200): 2 × k, at least 100,
                # measured 4.6 → 3.0 ms a query at 1,500 memories
                f"CALL QUERY_VECTOR_INDEX('{TABLE}', '{INDEX}', $q, $k, "
                f"efs := {max(100, 2 * want)}) "
                "WITH node, distance WHERE node.ns = $ns RETURN node.uid, distance",
                {"q": q, "k": want, "ns": namespace},
            )
            if len(rows) >= pool:
                break
            if total is None:
                total = self._q(f"MATCH (v:{TABLE}) RETURN count(*)")[0][0]
            if want >= total:
                break
            want = min(want * 4, total)
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
        have = self._vector_dim() is not None
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
            if have:
                got = {
                    r[0]
                    for r in self._q(
                        f"MATCH (v:{TABLE}) WHERE v.uid IN $us RETURN v.uid",
                        {"us": [r[2] for r in rows]},
                    )
                }
            else:
                got = set()
            out += [(r[0], r[1]) for r in rows if r[2] not in got]
            cursor = rows[-1][0]
        return out[:limit]

    def vector_count(self, namespace: str) -> int:
        if self._vector_dim() is None:
            return 0
        return int(
            self._q(f"MATCH (v:{TABLE}) WHERE v.ns = $ns RETURN count(*)", {"ns": namespace})[0][0]
        )
