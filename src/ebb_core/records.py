"""Fast, validated conversion between export records (JSON Lines) and columns for bulk loads.

Imports of hundreds of thousands of records skip per-record model objects: each line is checked
field by field and appended to plain columns that a store loads in one go (Arrow in Kùzu,
``UNWIND`` batches in Neo4j).
"""

from __future__ import annotations

import json
import mmap
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .clock import from_us, to_us
from .model import Node, Tier
from .validation import (
    CONTROL_PATTERN,
    KIND_PATTERN,
    MAX_ID_LEN,
    MAX_TEXT_LEN,
    MAX_WEIGHT,
    has_control_chars,
    id_problem,
    is_valid_kind,
    validate_weight,
)

#: Columns of :meth:`GraphStore.bulk_insert` node batches (times in µs, props as JSON text).
NODE_COLUMNS = (
    "namespace",
    "id",
    "kind",
    "text",
    "props",
    "created_us",
    "updated_us",
    "last_read_us",
    "pinned",
    "tier",
    "review_reason",
    "queued_us",
)
#: Stored link properties (both backends, in this order; times in µs, props as JSON text).
EDGE_PROPERTIES = ("kind", "weight", "created_us", "reinforced_us", "props")
#: Columns of :meth:`GraphStore.bulk_insert` edge batches: the link's ends, then its properties.
EDGE_COLUMNS = ("namespace", "src", "dst", *EDGE_PROPERTIES)

Columns = dict[str, Any]  # column name -> list or Arrow array


def empty(columns: tuple[str, ...]) -> Columns:
    return {c: [] for c in columns}


def _time(rec: dict[str, Any], key: str, optional: bool = False) -> int | None:
    value = rec.get(key)
    if value is None:
        if optional:
            return None
        raise ValueError(f"{key} is missing")
    if not isinstance(value, str):
        raise ValueError(f"{key} must be an ISO-8601 time")
    if value.endswith("Z"):  # Python 3.10 does not read "Z"
        value = value[:-1] + "+00:00"
    return to_us(datetime.fromisoformat(value))


def _str(rec: dict[str, Any], key: str, limit: int = MAX_ID_LEN) -> str:
    value = rec.get(key)
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise ValueError(f"{key} must be a non-empty string of at most {limit} characters")
    if limit == MAX_ID_LEN and has_control_chars(value):
        raise ValueError(f"{key} must not contain control characters")
    return value


def _props(rec: dict[str, Any]) -> str:
    props = rec.get("props")
    if not props:
        return "{}"
    if not isinstance(props, dict):
        raise ValueError("props must be an object")
    return json.dumps(props, sort_keys=True)


@dataclass(frozen=True)
class Defaults:
    """What a hand-written record may leave out (docs/cli.md, "The JSON Lines import format"):
    the namespace it goes into and the time it counts as written."""

    namespace: str
    now_us: int


def with_defaults(rec: dict[str, Any], defaults: Defaults | None, edge: bool = False) -> None:
    """Fill the fields a hand-written record may leave out, in place (only missing keys: an
    explicit ``null`` stays null)."""
    if defaults is None:
        return
    rec.setdefault("namespace", defaults.namespace)
    if edge:
        rec.setdefault("created_at", from_us(defaults.now_us).isoformat())
        rec.setdefault("reinforced_at", rec["created_at"])
        return
    rec.setdefault("kind", "note")
    rec.setdefault("created_at", from_us(defaults.now_us).isoformat())
    rec.setdefault("updated_at", rec["created_at"])
    rec.setdefault("last_read_at", rec["updated_at"])  # new knowledge counts as just read


