"""The Kùzu store's reads: memories by id (through the row copy, the recall snapshot or one
primary-key read), their recall columns, the text copy, and scans, queues and counts.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..model import Edge, Node, Tier
from ..records import node_from_row
from ..store import (
    Counts,
    Match,
)
from .base import KuzuBase
from .copies import _BASE_COLUMNS, _ROW_KEYS
from .engine import (
    storage_error,
)
from .queries import (
    _EDGE_RET,
    FTS_INDEX,
    SEP,
    _edge_from,
    _node_ret,
    _release_arrow_memory,
    _row_to_node,
    uid,
)

LISTS_IN_ROWS_UPTO = 131_072  # rows of a Kùzu 0.11.3 node group (see KuzuReads.lists_in_rows_upto)


class KuzuReads(KuzuBase):
    """Reading memories (mixed into :class:`~ebb_core.kuzu_store.KuzuStore`)."""

    def get_nodes(self, namespace: str, ids: Sequence[str]) -> dict[str, Node]:
        out: dict[str, Node] = {}
        with self._lock:
            for i in dict.fromkeys(ids):
                row = self._row(uid(namespace, i))
                if row is not None:
                    out[i] = node_from_row(row)
        return out

    def _row(self, u: str, *, snapshot: bool = True) -> dict[str, Any] | None:
        """A memory's stored row, recent-link list included (so recall can explain what it
        just fetched without reading it again), from the row cache or one primary-key read.
        ``snapshot=False``: never take the row snapshot for it (a bulk read, as maintain's)."""
        row = self._known_row(u, snapshot)
        if row is not _UNREAD:
            return row  # type: ignore[no-any-return]
        return self._read_row(u)

    def _known_row(self, u: str, snapshot: bool = True) -> Any:
        """A memory's row from the in-process copies: the row, None (no such memory), or
        ``_UNREAD`` (the table must be read)."""
        row = self._rows_cache.get(u)
        if row is not None:
            return row
        cache = self._cache
        if cache.ready:  # built by recall or maintain; a one-off read does not build it
            o = cache.offset.get(u)
            if o is None:
                return None  # the offsets name every memory
            if (
                self._snapshot
                and snapshot
                and cache.base is None
                and self._row_reads >= _SNAPSHOT_AFTER
                and self._snapshot_fits()
            ):
                # This process keeps reading memories (an agent session, not one call):
                # one scan of the table now is cheaper than ~0.7 ms per read from here on.
                # a list kept in LinkList overrides the row's (see kuzu.tables)
                lists = {
                    cache.offset[u]: links
                    for u, links in self._link_list_rows("l.uid, l.links")
                    if u in cache.offset
                }
                cache.attach(
                    self._arrow(
                        "MATCH (n:Memory) RETURN offset(id(n)) AS o, "
                        + ", ".join(f"n.{c} AS {c}" for c in _BASE_COLUMNS),
                        {},
                    ),
                    lists,
                )
                _release_arrow_memory()  # Kùzu's result, as large as the snapshot, is freed
            row = cache.base_row(o)
            if row is not None:
                self._mirror.row_read(u, row)
                return row
        return _UNREAD

    def _snapshot_fits(self) -> bool:
        """Whether the row snapshot (~``_SNAPSHOT_ROW_BYTES`` a memory) fits in its share of the
        memory budget (a quarter: ~1.1M memories at the default); past that rows are read
        from the table as needed."""
        return len(self._cache.offset) * _SNAPSHOT_ROW_BYTES <= self._budget // 4

    def _read_row(self, u: str) -> dict[str, Any] | None:
        """The stored row of ``u`` read from the table (one primary-key read, ~0.3-0.7 ms:
        an ``UNWIND`` of ten keys takes Kùzu a scan, ~0.7 s at 1M), and cached."""
        found = self._q(
            f"MATCH (n:Memory {{uid: $uid}}) RETURN {_node_ret('n')}, n.recent_links", {"uid": u}
        )
        if not found:
            return None
        row = dict(zip(_ROW_KEYS, found[0], strict=True))
        listed = self._listed(u)
        if listed is not None:
            row["recent_links"] = listed
        self._row_reads += 1
        self._mirror.row_read(u, row)
        return row

    def _listed(self, u: str) -> str | None:
        """The list of ``u`` kept in LinkList, which overrides its Memory row's (see
        ``kuzu.tables``), or None. A primary-key read of its own: ~0.05 ms, where an ``OPTIONAL
        MATCH`` of it in the row's read added ~0.2 ms (Kùzu 0.11.3, 100k); none when the
        recall columns know it has no row."""
        if self._lists_apart(u) is False or not self._has_link_list():
            return None
        found = self._q("MATCH (l:LinkList {uid: $u}) RETURN l.links", {"u": u})
        return found[0][0] if found else None

    #: Whether the LinkList table is there (None: not looked yet). A writing open creates it;
    #: a store of schema 4 opened read-only (``read_only=True``) has none, and every list of it
    #: is in its Memory rows.
    _link_list_there: bool | None = None

    def _has_link_list(self) -> bool:
        if self._link_list_there is None:
            self._link_list_there = not self.read_only or any(
                r[0] == "LinkList" for r in self._rows("CALL show_tables() RETURN name")
            )
        return self._link_list_there

    def _link_list_rows(self, columns: str) -> list[list[Any]]:
        """``columns`` of every LinkList row (none when the store has no such table)."""
        return self._q(f"MATCH (l:LinkList) RETURN {columns}") if self._has_link_list() else []

    def _lists_apart(self, u: str) -> bool | None:
        """Whether ``u`` has a LinkList row, as the recall columns tell once built (their
        bits are read with one scan of LinkList's uids, and kept by every write); None: not
        known."""
        cache = self._cache
        if not cache.ready:
            return None
        if cache.listed is None:
            self._mirror.listed_read([r[0] for r in self._link_list_rows("l.uid")])
        return cache.lists_apart(u)

    #: Up to how many Memory rows (the table's next offset) a changed list is SET in its
    #: Memory row rather than kept in LinkList (see ``kuzu.tables``): one Kùzu node group.
    #: While the table is one group, a SET rewrites at the checkpoint the one chunk of lists a
    #: checkpoint after a new memory rewrites anyway, and costs a remember less than replacing
    #: a LinkList row (~0.2-0.4 ms of its ~2 ms statement at 100k). Tests set it lower.
    lists_in_rows_upto = LISTS_IN_ROWS_UPTO

    def _lists_in_rows(self) -> bool:
        """Whether a changed list goes into its Memory row: the table fits in one node group,
        as the last build of the recall columns or the last memory this process created tell
        (Kùzu 0.11.3 appends a new row: its offset + 1 is the table's size). Not known (neither
        yet, or dropped with the other copies: a rollback, a bulk load): into LinkList, right
        at any size."""
        end = self._cache.end
        return end is not None and end <= self.lists_in_rows_upto

    def existing_ids(self, namespace: str, ids: Sequence[str]) -> set[str]:
        wanted = set(ids)
        if self._cache.ready:  # every memory's uid, kept in step with every write
            return {i for i in wanted if uid(namespace, i) in self._cache.offset}
        if len(wanted) <= 64:
            return {
                i
                for i in wanted
                if self._q("MATCH (n:Memory {uid: $u}) RETURN n.id", {"u": uid(namespace, i)})
            }
        rows = self._q("MATCH (n:Memory) WHERE n.ns = $ns RETURN n.id", {"ns": namespace})
        return wanted & {r[0] for r in rows}

    def matches_for(self, namespace: str, ids: Sequence[str]) -> list[Match]:
        """From the in-process columns (a node read is ~0.5 ms when its row is not cached)."""
        with self._lock:
            prefix = f"{namespace}{SEP}"
            columns = self._columns_of([prefix + i for i in ids])
            out = []
            for i in dict.fromkeys(ids):
                col = columns.get(prefix + i)
                if col is not None:
                    tier, key, pinned, kind = col
                    out.append(Match(i, 0.0, key, pinned, tier, kind))
            return out

    def _ensure_cache(self) -> None:
        if not self._cache.ready:
            self._cache.build(self._arrow(RECALL_COLUMNS, {}))

    def _text_copy(self) -> Any:
        """The in-process copy of the full-text index (see ``kuzu.text_index``), built from
        Kùzu's index tables on first use; None when it does not fit in an eighth of the memory
        budget (or ``EBB_KUZU_TEXT_COPY=0``): Kùzu's query answers then."""
        if self._text is None and not self._text_skip:
            from .text_index import load_from_kuzu

            def arrow(query: str, params: Mapping[str, Any] | None = None) -> Any:
                # one chunk: numbers and index terms (~10M postings at 1M memories, which
                # chunked and then combined were held twice)
                result = self._conn.execute(query, dict(params or {}))
                assert not isinstance(result, list)
                return result.get_as_arrow(chunk_size=-1)

            self._ensure_cache()
            self._exec("CALL enable_internal_catalog=true")
            try:
                index = load_from_kuzu(
                    arrow, "Memory", FTS_INDEX, self._budget // 8, self._cache.ns >= 0
                )
            except RuntimeError as exc:
                raise storage_error(exc, self._path) from None
            finally:
                self._exec("CALL enable_internal_catalog=false")
            _release_arrow_memory()  # the index's tables as read, ~3 times the copy
            self._mirror.text_read(index)
            self._text_skip = self._text is None
        return self._text

    def top_by_key(
        self, namespace: str, max_tier: Tier, limit: int, kinds: Sequence[str] = ()
    ) -> list[Node]:
        rows = self._q(
            f"MATCH (n:Memory) WHERE n.ns = $ns AND n.tier <= $mt {_kinds_filter(kinds)}"
            f"RETURN {_node_ret('n')} ORDER BY n.key DESC, n.id LIMIT $lim",
            {"ns": namespace, "mt": int(max_tier), "lim": int(limit), **_kinds_param(kinds)},
        )
        return [_row_to_node(r) for r in rows]

    def review_queue(self, namespace: str, limit: int) -> list[Node]:
        rows = self._q(
            "MATCH (n:Memory) WHERE n.ns = $ns AND n.tier = 4 "
            f"RETURN {_node_ret('n')} ORDER BY n.queued_us, n.id LIMIT $lim",
            {"ns": namespace, "lim": int(limit)},
        )
        return [_row_to_node(r) for r in rows]

    def scan_nodes(self, namespace: str, batch: int = 5000) -> Iterator[list[Node]]:
        after = ""
        while True:
            rows = self._q(
                "MATCH (n:Memory) WHERE n.ns = $ns AND n.id > $after "
                f"RETURN {_node_ret('n')} ORDER BY n.id LIMIT $lim",
                {"ns": namespace, "after": after, "lim": batch},
            )
            if not rows:
                return
            yield [_row_to_node(r) for r in rows]
            after = rows[-1][0]

    def scan_edges(self, namespace: str, batch: int = 5000) -> Iterator[list[Edge]]:
        skip = 0
        while True:
            rows = self._q(
                "MATCH (a:Memory)-[e:Link]->(b:Memory) WHERE a.ns = $ns "
                f"RETURN a.id, b.id, {_EDGE_RET} ORDER BY a.id, b.id, e.kind "
                "SKIP $skip LIMIT $lim",
                {"ns": namespace, "skip": skip, "lim": batch},
            )
            if not rows:
                return
            yield [_edge_from(namespace, r[0], r[1], r[2:]) for r in rows]
            skip += len(rows)

    def namespaces(self) -> list[str]:
        self._flush_deferred()  # audit rows waiting for the commit (see _copy_at_commit)
        rows = self._q("MATCH (n:Memory) RETURN DISTINCT n.ns")
        rows += self._q("MATCH (a:Audit) RETURN DISTINCT a.ns")
        return sorted({r[0] for r in rows})

    def counts(self, namespace: str) -> Counts:
        by_tier = {
            int(t): int(c)
            for t, c in self._q(
                "MATCH (n:Memory) WHERE n.ns = $ns RETURN n.tier, count(*)", {"ns": namespace}
            )
        }
        pinned = self._q(
            "MATCH (n:Memory) WHERE n.ns = $ns AND n.pinned RETURN count(*)", {"ns": namespace}
        )[0][0]
        edges = self._q(
            "MATCH (a:Memory)-[e:Link]->(:Memory) WHERE a.ns = $ns RETURN count(e)",
            {"ns": namespace},
        )[0][0]
        self._flush_deferred()
        audits = self._q("MATCH (a:Audit) WHERE a.ns = $ns RETURN count(*)", {"ns": namespace})[0][
            0
        ]
        return Counts(
            nodes=sum(by_tier.values()),
            edges=int(edges),
            by_tier=by_tier,
            pinned=int(pinned),
            audit_entries=int(audits),
        )


RECALL_COLUMNS = (
    "MATCH (n:Memory) RETURN offset(id(n)) AS o, n.uid AS u, n.kind AS k, n.tier AS t, "
    "n.key AS y, n.pinned AS p"
)
"""The rows the recall columns (``_RecallCache.build``) are built from."""
_SNAPSHOT_AFTER = 64  # rows read one by one before the recall snapshot is taken
_SNAPSHOT_ROW_BYTES = 600  # the row snapshot's size per memory (measured ~0.5 KB; see attach)
_UNREAD = object()  # see _known_row


def _kinds_filter(kinds: Sequence[str]) -> str:
    # An empty list parameter has no element type in Kùzu, so the filter is left out instead.
    return "AND list_contains($kinds, n.kind) " if kinds else ""


def _kinds_param(kinds: Sequence[str]) -> dict[str, Any]:
    return {"kinds": list(kinds)} if kinds else {}
