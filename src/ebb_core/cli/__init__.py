"""``ebb``: the command line, a thin shell over :class:`~ebb_core.engine.Brain`.

Every command prints a readable table by default and JSON with ``--json``. Errors print one line
naming what went wrong and what to do, and exit non-zero: never a traceback (set ``EBB_DEBUG=1``
to see one).

The group and its options are in :mod:`.app`, what every command shares in :mod:`.base`, and the
commands by concern: :mod:`.memories` (writes), :mod:`.reading`, :mod:`.upkeep` (maintain,
review, audit), :mod:`.transfer` (export, import, embed, ingest) and :mod:`.storage` (doctor,
repair). ``ebb mcp`` and ``ebb ui`` live with their servers and are imported only when they run.
"""

from __future__ import annotations

# Importing the command modules registers their commands on `main`.
from . import memories, reading, storage, transfer, upkeep
from .app import main
from .base import (
    EXIT_ERROR,
    EXIT_FULL,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_LOCKED,
    EXIT_NO_STORE,
    EXIT_STORAGE,
    Ctx,
    emit_json,
    handle_errors,
    json_option,
    pass_ctx,
    store_options,
)

__all__ = [
    "EXIT_ERROR",
    "EXIT_FULL",
    "EXIT_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_LOCKED",
    "EXIT_NO_STORE",
    "EXIT_STORAGE",
    "Ctx",
    "emit_json",
    "handle_errors",
    "json_option",
    "main",
    "memories",
    "pass_ctx",
    "reading",
    "storage",
    "store_options",
    "transfer",
    "upkeep",
]
