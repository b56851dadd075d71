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
* **Scoring on the server.** :meth:`recompute_keys` is two Cypher aggregations over the namespace,
  run as ``CALL (n) { … } IN TRANSACTIONS`` batches in auto-commit sessions when called outside a
  transaction (as ``Brain.maintain`` does), so a million memories never need one giant
  transaction. Ranking, the tier reference and tier moves are ``ORDER BY``/``CASE`` queries.
  Nothing pulls the graph into Python.
* **Graph Data Science, optional.** ``recompute_keys(..., spreading="pagerank")`` uses GDS
  PageRank when the plugin is installed (see :meth:`recompute_keys`).

Failures: an unreachable server at open raises :class:`BackendUnavailable` naming the URI; wrong
credentials say so; a connection lost mid-run is retried (managed transactions, and the start
of an explicit one) and then reported as :class:`BackendUnavailable`, never as a hang (connect
and acquisition timeouts are bounded).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any, NoReturn, TypeVar

from ._cypher import TIER_MOVES
from .clock import from_us, to_us
from .errors import BackendUnavailable, EbbError, InvalidInput
from .model import AuditEntry, Edge, Node, Tier
from .neo4j_vectors import Neo4jVectors
from .records import field_value, node_from_row, node_row
from .store import (
    SUPERSEDES,
    UPDATABLE_FIELDS,
    Adjustment,
    Counts,
    GraphStore,
    Incident,
    Link,
    Match,
    TierMove,
)

try:
    import neo4j
    from neo4j import exceptions as neo4j_errors
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "the Neo4j backend needs the official driver: pip install 'ebb-memory[neo4j]'"
    ) from exc

# The driver logs retries and server notifications; without a handler, Python's last-resort
# handler would print them to stderr (breaking the CLI's one-line errors). Applications that
# configure logging still receive them.
logging.getLogger("neo4j").addHandler(logging.NullHandler())

T = TypeVar("T")

SCHEMA_VERSION = "1"
DEFAULT_URI = "bolt://localhost:7687"
TEXT_INDEX = "ebb_memory_text"
SPREADINGS = ("default", "pagerank")
URI_SCHEMES = ("bolt", "neo4j", "bolt+s", "bolt+ssc", "neo4j+s", "neo4j+ssc")
#: PageRank damping for ``spreading="pagerank"`` (the usual 0.85).
PAGERANK_DAMPING = 0.85

_SCHEMA = (
    "CREATE CONSTRAINT ebb_memory_key IF NOT EXISTS FOR (n:Memory) REQUIRE (n.ns, n.id) IS UNIQUE",
    "CREATE CONSTRAINT ebb_audit_key IF NOT EXISTS FOR (a:Audit) REQUIRE (a.ns, a.seq) IS UNIQUE",
    "CREATE CONSTRAINT ebb_meta_key IF NOT EXISTS FOR (m:Meta) REQUIRE m.key IS UNIQUE",
    "CREATE INDEX ebb_memory_rank IF NOT EXISTS FOR (n:Memory) ON (n.ns, n.key)",
    "CREATE INDEX ebb_memory_tier IF NOT EXISTS FOR (n:Memory) ON (n.ns, n.tier)",
    f"CREATE FULLTEXT INDEX {TEXT_INDEX} IF NOT EXISTS FOR (n:Memory) ON EACH [n.text] "
    "OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}",
)

_NODE_FIELDS = (
    "id",
    "ns",
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
    "base_key",
    "key",
    "degree",
)
_EDGE_FIELDS = ("kind", "weight", "created_us", "reinforced_us", "props")
_AUDIT_FIELDS = (
    "seq",
    "ns",
    "at_us",
    "action",
    "node_id",
    "from_tier",
    "to_tier",
    "actor",
    "reason",
    "payload",
)


def _projection(var: str, fields: Sequence[str]) -> str:
    return var + " {" + ", ".join(f".{f}" for f in fields) + "}"


_NODE = _projection("n", _NODE_FIELDS)
_OTHER = _projection("m", _NODE_FIELDS)
_EDGE = _projection("e", _EDGE_FIELDS)
_KINDS = "(size($kinds) = 0 OR n.kind IN $kinds)"
# A term of a key: w · 2^((t − epoch)/h) (see ``scoring.term_key``).
_TERM = "{w} * 2.0 ^ (toFloat({t} - $epoch) / $h)"

_LUCENE_SPECIAL = re.compile(r'([+\-!(){}\[\]^"~*?:\\/&|])')


