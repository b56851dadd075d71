"""How ``ebb mcp`` (and ``ebb ui``) reach the store: one ``Brain`` kept open between calls.

Embedded Kùzu lets one process at a time open a store file, so on Kùzu :class:`StoreAccess` lets
go of it after ``idle_release`` seconds without a call, and right after the current call whenever
another process asks for the store (:mod:`ebb_core.handoff`). It needs neither the MCP SDK nor
the CLI: :mod:`ebb_core.mcp_server` builds the server on top of it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .engine import DEFAULT_NAMESPACE, Brain
from .errors import EbbError, InvalidInput
from .grouping import DEFAULT_DELAY as DEFAULT_REINFORCEMENT_DELAY
from .grouping import validate_delay
from .handoff import RequestFile
from .validation import validate_namespace

__all__ = ["BUSY", "DEFAULT_IDLE_RELEASE", "DEFAULT_WAIT", "StoreAccess", "busy_message"]

DEFAULT_WAIT = 10.0
"""Seconds a tool call waits for the store while a person's ``ebb`` command holds it."""

DEFAULT_IDLE_RELEASE = 5.0
"""Seconds without a call after which ``ebb mcp`` lets go of the embedded store."""

WANTED_POLL = 0.25
"""Seconds between the idle watcher's looks for another process's request for the store
(each call looks too, before it runs). It looked every 50 ms: 20 wake-ups a second, 2.7-4.6 ms
of the server's CPU a second while it held the store, for a hand-over 0.2 s sooner at most."""

BUSY = "Nothing was changed; try again in a few seconds."
"""The end of the tool error a call gets when another process kept the store past its wait."""


def busy_message(where: str, wait: float) -> str:
    """The tool error for a store another process held for longer than ``wait`` seconds."""
    return (
        f"the memory store {where} is busy: another process holds it (a person's `ebb` "
        f"command, or another program on the same store) and did not let go within {wait:g} "
        f"s. {BUSY}"
    )


# -- reaching the store ------------------------------------------------------------------------


