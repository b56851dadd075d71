"""The Neo4j backend, one module per concern (needs the ``neo4j`` extra).

* ``store``: :class:`Neo4jStore` itself, nodes, edges, scans and the audit log.
* ``session``: the driver, sessions, transactions, error translation, schema and settings.
* ``search``: links, incident edges, full-text recall, rankings.
* ``keys``: the scoring passes run on the server (keys, PageRank, rebases, tier moves).
* ``vectors``: ``MemoryVector`` nodes and the native vector index.
* ``queries``: the schema, Cypher fragments and row conversions.
"""

from __future__ import annotations

from .queries import (
    DEFAULT_URI,
    PAGERANK_DAMPING,
    SCHEMA_VERSION,
    SPREADINGS,
    TEXT_INDEX,
    URI_SCHEMES,
    lucene_query,
)
from .store import Neo4jStore

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
