"""The holding machinery of :class:`~ebb_core.grouping.GroupedStore`: what it holds, when it writes
it, its lifecycle and metadata (see :mod:`ebb_core.grouping` for what grouping does).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Concatenate, Generic, Literal, ParamSpec, TypeVar, overload

from .errors import InvalidInput
from .model import Node
from .store import Adjustment, GraphStore

log = logging.getLogger("ebb.grouping")

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_DELAY = 1.0
"""Seconds a grouped reinforcement may wait before it is written (``ebb mcp``'s default)."""


MAX_DELAY = 3600.0


class DelayedCall:
    """Runs ``action`` ``delay`` seconds after :meth:`schedule` on one thread kept for it.

    A ``threading.Timer`` per delay starts a thread each time, and ``Thread.start`` waits until
    the new thread has run: on a loaded machine a scheduler slice or more (measured in ``ebb mcp``
    at load 5-7: 28 ms a start, paid by the recall that held the first reinforcement, on the
    server's event loop, about once a second of recalls). Here the thread is started at the first
    :meth:`schedule` and then waits on a condition; scheduling again only notifies it (the
    thread ends after :attr:`IDLE_EXIT` seconds with nothing scheduled, or at :meth:`stop`).
    """

    IDLE_EXIT = 60.0
    """Seconds without a schedule after which the thread ends."""

    def __init__(self, delay: float, action: Callable[[], None], name: str) -> None:
        self.delay = delay
        self._action = action
        self._name = name
        self._cond = threading.Condition(threading.Lock())
        self._due: float | None = None
        self._stopped = False
        self._thread: threading.Thread | None = None

    @property
    def pending(self) -> bool:
        """Whether a call is scheduled and has not started."""
        return self._due is not None

    def schedule(self) -> None:
        """Run the action ``delay`` seconds from now, unless a run is pending already."""
        with self._cond:
            if self._stopped or self._due is not None:
                return
            self._due = time.monotonic() + self.delay
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            else:
                self._cond.notify()

    def stop(self) -> None:
        """Cancel what is pending and let the thread end (a run under way finishes)."""
        with self._cond:
            self._stopped = True
            self._due = None
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped:
                    if self._due is None:
                        # Nothing asked for a while: end (the next schedule starts a thread),
                        # so a store never closed does not keep one forever.
                        if not self._cond.wait(self.IDLE_EXIT) and self._due is None:
                            self._thread = None
                            return
                        continue
                    left = self._due - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                if self._stopped:
                    self._thread = None
                    return
                self._due = None
            try:
                self._action()
            except Exception:  # the action's own failures are its to report; keep serving
                log.exception("%s failed", self._name)


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


class Forward(Generic[P, R]):
    """A store method a grouped store passes on to its ``inner`` store, unchanged.

    ``Forward(GraphStore.name, before=...)`` as the class attribute ``name``: mypy sees the
    contract method's own signature on the grouped store (so a call with wrong arguments, or a
    method the contract lacks, is an error there), and every contract method stays defined on
    the class (``__getattr__`` only sees what the class lacks, so a method with a default on
    ``GraphStore`` would otherwise run that default instead of the backend's). ``before``:
    ``"nothing"`` for a read that what is held cannot change; ``"flush"`` to write what is
    held first, in its own transaction (whole-namespace reads and passes); ``"write"`` for a
    write, which takes the held changes into its transaction (:meth:`GroupedBase._writing`).
    """

    def __init__(
        self,
        method: Callable[Concatenate[Any, P], R],
        *,
        before: Literal["nothing", "flush", "write"] = "nothing",
    ) -> None:
        self.name = method.__name__
        self.before = before
        self.__doc__ = method.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        if name != self.name:
            raise TypeError(f"{owner.__name__}.{name} forwards {self.name}: use one name")

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Forward[P, R]: ...
    @overload
    def __get__(self, obj: GroupedBase, owner: type | None = None) -> Callable[P, R]: ...
    def __get__(
        self, obj: GroupedBase | None, owner: type | None = None
    ) -> Forward[P, R] | Callable[P, R]:
        if obj is None:
            return self
        target: Callable[P, R] = getattr(obj.inner, self.name)
        if self.before == "nothing":
            return target
        store = obj

        def flushed(*args: P.args, **kwargs: P.kwargs) -> R:
            store.flush()
            return target(*args, **kwargs)

        def written(*args: P.args, **kwargs: P.kwargs) -> R:
            with store._writing():
                return target(*args, **kwargs)

        return flushed if self.before == "flush" else written


class GroupedBase(GraphStore):
    """``inner`` with recall's reinforcement grouped (see :mod:`ebb_core.grouping`): the holding.

    Writes made inside :meth:`grouping` (the engine's reinforcement of what it returned) are
    held; every other write first writes what is held, in its own transaction. ``lock`` is the
    engine's (the timer's write takes it like any call). Attributes this class does not define
    are the inner store's.
    """

    _rollback_said: bool | None = None

    @property
    def bulk_rollback_safe(self) -> bool:
        """The backend's, read when asked: a Kùzu store says it per bulk load (its size)."""
        said = self._rollback_said
        return self.inner.bulk_rollback_safe if said is None else said

    @bulk_rollback_safe.setter
    def bulk_rollback_safe(self, value: bool) -> None:  # a caller's (or a test's) own say
        self._rollback_said = value

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
        self._timer = DelayedCall(self.delay, self._on_timer, "ebb-reinforcement")
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
        if not self._closed:
            self._timer.schedule()

    def _on_timer(self) -> None:
        with self._lock:
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
            self._timer.stop()
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