class StoreAccess:
    """How the server reaches the store: one ``Brain`` kept open between calls.

    Embedded Kùzu lets one process at a time open a store, so on Kùzu the server lets go of it
    (closes it; the next call opens it again):

    - right after a call, when another process has asked for the store (see
      :mod:`ebb_core.handoff`: every ``ebb`` command asks when it finds the store held), and
      then gives that process up to ``wait`` seconds to get in before opening again;
    - when no call came for ``idle_release`` seconds (``0``: after every call, as before);
    - after a call that failed unexpectedly (the next call starts from a fresh open).

    On other backends (``hold``, the default off Kùzu) the connection is kept for the server's
    lifetime. What recall reinforces is written grouped (``reinforcement_delay`` seconds at
    most later, at the next write, or when the store is let go of; see
    :mod:`ebb_core.grouping`). ``opener`` replaces ``Brain.open`` (tests pass one with a fixed
    clock). Calls within one server take turns.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        backend: str | None = None,
        namespace: str | None = None,
        wait: float = DEFAULT_WAIT,
        idle_release: float = DEFAULT_IDLE_RELEASE,
        hold: bool | None = None,
        opener: Callable[[], Brain] | None = None,
        reinforcement_delay: float = DEFAULT_REINFORCEMENT_DELAY,
    ) -> None:
        self.path = path
        self.reinforcement_delay = validate_delay(reinforcement_delay)
        self.backend = (backend or os.environ.get("EBB_BACKEND") or "kuzu").strip().lower()
        self.namespace = validate_namespace(
            namespace or os.environ.get("EBB_NAMESPACE") or DEFAULT_NAMESPACE
        )
        for name, value in (("wait", wait), ("idle_release", idle_release)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise InvalidInput(
                    f"{name} must be a number of seconds >= 0, got {value!r}", field=name
                )
        self.wait = float(wait)
        self.idle_release = float(idle_release)
        self.hold = self.backend != "kuzu" if hold is None else hold
        self._opener = opener
        # Reentrant: a call run on the event loop's thread takes it first (see ``claim``).
        self._lock = threading.RLock()
        self._held: Brain | None = None
        self._claimed = False  # a call on the event loop's thread holds `_lock` (see `claim`)
        self._last = 0.0
        self._watcher: threading.Thread | None = None
        self._closed = threading.Event()
        self._requests: RequestFile | None = None
        if self.backend == "kuzu":
            from .backends import DEFAULT_PATH

            where = self.path or os.environ.get("EBB_DB_PATH") or DEFAULT_PATH
            self._requests = RequestFile(where)
        self.opens = 0
        """How many times the store was opened (it stays open between calls)."""
        self.releases: dict[str, int] = {"asked": 0, "idle": 0, "error": 0}
        """How many times it was let go of, by reason."""

    @property
    def location(self) -> str:
        """Where the store is, for messages: the embedded store's path, or the backend."""
        if self.backend == "kuzu":
            from .backends import DEFAULT_PATH

            where = self.path or os.environ.get("EBB_DB_PATH") or DEFAULT_PATH
            return f"at {os.fspath(where)}"
        return f"on {self.backend}"

    @property
    def is_open(self) -> bool:
        return self._held is not None

    def _open(self, wait: float) -> Brain:
        if self._opener is not None:
            return self._opener()
        return Brain.open(
            self.path,
            backend=self.backend,
            namespace=self.namespace,
            wait=wait,
            reinforcement_delay=self.reinforcement_delay,
        )

    def _wanted(self) -> bool:
        return self._requests is not None and self._requests.wanted_by_other()

    def _open_when_free(self) -> Brain:
        deadline = time.monotonic() + self.wait
        while self._wanted() and time.monotonic() < deadline:
            time.sleep(0.02)  # another process asked for the store: let it in first
        brain = self._open(max(0.0, deadline - time.monotonic()))
        self.opens += 1
        return brain

    def _release(self, reason: str) -> None:
        brain = self._held
        if brain is not None:
            self.releases[reason] += 1
            try:
                brain.close()  # writes held reinforcement and checkpoints: the file is busy
            finally:
                # Not open until closed: one who sees `is_open` false may open the file at once
                # (in this process too, where a second Kùzu database on a closing file crashes).
                self._held = None

    def claim(self) -> bool:
        """Take the store for a call on this thread if that cannot wait: it is open, no other call
        (or release) has it, and no other process asked for it. Then :meth:`brain` does not wait
        either; :meth:`unclaim` after the call. ``False``: run the call where it may wait
        (always off the embedded store: a database server answers over the network)."""
        if self.backend != "kuzu" or self._held is None or not self._lock.acquire(blocking=False):
            return False
        if self._held is None or (not self.hold and self._wanted()):
            self._lock.release()
            return False
        self._claimed = True
        return True

    def unclaim(self) -> None:
        self._claimed = False
        self._lock.release()

    @contextmanager
    def brain(self) -> Iterator[Brain]:
        """The store for one call; calls within this process take turns."""
        with self._lock:
            # A claimed call (see `claim`) runs on the event loop: it uses the open store even
            # if a request came in since the claim, and leaves letting go (a close, which
            # checkpoints) to the watcher thread, so the loop never waits on the file.
            claimed = self._claimed
            if self._held is not None and not self.hold and not claimed and self._wanted():
                self._release("asked")
            if self._held is None:
                self._held = self._open_when_free()
            try:
                yield self._held
            except EbbError:
                raise
            except BaseException:
                if not self.hold:
                    self._release("error")
                raise
            finally:
                self._last = time.monotonic()
                if self._held is not None and not self.hold:
                    if self.idle_release <= 0:
                        self._release("idle")
                    elif not claimed and self._wanted():
                        self._release("asked")
                    else:
                        self._watch()

    def _watch(self) -> None:
        """Start the thread that lets go of an idle or wanted store (under ``_lock``)."""
        if self._watcher is not None and self._watcher.is_alive():
            return
        self._watcher = threading.Thread(target=self._watching, name="ebb-idle", daemon=True)
        self._watcher.start()

    def _watching(self) -> None:
        """When the store turns idle, and every :data:`WANTED_POLL` seconds: let go of it if it
        is idle or wanted. The lock is taken only to let go (checked again under it), so a call
        arriving on the event loop never finds it taken by a mere check and sent to a worker
        thread (:meth:`claim`)."""
        while not self._closed.wait(self._next_look()):
            if self._held is not None and not self._idle() and not self._wanted():
                continue
            if not self._lock.acquire(blocking=False):
                continue  # a call is in flight: it checks when it ends
            try:
                if self._held is None:
                    self._watcher = None
                    return
                if self._idle():
                    self._release("idle")
                elif self._wanted():
                    self._release("asked")
            finally:
                self._lock.release()

    def _next_look(self) -> float:
        """Seconds until the watcher looks again: when the store turns idle, or after
        :data:`WANTED_POLL` to see whether another process asked for it, whichever is first."""
        until_idle = self._last + self.idle_release - time.monotonic()
        return max(0.02, min(WANTED_POLL, until_idle))

    def _idle(self) -> bool:
        return time.monotonic() - self._last >= self.idle_release

    def check(self, wait: float | None = None) -> str:
        """Open the store once (creating it if needed) and say where it is.

        ``wait`` (default: the calls' wait) bounds how long another process may hold it.
        """
        saved = self.wait
        if wait is not None:
            self.wait = min(wait, saved)
        try:
            with self.brain() as brain:
                return brain.store.location
        finally:
            self.wait = saved

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            self._release("idle")
