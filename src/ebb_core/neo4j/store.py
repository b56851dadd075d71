"""``Neo4jStore``: the production backend, on a Neo4j 5 server (or Aura) via the official driver.

Same semantics as :class:`~ebb_core.kuzu_store.KuzuStore`; what differs is how the work is done:

* **Schema, created idempotently at open.** ``(:Memory)`` nodes unique on ``(ns, id)``,
  ``(:Audit)`` entries unique on ``(ns, seq)``, ``(:Meta)`` settings unique on ``key`` (the schema
  version lives there), a range index on ``(ns, key)`` for ranking, one on ``(ns, tier)`` for the
  review queue, and a full-text index on ``text`` (Lucene, English analyzer) for recall. Edges are
  ``[:LINK]`` relationships with a ``kind`` property, unique per ``(src, dst, kind)``.
* **Parameterised Cypher only.** User data reaches the server as parameters; the only text spliced
  into queries is this module's own constants. Full-text queries are Lucene syntax, so query text
  is escaped (:func:`lucene_query`).
* **Batched writes.** Every multi-row write is one ``UNWIND $rows`` statement per batch.
* **Transactions.** :meth:`transaction` opens an explicit transaction that every store call on the
  same thread joins (re-entrant), so one Brain operation commits or rolls back as a whole. A call
  made outside one runs as a managed transaction, which the driver retries on transient errors
  and lost connections for up to ``retry_seconds``.
* **Scoring as columns.** :meth:`recompute_keys` reads the namespace's memories and links out
  as columns in pages (one record of lists per page), computes every key with
  :func:`ebb_core.scoring.graph_keys` (the Kùzu store's code) and writes back only the changed
  ones in ``UNWIND`` batches, each committed on its own outside a transaction (see
  :mod:`.columns`). Ranking, the tier reference and tier moves are ``ORDER BY``/``CASE`` queries.
* **Graph Data Science, optional.** ``recompute_keys(..., spreading="pagerank")`` uses GDS
  PageRank when the plugin is installed (see :meth:`recompute_keys`).

Failures: an unreachable server at open raises :class:`BackendUnavailable` naming the URI; wrong
credentials say so; a connection lost mid-run is retried (managed transactions, and the start
of an explicit one) and then reported as :class:`BackendUnavailable`, never as a hang (connect
and acquisition timeouts are bounded).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from ..clock import to_us
from ..errors import InvalidInput
from ..model import AuditEntry, Edge, Node, Tier
from ..records import field_value, node_from_row, node_row
from ..store import (
    UPDATABLE_FIELDS,
    Adjustment,
    Counts,
    GraphStore,
    TierMoveColumns,
    memory_exists,
    refuse_existing,
)
from .bulk import Neo4jBulk
from .hubs import Neo4jHubs, fix_hubs, hubs_among, note_hub_links
from .keys import Neo4jKeys
from .queries import (
    _AUDIT_FIELDS,
    _EDGE,
    _NODE,
    DEFAULT_URI,
    IN_NS,
    _batches,
    _by_namespace,
    _projection,
    _pylist,
    _to_audit,
    _to_edge,
)
from .rescore import MARK, MARK_ENDS, MARK_N, mark, share_then
from .search import Neo4jSearch
from .session import neo4j_errors
from .vectors import Neo4jVectors


class Neo4jStore(Neo4jBulk, Neo4jVectors, Neo4jSearch, Neo4jKeys, Neo4jHubs, GraphStore):
    """Neo4j backend: one database (``database``; the server's default when None) on ``uri``.

    >>> store = Neo4jStore("bolt://localhost:7687", auth=("neo4j", "secret"))  # doctest: +SKIP
    >>> brain = Brain(store, namespace="acme")                                  # doctest: +SKIP

    ``retry_seconds`` bounds how long a call keeps retrying after a lost connection or a
    transient error; ``connection_timeout`` bounds each connection attempt; ``batch_size`` is the
    number of rows per ``UNWIND`` statement and per ``IN TRANSACTIONS`` batch.
    """

    backend = "neo4j"

    @classmethod
    def from_env(cls) -> Neo4jStore:
        """Open the store the environment names.

        ``NEO4J_URI`` (default ``bolt://localhost:7687``); ``NEO4J_USER`` (default ``neo4j``) and
        ``NEO4J_PASSWORD`` (no authentication when unset); ``NEO4J_DATABASE`` (default: the
        server's default database); ``EBB_NEO4J_RETRY_SECONDS`` (default 15).
        """
        uri = os.environ.get("NEO4J_URI") or DEFAULT_URI
        password = os.environ.get("NEO4J_PASSWORD")
        user = os.environ.get("NEO4J_USER") or "neo4j"
        auth = (user, password) if password is not None else None
        retry = os.environ.get("EBB_NEO4J_RETRY_SECONDS")
        try:
            retry_seconds = float(retry) if retry else 15.0
        except ValueError:
            raise InvalidInput(
                f"EBB_NEO4J_RETRY_SECONDS must be a number of seconds, got {retry!r}",
                field="retry_seconds",
            ) from None
        return cls(
            uri,
            auth=auth,
            database=os.environ.get("NEO4J_DATABASE") or None,
            retry_seconds=retry_seconds,
        )

    # -- hubs' link lists (.hubs): made again after an import ---------------------------------
    @contextmanager
    def bulk_load(self, rows: int) -> Iterator[None]:
        top = self._local.tx is None and self._local.stage is None
        with super().bulk_load(rows):
            stage = self._local.stage
            yield
        if top and stage is not None:
            # Only the memories its links end at (more than HUB_LINKS times, into empty
            # namespaces): not a pass over every memory's link count.
            self.refresh_hubs_of({ns: sorted(ids) for ns, ids in stage.ends.items()})

    # -- nodes ---------------------------------------------------------------------------------
    def existing_ids(self, namespace: str, ids: Sequence[str]) -> set[str]:
        wanted = list(dict.fromkeys(ids))
        found: set[str] = set()
        # An import into a new namespace asks about every id it brings (a million at 1M): one
        # look at the namespace first answers that without a seek per id.
        if len(wanted) > self._batch and not self._read(
            "MATCH (n:Memory) WHERE n.ns = $ns AND n.id IS NOT NULL RETURN 1 AS x LIMIT 1",
            {"ns": namespace},
        ):
            return found
        for part in _batches(wanted, self._batch):
            rows = self._read(
                "UNWIND $ids AS i MATCH (n:Memory {ns: $ns, id: i}) RETURN n.id AS id",
                {"ns": namespace, "ids": list(part)},
            )
            found.update(r["id"] for r in rows)
        return found

    def upsert_nodes(self, nodes: Sequence[Node]) -> None:
        self._write_rows(
            "UNWIND $rows AS r MERGE (n:Memory {ns: r.ns, id: r.id}) "
            f"WITH n, r, {share_then('n')} AS s0 SET n = r SET n.share0 = s0, n:{MARK}",
            [node_row(n) for n in nodes],
        )

    def insert_nodes(self, nodes: Sequence[Node]) -> None:
        # Checked first (one read), so that a taken id is refused as bad input naming it;
        # the (ns, id) key constraint still guards against another writer in between.
        refuse_existing(self, nodes)
        try:
            self._write_rows(
                f"UNWIND $rows AS r CREATE (n:Memory:{MARK}) SET n = r",
                [node_row(n) for n in nodes],
            )
        except neo4j_errors.ConstraintError as exc:
            if not (exc.code and exc.code.endswith("ConstraintValidationFailed")):
                raise
            n, others = nodes[0], len(nodes) - 1
            detail = " (created meanwhile by another writer"
            detail += f"; or one of the {others} other memories written with it)" if others else ")"
            err = memory_exists(n.namespace, n.id, detail=detail)
            raise err from None

    def _write_rows(
        self, query: str, rows: Sequence[Any], links: str | None = None, **params: Any
    ) -> None:
        """``query`` over ``rows`` in batches, in one transaction; ``links``: the rows are
        links of that namespace, and the hubs among their ends keep their lists (``.hubs``)."""
        if not rows:
            return

        def work(tx: Any) -> None:
            hubs = hubs_among(tx, links, rows) if links is not None else None
            for part in _batches(rows, self._batch):
                tx.run(query, {"rows": list(part), **params}).consume()
            if links is not None and hubs is not None and (hubs[0] or hubs[1]):
                note_hub_links(tx, links, rows, hubs)

        self._unit(work)

    def update_nodes(self, namespace: str, changes: Mapping[str, Mapping[str, Any]]) -> None:
        self.adjust(namespace, {i: Adjustment(fields=f) for i, f in changes.items()})

    def adjust(self, namespace: str, changes: Mapping[str, Adjustment]) -> None:
        rows = []
        pushes = []
        for node_id, adj in changes.items():
            bad = set(adj.fields) - UPDATABLE_FIELDS
            if bad:
                raise InvalidInput(f"cannot update node fields {sorted(bad)}", field="fields")
            values = dict(field_value(f, v) for f, v in adj.fields.items())
            if adj.base_delta or adj.degree_delta or adj.key_delta or values:
                rows.append(
                    {
                        "id": node_id,
                        "db": float(adj.base_delta),
                        "dd": int(adj.degree_delta),
                        "dk": float(adj.key_delta),
                        "set": values,
                    }
                )
            if adj.push_delta:
                pushes.append({"id": node_id, "d": float(adj.push_delta)})
        if not rows and not pushes:
            return

        def work(tx: Any) -> None:
            # Own changes first, then pushes (as in Kùzu): a push adds to whatever key is set.
            for part in _batches(rows, self._batch):
                tx.run(
                    f"UNWIND $rows AS r MATCH (n:Memory {{ns: $ns, id: r.id}}) {MARK_N} "
                    "SET n.base_key = n.base_key + r.db, n.degree = n.degree + r.dd, "
                    "n.key = n.key + r.dk SET n += r.set",
                    {"ns": namespace, "rows": list(part)},
                ).consume()
            for part in _batches(pushes, self._batch):
                # One push per edge: a neighbour linked twice (two kinds) gets it twice.
                tx.run(
                    f"UNWIND $rows AS p MATCH (n:Memory {{ns: $ns, id: p.id}}) {MARK_N} "
                    "WITH n, p MATCH (n)-[:LINK]-(m:Memory) "
                    f"WITH m, sum(p.d) AS total SET m.key = m.key + total {mark('m')}",
                    {"ns": namespace, "rows": list(part)},
                ).consume()

        self._unit(work)

    def set_tiers(
        self,
        namespace: str,
        moves: TierMoveColumns,
        review_reasons: Mapping[str, str],
        queued_at: datetime,
    ) -> None:
        # Parallel lists (ids, tiers; the frozen ones' reasons apart), one SET per row of an
        # UNWIND: no dict of fields per memory.
        if not len(moves):
            return
        import numpy as np

        frozen = moves.to_tier == int(Tier.FROZEN)
        parts = []
        rest = np.flatnonzero(~frozen)
        if len(rest):
            parts.append(
                (
                    "UNWIND range(0, size($ids) - 1) AS i "
                    "MATCH (n:Memory {ns: $ns, id: $ids[i]}) SET n.tier = $tier[i]",
                    {"ids": moves.ids[rest].tolist(), "tier": moves.to_tier[rest].tolist()},
                )
            )
        held = np.flatnonzero(frozen)
        if len(held):
            ids = moves.ids[held].tolist()
            parts.append(
                (
                    "UNWIND range(0, size($ids) - 1) AS i "
                    "MATCH (n:Memory {ns: $ns, id: $ids[i]}) "
                    "SET n.tier = 4, n.review_reason = $why[i], n.queued_us = $at",
                    {"ids": ids, "why": [review_reasons[i] for i in ids]},
                )
            )

        def work(tx: Any) -> None:
            for query, cols in parts:
                size = len(cols["ids"])
                for lo in range(0, size, self._batch):
                    params = {c: v[lo : lo + self._batch] for c, v in cols.items()}
                    params.update(ns=namespace, at=to_us(queued_at))
                    tx.run(query, params).consume()

        self._unit(work)

    def delete_nodes(self, namespace: str, ids: Sequence[str]) -> None:
        ids = list(ids)

        def work(tx: Any) -> None:
            # The hubs among the neighbours lose a link: their lists are made again.
            hubs = tx.run(
                "UNWIND $ids AS i MATCH (:Memory {ns: $ns, id: i})-[:LINK]-(m:Memory) "
                "WHERE m.hub_deg IS NOT NULL RETURN DISTINCT m.id AS id",
                {"ns": namespace, "ids": ids},
            )
            around = [r["id"] for r in hubs]
            # Their neighbours lose links (degree and base): re-scored by the next maintain.
            tx.run(
                "UNWIND $ids AS i MATCH (:Memory {ns: $ns, id: i})-[:LINK]-(n:Memory) "
                f"WHERE NOT n.id IN $ids {MARK_N}",
                {"ns": namespace, "ids": ids},
            ).consume()
            for part in _batches(ids, self._batch):
                tx.run(
                    "UNWIND $ids AS i MATCH (n:Memory {ns: $ns, id: i}) DETACH DELETE n",
                    {"ns": namespace, "ids": list(part)},
                ).consume()
            fix_hubs(tx, namespace, around)

        if ids:
            self._unit(work)
        self.delete_vectors(namespace, ids)

    # -- edges ---------------------------------------------------------------------------------
    def upsert_edges(self, edges: Sequence[Edge]) -> None:
        for ns, rows in _by_namespace(edges).items():
            self._write_rows(
                "UNWIND $rows AS r "
                "MATCH (a:Memory {ns: $ns, id: r.src}) MATCH (b:Memory {ns: $ns, id: r.dst}) "
                "MERGE (a)-[e:LINK {kind: r.kind}]->(b) "
                "SET e.weight = r.weight, e.created_us = r.created_us, "
                f"e.reinforced_us = r.reinforced_us, e.props = r.props {MARK_ENDS}",
                rows,
                ns,
                ns=ns,
            )

    def insert_edges(self, edges: Sequence[Edge]) -> None:
        for ns, rows in _by_namespace(edges).items():
            self._write_rows(
                "UNWIND $rows AS r "
                "MATCH (a:Memory {ns: $ns, id: r.src}) MATCH (b:Memory {ns: $ns, id: r.dst}) "
                "CREATE (a)-[:LINK {kind: r.kind, weight: r.weight, created_us: r.created_us, "
                f"reinforced_us: r.reinforced_us, props: r.props}}]->(b) {MARK_ENDS}",
                rows,
                ns,
                ns=ns,
            )

    def get_edge(self, namespace: str, src: str, dst: str, kind: str) -> Edge | None:
        rows = self._read(
            "MATCH (:Memory {ns: $ns, id: $a})-[e:LINK {kind: $k}]->(:Memory {ns: $ns, id: $b}) "
            f"RETURN {_EDGE} AS e LIMIT 1",
            {"ns": namespace, "a": src, "b": dst, "k": kind},
        )
        return _to_edge(namespace, src, dst, rows[0]["e"]) if rows else None

    def scan_nodes(self, namespace: str, batch: int = 5000) -> Iterator[list[Node]]:
        after = ""
        while True:
            rows = self._read(
                "MATCH (n:Memory) WHERE n.ns = $ns AND n.id > $after "
                f"RETURN {_NODE} AS n ORDER BY n.id LIMIT $lim",
                {"ns": namespace, "after": after, "lim": int(batch)},
            )
            if not rows:
                return
            yield [node_from_row(r["n"]) for r in rows]
            after = rows[-1]["n"]["id"]

    def scan_edges(self, namespace: str, batch: int = 5000) -> Iterator[list[Edge]]:
        # Pages of source ids in id order (an index range), then their outgoing edges.
        after = ""
        while True:
            sources = self._read(
                "MATCH (a:Memory) WHERE a.ns = $ns AND a.id > $after "
                "RETURN a.id AS id ORDER BY a.id LIMIT $lim",
                {"ns": namespace, "after": after, "lim": int(batch)},
            )
            if not sources:
                return
            rows = self._read(
                "UNWIND $ids AS i MATCH (a:Memory {ns: $ns, id: i})-[e:LINK]->(b:Memory) "
                f"RETURN a.id AS a, b.id AS b, {_EDGE} AS e ORDER BY a, b, e.kind",
                {"ns": namespace, "ids": [r["id"] for r in sources]},
            )
            if rows:
                yield [_to_edge(namespace, r["a"], r["b"], r["e"]) for r in rows]
            after = sources[-1]["id"]

    def namespaces(self) -> list[str]:
        rows = self._read(
            "MATCH (n:Memory) RETURN DISTINCT n.ns AS ns "
            "UNION MATCH (a:Audit) RETURN DISTINCT a.ns AS ns"
        )
        return sorted({r["ns"] for r in rows})

    def counts(self, namespace: str) -> Counts:
        def work(tx: Any) -> Counts:
            p = {"ns": namespace}
            by_tier = {
                int(r["t"]): int(r["c"])
                for r in tx.run(
                    f"MATCH (n:Memory) WHERE {IN_NS} RETURN n.tier AS t, count(*) AS c", p
                )
            }
            pinned = tx.run(
                f"MATCH (n:Memory) WHERE {IN_NS} AND n.pinned RETURN count(*) AS c", p
            ).single()["c"]
            edges = tx.run(
                "MATCH (a:Memory)-[e:LINK]->(:Memory) WHERE a.ns = $ns RETURN count(e) AS c", p
            ).single()["c"]
            audits = tx.run("MATCH (a:Audit) WHERE a.ns = $ns RETURN count(*) AS c", p).single()[
                "c"
            ]
            return Counts(
                nodes=sum(by_tier.values()),
                edges=int(edges),
                by_tier=by_tier,
                pinned=int(pinned),
                audit_entries=int(audits),
            )

        return self._unit(work, write=False)

    # -- audit log -----------------------------------------------------------------------------
    def append_audit(self, entries: Sequence[AuditEntry]) -> None:
        self._write_rows(
            "UNWIND $rows AS r CREATE (a:Audit) SET a = r", [audit_row(a) for a in entries]
        )

    def append_audit_columns(
        self, namespace: str, first_seq: int, at: datetime, columns: Mapping[str, Sequence[Any]]
    ) -> None:
        # Parallel lists, one CREATE per row of an UNWIND: no AuditEntry, no dict per entry
        # (a first maintain at 1M writes ~800k of them).
        size = len(columns["action"])
        if not size:
            return
        names = ("action", "node_id", "from_tier", "to_tier", "actor", "reason")
        query = (
            "UNWIND range(0, size($action) - 1) AS i CREATE (:Audit {seq: $first + i, ns: $ns, "
            "at_us: $at, " + ", ".join(f"{c}: ${c}[i]" for c in names) + "})"
        )

        def work(tx: Any) -> None:
            for lo in range(0, size, self._batch):
                params: dict[str, Any] = {"ns": namespace, "at": to_us(at), "first": first_seq + lo}
                params.update((c, _pylist(columns[c][lo : lo + self._batch])) for c in names)
                tx.run(query, params).consume()

        self._unit(work)

    def audit_log(
        self,
        namespace: str,
        limit: int,
        node_id: str | None = None,
        action: str | None = None,
        after_seq: int | None = None,
    ) -> list[AuditEntry]:
        # newest `limit` (descending, reversed below) or, paging forward, oldest above after_seq
        newest = after_seq is None
        rows = self._read(
            "MATCH (a:Audit) WHERE a.ns = $ns AND a.seq > $after "
            "AND ($node IS NULL OR a.node_id = $node) AND ($action IS NULL OR a.action = $action) "
            f"RETURN {_projection('a', _AUDIT_FIELDS)} AS a "
            f"ORDER BY a.seq {'DESC' if newest else 'ASC'} LIMIT $lim",
            {
                "ns": namespace,
                "after": 0 if after_seq is None else int(after_seq),
                "node": node_id,
                "action": action,
                "lim": int(limit),
            },
        )
        if newest:
            rows.reverse()
        return [_to_audit(r["a"]) for r in rows]

    def last_audit_seq(self, namespace: str) -> int:
        rows = self._read(
            # ORDER BY ns, seq: the (ns, seq) index walked backwards from its end, one entry
            # read (by seq alone the planner read every entry of the namespace and kept the
            # top one: 0.12 s a call at 800k entries, once per batch of a first maintain's moves)
            "MATCH (a:Audit) WHERE a.ns = $ns AND a.seq IS NOT NULL "
            "RETURN a.seq AS s ORDER BY a.ns DESC, a.seq DESC LIMIT 1",
            {"ns": namespace},
        )
        return int(rows[0]["s"]) if rows else 0


def audit_row(a: AuditEntry) -> dict[str, Any]:
    """An audit entry as stored properties (``append_audit``; the offline import's CSV too)."""
    return {
        "seq": int(a.seq),
        "ns": a.namespace,
        "at_us": to_us(a.at),
        "action": a.action,
        "node_id": a.node_id,
        "from_tier": None if a.from_tier is None else int(a.from_tier),
        "to_tier": None if a.to_tier is None else int(a.to_tier),
        "actor": a.actor,
        "reason": a.reason,
        "payload": None if a.payload is None else json.dumps(a.payload),
    }
