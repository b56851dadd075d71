"""Scoring passes on the Neo4j server: keys (one-hop or GDS PageRank), rebases, tiers."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidInput
from ..model import Tier
from ..store import TierMove, TierMoveColumns
from . import rescore
from .columns import read_score_columns, write_changed_keys
from .queries import _TERM, IN_NS, PAGERANK_DAMPING, SPREADINGS, TIER_MOVES
from .session import Neo4jSession, neo4j_errors

#: ``TIER_MOVES`` as one record of four lists: the driver's cost is per record (~800k one-move
#: records took ~20 s at 1M). A ratio is null only where a key is, never after a re-score.
_TIER_MOVE_COLUMNS = TIER_MOVES.split(" RETURN ")[0] + (
    " RETURN collect(n.id) AS i, collect(n.tier) AS f, collect(t) AS t, "
    "collect(coalesce(r, 0.0)) AS r"
)


class Neo4jKeys(Neo4jSession):
    """The scoring half of ``Neo4jStore``."""

    #: How many ``IN TRANSACTIONS`` batches of the PageRank re-score's base pass the server
    #: runs at once (``IN n CONCURRENT TRANSACTIONS``); 1 runs them one after the other.
    scoring_writers = 2

    # -- scoring passes ------------------------------------------------------------------------
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
        """Recompute ``base_key``, ``degree`` and ``key`` of every node of the namespace.

        ``"default"``: the same sums as ``scoring`` (and Kùzu's vectorised pass): base is the sum
        over a node's edges of ``w · 2^((t − E)/h)`` plus its read term, degree its number of
        edges, key its base plus ``spread`` times the sum over its edges of the neighbour's
        ``base / degree``. Computed in the client by :func:`ebb_core.scoring.graph_keys` on
        the namespace's columns, read out in pages; only changed scores are written back, in
        batches that each commit on their own when called outside a transaction, else inside
        it (:mod:`.columns`).

        ``"pagerank"`` (needs the Graph Data Science plugin): base and degree as above; the
        one-hop term is replaced by PageRank mass. The namespace is projected with each edge
        undirected and weighted by its term ``w · 2^((t − E)/h)``; weighted PageRank (damping
        0.85, scores scaled to sum to 1) gives each node its share ``R(n)`` of the walk; then
        ``key = base + spread · R(n) · Σ base``: the namespace's total base, redistributed along
        recently reinforced paths of any length. Every edge weight and every base carries the
        same factor ``2^(−(T−E)/h)`` over time, so ``R`` does not change as time passes and the
        key stays in key space: ``activation = 2^(−(T−E)/h) · key``, and tiers, ranking and
        epoch rebases work unchanged. Between passes, writes adjust keys with the default
        one-hop deltas; the next ``maintain`` recomputes.
        """
        if spreading not in SPREADINGS:
            raise InvalidInput(
                f"spreading {spreading!r} is not available on Neo4j: choose one of "
                f"{list(SPREADINGS)} ('pagerank' needs the Graph Data Science plugin)",
                field="spreading",
            )
        if spreading == "pagerank":
            self._require_gds()
            # PageRank keys are not the one-hop ones: the next default pass is a full one.
            self._unit(lambda tx: rescore.drop_watermarks(self, tx, [namespace]))
        if spreading == "default":
            return self._column_keys(namespace, epoch_us, half_life_us, read_bonus, spread)
        batched = self._local.tx is None
        params = {
            "ns": namespace,
            "epoch": int(epoch_us),
            "h": float(half_life_us),
            "rb": float(read_bonus),
            "spread": float(spread),
            "batch": self._batch,
        }
        count = self._read(
            f"MATCH (n:Memory) WHERE {IN_NS} RETURN count(n) AS c", {"ns": namespace}
        )[0]["c"]
        if not count:
            return 0
        edge_term = _TERM.format(w="e.weight", t="e.reinforced_us")
        read_term = _TERM.format(w="$rb", t="n.last_read_us")
        self._each_node(
            "OPTIONAL MATCH (n)-[e:LINK]-() "
            f"WITH n, sum({edge_term}) AS edges, count(e) AS degree "
            "WITH n, degree, edges + CASE WHEN n.last_read_us IS NULL THEN 0.0 "
            f"ELSE {read_term} END AS base "
            # Written only where it changed (a write costs a record and an index entry; most
            # memories' sums are the same from one maintain to the next).
            "WHERE n.base_key IS NULL OR n.base_key <> base OR n.degree IS NULL "
            "OR n.degree <> degree SET n.base_key = base, n.degree = degree",
            params,
            batched,
        )
        self._pagerank_keys(namespace, params, batched)
        return int(count)

    def _column_keys(
        self, namespace: str, epoch_us: int, half_life_us: float, read_bonus: float, spread: float
    ) -> int:
        """The default pass: the namespace's columns read out, scored in numpy with
        :func:`ebb_core.scoring.graph_keys` (the Kùzu store's code, so both give the same
        keys), and only the changed rows written back (see :mod:`.columns`)."""
        from .. import scoring

        mark = rescore.WATERMARK + namespace
        sig = rescore.signature(epoch_us, half_life_us, read_bonus, spread)
        if self.get_meta(mark) == sig:
            # Only what changed since the last pass, and its neighbours (.rescore).
            size = rescore.count(self, namespace)
            marked = rescore.take_marked(self, namespace, max(size // 4, rescore.SMALL))
            if marked is not None:
                rescore.rescore(self, namespace, marked, epoch_us, half_life_us, read_bonus, spread)
                self.set_meta(mark, sig)
                return size
        else:
            self._unit(lambda tx: rescore.drop_watermarks(self, tx, [namespace]))
            rescore.clear_marks(self, namespace)
        cols = read_score_columns(self, namespace)
        if cols is None:
            self.set_meta(mark, sig)
            return 0
        size = len(cols.node)
        base, key, degree = scoring.graph_keys(
            size,
            cols.src,
            cols.dst,
            cols.weight,
            cols.reinforced_us,
            cols.read_us,
            cols.has_read,
            epoch_us,
            half_life_us,
            read_bonus,
            spread,
        )
        write_changed_keys(self, namespace, cols, base, key, degree)
        self.set_meta(mark, sig)
        return size

    def _each_node(self, body: str, params: Mapping[str, Any], batched: bool) -> None:
        """Run ``body`` for every node ``n`` of the namespace, batched when outside a tx
        (``scoring_writers`` batches at once: each writes only its own memories' scores)."""
        query = f"MATCH (n:Memory) WHERE {IN_NS} CALL (n) {{ {body} }}"
        if batched:
            writers = max(1, int(self.scoring_writers))
            at_once = f"{writers} CONCURRENT " if writers > 1 else ""
            self._autocommit(f"{query} IN {at_once}TRANSACTIONS OF $batch ROWS", params)
        else:
            self._run(query, params)

    def has_gds(self) -> bool:
        """Whether the server has the Graph Data Science plugin (``gds.version()``)."""
        if self._gds is None:
            try:
                with self._errors(), self._session() as session:
                    session.run("RETURN gds.version() AS v").consume()
                self._gds = True
            except neo4j_errors.ClientError:
                self._gds = False
        return self._gds

    def _require_gds(self) -> None:
        if not self.has_gds():
            raise InvalidInput(
                f"spreading 'pagerank' needs the Graph Data Science plugin, and the Neo4j server "
                f"at {self._uri} does not have it (gds.version() is unknown): install GDS, or "
                "use spreading 'default'",
                field="spreading",
            )

    def _pagerank_keys(self, namespace: str, params: Mapping[str, Any], batched: bool) -> None:
        graph = f"ebb-pagerank-{uuid.uuid4().hex}"
        total = self._read(
            f"MATCH (n:Memory) WHERE {IN_NS} RETURN sum(n.base_key) AS b", {"ns": namespace}
        )[0]["b"]
        p = {**params, "graph": graph, "total": float(total or 0.0), "d": PAGERANK_DAMPING}
        weight = _TERM.format(w="e.weight", t="e.reinforced_us")
        self._run(
            "MATCH (a:Memory) WHERE a.ns = $ns AND a.id IS NOT NULL "
            "OPTIONAL MATCH (a)-[e:LINK]->(b:Memory) "
            "WITH gds.graph.project($graph, a, b, "
            f"{{relationshipProperties: CASE WHEN e IS NULL THEN NULL ELSE {{w: {weight}}} END}}, "
            "{undirectedRelationshipTypes: ['*']}) AS g RETURN g.nodeCount AS nodes",
            p,
        )
        try:
            query = (
                "CALL gds.pageRank.stream($graph, {relationshipWeightProperty: 'w', "
                "dampingFactor: $d, maxIterations: 100, tolerance: 1e-10, scaler: 'L1Norm'}) "
                "YIELD nodeId, score WITH gds.util.asNode(nodeId) AS n, score "
                "CALL (n, score) { SET n.key = n.base_key + $spread * $total * score }"
            )
            if batched:
                self._autocommit(query + " IN TRANSACTIONS OF $batch ROWS", p)
            else:
                self._run(query, p)
        finally:
            with self._errors(), self._session() as session:
                session.run(
                    "CALL gds.graph.drop($graph, false) YIELD graphName RETURN graphName",
                    {"graph": graph},
                ).consume()

    def scale_keys(self, factor: float) -> None:
        # Scaled keys are not those a pass with the recorded parameters gave: every
        # namespace's next pass is full (.rescore).
        self._run("MATCH (m:Meta) WHERE m.key STARTS WITH $w DELETE m", {"w": rescore.WATERMARK})
        if self._local.meta is not None:
            self._local.meta.clear()
        body = "SET n.key = n.key * $f, n.base_key = n.base_key * $f"
        if self._local.tx is None:
            self._autocommit(
                f"MATCH (n:Memory) CALL (n) {{ {body} }} IN TRANSACTIONS OF $batch ROWS",
                {"f": float(factor), "batch": self._batch},
            )
        else:
            self._run(f"MATCH (n:Memory) {body}", {"f": float(factor)})

    def reference_key(self, namespace: str, quantile: float) -> tuple[float, int]:
        live = "n.ns = $ns AND NOT n.pinned AND n.tier < 4"

        def work(tx: Any) -> tuple[float, int]:
            count = tx.run(
                f"MATCH (n:Memory) WHERE {live} RETURN count(*) AS c", {"ns": namespace}
            ).single()["c"]
            rank = int(count * (1.0 - quantile))
            # Walked in the (ns, key) index's order (ORDER BY ns, key lets the index supply
            # it): only the top `rank` entries are read, not every memory sorted (1M: 7.5 s ->
            # 0.17 s, same key).
            row = tx.run(
                "MATCH (n:Memory) USING INDEX SEEK n:Memory(ns, key) "
                f"WHERE {live} AND n.key IS NOT NULL "
                "RETURN n.key AS k ORDER BY n.ns DESC, n.key DESC SKIP $r LIMIT 1",
                {"ns": namespace, "r": rank},
            ).single()
            return (float(row["k"] or 0.0), rank) if row else (0.0, 0)

        return self._unit(work, write=False)

    def tier_moves(
        self,
        namespace: str,
        reference: float,
        hot_ratio: float,
        warm_ratio: float,
        cold_ratio: float,
    ) -> list[TierMove]:
        rows = self._read(
            TIER_MOVES,
            {
                "ns": namespace,
                "mx": float(reference),
                "hot": float(hot_ratio),
                "warm": float(warm_ratio),
                "cold": float(cold_ratio),
            },
        )
        return [
            TierMove(r["id"], Tier(int(r["tier"])), Tier(int(r["t"])), float(r["r"])) for r in rows
        ]

    def tier_move_columns(
        self,
        namespace: str,
        reference: float,
        hot_ratio: float,
        warm_ratio: float,
        cold_ratio: float,
    ) -> TierMoveColumns:
        # Straight into columns (a first maintain at 1M moves ~800k memories: one TierMove
        # each, then sorted, took seconds), in the same id order as the default's sort (done
        # here, not by the server).
        import numpy as np

        rec = self._read(
            _TIER_MOVE_COLUMNS,
            {
                "ns": namespace,
                "mx": float(reference),
                "hot": float(hot_ratio),
                "warm": float(warm_ratio),
                "cold": float(cold_ratio),
            },
        )[0]
        ids: list[str] = rec["i"]
        src = np.array(rec["f"], np.int64)
        dst = np.array(rec["t"], np.int64)
        ratio = np.array(rec["r"], np.float64)
        names = np.empty(len(ids), dtype=object)
        names[:] = ids
        order = np.argsort(np.array(ids, dtype=str), kind="stable") if ids else np.zeros(0, int)
        return TierMoveColumns(
            names[order],
            src[order],
            dst[order],
            ratio[order],
        )
