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
