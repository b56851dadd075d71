"""Compatibility name for the Neo4j backend, which now lives in :mod:`ebb_core.neo4j`."""

from __future__ import annotations

from .neo4j import (
    DEFAULT_URI,
    PAGERANK_DAMPING,
    SCHEMA_VERSION,
    SPREADINGS,
    TEXT_INDEX,
    URI_SCHEMES,
    Neo4jStore,
    lucene_query,
)

__all__ = [
    "DEFAULT_URI",
    "PAGERANK_DAMPING",
    "SCHEMA_VERSION",
    "SPREADINGS",
    "TEXT_INDEX",
    "URI_SCHEMES",
    "Neo4jStore",
    "lucene_query",
]
