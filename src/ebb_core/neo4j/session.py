"""The Neo4j store's plumbing: the driver, sessions, transactions, errors, schema and settings.

Every other part of ``Neo4jStore`` runs its Cypher through :meth:`Neo4jSession._run`,
:meth:`~Neo4jSession._read` or :meth:`~Neo4jSession._unit`, so it joins the thread's explicit
transaction when there is one and is retried otherwise.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, NoReturn, TypeVar

from ..errors import BackendUnavailable, EbbError, ImportInterrupted, InvalidInput, StorageError
from .queries import _SCHEMA, IMPORT_MARKER, SCHEMA_VERSION, URI_SCHEMES, _schema_name

__all__ = ["Neo4jSession", "neo4j", "neo4j_errors"]

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
    stage: Any = None  # the import being committed batch by batch (see Neo4jStore.bulk_load)
    hint: Any = None  # (namespace, RecallHint) until the next text_matches (see search)
    reads: Any = None  # what a recall fetched ahead in this transaction (search._Reads)


class Neo4jSession:
    """Connection and transaction plumbing of :class:`~ebb_core.neo4j.store.Neo4jStore`."""

    tier_moves_per_transaction: int | None  # see ServerScoring: here ``batch_size``

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
        self.tier_moves_per_transaction = self._batch  # maintain's moves, batch by batch
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
            if isinstance(exc, neo4j_errors.TransientError):
                self._transient(exc)
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

    def _transient(self, exc: neo4j_errors.Neo4jError) -> NoReturn:
        """A transient server error the retries did not get past (or, inside an explicit
        transaction, could not retry), as a :class:`StorageError` naming the remedy."""
        code = exc.code or "a transient error"
        reason = " ".join(str(exc.message or exc).split())[:240]
        if "Memory" in code:
            raise StorageError(
                f"Neo4j at {self._uri} ran out of transaction memory ({code}: {reason}); the "
                "failed transaction was rolled back: raise the server's "
                "dbms.memory.transaction.total.max (and db.memory.transaction.max), or open the "
                f"store with a smaller batch_size (now {self._batch}), then retry"
            ) from None
        raise StorageError(
            f"Neo4j at {self._uri} reported {code} and retrying for {self._retry:g} s did not "
            f"get past it ({reason}); the failed transaction was rolled back: retry later"
        ) from None

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
        if write:  # what recall fetched ahead may no longer be what the store holds
            self._local.reads = None
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

    def _apart(self, work: Callable[[Any], T]) -> T:
        """Run ``work(tx)`` in a retried managed write transaction of its own, committed on its
        own even when the thread has an explicit transaction open (a staged import's batches)."""
        self._local.reads = None
        with self._errors(), self._session() as session:
            return session.execute_write(work)  # type: ignore[no-any-return]

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
        state.hint = state.reads = None
        try:
            yield
        except BaseException:
            state.session = state.tx = state.failed = state.meta = None
            state.hint = state.reads = None
            state.depth = 0
            self._abandon(session, tx)
            raise
        state.session = state.tx = state.meta = state.hint = state.reads = None
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
        for info in self.unfinished_imports():
            warnings.warn(_unfinished_message(info), ImportInterrupted, stacklevel=4)

    def unfinished_imports(self) -> list[dict[str, Any]]:
        """Imports committed batch by batch that have not finished: interrupted (the process
        was killed or lost the server, so it could not remove its part) or still running in
        another process. Each: ``marker`` (to pass to ``discard_import``), ``namespaces``,
        ``memories`` and ``links`` (the file's), ``started`` (UTC), and ``memories_committed``
        and ``links_committed`` (what the store holds of it)."""
        rows = self._read(
            "MATCH (m:Meta) WHERE m.key STARTS WITH $p "
            "RETURN m.key AS k, m.value AS v, m.memories AS n, m.links AS l ORDER BY k",
            {"p": IMPORT_MARKER},
        )
        return [
            {
                "marker": r["k"],
                **json.loads(r["v"]),
                "memories_committed": int(r["n"] or 0),
                "links_committed": int(r["l"] or 0),
            }
            for r in rows
        ]

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


def _unfinished_message(info: Mapping[str, Any]) -> str:
    names = ", ".join(repr(n) for n in info.get("namespaces", []))
    return (
        f"an import into namespace {names} started at {info.get('started')} did not finish "
        f"(interrupted, or still running elsewhere): {info['memories_committed']:,} of its "
        f"{info.get('memories', 0):,} memories and {info['links_committed']:,} of its "
        f"{info.get('links', 0):,} links are in the store. If it was interrupted, remove them "
        f"with Neo4jStore.discard_import({info['marker']!r}) (deletes every memory of "
        f"{names}, which was empty when the import began) and import the file again"
    )
