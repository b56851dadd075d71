"""The one place the Kùzu engine is imported, so a fork with the same Python API can be dropped in.

Set ``EBB_KUZU_MODULE`` to the fork's module name (e.g. ``ladybug``) to try one. Kùzu 0.11.3 is
pinned because its wheel carries the full-text and vector extensions, which then load offline.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import Any

from ..errors import BackendUnavailable

MODULE_NAME = os.environ.get("EBB_KUZU_MODULE", "kuzu")


class _AsyncioOnUse(ModuleType):
    """What Kùzu's package is given for ``asyncio`` while it is imported: the real module,
    imported when an attribute is first asked for.

    ``import kuzu`` imports ``asyncio`` for its ``AsyncConnection``, which Ebb never uses:
    ~25-30 ms of a one-shot command's CPU (asyncio brings ssl, socket, subprocess...). Only
    Kùzu's own modules hold this stand-in; ``sys.modules`` has no ``asyncio`` afterwards, so
    every other ``import asyncio`` gets the real module, and an ``AsyncConnection`` reaches
    it through here on its first call. (``importlib.util.LazyLoader`` does not do: the
    import statement reads the module's ``__spec__``, which loads a lazy module at once.)"""

    def __getattr__(self, name: str) -> Any:
        if sys.modules.get("asyncio") is self:  # asked for during Kùzu's own import
            del sys.modules["asyncio"]
        return getattr(importlib.import_module("asyncio"), name)


def _import(name: str) -> ModuleType:
    """``import name``, deferring ``asyncio`` when nothing has imported it yet."""
    if "asyncio" in sys.modules or name in sys.modules:
        return importlib.import_module(name)
    stand_in = _AsyncioOnUse("asyncio")
    sys.modules["asyncio"] = stand_in
    try:
        return importlib.import_module(name)
    finally:
        if sys.modules.get("asyncio") is stand_in:
            del sys.modules["asyncio"]


def load() -> ModuleType:
    try:
        return _import(MODULE_NAME)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise BackendUnavailable(
            f"the embedded engine module {MODULE_NAME!r} is not installed: "
            "pip install 'kuzu==0.11.3' (or unset EBB_KUZU_MODULE)"
        ) from exc
