"""What Ebb is doing, through the standard :mod:`logging` module (logger ``"ebb"``).

Each public :class:`~ebb_core.engine.Brain` call is logged at DEBUG when it returns or fails:
the call and its arguments (shortened), the namespace, the store, how long it took and what it
returned. Nothing is printed by default (a library adds no handler); ``EBB_LOG=debug`` (or
``info``, ``warning``…) sends the ``ebb`` logger to standard error at that level, for the CLI,
the MCP server and any program that imports Ebb. An application that configures logging itself
just sets the level of ``logging.getLogger("ebb")``.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Sized
from typing import Any, TypeVar

logger = logging.getLogger("ebb")

T = TypeVar("T")
_SKIP = {"open", "scoped", "close"}  # no store work of their own


class _Depth(threading.local):
    n = 0  # 1 while a logged call runs on this thread


_depth = _Depth()


def configure_from_env() -> None:
    """Honour ``EBB_LOG`` (a level name: debug, info, warning, error) once, at import."""
    value = os.environ.get("EBB_LOG", "").strip()
    if not value:
        return
    level = logging.getLevelName(value.upper())
    if not isinstance(level, int):
        level = logging.DEBUG  # EBB_LOG=1 / true / yes: the useful level
    if not any(getattr(h, "_ebb", False) for h in logger.handlers):
        handler = logging.StreamHandler()  # standard error, looked up when each line is written
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        handler._ebb = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(level)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _result(value: Any) -> str:
    if value is None:
        return "done"
    if isinstance(value, (list, tuple, dict)) and isinstance(value, Sized):
        return f"{len(value)} item{'s' if len(value) != 1 else ''}"
    ident = getattr(value, "id", None)
    if isinstance(ident, str):
        return ident
    return type(value).__name__


def _logged(name: str, fn: Callable[..., T]) -> Callable[..., T]:
    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> T:
        # Only the outermost call is logged (public methods call each other).
        if not logger.isEnabledFor(logging.DEBUG) or _depth.n:
            return fn(self, *args, **kwargs)
        _depth.n = 1
        start = time.perf_counter()
        try:
            result = fn(self, *args, **kwargs)
        except BaseException as exc:
            _depth.n = 0
            logger.debug(
                "%s(%s) ns=%s store=%s:%s %.1f ms -> %s: %s",
                name,
                _arguments(args, kwargs),
                self.namespace,
                self.store.backend,
                self.store.location,
                (time.perf_counter() - start) * 1000,
                type(exc).__name__,
                _short(str(exc), 200),
            )
            raise
        _depth.n = 0
        logger.debug(
            "%s(%s) ns=%s store=%s:%s %.1f ms -> %s",
            name,
            _arguments(args, kwargs),
            self.namespace,
            self.store.backend,
            self.store.location,
            (time.perf_counter() - start) * 1000,
            _result(result),
        )
        return result

    return wrapper


def _arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    parts = [_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def instrument(cls: type) -> None:
    """Wrap every public method of ``cls`` (the Brain) so that its calls are logged, those it
    inherits from its mixins (``transfer.TransferMixin``, ...) included, on ``cls`` itself."""
    members: dict[str, Any] = {}
    for klass in reversed(cls.__mro__[:-1]):  # base classes first, ``object`` left out
        members.update(vars(klass))
    for name, member in members.items():
        if name.startswith("_") or name in _SKIP or not callable(member):
            continue
        if isinstance(member, (classmethod, staticmethod, property)):
            continue
        setattr(cls, name, _logged(name, member))
