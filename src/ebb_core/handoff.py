"""Asking a process that holds the embedded store to let go of it.

Embedded Kùzu lets one process at a time open a store file. ``ebb mcp`` keeps its store open
between calls (that is what makes a call cost about what the call itself costs), so a person's
``ebb review`` / ``ebb approve`` has to ask it to let go:

- whoever wants the store and finds it held (``open_store(..., wait=...)``, so every ``ebb``
  command and ``Brain.open(wait=...)``) writes its pid to ``<store>.ebb-wanted`` and keeps
  retrying; once it has the store open it removes the file (only if the file still names it,
  so a second waiter's request stays);
- a holder that honours requests (``ebb mcp``) checks for the file before and after each call
  and every fraction of a second while idle; when a live process other than itself wants the
  store, it closes it at once (finishing the call in flight first) and, before opening again,
  gives the waiter up to its own wait to get in.

A request whose process is gone, or older than :data:`STALE_AFTER` seconds, is ignored, so a
killed command cannot stall a server. Nothing else depends on the file: a holder that does not
look (any other program) is simply waited for until it closes the store.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

__all__ = ["STALE_AFTER", "RequestFile", "request_path"]

SUFFIX = ".ebb-wanted"
STALE_AFTER = 120.0
"""Seconds after which a request is ignored (its writer gave up or died without removing it)."""


def request_path(store_path: str | os.PathLike[str]) -> Path | None:
    """Where requests for the store at ``store_path`` go (``None`` for an in-memory store)."""
    text = os.fspath(store_path)
    if not text or text == ":memory:":
        return None
    # Next to the file itself, however it is named (relative path, symlink), so that every
    # process that opens this store finds the same request.
    return Path(os.path.realpath(text) + SUFFIX)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    if os.name == "nt":  # os.kill would end the process there: rely on STALE_AFTER alone
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


class RequestFile:
    """One store's request file: post, withdraw, and check for another process's request."""

    def __init__(self, store_path: str | os.PathLike[str]) -> None:
        self.path = request_path(store_path)
        self.pid = os.getpid()

    def post(self) -> None:
        """Ask the holder to let go (keeps an existing request from another waiter)."""
        if self.path is None or self.wanted_by_other():
            return
        with contextlib.suppress(OSError):  # a read-only folder: the holder's idle release stays
            tmp = self.path.with_name(f"{self.path.name}.{self.pid}")
            tmp.write_text(str(self.pid))
            os.replace(tmp, self.path)

    def withdraw(self) -> None:
        """Remove the request if it is this process's."""
        if self.path is not None and self._owner() == self.pid:
            with contextlib.suppress(OSError):
                self.path.unlink()

    def wanted_by_other(self) -> bool:
        """Whether a live process other than this one wants the store now."""
        if self.path is None:
            return False
        try:
            age = time.time() - self.path.stat().st_mtime
        except OSError:
            return False
        owner = self._owner()
        if owner is None or owner == self.pid:
            return False
        return age <= STALE_AFTER and _alive(owner)

    def _owner(self) -> int | None:
        assert self.path is not None
        try:
            return int(self.path.read_text().strip() or "0")
        except (OSError, ValueError):
            return None