def add_node(cols: Columns, rec: dict[str, Any], namespace: str | None) -> str:
    """Validate a node record and append it to ``cols``; returns its id."""
    kind = rec.get("kind")
    if not isinstance(kind, str) or not is_valid_kind(kind):
        raise ValueError(f"kind {kind!r} is not a valid kind")
    tier = rec.get("tier", 1)
    if isinstance(tier, bool) or tier not in (1, 2, 3, 4):
        raise ValueError(f"tier must be 1, 2, 3 or 4, got {tier!r}")
    pinned = rec.get("pinned", False)
    if not isinstance(pinned, bool):
        raise ValueError("pinned must be true or false")
    reason = rec.get("review_reason")
    if reason is not None and not isinstance(reason, str):
        raise ValueError("review_reason must be a string or null")
    node_id = _str(rec, "id")
    problem = id_problem(node_id)
    if problem:
        raise ValueError(problem)
    cols["namespace"].append(namespace or _str(rec, "namespace"))
    cols["id"].append(node_id)
    cols["kind"].append(kind)
    cols["text"].append(_str(rec, "text", MAX_TEXT_LEN))
    cols["props"].append(_props(rec))
    cols["created_us"].append(_time(rec, "created_at"))
    cols["updated_us"].append(_time(rec, "updated_at"))
    cols["last_read_us"].append(_time(rec, "last_read_at", optional=True))
    cols["pinned"].append(pinned)
    cols["tier"].append(tier)
    cols["review_reason"].append(reason)
    cols["queued_us"].append(_time(rec, "queued_at", optional=True))
    return node_id


def add_edge(cols: Columns, rec: dict[str, Any], namespace: str | None) -> tuple[str, str, str]:
    """Validate an edge record and append it to ``cols``; returns ``(namespace, src, dst)``."""
    kind = rec.get("kind", "related")
    if not isinstance(kind, str) or not is_valid_kind(kind):
        raise ValueError(f"kind {kind!r} is not a valid kind")
    weight = validate_weight(rec.get("weight", 1.0))
    ns = namespace or _str(rec, "namespace")
    src, dst = _str(rec, "src"), _str(rec, "dst")
    if src == dst:
        raise ValueError(f"edge from {src!r} to itself")
    cols["namespace"].append(ns)
    cols["src"].append(src)
    cols["dst"].append(dst)
    cols["kind"].append(kind)
    cols["weight"].append(float(weight))
    cols["created_us"].append(_time(rec, "created_at"))
    cols["reinforced_us"].append(_time(rec, "reinforced_at"))
    cols["props"].append(_props(rec))
    return ns, src, dst


# -- the fast path: the whole file through Arrow's JSON reader ------------------------------------
class SlowPath(Exception):
    """The file needs the per-line Python reader (rich props, odd layout, or an error to locate)."""


_CHUNK = 1 << 26


def _line_chunks(data: bytes | str | os.PathLike[str]) -> Iterator[memoryview]:
    """``data`` (bytes, or a file mapped into memory) in pieces of whole lines (~64 MB), none
    blank: views, not copies (reading the file in pieces and joining them took ~0.6 s of a
    100k-memory import's ~3 s parse). A view is released when the next one is asked for."""
    if isinstance(data, bytes):
        yield from _views(data)
        return
    with open(data, "rb") as fh:
        if not os.fstat(fh.fileno()).st_size:
            return
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield from _views(mm)
        finally:
            with suppress(BufferError):  # a view still held elsewhere: closed when collected
                mm.close()


def _views(buf: Any) -> Iterator[memoryview]:
    lo, size = 0, len(buf)
    whole = memoryview(buf)
    try:
        while lo < size:
            hi = size if size - lo <= _CHUNK else buf.find(b"\n", lo + _CHUNK) + 1 or size
            if _NON_BLANK.search(buf, lo, hi):
                view = whole[lo:hi]
                yield view
                with suppress(BufferError):
                    view.release()
            if hasattr(buf, "madvise"):  # the parsed pages leave this process's memory
                page = lo - lo % mmap.PAGESIZE
                buf.madvise(mmap.MADV_DONTNEED, page, (hi - hi % mmap.PAGESIZE) - page)
            lo = hi
    finally:
        with suppress(BufferError):
            whole.release()