def lucene_query(text: str) -> str:
    """``text`` as a Lucene query matching any of its words, with every operator escaped.

    >>> lucene_query('acme (pricing) AND "seats"')
    'acme \\\\(pricing\\\\) and \\\\"seats\\\\"'
    """
    terms = []
    for word in text.split():
        escaped = _LUCENE_SPECIAL.sub(r"\\\1", word)
        # AND/OR/NOT are operators only in upper case; the analyzer lowercases anyway.
        terms.append(escaped.lower() if escaped in ("AND", "OR", "NOT") else escaped)
    return " ".join(terms)


# -- conversions -------------------------------------------------------------------------------
def _to_edge(ns: str, src: str, dst: str, e: Mapping[str, Any]) -> Edge:
    return Edge(
        namespace=ns,
        src=src,
        dst=dst,
        kind=e["kind"],
        weight=float(e["weight"]),
        created_at=from_us(e["created_us"]),
        reinforced_at=from_us(e["reinforced_us"]),
        props=json.loads(e["props"]) if e["props"] else {},
    )


def _edge_row(e: Edge) -> dict[str, Any]:
    return {
        "src": e.src,
        "dst": e.dst,
        "kind": e.kind,
        "weight": float(e.weight),
        "created_us": to_us(e.created_at),
        "reinforced_us": to_us(e.reinforced_at),
        "props": json.dumps(e.props, sort_keys=True),
    }


def _pylist(column: Any) -> list[Any]:
    """A bulk-import column (list or Arrow array) as a plain list."""
    if isinstance(column, list):
        return column
    if hasattr(column, "to_pylist"):
        result: list[Any] = column.to_pylist()
        return result
    return list(column)


def _row_batches(
    cols: Mapping[str, Sequence[Any]], size: int, extra: Mapping[str, Any] | None = None
) -> Iterator[list[dict[str, Any]]]:
    """Bulk-import columns (lists or Arrow arrays) as rows, ``size`` at a time, each with
    ``extra``'s fields first; a node column ``namespace`` becomes ``ns``."""
    names = list(cols)
    total = len(cols[names[0]]) if names else 0
    keys = ["ns" if c == "namespace" and extra is not None else c for c in names]
    for lo in range(0, total, size):
        columns = [_pylist(cols[c][lo : lo + size]) for c in names]
        yield [
            {**(extra or {}), **dict(zip(keys, values, strict=True))}
            for values in zip(*columns, strict=True)
        ]


