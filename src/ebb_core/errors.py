"""Ebb's exceptions: each says what happened, to which id or path, and what to do."""

from __future__ import annotations


class EbbError(Exception):
    """Base class of every error Ebb raises on purpose."""


class NotFound(EbbError, KeyError):
    """A memory (or edge) with the given id does not exist in this namespace."""

    def __init__(self, message: str, *, id: str | None = None) -> None:
        super().__init__(message)
        self.id = id

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0])


class InvalidInput(EbbError, ValueError):
    """An argument is out of range or malformed; ``field`` names which one."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class StoreLocked(EbbError):
    """Another process holds the embedded store open for writing."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class BackendUnavailable(EbbError):
    """The configured backend cannot be reached or is not installed."""


class StorageError(EbbError):
    """The store's files could not be read or written (an I/O error, or damage Ebb cannot undo
    on its own). The message names the path and what to do (usually ``ebb doctor`` / ``ebb
    repair``); nothing acknowledged before it was lost. CLI exit code 4."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class StoreFull(StorageError):
    """A write could not be made because the disk (or the file-size limit) is full. The call
    that raised it stored nothing; the store opens again once there is room. CLI exit code 5."""


class NoStore(EbbError):
    """A command that only reads was pointed at a path where no store exists (it creates none).
    CLI exit code 6."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class ImportInterrupted(UserWarning):
    """A warning, not an error: a Neo4j store holds part of an import that did not finish
    (committed batch by batch); the message names its namespaces and how to remove it."""


class StoreRebuilt(UserWarning):
    """A warning, not an error: a store was rebuilt from its rows on open; the message names
    the kept original."""