_NON_BLANK = re.compile(rb"\S")


def read_columns(
    data: bytes | str | os.PathLike[str], namespace: str | None
) -> tuple[Columns, Columns, list[int]]:
    """Parse a whole export (its bytes, or the path of the file) with Arrow; validate
    column-wise.

    Returns node columns, edge columns (Arrow arrays) and the 0-based indices of audit records
    among non-blank lines (parsed separately, since their payloads are free-form JSON).
    Raises :class:`SlowPath` when the file should go through :func:`add_node`/:func:`add_edge`.
    The file is parsed in pieces of ~64 MB of whole lines, each keeping only the columns
    its nodes and edges use: a million memories with five million links parse in ~1 GB,
    where the whole file as one table took ~5 GB.
    """
    nodes, edges, audits = _parse_tables(data)
    n, m = nodes.num_rows, edges.num_rows
    ns_nodes = _namespace_column(nodes, n, namespace)
    if n:
        _check_nodes(nodes, ns_nodes, namespace)
    ns_edges = _namespace_column(edges, m, namespace)
    if m:
        _check_edges(edges, ns_edges, namespace)
    return _node_columns(nodes, ns_nodes), _edge_columns(edges, ns_edges), audits


_NODE_FIELDS = [
    "id", "namespace", "kind", "text", "created_at", "updated_at", "last_read_at",
    "pinned", "tier", "review_reason", "queued_at",
]  # fmt: skip
_EDGE_FIELDS = ["namespace", "src", "dst", "kind", "weight", "created_at", "reinforced_at"]


def _parse_tables(data: bytes | str | os.PathLike[str]) -> tuple[Any, Any, list[int]]:
    """The export's node and edge records as two Arrow tables (only the columns they use),
    and the 0-based indices of its audit records among non-blank lines; parsed in pieces of
    whole lines (see :func:`read_columns`)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    ts = pa.timestamp("us", tz="UTC")
    fields = [
        ("type", pa.string()), ("id", pa.string()), ("namespace", pa.string()),
        ("kind", pa.string()), ("text", pa.string()), ("created_at", ts), ("updated_at", ts),
        ("last_read_at", ts), ("pinned", pa.bool_()), ("tier", pa.int64()),
        ("review_reason", pa.string()), ("queued_at", ts), ("src", pa.string()),
        ("dst", pa.string()), ("weight", pa.float64()), ("reinforced_at", ts),
    ]  # fmt: skip
    node_parts, edge_parts, audits = [], [], []
    rows = headers = 0
    for chunk in _line_chunks(data):
        try:
            table = pj.read_json(
                pa.py_buffer(chunk),
                parse_options=pj.ParseOptions(
                    explicit_schema=pa.schema(fields), unexpected_field_behavior="infer"
                ),
                read_options=pj.ReadOptions(block_size=1 << 24),
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SlowPath(str(exc)) from None
        del chunk
        headers += _check_piece(table, headers, rows)
        kinds = table["type"]
        node_parts.append(table.filter(pc.equal(kinds, "node")).select(_NODE_FIELDS))
        edge_parts.append(table.filter(pc.equal(kinds, "edge")).select(_EDGE_FIELDS))
        at = pc.indices_nonzero(pc.fill_null(pc.equal(kinds, "audit"), False)).to_pylist()
        audits += [rows + i for i in at]
        rows += table.num_rows
        del table, kinds
    if not node_parts:
        raise SlowPath("no records")
    return pa.concat_tables(node_parts), pa.concat_tables(edge_parts), audits


def _check_piece(table: Any, headers: int, rows: int) -> int:
    """How many headers one parsed piece holds; :class:`SlowPath` for what the fast path does
    not take (props, unknown record types, a header anywhere but first)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "props" in table.column_names:
        props_type = table.schema.field("props").type
        if not (pa.types.is_struct(props_type) and props_type.num_fields == 0) and not (
            pa.types.is_null(props_type)
        ):
            raise SlowPath("records carry props")
    kinds = table["type"]
    known = pc.is_in(kinds, value_set=pa.array(["node", "edge", "audit", "ebb-export"]))
    if not pc.all(pc.fill_null(known, False)).as_py():
        raise SlowPath("unknown record type")
    header = pc.equal(kinds, "ebb-export")
    found = int(pc.sum(pc.cast(pc.fill_null(header, False), pa.int64())).as_py() or 0)
    if found and (headers or rows or kinds[0].as_py() != "ebb-export"):
        raise SlowPath("header not first")
    if headers + found > 1:
        raise SlowPath("header not first")
    return found


