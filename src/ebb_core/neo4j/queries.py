"""The Neo4j store's schema, Cypher fragments and row conversions (no server access here)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

from ..clock import from_us, to_us
from ..model import AuditEntry, Edge, Tier
from ..records import EDGE_PROPERTIES, NODE_PROPERTIES

T = TypeVar("T")

SCHEMA_VERSION = "1"
DEFAULT_URI = "bolt://localhost:7687"
TEXT_INDEX = "ebb_memory_text"
SPREADINGS = ("default", "pagerank")
URI_SCHEMES = ("bolt", "neo4j", "bolt+s", "bolt+ssc", "neo4j+s", "neo4j+ssc")
#: PageRank damping for ``spreading="pagerank"`` (the usual 0.85).
PAGERANK_DAMPING = 0.85
#: Every memory of namespace ``$ns``: ``n.id IS NOT NULL`` (always true) lets the planner seek
#: the ``(ns, id)`` uniqueness index instead of scanning every memory, as ``n.ns = $ns`` alone
#: plans (EXPLAIN on Neo4j 5.26: NodeByLabelScan without it, NodeUniqueIndexSeek with it).
IN_NS = "n.ns = $ns AND n.id IS NOT NULL"

_SCHEMA = (
    "CREATE CONSTRAINT ebb_memory_key IF NOT EXISTS FOR (n:Memory) REQUIRE (n.ns, n.id) IS UNIQUE",
    "CREATE CONSTRAINT ebb_audit_key IF NOT EXISTS FOR (a:Audit) REQUIRE (a.ns, a.seq) IS UNIQUE",
    "CREATE CONSTRAINT ebb_meta_key IF NOT EXISTS FOR (m:Meta) REQUIRE m.key IS UNIQUE",
    "CREATE INDEX ebb_memory_rank IF NOT EXISTS FOR (n:Memory) ON (n.ns, n.key)",
    "CREATE INDEX ebb_memory_tier IF NOT EXISTS FOR (n:Memory) ON (n.ns, n.tier)",
    # Supersessions are rare among a namespace's links: maintain finds them by this index
    # instead of expanding every link of every memory (see search.superseded_by).
    "CREATE INDEX ebb_link_kind IF NOT EXISTS FOR ()-[e:LINK]-() ON (e.kind)",
    f"CREATE FULLTEXT INDEX {TEXT_INDEX} IF NOT EXISTS FOR (n:Memory) ON EACH [n.text] "
    "OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}",
)

#: Memory properties in the order ``records.node_from_row`` reads them.
_NODE_FIELDS = NODE_PROPERTIES
_EDGE_FIELDS = EDGE_PROPERTIES
_AUDIT_FIELDS = (
    "seq",
    "ns",
    "at_us",
    "action",
    "node_id",
    "from_tier",
    "to_tier",
    "actor",
    "reason",
    "payload",
)


def _projection(var: str, fields: Sequence[str]) -> str:
    return var + " {" + ", ".join(f".{f}" for f in fields) + "}"


_NODE = _projection("n", _NODE_FIELDS)
_OTHER = _projection("m", _NODE_FIELDS)
_EDGE = _projection("e", _EDGE_FIELDS)
_KINDS = "(size($kinds) = 0 OR n.kind IN $kinds)"
# A term of a key: w · 2^((t − epoch)/h) (see ``scoring.term_key``).
_TERM = "{w} * 2.0 ^ (toFloat({t} - $epoch) / $h)"
# The decay of something last reinforced at {t}, at $now: 2^(−age/h), a negative age (clock
# skew) counted as zero (see ``scoring.decay``).
_DECAY = "2.0 ^ (-toFloat(CASE WHEN {t} < $now THEN $now - {t} ELSE 0 END) / $h)"

#: Nodes whose tier differs from what ``key / $mx`` says (see ``GraphStore.tier_moves``):
#: pinned belong in hot, frozen never leave frozen here, otherwise ``scoring.tier_for``'s cuts.
#: (Kùzu runs the same rule in numpy, ``scoring.tiers_for``; the store contract suite,
#: :mod:`ebb_core.testing`, holds the backends to the same moves.)
#: Parameters: ``$ns, $mx, $hot, $warm, $cold``. Returns ``id, tier, t, r`` by id.
TIER_MOVES = (
    "MATCH (n:Memory) WHERE n.ns = $ns AND n.tier < 4 "
    "WITH n, CASE WHEN $mx <= 0.0 THEN 1.0 ELSE n.key / $mx END AS r "
    "WITH n, r, CASE WHEN n.pinned OR r >= $hot THEN 1 WHEN r >= $warm THEN 2 "
    "WHEN r >= $cold THEN 3 ELSE 4 END AS t "
    "WHERE t <> n.tier RETURN n.id AS id, n.tier AS tier, t, r ORDER BY n.id"
)

_LUCENE_SPECIAL = re.compile(r'([+\-!(){}\[\]^"~*?:\\/&|])')


def lucene_query(text: str) -> str:
    """``text`` as a Lucene query matching any of its words, with every operator escaped.

    >>> lucene_query('acme (pricing) AND "seats"')
    'acme \\\\(pricing\\\\) and \\\\"seats\\\\"'
    """
    terms = []
    for word in text.split():
        escaped = _LUCENE_SPECIAL.sub(r"\\\1", word)
        # AND/OR/NOT are operators only in upper case; the analyzer lowercases anyway.
        terms.append(escaped.lower() if escaped in ("AND", "OR", "NOT") else escaped)
    return " ".join(terms)


# -- conversions -------------------------------------------------------------------------------
def _to_edge(ns: str, src: str, dst: str, e: Mapping[str, Any]) -> Edge:
    return Edge(
        namespace=ns,
        src=src,
        dst=dst,
        kind=e["kind"],
        weight=float(e["weight"]),
        created_at=from_us(e["created_us"]),
        reinforced_at=from_us(e["reinforced_us"]),
        props=json.loads(e["props"]) if e["props"] else {},
    )


def _edge_row(e: Edge) -> dict[str, Any]:
    return {
        "src": e.src,
        "dst": e.dst,
        "kind": e.kind,
        "weight": float(e.weight),
        "created_us": to_us(e.created_at),
        "reinforced_us": to_us(e.reinforced_at),
        "props": json.dumps(e.props, sort_keys=True),
    }


def _pylist(column: Any) -> list[Any]:
    """A bulk-import column (list or Arrow array) as a plain list."""
    if isinstance(column, list):
        return column
    if hasattr(column, "to_pylist"):
        result: list[Any] = column.to_pylist()
        return result
    return list(column)


def _batches(rows: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for lo in range(0, len(rows), size):
        yield rows[lo : lo + size]


def _to_audit(a: Mapping[str, Any]) -> AuditEntry:
    return AuditEntry(
        seq=int(a["seq"]),
        namespace=a["ns"],
        at=from_us(a["at_us"]),
        action=a["action"],
        node_id=a["node_id"],
        from_tier=None if a["from_tier"] is None else Tier(int(a["from_tier"])),
        to_tier=None if a["to_tier"] is None else Tier(int(a["to_tier"])),
        actor=a["actor"],
        reason=a["reason"] or "",
        payload=json.loads(a["payload"]) if a["payload"] else None,
    )


def _by_namespace(edges: Sequence[Edge]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for e in edges:
        out.setdefault(e.namespace, []).append(_edge_row(e))
    return out


def _schema_name(ddl: str) -> str:
    """The name in ``CREATE [FULLTEXT] INDEX|CONSTRAINT <name> IF NOT EXISTS …``."""
    words = ddl.split()
    return words[words.index("IF") - 1]


#: ``Meta`` keys of imports being committed batch by batch (``import:<hex>``; see ``bulk``).
IMPORT_MARKER = "import:"
