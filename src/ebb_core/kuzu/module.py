"""The one place the Kùzu engine is imported, so a fork with the same Python API can be dropped in.

Set ``EBB_KUZU_MODULE`` to the fork's module name (e.g. ``ladybug``) to try one. Kùzu 0.11.3 is
pinned because its wheel carries the full-text and vector extensions, which then load offline.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from ..errors import BackendUnavailable

MODULE_NAME = os.environ.get("EBB_KUZU_MODULE", "kuzu")


def load() -> ModuleType:
    try:
        return importlib.import_module(MODULE_NAME)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise BackendUnavailable(
            f"the embedded engine module {MODULE_NAME!r} is not installed: "
            "pip install 'kuzu==0.11.3' (or unset EBB_KUZU_MODULE)"
        ) from exc