def _require(ok: Any) -> None:
    """:class:`SlowPath` unless every value of the Arrow boolean column ``ok`` is true."""
    import pyarrow.compute as pc

    if not pc.all(pc.fill_null(ok, False)).as_py():
        raise SlowPath("invalid value")


def _namespace_column(table: Any, rows: int, namespace: str | None) -> Any:
    """The records' namespaces: ``namespace`` for every row when given, else their own."""
    return repeated(namespace, rows) if namespace else table["namespace"]


def repeated(value: Any, rows: int, typ: Any = None) -> Any:
    """An Arrow column of ``value`` in every row, of type ``typ`` (string when not given).
    Built in Arrow: from a Python list, five million namespaces took ~1.4 s of a 1M-memory
    import."""
    import pyarrow as pa

    return pa.repeat(pa.scalar(value, typ if typ is not None else pa.string()), rows)


def _check_nodes(nodes: Any, ns_nodes: Any, namespace: str | None) -> None:
    """The node records checked column-wise by the rules of :mod:`.validation`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind_re, ctrl_re = KIND_PATTERN, CONTROL_PATTERN  # the rules of .validation, in Arrow
    for col in ("id", "kind", "text", "created_at", "updated_at"):
        _require(pc.is_valid(nodes[col]))
    if not namespace:
        _require(pc.is_valid(ns_nodes))
    _require(pc.match_substring_regex(nodes["kind"], kind_re))
    _require(pc.less_equal(pc.utf8_length(nodes["id"]), MAX_ID_LEN))
    _require(pc.invert(pc.match_substring_regex(nodes["id"], ctrl_re)))
    _require(pc.invert(pc.match_substring_regex(nodes["id"], r"[\s\p{Z}]")))
    unusual = pc.filter(nodes["id"], pc.invert(pc.string_is_ascii(nodes["id"])))
    if any(id_problem(i) for i in unusual.to_pylist() if i is not None):
        raise SlowPath("invalid id")  # the line-by-line path names the line
    _require(pc.less_equal(pc.utf8_length(nodes["text"]), MAX_TEXT_LEN))
    _require(pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(nodes["text"])), 0))
    _require(pc.is_in(pc.fill_null(nodes["tier"], 1), value_set=pa.array([1, 2, 3, 4])))


def _check_edges(edges: Any, ns_edges: Any, namespace: str | None) -> None:
    """The edge records checked column-wise by the rules of :mod:`.validation`."""
    import pyarrow.compute as pc

    for col in ("src", "dst", "created_at", "reinforced_at"):
        _require(pc.is_valid(edges[col]))
    if not namespace:
        _require(pc.is_valid(ns_edges))
    _require(pc.match_substring_regex(pc.fill_null(edges["kind"], "related"), KIND_PATTERN))
    weight = pc.fill_null(edges["weight"], 1.0)
    _require(pc.and_(pc.greater(weight, 0.0), pc.less_equal(weight, MAX_WEIGHT)))
    _require(pc.not_equal(edges["src"], edges["dst"]))


def _us(col: Any) -> Any:
    """An Arrow timestamp column as integer microseconds."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(col, pa.int64())


