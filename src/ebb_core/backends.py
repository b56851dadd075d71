"""Choosing and opening a backend from arguments or the environment."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from .errors import BackendUnavailable, InvalidInput, StoreLocked
from .store import GraphStore

BACKENDS = ("kuzu", "neo4j")
DEFAULT_PATH = "./ebb_db"


def open_store(
    backend: str | None = None,
    path: str | os.PathLike[str] | None = None,
    *,
    read_only: bool = False,
    only_reads: bool = False,
    wait: float = 0.0,
    create: bool = True,
    on_wait: Callable[[str], None] | None = None,
) -> GraphStore:
    """Open the store named by ``backend`` (default ``EBB_BACKEND``, else ``kuzu``).

    Kùzu reads ``path`` (default ``EBB_DB_PATH``, else ``./ebb_db``); Neo4j reads ``NEO4J_URI``,
    ``NEO4J_USER``, ``NEO4J_PASSWORD`` and ``NEO4J_DATABASE``. ``wait`` seconds are spent
    retrying while another process holds the embedded store open; meanwhile a request to let go
    is posted for the holder (see :mod:`ebb_core.handoff`: a running ``ebb mcp`` lets go after
    its current call) and ``on_wait`` is called once with a line saying what is waited for.
    ``create=False``: an embedded store that does not exist raises
    :class:`~ebb_core.errors.NoStore` (none is made). ``only_reads``: the caller only reads,
    so a clean embedded store is opened read-only and nothing is written to disk (see
    :class:`~ebb_core.kuzu_store.KuzuStore`); Neo4j ignores it.
    """
    name = (backend or os.environ.get("EBB_BACKEND") or "kuzu").strip().lower()
    if name == "kuzu":
        from .kuzu_store import KuzuStore

        where = path or os.environ.get("EBB_DB_PATH") or DEFAULT_PATH
        deadline = time.monotonic() + max(wait, 0.0)
        request = None
        try:
            while True:
                try:
                    return KuzuStore(
                        Path(where), read_only=read_only, create=create, only_reads=only_reads
                    )
                except StoreLocked:
                    if time.monotonic() >= deadline:
                        raise
                    if request is None:
                        from .handoff import RequestFile

                        request = RequestFile(where)
                        if on_wait is not None:
                            on_wait(
                                f"waiting up to {wait:g} s for the store at {where}: another "
                                "process holds it (a running `ebb mcp` lets go after its "
                                "current call; anything else when it closes the store)"
                            )
                    request.post()
                    time.sleep(0.05)
        finally:
            if request is not None:
                request.withdraw()
    if name == "neo4j":
        try:
            from .neo4j import Neo4jStore
        except ImportError as exc:
            raise BackendUnavailable(
                f"the Neo4j backend needs its extra: pip install 'ebb-memory[neo4j]' ({exc})"
            ) from None
        store: GraphStore = Neo4jStore.from_env()
        return store
    raise InvalidInput(
        f"unknown backend {name!r} (from EBB_BACKEND or --backend): choose one of {BACKENDS}",
        field="backend",
    )