def _batches(rows: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for lo in range(0, len(rows), size):
        yield rows[lo : lo + size]


#: What a server that went away (or is restarting) looks like to the driver.
_CONNECTION_LOST = (
    neo4j_errors.ServiceUnavailable,
    neo4j_errors.SessionExpired,
    neo4j_errors.ConnectionAcquisitionTimeoutError,
    neo4j_errors.DatabaseUnavailable,
)


class _TxState(threading.local):
    """The explicit transaction of the current thread, if any."""

    depth = 0
    session: Any = None
    tx: Any = None
    failed: BaseException | None = None
    meta: dict[str, str | None] | None = None  # settings read or written in this transaction


class Neo4jStore(Neo4jVectors, GraphStore):
    """Neo4j backend: one database (``database``; the server's default when None) on ``uri``.

    >>> store = Neo4jStore("bolt://localhost:7687", auth=("neo4j", "secret"))  # doctest: +SKIP
    >>> brain = Brain(store, namespace="acme")                                  # doctest: +SKIP

    ``retry_seconds`` bounds how long a call keeps retrying after a lost connection or a
    transient error; ``connection_timeout`` bounds each connection attempt; ``batch_size`` is the
    number of rows per ``UNWIND`` statement and per ``IN TRANSACTIONS`` batch.
    """

    backend = "neo4j"

    def __init__(
        self,
        uri: str,
        auth: tuple[str, str] | None = None,
        database: str | None = None,
        *,
        connection_timeout: float = 5.0,
        retry_seconds: float = 15.0,
        batch_size: int = 10_000,
    ) -> None:
        scheme = uri.partition("://")[0].lower()
        if scheme not in URI_SCHEMES:
            raise InvalidInput(
                f"NEO4J_URI {uri!r} is not a Bolt URI: use {' or '.join(URI_SCHEMES[:2])} "
                "(e.g. bolt://localhost:7687, neo4j+s://<id>.databases.neo4j.io)",
                field="uri",
            )
        self._uri = uri
        self._auth_user = auth[0] if auth else None
        self._database = database or None
        self._retry = float(retry_seconds)
        self._batch = int(batch_size)
        self._local = _TxState()
        self._closed = False
        self._gds: bool | None = None
        try:
            self._driver = neo4j.GraphDatabase.driver(
                uri,
                auth=auth,
                connection_timeout=connection_timeout,
                connection_acquisition_timeout=connection_timeout * 2 + 1.0,
                max_transaction_retry_time=self._retry,
                initial_retry_delay=0.2,
                liveness_check_timeout=30.0,
                user_agent="ebb-memory",
            )
        except (ValueError, neo4j_errors.ConfigurationError) as exc:
            raise InvalidInput(
                f"NEO4J_URI {uri!r} is not a Neo4j URI ({exc}): use e.g. bolt://host:7687 or "
                "neo4j+s://<id>.databases.neo4j.io",
                field="uri",
            ) from None
        self._bookmarks = self._driver.execute_query_bookmark_manager
        try:
            with self._errors("connect"):
                self._driver.verify_connectivity()
                self._driver.verify_authentication()
            self._ensure_schema()
        except BaseException:
            self._driver.close()
            raise

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

    # -- plumbing ------------------------------------------------------------------------------
    @property
    def location(self) -> str:
        return f"{self._uri} (database {self._database or 'default'})"

    @property
    def uri(self) -> str:
        return self._uri

    @contextmanager
    def _errors(self, stage: str = "call") -> Iterator[None]:
        """Turn the driver's connection and credential failures into one clear Ebb error.

        ``stage``: ``"connect"`` (opening the store), ``"tx"`` (inside an explicit transaction,
        which cannot be retried statement by statement) or ``"call"`` (after the retries).
        """
        who = f"user {self._auth_user!r}" if self._auth_user else "no credentials"
        try:
            yield
        except neo4j_errors.Neo4jError as exc:
            if exc.code and "CredentialsExpired" in exc.code:
                raise BackendUnavailable(
                    f"Neo4j at {self._uri} requires a new password for {who} before use: "
                    "change it (ALTER CURRENT USER SET PASSWORD FROM '…' TO '…' on the system "
                    "database), then set NEO4J_PASSWORD"
                ) from None
            if isinstance(exc, neo4j_errors.DatabaseUnavailable):
                self._lost(exc, stage)
            if exc.code and "DatabaseNotFound" in exc.code:
                raise BackendUnavailable(
                    f"Neo4j at {self._uri} has no database {self._database!r}: create it or fix "
                    "NEO4J_DATABASE"
                ) from None
            if not isinstance(exc, neo4j_errors.AuthError):
                raise
            raise BackendUnavailable(
                f"Neo4j at {self._uri} refused the credentials ({who}): check NEO4J_USER and "
                "NEO4J_PASSWORD"
            ) from None
        except neo4j_errors.IncompleteCommit:
            raise BackendUnavailable(
                f"lost the connection to Neo4j at {self._uri} while committing: the last "
                "operation may or may not have been applied; check it once the server is back"
            ) from None
        except _CONNECTION_LOST as exc:
            self._lost(exc, stage)

    def _lost(self, exc: Exception, stage: str) -> NoReturn:
        reason = " ".join(str(exc).split())[:240]
        if stage == "connect":
            raise BackendUnavailable(
                f"cannot reach Neo4j at {self._uri} ({reason}): start the server or fix NEO4J_URI"
            ) from None
        if stage == "tx":
            raise BackendUnavailable(
                f"lost the connection to Neo4j at {self._uri} during an operation, so none of it "
                f"was applied ({reason}): check the server, then retry"
            ) from None
        raise BackendUnavailable(
            f"lost the connection to Neo4j at {self._uri} and could not get it back within "
            f"{self._retry:g} s ({reason}); the operation was not applied: check the server, "
            "then retry"
        ) from None

    def _session(self, **config: Any) -> Any:
        if self._closed:
            raise BackendUnavailable(f"the store on {self._uri} is closed")
        return self._driver.session(
            database=self._database, bookmark_manager=self._bookmarks, **config
        )

    def _run(self, query: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """One statement: in the thread's transaction if there is one, else a managed one."""
        return self._unit(lambda tx: list(tx.run(query, dict(params or {}))))

    def _read(self, query: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """Like :meth:`_run` for a statement that only reads (routed to readers in a cluster)."""
        return self._unit(lambda tx: list(tx.run(query, dict(params or {}))), write=False)

    def _unit(self, work: Callable[[Any], T], *, write: bool = True) -> T:
        """Run ``work(tx)`` in the thread's transaction, or else in a retried managed one."""
        tx = self._local.tx
        if tx is not None:
            try:
                with self._errors("tx"):
                    return work(tx)
            except BaseException as exc:
                self._local.failed = exc  # the server has rolled the transaction back
                raise
        with self._errors(), self._session() as session:
            if write:
                return session.execute_write(work)  # type: ignore[no-any-return]
            return session.execute_read(work)  # type: ignore[no-any-return]

    def _retrying(self, attempt: Callable[[], T]) -> T:
        """Call ``attempt`` until it gets through to the server or ``retry_seconds`` pass (for
        what the driver does not retry itself: auto-commit statements, beginning a transaction).
        """
        deadline = time.monotonic() + self._retry
        delay = 0.2
        while True:
            try:
                return attempt()
            except _CONNECTION_LOST as exc:
                if isinstance(exc, neo4j_errors.IncompleteCommit) or time.monotonic() > deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    def _autocommit(self, query: str, params: Mapping[str, Any]) -> None:
        """Run an idempotent ``CALL … IN TRANSACTIONS`` statement (auto-commit), retried."""

        def attempt() -> None:
            with self._session() as session:
                session.run(query, dict(params)).consume()

        with self._errors():
            self._retrying(attempt)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        state = self._local
        if state.depth:
            state.depth += 1
            try:
                yield
            finally:
                state.depth -= 1
            return
        with self._errors():
            session, tx = self._retrying(self._begin)
        state.session, state.tx, state.depth, state.meta = session, tx, 1, {}
        try:
            yield
        except BaseException:
            state.session = state.tx = state.failed = state.meta = None
            state.depth = 0
            self._abandon(session, tx)
            raise
        state.session = state.tx = state.meta = None
        state.depth = 0
        failed, state.failed = state.failed, None
        if failed is not None:  # a statement failed and the caller carried on regardless
            self._abandon(session, tx)
            if isinstance(failed, EbbError):
                raise type(failed)(f"the transaction was rolled back: {failed}") from None
            raise EbbError(
                f"the transaction was rolled back: a statement in it failed ({failed})"
            ) from None
        try:
            with self._errors("tx"):
                tx.commit()
        finally:
            with suppress(neo4j_errors.DriverError):
                session.close()

    def _begin(self) -> tuple[Any, Any]:
        session = self._session()
        try:
            return session, session.begin_transaction()
        except BaseException:
            with suppress(neo4j_errors.DriverError):
                session.close()
            raise

    @staticmethod
    def _abandon(session: Any, tx: Any) -> None:
        try:
            tx.rollback()
        except neo4j_errors.DriverError:
            pass  # the connection is gone: the server rolls back on its own
        except neo4j_errors.Neo4jError:
            pass  # already rolled back by the server after a failed statement
        finally:
            with suppress(neo4j_errors.DriverError):
                session.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._driver.close()

    def _ensure_schema(self) -> None:
        with self._errors("connect"):
            existing = {
                r["name"]
                for r in self._driver.execute_query(
                    "SHOW INDEXES YIELD name RETURN name",
                    database_=self._database,
                    routing_=neo4j.RoutingControl.READ,
                ).records
            }
            created = False
            for ddl in _SCHEMA:
                name = _schema_name(ddl)
                if name in existing:
                    continue
                try:
                    self._driver.execute_query(ddl, database_=self._database)
                except neo4j_errors.ClientError as exc:
                    # Another process created it between our check and here.
                    if not (exc.code and "AlreadyExists" in exc.code):
                        raise
                created = True
            if created:
                self._driver.execute_query(
                    "CALL db.awaitIndexes($s)", {"s": 300}, database_=self._database
                )
        version = self.get_meta("schema_version")
        if version is None:
            if self._read("MATCH (n:Memory) RETURN n.id LIMIT 1"):
                raise BackendUnavailable(
                    f"the Neo4j database at {self.location} holds Memory nodes without an Ebb "
                    "schema version: use an empty database (NEO4J_DATABASE) for Ebb"
                )
            self.set_meta("schema_version", SCHEMA_VERSION)
        elif version != SCHEMA_VERSION:
            raise BackendUnavailable(
                f"the Neo4j database at {self.location} has Ebb schema version {version!r}; this "
                f"Ebb expects {SCHEMA_VERSION}: export it with the Ebb that wrote it and import "
                "it here"
            )

    # -- metadata ------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        # Within a transaction a setting is read once (the Brain reads the tier reference
        # several times per operation): one round trip each saved.
        cache = self._local.meta
        if cache is not None and key in cache:
            return cache[key]
        rows = self._read("MATCH (m:Meta {key: $k}) RETURN m.value AS v", {"k": key})
        value: str | None = rows[0]["v"] if rows else None
        if cache is not None:
            cache[key] = value
        return value

    def set_meta(self, key: str, value: str) -> None:
        self._run("MERGE (m:Meta {key: $k}) SET m.value = $v", {"k": key, "v": value})
        if self._local.meta is not None:
            self._local.meta[key] = value

    # -- nodes ---------------------------------------------------------------------------------
    def get_nodes(self, namespace: str, ids: Sequence[str]) -> dict[str, Node]:
        if not ids:
            return {}
        rows = self._read(
            f"UNWIND $ids AS i MATCH (n:Memory {{ns: $ns, id: i}}) RETURN {_NODE} AS n",
            {"ns": namespace, "ids": list(dict.fromkeys(ids))},
        )
        return {r["n"]["id"]: node_from_row(r["n"]) for r in rows}

    def existing_ids(self, namespace: str, ids: Sequence[str]) -> set[str]:
        wanted = list(dict.fromkeys(ids))
        found: set[str] = set()
        for part in _batches(wanted, self._batch):
            rows = self._read(
                "UNWIND $ids AS i MATCH (n:Memory {ns: $ns, id: i}) RETURN n.id AS id",
                {"ns": namespace, "ids": list(part)},
            )
            found.update(r["id"] for r in rows)
        return found

    def upsert_nodes(self, nodes: Sequence[Node]) -> None:
        self._write_rows(
            "UNWIND $rows AS r MERGE (n:Memory {ns: r.ns, id: r.id}) SET n = r",
            [node_row(n) for n in nodes],
        )

    def insert_nodes(self, nodes: Sequence[Node]) -> None:
        self._write_rows(
            "UNWIND $rows AS r CREATE (n:Memory) SET n = r", [node_row(n) for n in nodes]
        )

    def _write_rows(self, query: str, rows: Sequence[Any], **params: Any) -> None:
        if not rows:
            return

        def work(tx: Any) -> None:
            for part in _batches(rows, self._batch):
                tx.run(query, {"rows": list(part), **params}).consume()

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
                    "UNWIND $rows AS r MATCH (n:Memory {ns: $ns, id: r.id}) "
                    "SET n.base_key = n.base_key + r.db, n.degree = n.degree + r.dd, "
                    "n.key = n.key + r.dk SET n += r.set",
                    {"ns": namespace, "rows": list(part)},
                ).consume()
            for part in _batches(pushes, self._batch):
                # One push per edge: a neighbour linked twice (two kinds) gets it twice.
                tx.run(
                    "UNWIND $rows AS p MATCH (:Memory {ns: $ns, id: p.id})-[:LINK]-(m:Memory) "
                    "WITH m, sum(p.d) AS total SET m.key = m.key + total",
                    {"ns": namespace, "rows": list(part)},
                ).consume()

        self._unit(work)

    def delete_nodes(self, namespace: str, ids: Sequence[str]) -> None:
        self._write_rows(
            "UNWIND $rows AS i MATCH (n:Memory {ns: $ns, id: i}) DETACH DELETE n",
            list(ids),
            ns=namespace,
        )
        self.delete_vectors(namespace, ids)

    def bulk_insert(
        self, nodes: Mapping[str, Sequence[Any]], edges: Mapping[str, Sequence[Any]]
    ) -> None:
        # Rows are made batch by batch from the columns: a million memories and five million
        # links as dicts at once took ~8 GB in the client.
        scores = {"base_key": 0.0, "key": 0.0, "degree": 0}

        def work(tx: Any) -> None:
            for part in _row_batches(nodes, self._batch, scores):
                tx.run("UNWIND $rows AS r CREATE (n:Memory) SET n = r", {"rows": part}).consume()
            for part in _row_batches(edges, self._batch):
                tx.run(
                    "UNWIND $rows AS r "
                    "MATCH (a:Memory {ns: r.namespace, id: r.src}) "
                    "MATCH (b:Memory {ns: r.namespace, id: r.dst}) "
                    "CREATE (a)-[:LINK {kind: r.kind, weight: toFloat(r.weight), "
                    "created_us: r.created_us, reinforced_us: r.reinforced_us, "
                    "props: r.props}]->(b)",
                    {"rows": part},
                ).consume()

        self._unit(work)

    # -- edges ---------------------------------------------------------------------------------
    def upsert_edges(self, edges: Sequence[Edge]) -> None:
        for ns, rows in _by_namespace(edges).items():
            self._write_rows(
                "UNWIND $rows AS r "
                "MATCH (a:Memory {ns: $ns, id: r.src}) MATCH (b:Memory {ns: $ns, id: r.dst}) "
                "MERGE (a)-[e:LINK {kind: r.kind}]->(b) "
                "SET e.weight = r.weight, e.created_us = r.created_us, "
                "e.reinforced_us = r.reinforced_us, e.props = r.props",
                rows,
                ns=ns,
            )

    def insert_edges(self, edges: Sequence[Edge]) -> None:
        for ns, rows in _by_namespace(edges).items():
            self._write_rows(
                "UNWIND $rows AS r "
                "MATCH (a:Memory {ns: $ns, id: r.src}) MATCH (b:Memory {ns: $ns, id: r.dst}) "
                "CREATE (a)-[:LINK {kind: r.kind, weight: r.weight, created_us: r.created_us, "
                "reinforced_us: r.reinforced_us, props: r.props}]->(b)",
                rows,
                ns=ns,
            )

    def get_edge(self, namespace: str, src: str, dst: str, kind: str) -> Edge | None:
        rows = self._read(
            "MATCH (:Memory {ns: $ns, id: $a})-[e:LINK {kind: $k}]->(:Memory {ns: $ns, id: $b}) "
            f"RETURN {_EDGE} AS e LIMIT 1",
            {"ns": namespace, "a": src, "b": dst, "k": kind},
        )
        return _to_edge(namespace, src, dst, rows[0]["e"]) if rows else None

    def strongest_links(
        self,
        namespace: str,
        ids: Sequence[str],
        now_us: int,
        half_life_us: float,
        min_decayed: float,
        limit: int,
    ) -> list[Link]:
        if not ids:
            return []
        rows = self._read(
            # Decay first (relationship properties only), then the other end's tier: a hub's
            # stale edges never cost a node read.
            "UNWIND $ids AS i MATCH (s:Memory {ns: $ns, id: i})-[e:LINK]-(m) "
            "WITH s, m, e, e.weight * 2.0 ^ (toFloat(e.reinforced_us - $now) / $h) AS dw "
            "WHERE dw >= $min WITH s, m, e, dw WHERE m.tier < 4 "
            "RETURN s.id AS s, m.id AS m, e.kind AS kind, startNode(e) = s AS out, "
            "e.weight AS w, e.reinforced_us AS t ORDER BY dw DESC, m, s, kind LIMIT $lim",
            {
                "ns": namespace,
                "ids": list(dict.fromkeys(ids)),
                "now": int(now_us),
                "h": float(half_life_us),
                "min": float(min_decayed),
                "lim": int(limit),
            },
        )
        return [
            Link(r["s"], r["m"], r["kind"], bool(r["out"]), float(r["w"]), int(r["t"]))
            for r in rows
        ]

    def incident(self, namespace: str, ids: Sequence[str]) -> list[Incident]:
        if not ids:
            return []
        rows = self._read(
            "UNWIND $ids AS i MATCH (a:Memory {ns: $ns, id: i})-[e:LINK]-(m:Memory) "
            f"WITH i, startNode(e) = a AS out, e, m "
            f"RETURN i, out, {_EDGE} AS e, {_OTHER} AS m ORDER BY i, out DESC, m.id, e.kind",
            {"ns": namespace, "ids": list(dict.fromkeys(ids))},
        )
        # Grouped per id in the order asked, outgoing edges first (as the Kùzu store does).
        by_id: dict[str, list[Incident]] = {i: [] for i in dict.fromkeys(ids)}
        for r in rows:
            i, other = r["i"], node_from_row(r["m"])
            src, dst = (i, other.id) if r["out"] else (other.id, i)
            by_id[i].append(Incident(i, _to_edge(namespace, src, dst, r["e"]), other))
        return [inc for group in by_id.values() for inc in group]

    # -- finding -------------------------------------------------------------------------------
    def text_candidates(
        self, namespace: str, query: str, max_tier: Tier, pool: int, kinds: Sequence[str] = ()
    ) -> list[tuple[Node, float]]:
        rows = self._text(namespace, query, max_tier, pool, pool, kinds, _NODE)
        return [(node_from_row(r["n"]), float(r["score"])) for r in rows]

    def text_matches(
        self, namespace: str, query: str, max_tier: Tier, pool: int, kinds: Sequence[str] = ()
    ) -> list[Match]:
        # As in Kùzu: the namespace's own top max(4 × pool, 200), filtered, then the best ``pool``.
        want = max(4 * pool, 200)
        rows = self._text(
            namespace, query, max_tier, want, pool, kinds, "n {.id, .key, .pinned, .tier}"
        )
        return [
            Match(
                r["n"]["id"],
                float(r["score"]),
                float(r["n"]["key"] or 0.0),
                r["n"]["pinned"],
                int(r["n"]["tier"]),
            )
            for r in rows
        ]

    def superseded_by(
        self, namespace: str, ids: Sequence[str] | None = None
    ) -> dict[str, list[str]]:
        params: dict[str, Any] = {"ns": namespace, "k": SUPERSEDES}
        if ids is None:
            query = (
                "MATCH (a:Memory {ns: $ns})-[e:LINK {kind: $k}]->(b:Memory) WHERE a.tier < 4 "
                "RETURN b.id AS old, a.id AS new ORDER BY old, new"
            )
        else:
            params["ids"] = list(dict.fromkeys(ids))
            query = (
                "UNWIND $ids AS i MATCH (b:Memory {ns: $ns, id: i})<-[e:LINK {kind: $k}]-"
                "(a:Memory) WHERE a.tier < 4 RETURN b.id AS old, a.id AS new ORDER BY old, new"
            )
        out: dict[str, list[str]] = {}
        for r in self._read(query, params):
            out.setdefault(r["old"], []).append(r["new"])
        return out

    def _text(
        self,
        namespace: str,
        query: str,
        max_tier: Tier,
        want: int,
        pool: int,
        kinds: Sequence[str],
        projection: str,
    ) -> list[Any]:
        """The namespace's ``want`` best full-text hits for ``query`` (ties by id), filtered by
        tier and kind, best ``pool`` first.

        The index is shared by every namespace and its query cannot filter by property, so its
        limit is widened until it holds ``want`` of this namespace's memories or has no more
        matches: what one namespace finds never depends on how large the others are.
        """
        lucene = lucene_query(query)
        if not lucene:
            return []
        top, size = want, None
        while True:
            rows = self._read(
                f"CALL db.index.fulltext.queryNodes('{TEXT_INDEX}', $q, {{limit: $top}}) "
                "YIELD node, score "
                "WITH node, score ORDER BY score DESC, node.id "
                "WITH count(*) AS seen, "
                "collect(CASE WHEN node.ns = $ns THEN {n: node, score: score} END) AS ours "
                # One row at least (a null sentinel) so `seen` and `found` always come back.
                "UNWIND [h IN ours[..$want] WHERE h.n.tier <= $mt AND "
                "(size($kinds) = 0 OR h.n.kind IN $kinds)][..$pool] + [null] AS h "
                "WITH seen, size(ours) AS found, h.n AS n, h.score AS score "
                f"RETURN seen, found, {projection} AS n, score",
                {
                    "q": lucene,
                    "top": int(top),
                    "want": int(want),
                    "pool": int(pool),
                    "ns": namespace,
                    "mt": int(max_tier),
                    "kinds": list(kinds),
                },
            )
            seen, found = rows[0]["seen"], rows[0]["found"]
            if found >= want or seen < top:
                break
            if size is None:
                size = self._read("MATCH (n:Memory) RETURN count(n) AS c")[0]["c"]
            if top >= size:
                break
            # Widen in proportion to this namespace's share of the hits so far (all at once
            # when it had none), so a crowded query costs two or three index calls, not many.
            top = size if found == 0 else min(size, max(2 * top, top * 2 * want // found))
        return [r for r in rows if r["n"] is not None]

    def top_by_key(
        self, namespace: str, max_tier: Tier, limit: int, kinds: Sequence[str] = ()
    ) -> list[Node]:
        # `n.key IS NOT NULL` lets the planner walk the (ns, key) index in key order.
        rows = self._read(
            "MATCH (n:Memory) WHERE n.ns = $ns AND n.key IS NOT NULL AND n.tier <= $mt AND "
            f"{_KINDS} RETURN {_NODE} AS n ORDER BY n.key DESC, n.id LIMIT $lim",
            {"ns": namespace, "mt": int(max_tier), "lim": int(limit), "kinds": list(kinds)},
        )
        return [node_from_row(r["n"]) for r in rows]

    def review_queue(self, namespace: str, limit: int) -> list[Node]:
        rows = self._read(
            f"MATCH (n:Memory) WHERE n.ns = $ns AND n.tier = 4 RETURN {_NODE} AS n "
            "ORDER BY n.queued_us, n.id LIMIT $lim",
            {"ns": namespace, "lim": int(limit)},
        )
        return [node_from_row(r["n"]) for r in rows]

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
                    "MATCH (n:Memory) WHERE n.ns = $ns RETURN n.tier AS t, count(*) AS c", p
                )
            }
            pinned = tx.run(
                "MATCH (n:Memory) WHERE n.ns = $ns AND n.pinned RETURN count(*) AS c", p
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
        """Recompute ``base_key``, ``degree`` and ``key`` of every node on the server.

        ``"default"``: the same sums as ``scoring`` (and Kùzu's vectorised pass): base is the sum
        over a node's edges of ``w · 2^((t − E)/h)`` plus its read term, degree its number of
        edges, key its base plus ``spread`` times the sum over its edges of the neighbour's
        ``base / degree``. Two aggregations, each batched with ``CALL (n) { … } IN
        TRANSACTIONS`` when called outside a transaction, else run inside it.

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
            "MATCH (n:Memory) WHERE n.ns = $ns RETURN count(n) AS c", {"ns": namespace}
        )[0]["c"]
        if not count:
            return 0
        edge_term = _TERM.format(w="e.weight", t="e.reinforced_us")
        read_term = _TERM.format(w="$rb", t="n.last_read_us")
        self._each_node(
            "OPTIONAL MATCH (n)-[e:LINK]-() "
            f"WITH n, sum({edge_term}) AS edges, count(e) AS degree "
            "SET n.base_key = edges + CASE WHEN n.last_read_us IS NULL THEN 0.0 "
            f"ELSE {read_term} END, n.degree = degree",
            params,
            batched,
        )
        if spreading == "pagerank":
            self._pagerank_keys(namespace, params, batched)
        else:
            self._each_node(
                "OPTIONAL MATCH (n)-[:LINK]-(m:Memory) "
                "WITH n, sum(CASE WHEN m.degree > 0 THEN m.base_key / m.degree ELSE 0.0 END) "
                "AS shares SET n.key = n.base_key + $spread * shares",
                params,
                batched,
            )
        return int(count)

    def _each_node(self, body: str, params: Mapping[str, Any], batched: bool) -> None:
        """Run ``body`` for every node ``n`` of the namespace, batched when outside a tx."""
        query = f"MATCH (n:Memory) WHERE n.ns = $ns CALL (n) {{ {body} }}"
        if batched:
            self._autocommit(query + " IN TRANSACTIONS OF $batch ROWS", params)
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
            "MATCH (n:Memory) WHERE n.ns = $ns RETURN sum(n.base_key) AS b", {"ns": namespace}
        )[0]["b"]
        p = {**params, "graph": graph, "total": float(total or 0.0), "d": PAGERANK_DAMPING}
        weight = _TERM.format(w="e.weight", t="e.reinforced_us")
        self._run(
            "MATCH (a:Memory) WHERE a.ns = $ns OPTIONAL MATCH (a)-[e:LINK]->(b:Memory) "
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
            row = tx.run(
                f"MATCH (n:Memory) WHERE {live} AND n.key IS NOT NULL "
                "RETURN n.key AS k ORDER BY n.key DESC SKIP $r LIMIT 1",
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

    # -- audit log -----------------------------------------------------------------------------
    def append_audit(self, entries: Sequence[AuditEntry]) -> None:
        self._write_rows(
            "UNWIND $rows AS r CREATE (a:Audit) SET a = r",
            [
                {
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
                for a in entries
            ],
        )

    def audit_log(
        self,
        namespace: str,
        limit: int,
        node_id: str | None = None,
        action: str | None = None,
        after_seq: int = 0,
    ) -> list[AuditEntry]:
        rows = self._read(
            "MATCH (a:Audit) WHERE a.ns = $ns AND a.seq > $after "
            "AND ($node IS NULL OR a.node_id = $node) AND ($action IS NULL OR a.action = $action) "
            f"RETURN {_projection('a', _AUDIT_FIELDS)} AS a ORDER BY a.seq DESC LIMIT $lim",
            {
                "ns": namespace,
                "after": int(after_seq),
                "node": node_id,
                "action": action,
                "lim": int(limit),
            },
        )
        rows.reverse()
        return [_to_audit(r["a"]) for r in rows]

    def last_audit_seq(self, namespace: str) -> int:
        rows = self._read(
            "MATCH (a:Audit) WHERE a.ns = $ns AND a.seq IS NOT NULL "
            "RETURN a.seq AS s ORDER BY a.seq DESC LIMIT 1",
            {"ns": namespace},
        )
        return int(rows[0]["s"]) if rows else 0


def _to_audit(a: Mapping[str, Any]) -> AuditEntry:
    return AuditEntry(
        seq=int(a["seq"]),
        namespace=a["ns"],
        at=from_us(a["at_us"]),
        action=a["action"],
        node_id=a["node_id"],
        from_tier=None if a["from_tier"] is None else Tier(int(a["from_tier"])),
        to_tier=None if a["to_tier"] is None else Tier(int(a["to_tier"])),
        actor=a["actor"],
        reason=a["reason"] or "",
        payload=json.loads(a["payload"]) if a["payload"] else None,
    )


def _by_namespace(edges: Sequence[Edge]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for e in edges:
        out.setdefault(e.namespace, []).append(_edge_row(e))
    return out


def _schema_name(ddl: str) -> str:
    """The name in ``CREATE [FULLTEXT] INDEX|CONSTRAINT <name> IF NOT EXISTS …``."""
    words = ddl.split()
    return words[words.index("IF") - 1]