def _node_columns(nodes: Any, ns_nodes: Any) -> Columns:
    """The node records as the columns a store's bulk insert takes."""
    import pyarrow.compute as pc

    n = nodes.num_rows
    return {
        "namespace": ns_nodes, "id": nodes["id"], "kind": nodes["kind"], "text": nodes["text"],
        "props": repeated("{}", n), "created_us": _us(nodes["created_at"]),
        "updated_us": _us(nodes["updated_at"]), "last_read_us": _us(nodes["last_read_at"]),
        "pinned": pc.fill_null(nodes["pinned"], False), "tier": pc.fill_null(nodes["tier"], 1),
        "review_reason": nodes["review_reason"], "queued_us": _us(nodes["queued_at"]),
    }  # fmt: skip


def _edge_columns(edges: Any, ns_edges: Any) -> Columns:
    """The edge records as the columns a store's bulk insert takes."""
    import pyarrow.compute as pc

    m = edges.num_rows
    return {
        "namespace": ns_edges, "src": edges["src"], "dst": edges["dst"],
        "kind": pc.fill_null(edges["kind"], "related"),
        "weight": pc.fill_null(edges["weight"], 1.0), "created_us": _us(edges["created_at"]),
        "reinforced_us": _us(edges["reinforced_at"]), "props": repeated("{}", m),
    }  # fmt: skip


# -- stored rows: how both backends keep a Node (times in µs, props as JSON text) ----------------
#: Stored node properties in the order Kùzu returns them (``Memory`` columns but ``uid``).
NODE_PROPERTIES = (
    "id", "ns", "kind", "text", "props", "created_us", "updated_us", "last_read_us", "pinned",
    "tier", "review_reason", "queued_us", "base_key", "key", "degree",
)  # fmt: skip


def opt_us(value: datetime | None) -> int | None:
    return None if value is None else to_us(value)


def opt_dt(value: int | None) -> datetime | None:
    return None if value is None else from_us(int(value))


def node_row(n: Node) -> dict[str, Any]:
    """A node as stored properties (``NODE_PROPERTIES``)."""
    return {
        "id": n.id,
        "ns": n.namespace,
        "kind": n.kind,
        "text": n.text,
        "props": json.dumps(n.props, sort_keys=True),
        "created_us": to_us(n.created_at),
        "updated_us": to_us(n.updated_at),
        "last_read_us": opt_us(n.last_read_at),
        "pinned": n.pinned,
        "tier": int(n.tier),
        "review_reason": n.review_reason,
        "queued_us": opt_us(n.queued_at),
        "base_key": float(n.base_key),
        "key": float(n.key),
        "degree": int(n.degree),
    }


def node_from_row(r: Mapping[str, Any]) -> Node:
    """Inverse of :func:`node_row`."""
    return Node(
        id=r["id"],
        namespace=r["ns"],
        kind=r["kind"],
        text=r["text"],
        props=json.loads(r["props"]) if r["props"] else {},
        created_at=from_us(r["created_us"]),
        updated_at=from_us(r["updated_us"]),
        last_read_at=opt_dt(r["last_read_us"]),
        pinned=bool(r["pinned"]),
        tier=Tier(int(r["tier"])),
        review_reason=r["review_reason"],
        queued_at=opt_dt(r["queued_us"]),
        base_key=float(r["base_key"] or 0.0),
        key=float(r["key"] or 0.0),
        degree=int(r["degree"] or 0),
    )


def field_value(field: str, value: Any) -> tuple[str, Any]:
    """Map a model field of a partial update to its stored property and value."""
    if field in ("updated_at", "last_read_at", "queued_at"):
        return field[: -len("_at")] + "_us", opt_us(value)
    if field == "props":
        return "props", json.dumps(value, sort_keys=True)
    if field == "tier":
        return "tier", int(value)
    if field in ("base_key", "key"):
        return field, float(value)
    if field == "degree":
        return field, int(value)
    return field, value
