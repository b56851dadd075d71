"""Grouped reinforcement: what recall reinforces counts at once and is written a little later.

Every recall reinforces what it returns (its read clocks move, so their keys grow). Written
through, that is a write transaction per recall: on embedded Kùzu about half of a recall's time
at 1k memories. :class:`GroupedStore` wraps a :class:`~ebb_core.store.GraphStore` so that
these writes, and only these, are kept in memory and written together:

- at the next write of anything else (in that write's transaction, before it), so what is
  stored is always what write-through would have stored, in the same order;
- when the store is closed (an idle ``ebb mcp`` letting go of the store, a hand-over to an
  ``ebb`` command, the end of a program that closes its ``Brain``);
- at the latest ``delay`` seconds after the first of them (a background timer).

Until then every read through this store sees them (the keys and read clocks recall ranks on
are the reinforced ones), so the next recall in this process ranks exactly as if each had been
written at once. What a crash or a kill can lose is at most the last ``delay`` seconds of
reinforcement: never a memory, a link, an edit or an audit entry, which are written as before.

Turned on by ``Brain(..., reinforcement_delay=seconds)`` (``ebb mcp`` does, with 1 s); the
library's default writes every reinforcement with its recall.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any

from .errors import InvalidInput
from .model import AuditEntry, Edge, Node, Tier
from .store import (
    Adjustment,
    Counts,
    GraphStore,
    Incident,
    Link,
    Match,
    TierMove,
    TierMoveColumns,
)

log = logging.getLogger("ebb.grouping")

DEFAULT_DELAY = 1.0
"""Seconds a grouped reinforcement may wait before it is written (``ebb mcp``'s default)."""


MAX_DELAY = 3600.0


def validate_delay(delay: float, field: str = "reinforcement_delay") -> float:
    """``delay`` as seconds (0: write-through), or a clear error."""
    if (
        isinstance(delay, bool)
        or not isinstance(delay, (int, float))
        or not (math.isfinite(delay) and 0 <= delay <= MAX_DELAY)
    ):
        raise InvalidInput(
            f"{field} must be a number of seconds from 0 (write every reinforcement with its "
            f"recall) to {MAX_DELAY:g}, got {delay!r}",
            field=field,
        )
    return float(delay)


def parse_delay(raw: str, field: str) -> float:
    """A delay given as text (an environment variable), validated."""
    try:
        value = float(raw)
    except ValueError:
        raise InvalidInput(
            f"{field} must be a number of seconds, e.g. 1 or 0.5, got {raw!r}", field=field
        ) from None
    return validate_delay(value, field)


def merge(first: Adjustment, then: Adjustment) -> Adjustment:
    """One adjustment with the effect of ``first`` followed by ``then``."""
    return Adjustment(
        base_delta=first.base_delta + then.base_delta,
        degree_delta=first.degree_delta + then.degree_delta,
        key_delta=first.key_delta + then.key_delta,
        push_delta=first.push_delta + then.push_delta,
        fields={**first.fields, **then.fields},
    )


def _node(node: Node, adj: Adjustment) -> Node:
    update: dict[str, Any] = dict(adj.fields)
    if adj.base_delta:
        update["base_key"] = node.base_key + adj.base_delta
    if adj.key_delta:
        update["key"] = node.key + adj.key_delta
    if adj.degree_delta:
        update["degree"] = node.degree + adj.degree_delta
    return node.model_copy(update=update) if update else node


class GroupedStore(GraphStore):
    """``inner`` with recall's reinforcement grouped (see the module's docstring).

    Writes made inside :meth:`grouping` (the engine's reinforcement of what it returned) are
    held; every other write first writes what is held, in its own transaction. ``lock`` is the
    engine's (the timer's write takes it like any call). Attributes this class does not define
    are the inner store's.
    """

    def __init__(self, inner: GraphStore, delay: float, lock: threading.RLock) -> None:
        if not validate_delay(delay):
            raise InvalidInput("a grouped store needs a delay > 0", field="reinforcement_delay")
        self.inner = inner
        self.delay = float(delay)
        self.backend = inner.backend
        self.supports_vectors = inner.supports_vectors
        self._lock = lock
        self._held: dict[str, dict[str, Adjustment]] = {}  # namespace -> id -> change
        self._held_meta: dict[str, str] = {}
        self._sent: tuple[dict[str, dict[str, Adjustment]], dict[str, str]] | None = None
        self._depth = 0  # this wrapper's transaction depth (under ``lock``)
        self._grouping = 0
        self._timer: threading.Timer | None = None
        self._closed = False
        self.flushes = 0
        """How many times held reinforcement was written and committed."""

    def __getattr__(self, name: str) -> Any:
        # only called for what this class lacks: a backend's own methods and attributes
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    # -- holding and writing ------------------------------------------------------------------
    @property
    def held(self) -> int:
        """How many memories have reinforcement not written yet (held, or sent in a
        transaction that has not committed)."""
        sent = self._sent[0] if self._sent is not None else {}
        return sum(len(v) for v in self._held.values()) + sum(len(v) for v in sent.values())

    @contextmanager
    def grouping(self) -> Iterator[None]:
        with self._lock:
            self._grouping += 1
            try:
                yield
            finally:
                self._grouping -= 1

    def flush(self) -> None:
        """Write what is held now (one transaction, or the caller's)."""
        with self._lock:
            if self._held or self._held_meta:
                with self.transaction():
                    self._send()

    def _send(self) -> None:
        """Write what is held inside the current transaction (kept until it commits)."""
        if not (self._held or self._held_meta):
            return
        held, meta = self._held, self._held_meta
        self._held, self._held_meta = {}, {}
        self._sent = (held, meta) if self._sent is None else self._sent
        for ns, changes in held.items():
            self.inner.adjust(ns, changes)
        for key, value in meta.items():
            self.inner.set_meta(key, value)

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Around every write: what is held goes first, in the caller's transaction; a write
        made outside any (its own, or DDL such as a first vector table) stays outside one."""
        with self._lock:
            if self._depth:
                self._send()
            else:
                self.flush()
            yield

    def _hold(self, namespace: str, changes: Mapping[str, Adjustment]) -> None:
        held = self._held.setdefault(namespace, {})
        for i, adj in changes.items():
            held[i] = merge(held[i], adj) if i in held else adj
        self._schedule()

    def _schedule(self) -> None:
        if self._timer is None and not self._closed:
            timer = threading.Timer(self.delay, self._on_timer)
            timer.daemon = True
            timer.name = "ebb-reinforcement"
            self._timer = timer
            timer.start()

    def _on_timer(self) -> None:
        with self._lock:
            self._timer = None
            if self._closed:
                return
            try:
                self.flush()
            except Exception as exc:
                if getattr(self.inner, "_closed", False):  # closed behind this wrapper's back
                    self._closed = True
                    log.warning("grouped reinforcement not written: the store was closed")
                    return
                # kept held: the next write, close or timer tries again
                log.warning("could not write grouped reinforcement yet: %s", exc)
                self._schedule()

    def _hold_again(self) -> None:
        """After a rollback: what was sent is held again, before what was held since."""
        assert self._sent is not None
        (held, meta), self._sent = self._sent, None
        for ns, changes in self._held.items():
            into = held.setdefault(ns, {})
            for i, adj in changes.items():
                into[i] = merge(into[i], adj) if i in into else adj
        self._held, self._held_meta = held, {**meta, **self._held_meta}
        if self._held or self._held_meta:
            self._schedule()

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def location(self) -> str:
        return self.inner.location

    @property
    def capabilities(self) -> frozenset[str]:
        return self.inner.capabilities

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            outer = self._depth == 0
            self._depth += 1
            try:
                with self.inner.transaction():
                    yield
            except BaseException:
                if outer and self._sent is not None:  # rolled back: hold it again
                    self._hold_again()
                raise
            else:
                if outer and self._sent is not None:
                    self._sent = None
                    self.flushes += 1
            finally:
                self._depth -= 1

    @contextmanager
    def bulk_load(self, rows: int) -> Iterator[None]:
        self.flush()
        with self.inner.bulk_load(rows):
            yield

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            timer, self._timer = self._timer, None
            if timer is not None:
                timer.cancel()
            try:
                self.flush()
            except Exception as exc:
                log.warning("grouped reinforcement not written at close: %s", exc)
            self._closed = True
            self.inner.close()

    # -- metadata ------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        held = self._held_meta.get(key)
        return held if held is not None else self.inner.get_meta(key)

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            if self._grouping and self._sent is None:
                self._held_meta[key] = value
                self._schedule()
                return
            with self._writing():
                self.inner.set_meta(key, value)

    # -- reads: what is held shows --------------------------------------------------------------
    def _over_nodes(self, namespace: str, nodes: Mapping[str, Node]) -> dict[str, Node]:
        held = self._held.get(namespace)
        if not held:
            return dict(nodes)
        return {i: _node(n, held[i]) if i in held else n for i, n in nodes.items()}

    def _over_matches(self, namespace: str, found: list[Match]) -> list[Match]:
        held = self._held.get(namespace)
        if not held:
            return found
        out = []
        for m in found:
            adj = held.get(m.id)
            if adj is not None and adj.key_delta:
                m = Match(m.id, m.score, m.key + adj.key_delta, m.pinned, m.tier, m.kind)
            out.append(m)
        return out

    def get_nodes(self, namespace: str, ids: Sequence[str]) -> dict[str, Node]:
        with self._lock:
            return self._over_nodes(namespace, self.inner.get_nodes(namespace, ids))

    def existing_ids(self, namespace: str, ids: Sequence[str]) -> set[str]:
        return self.inner.existing_ids(namespace, ids)

    def incident(self, namespace: str, ids: Sequence[str]) -> list[Incident]:
        with self._lock:
            found = self.inner.incident(namespace, ids)
            held = self._held.get(namespace)
            if not held:
                return found
            return [
                replace(inc, other=_node(inc.other, held[inc.other.id]))
                if inc.other.id in held
                else inc
                for inc in found
            ]

    def get_edge(self, namespace: str, src: str, dst: str, kind: str) -> Edge | None:
        return self.inner.get_edge(namespace, src, dst, kind)

    def strongest_links(
        self,
        namespace: str,
        ids: Sequence[str],
        now_us: int,
        half_life_us: float,
        min_decayed: float,
        limit: int,
    ) -> list[Link]:
        return self.inner.strongest_links(namespace, ids, now_us, half_life_us, min_decayed, limit)

    def matches_for(self, namespace: str, ids: Sequence[str]) -> list[Match]:
        with self._lock:
            return self._over_matches(namespace, self.inner.matches_for(namespace, ids))

    def superseded_by(
        self, namespace: str, ids: Sequence[str] | None = None
    ) -> dict[str, list[str]]:
        return self.inner.superseded_by(namespace, ids)

    def text_candidates(
        self, namespace: str, query: str, max_tier: Tier, pool: int, kinds: Sequence[str] = ()
    ) -> list[tuple[Node, float]]:
        with self._lock:
            found = self.inner.text_candidates(namespace, query, max_tier, pool, kinds)
            held = self._held.get(namespace)
            if not held:
                return found
            return [(_node(n, held[n.id]) if n.id in held else n, s) for n, s in found]

    def text_matches(
        self, namespace: str, query: str, max_tier: Tier, pool: int, kinds: Sequence[str] = ()
    ) -> list[Match]:
        with self._lock:
            found = self.inner.text_matches(namespace, query, max_tier, pool, kinds)
            return self._over_matches(namespace, found)

    def vector_matches(
        self, namespace: str, vector: Any, pool: int, max_tier: Tier, kinds: Sequence[str] = ()
    ) -> list[tuple[Match, float]]:
        with self._lock:
            found = self.inner.vector_matches(namespace, vector, pool, max_tier, kinds)
            if not self._held.get(namespace):
                return found
            over = self._over_matches(namespace, [m for m, _ in found])
            return [(m, sim) for m, (_, sim) in zip(over, found, strict=True)]

    def top_by_key(
        self, namespace: str, max_tier: Tier, limit: int, kinds: Sequence[str] = ()
    ) -> list[Node]:
        with self._lock:
            held = self._held.get(namespace)
            if not held:
                return self.inner.top_by_key(namespace, max_tier, limit, kinds)
            # A held change can lift a memory past at most len(held) others: ask for that
            # many more, and add the held ones themselves, with their held keys.
            found = self._over_nodes(
                namespace,
                {
                    n.id: n
                    for n in self.inner.top_by_key(namespace, max_tier, limit + len(held), kinds)
                },
            )
            for i, n in self._over_nodes(
                namespace, self.inner.get_nodes(namespace, list(held))
            ).items():
                if n.tier <= max_tier:
                    found[i] = n
            chosen = [n for n in found.values() if not kinds or n.kind in kinds]
            chosen.sort(key=lambda n: (-n.key, n.id))
            return chosen[:limit]

    def review_queue(self, namespace: str, limit: int) -> list[Node]:
        with self._lock:
            nodes = self.inner.review_queue(namespace, limit)
            over = self._over_nodes(namespace, {n.id: n for n in nodes})
            return [over[n.id] for n in nodes]

    def namespaces(self) -> list[str]:
        return self.inner.namespaces()

    def counts(self, namespace: str) -> Counts:
        return self.inner.counts(namespace)  # reinforcement changes no tier or count

    def audit_log(
        self,
        namespace: str,
        limit: int,
        node_id: str | None = None,
        action: str | None = None,
        after_seq: int | None = None,
    ) -> list[AuditEntry]:
        return self.inner.audit_log(namespace, limit, node_id, action, after_seq)

    def last_audit_seq(self, namespace: str) -> int:
        return self.inner.last_audit_seq(namespace)

    def vectors_of(self, namespace: str, ids: Sequence[str]) -> dict[str, Any]:
        return self.inner.vectors_of(namespace, ids)

    def without_vectors(
        self, namespace: str, after: str = "", limit: int = 256
    ) -> list[tuple[str, str]]:
        return self.inner.without_vectors(namespace, after, limit)

    def vector_count(self, namespace: str) -> int:
        return self.inner.vector_count(namespace)

    def ensure_vectors(self, dim: int) -> None:
        self.inner.ensure_vectors(dim)  # outside transactions (schema); touches no memory

    # -- whole-namespace reads and passes: what is held is written first --------------------------
    def scan_nodes(self, namespace: str, batch: int = 5000) -> Iterator[list[Node]]:
        self.flush()
        return self.inner.scan_nodes(namespace, batch)

    def scan_edges(self, namespace: str, batch: int = 5000) -> Iterator[list[Edge]]:
        return self.inner.scan_edges(namespace, batch)

    def reference_key(self, namespace: str, quantile: float) -> tuple[float, int]:
        self.flush()
        return self.inner.reference_key(namespace, quantile)

    def tier_moves(
        self,
        namespace: str,
        reference: float,
        hot_ratio: float,
        warm_ratio: float,
        cold_ratio: float,
    ) -> list[TierMove]:
        self.flush()
        return self.inner.tier_moves(namespace, reference, hot_ratio, warm_ratio, cold_ratio)

    # Defined on GraphStore (as defaults), so __getattr__ would never pass these on: without
    # them a grouped Brain would take the default per-row paths, not the backend's own.
    def tier_move_columns(
        self,
        namespace: str,
        reference: float,
        hot_ratio: float,
        warm_ratio: float,
        cold_ratio: float,
    ) -> TierMoveColumns:
        self.flush()
        return self.inner.tier_move_columns(namespace, reference, hot_ratio, warm_ratio, cold_ratio)

    def set_tiers(
        self,
        namespace: str,
        moves: TierMoveColumns,
        review_reasons: Mapping[str, str],
        queued_at: datetime,
    ) -> None:
        with self._writing():
            self.inner.set_tiers(namespace, moves, review_reasons, queued_at)

    # -- writes --------------------------------------------------------------------------------
    def adjust(self, namespace: str, changes: Mapping[str, Adjustment]) -> None:
        with self._lock:
            if (
                self._grouping
                and self._sent is None
                and not any(a.push_delta for a in changes.values())
            ):
                self._hold(namespace, changes)
                return
            with self._writing():
                self.inner.adjust(namespace, changes)

    def upsert_nodes(self, nodes: Sequence[Node]) -> None:
        with self._writing():
            self.inner.upsert_nodes(nodes)

    def insert_nodes(self, nodes: Sequence[Node]) -> None:
        with self._writing():
            self.inner.insert_nodes(nodes)

    def update_nodes(self, namespace: str, changes: Mapping[str, Mapping[str, Any]]) -> None:
        with self._writing():
            self.inner.update_nodes(namespace, changes)

    def write_event(
        self,
        namespace: str,
        *,
        new_nodes: Sequence[Node] = (),
        changes: Mapping[str, Adjustment] | None = None,
        new_edges: Sequence[Edge] = (),
        final: bool = False,
    ) -> None:
        with self._writing():
            self.inner.write_event(
                namespace, new_nodes=new_nodes, changes=changes, new_edges=new_edges, final=final
            )

    def delete_nodes(self, namespace: str, ids: Sequence[str]) -> None:
        with self._writing():
            self.inner.delete_nodes(namespace, ids)

    def bulk_insert(
        self, nodes: Mapping[str, Sequence[Any]], edges: Mapping[str, Sequence[Any]]
    ) -> None:
        with self._writing():
            self.inner.bulk_insert(nodes, edges)

    def upsert_edges(self, edges: Sequence[Edge]) -> None:
        with self._writing():
            self.inner.upsert_edges(edges)

    def insert_edges(self, edges: Sequence[Edge]) -> None:
        with self._writing():
            self.inner.insert_edges(edges)

    def put_vectors(
        self, namespace: str, ids: Sequence[str], vectors: Any, *, new: bool = False
    ) -> None:
        with self._writing():
            self.inner.put_vectors(namespace, ids, vectors, new=new)

    def delete_vectors(self, namespace: str, ids: Sequence[str]) -> None:
        with self._writing():
            self.inner.delete_vectors(namespace, ids)

    def drop_vectors(self) -> None:
        self.flush()
        self.inner.drop_vectors()

    def index_vectors(self, namespace: str, *, limit: int | None = None, **kw: Any) -> int:
        # Defined on GraphStore (a no-op there), so __getattr__ would never pass it on: a
        # grouped Brain's maintain would leave Kùzu's vector tail unindexed for ever.
        self.flush()
        return self.inner.index_vectors(namespace, limit=limit, **kw)

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
        self.flush()
        return self.inner.recompute_keys(
            namespace, epoch_us, half_life_us, read_bonus, spread, spreading=spreading
        )

    def scale_keys(self, factor: float) -> None:
        with self._writing():
            self.inner.scale_keys(factor)

    def append_audit(self, entries: Sequence[AuditEntry]) -> None:
        with self._writing():
            self.inner.append_audit(entries)

    def append_audit_columns(
        self, namespace: str, first_seq: int, at: datetime, columns: Mapping[str, Sequence[Any]]
    ) -> None:
        with self._writing():
            self.inner.append_audit_columns(namespace, first_seq, at, columns)
