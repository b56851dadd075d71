"""Vectors in the Neo4j store: ``MemoryVector`` nodes beside ``Memory`` with a native vector index.

Mixed into :class:`~ebb_core.neo4j.store.Neo4jStore`. A ``(:MemoryVector {ns, id, vec})`` node
per embedded memory (unique on ``(ns, id)``), indexed by ``CREATE VECTOR INDEX`` (cosine) with
the embedder's dimension, made on the first vector. Neo4j's cosine *score* is ``(1 + cos) / 2``;
the similarity handed to recall is the cosine itself. A namespace's nearest neighbours come from
``db.index.vector.queryNodes`` searched deeper until it yields enough of that namespace's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..model import Tier
from ..store import Match
from .session import Neo4jSession

INDEX = "ebb_memory_vec"
KEY = "ebb_memory_vec_key"


class Neo4jVectors(Neo4jSession):
    """The vector half of ``Neo4jStore``."""

    supports_vectors = True
    _vec_dim: int | None = None
    _vec_checked = False

    def _ddl(self, query: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        with self._errors("call"):
            return list(
                self._driver.execute_query(
                    query, dict(params or {}), database_=self._database
                ).records
            )

    def _vector_dim(self) -> int | None:
        if not self._vec_checked:
            rows = self._ddl(
                "SHOW VECTOR INDEXES YIELD name, options WHERE name = $n RETURN options",
                {"n": INDEX},
            )
            if rows:
                config = rows[0]["options"]["indexConfig"]
                self._vec_dim = int(config["vector.dimensions"])
            self._vec_checked = True
        return self._vec_dim

    def ensure_vectors(self, dim: int) -> None:
        have = self._vector_dim()
        if have == dim:
            return
        if have is not None and not self._read("MATCH (v:MemoryVector) RETURN v.id LIMIT 1"):
            # an index left by vectors that are all gone (an emptied database): made anew
            self._ddl(f"DROP INDEX {INDEX} IF EXISTS")
            have = self._vec_dim = None
        if have is not None:
            from ..embeddings import EmbedderError

            raise EmbedderError(
                f"this store's vectors have dimension {have}, the embedder's have {dim}: "
                "re-embed with `ebb embed --rebuild`"
            )
        self._ddl(
            f"CREATE CONSTRAINT {KEY} IF NOT EXISTS FOR (v:MemoryVector) REQUIRE (v.ns, v.id) "
            "IS UNIQUE"
        )
        self._ddl(
            f"CREATE VECTOR INDEX {INDEX} IF NOT EXISTS FOR (v:MemoryVector) ON (v.vec) "
            "OPTIONS {indexConfig: {`vector.dimensions`: $d, "
            "`vector.similarity_function`: 'cosine'}}",
            {"d": int(dim)},
        )
        self._ddl("CALL db.awaitIndexes($s)", {"s": 300})
        self._vec_dim, self._vec_checked = dim, True

    def drop_vectors(self) -> None:
        if self._vector_dim() is None:
            return
        self._ddl(f"DROP INDEX {INDEX} IF EXISTS")
        self._autocommit(
            "MATCH (v:MemoryVector) CALL (v) { DETACH DELETE v } IN TRANSACTIONS OF 5000 ROWS", {}
        )
        self._vec_dim, self._vec_checked = None, True

    def put_vectors(
        self, namespace: str, ids: Sequence[str], vectors: Any, *, new: bool = False
    ) -> None:
        mat = np.asarray(vectors, dtype=np.float32)
        if len(ids) == 0:
            return
        self.ensure_vectors(int(mat.shape[1]))
        rows = [{"id": i, "v": row.tolist()} for i, row in zip(ids, mat, strict=True)]
        for lo in range(0, len(rows), 1000):
            self._run(
                "UNWIND $rows AS r MERGE (v:MemoryVector {ns: $ns, id: r.id}) "
                "WITH v, r CALL db.create.setNodeVectorProperty(v, 'vec', r.v)",
                {"ns": namespace, "rows": rows[lo : lo + 1000]},
            )

    def delete_vectors(self, namespace: str, ids: Sequence[str]) -> None:
        if not ids or self._vector_dim() is None:
            return
        self._run(
            "UNWIND $ids AS i MATCH (v:MemoryVector {ns: $ns, id: i}) DELETE v",
            {"ns": namespace, "ids": list(ids)},
        )

    def vectors_of(self, namespace: str, ids: Sequence[str]) -> dict[str, Any]:
        if not ids or self._vector_dim() is None:
            return {}
        rows = self._read(
            "UNWIND $ids AS i MATCH (v:MemoryVector {ns: $ns, id: i}) "
            "RETURN v.id AS id, v.vec AS v",
            {"ns": namespace, "ids": list(ids)},
        )
        return {r["id"]: np.asarray(r["v"], dtype=np.float32) for r in rows}

    def vector_matches(
        self, namespace: str, vector: Any, pool: int, max_tier: Tier, kinds: Sequence[str] = ()
    ) -> list[tuple[Match, float]]:
        if self._vector_dim() is None or pool <= 0:
            return []
        q = np.asarray(vector, dtype=np.float32).tolist()
        want = max(pool, 20)
        total = None
        while True:
            rows = self._read(
                f"CALL db.index.vector.queryNodes('{INDEX}', $k, $q) YIELD node, score "
                "WITH node, score WHERE node.ns = $ns "
                "MATCH (n:Memory {ns: $ns, id: node.id}) "
                "RETURN n.id AS id, score, n.key AS key, n.pinned AS pinned, n.tier AS tier, "
                "n.kind AS kind",
                {"q": q, "k": want, "ns": namespace},
            )
            if len(rows) >= pool:
                break
            if total is None:
                total = self._read("MATCH (v:MemoryVector) RETURN count(v) AS c")[0]["c"]
            if want >= total:
                break
            want = min(want * 4, total)
        ranked = sorted(rows, key=lambda r: (-r["score"], r["id"]))[:pool]
        out = []
        for r in ranked:
            if r["tier"] > int(max_tier) or (kinds and r["kind"] not in kinds):
                continue
            match = Match(r["id"], 0.0, r["key"], r["pinned"], r["tier"], r["kind"])
            out.append((match, 2.0 * float(r["score"]) - 1.0))
        return out

    def without_vectors(
        self, namespace: str, after: str = "", limit: int = 256
    ) -> list[tuple[str, str]]:
        rows = self._read(
            "MATCH (n:Memory {ns: $ns}) WHERE n.id > $after "
            "AND NOT EXISTS { MATCH (v:MemoryVector {ns: $ns, id: n.id}) } "
            "RETURN n.id AS id, n.text AS text ORDER BY n.id LIMIT $lim",
            {"ns": namespace, "after": after, "lim": limit},
        )
        return [(r["id"], r["text"]) for r in rows]

    def vector_count(self, namespace: str) -> int:
        if self._vector_dim() is None:
            return 0
        rows = self._read(
            "MATCH (v:MemoryVector {ns: $ns}) RETURN count(v) AS c", {"ns": namespace}
        )
        return int(rows[0]["c"])
