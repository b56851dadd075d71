"""Deprecated name for the Neo4j backend, which now lives in :mod:`ebb_core.neo4j`.

``from ebb_core.neo4j_store import Neo4jStore`` (the import the README gave before the backend
became a package) still works for one release, with a :class:`DeprecationWarning`; import from
:mod:`ebb_core.neo4j` instead.
"""

from __future__ import annotations

import warnings
from typing import Any

#: What the old module exported; each now comes from :mod:`ebb_core.neo4j`.
_MOVED = frozenset(
    {
        "DEFAULT_URI",
        "PAGERANK_DAMPING",
        "SCHEMA_VERSION",
        "SPREADINGS",
        "TEXT_INDEX",
        "URI_SCHEMES",
        "Neo4jStore",
        "lucene_query",
    }
)


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"ebb_core.neo4j_store is deprecated and goes in the next release: "
        f"use `from ebb_core.neo4j import {name}`",
        DeprecationWarning,
        stacklevel=2,
    )
    from . import neo4j

    return getattr(neo4j, name)
