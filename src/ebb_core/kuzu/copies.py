"""The Kùzu store's in-process copies of its Memory table: the recall columns
(:class:`_RecallCache`) and the recently read rows (:class:`_RowCache`)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ..model import Node, Tier
from ..records import NODE_PROPERTIES
from .queries import SEP, uid

_ROW_KEYS = (*NODE_PROPERTIES, "recent_links")
#: Row columns the recall snapshot keeps as Arrow (the rest are its numpy arrays and lists).
_BASE_COLUMNS = tuple(c for c in _ROW_KEYS if c not in ("kind", "tier", "key", "pinned"))


class _RecallCache:
    """Per-offset copies of the node table: what recall filters and blends on, and the rows.

    A full-text query alone takes ~2 ms at 100k memories, but reading any property of the nodes
    it returns makes Kùzu scan the node table (~12 ms more), and fetching a hit by primary key
    costs ~0.7 ms. Recall therefore takes offsets and scores from the index, looks up namespace,
    tier, key and pin in the arrays here, and, once a process has read more than a few dozen
    rows, reads its winners' rows from ``base``: an Arrow snapshot of the table (~0.5 KB per
    memory), whose row for an offset is used only while ``fresh`` says no write has touched it
    since. Only this process can write the file (Kùzu's
    lock) and every write goes through this store, which keeps the arrays in step and clears
    ``fresh`` for what it writes; anything it cannot follow (a rollback, a bulk load, a
    deletion) drops the copy, rebuilt on next use.
    """

    def __init__(self) -> None:
        # The numpy arrays exist once built (importing numpy costs a one-shot command ~50 ms);
        # until then no offset is known, so nothing below reaches them.
        self.ready = False
        self.uid: list[str | None] = []
        self.kind: list[str] = []
        self.tier: Any = None
        self.key: Any = None
        self.pinned: Any = None
        self.ns: Any = None  # namespace codes (see ns_code); -1: no memory here
        self.offset: dict[str, int] = {}
        # the Memory table's next offset as the last build or create in this process told it
        # (None: not known): kept while the columns are out of date, dropped with the copies
        self.end: int | None = None
        self._ns_codes: dict[str, int] = {}
        self.base: Any = None  # Arrow table of the other columns, one row per offset in `pos`
        self.pos: Any = None
        self.fresh: Any = None
        # which memories have a LinkList row (see kuzu.tables), by offset; None: not read yet
        self.listed: Any = None

    def ns_code(self, namespace: str) -> int:
        return self._ns_codes.setdefault(namespace, len(self._ns_codes))

    def build(self, table: Any) -> None:
        """Take the recall columns from ``table`` (offsets ``o``, uids ``u``, kinds ``k``, tiers
        ``t``, keys ``y``, pins ``p``), column-wise: the same in a Python loop over the rows
        took ~1.5 s of a maintain at 1M memories."""
        import numpy as np
        import pyarrow.compute as pc

        offsets = table["o"].to_numpy()
        size = int(offsets.max()) + 1 if len(offsets) else 0
        uids = table["u"].to_pylist()
        spread: Any = np.full(size, None, object)
        spread[offsets] = uids
        self.uid = spread.tolist()
        # one string object per kind and per namespace, not one per memory
        kinds = pc.dictionary_encode(table["k"].combine_chunks())
        names = np.array([*kinds.dictionary.to_pylist(), None], object)
        spread[:] = ""
        spread[offsets] = names[kinds.indices.fill_null(len(names) - 1).to_numpy()]
        self.kind = spread.tolist()
        del spread
        self.tier = np.full(size, 4, np.int64)
        self.key = np.zeros(size, np.float64)
        self.pinned = np.zeros(size, np.bool_)
        self.ns = np.full(size, -1, np.int64)
        if len(offsets):
            prefix = pc.split_pattern(table["u"].combine_chunks(), SEP, max_splits=1)
            spaces = pc.dictionary_encode(pc.list_element(prefix, 0))
            codes = np.array([self.ns_code(x) for x in spaces.dictionary.to_pylist()], np.int64)
            self.ns[offsets] = codes[spaces.indices.to_numpy()]
        self.tier[offsets] = table["t"].to_numpy()
        self.key[offsets] = table["y"].to_numpy()
        self.pinned[offsets] = table["p"].to_numpy(zero_copy_only=False)
        self.offset = dict(zip(uids, offsets.tolist(), strict=True))
        self.end = size
        self.base = None
        self.lists: dict[int, str] = {}
        self.pos = np.full(size, -1, np.int64)
        self.fresh = np.zeros(size, np.bool_)
        self.listed = None
        self.ready = True

    def attach(self, table: Any, lists: dict[int, str] | None = None) -> None:
        """Take ``table`` (offsets ``o`` and ``_BASE_COLUMNS``, as stored now) as the snapshot;
        ``lists``: recent-link lists by offset that override the table's (LinkList's rows)."""
        import numpy as np

        offsets = table["o"].to_numpy()
        self.base = table.select(list(_BASE_COLUMNS))
        self.lists = lists or {}
        self.pos[offsets] = np.arange(len(offsets))
        self.fresh[offsets] = True

    def stale(self, offsets: Any) -> None:
        """Writes changed the rows at ``offsets`` (a batch). When a batch leaves much of the
        snapshot stale (a maintain, a large import), the snapshot is dropped: the next read
        that needs one takes it anew, instead of reading most rows from the table one by one
        from then on."""
        self.fresh[offsets] = False
        if self.base is not None and len(offsets) * 8 > len(self.fresh):
            self.drop_snapshot()

    def drop_snapshot(self) -> None:
        """Let go of the row snapshot (every row then reads from the table, until the next
        read that needs it takes it again)."""
        if self.base is not None:
            self.base = None
            self.lists = {}
            self.fresh[:] = False

    def base_row(self, o: int) -> dict[str, Any] | None:
        """The stored row at offset ``o`` from the snapshot, if no write has touched it since."""
        if o >= len(self.fresh) or not self.fresh[o]:
            return None
        i, base = int(self.pos[o]), self.base
        row = {c: base.column(c)[i].as_py() for c in _BASE_COLUMNS}
        if o in self.lists:
            row["recent_links"] = self.lists[o]
        row["kind"], row["tier"] = self.kind[o], int(self.tier[o])
        row["key"], row["pinned"] = float(self.key[o]), bool(self.pinned[o])
        return row

    def take_listed(self, uids: list[str]) -> None:
        """Take the uids of every LinkList row (read from the table) as the ``listed`` bits."""
        import numpy as np

        self.listed = np.zeros(len(self.uid), np.bool_)
        at = [self.offset.get(u, -1) for u in uids]
        self.listed[[o for o in at if o >= 0]] = True

    def lists_apart(self, u: str) -> bool | None:
        """Whether ``u`` has a LinkList row, if the bits tell (None: they do not)."""
        o = self.offset.get(u) if self.listed is not None else None
        if o is None:
            return None
        return bool(self.listed[o]) if o < len(self.listed) else False

    def listed_now(self, u: str, apart: bool) -> None:
        """A write gave ``u`` a LinkList row (``apart``) or left it none."""
        if self.listed is None:
            return
        o = self.offset.get(u)
        if o is None:
            self.listed = None  # a memory the offsets do not know: read the bits again
            return
        if o >= len(self.listed):
            import numpy as np

            grow = np.zeros(o + 1 - len(self.listed), np.bool_)
            self.listed = np.concatenate([self.listed, grow])
        self.listed[o] = apart

    def touched(self, u: str) -> None:
        """A write changed the row of ``u``: its snapshot row is no longer the stored one."""
        o = self.offset.get(u)
        if o is not None:
            self.fresh[o] = False

    def put(self, offset: int, node: Node) -> None:
        import numpy as np

        if offset >= len(self.uid):
            grow = max(offset + 1, 2 * len(self.uid)) - len(self.uid)
            self.uid += [None] * grow
            self.kind += [""] * grow
            self.tier = np.concatenate([self.tier, np.full(grow, 4, np.int64)])
            self.key = np.concatenate([self.key, np.zeros(grow)])
            self.pinned = np.concatenate([self.pinned, np.zeros(grow, np.bool_)])
            self.ns = np.concatenate([self.ns, np.full(grow, -1, np.int64)])
            self.pos = np.concatenate([self.pos, np.full(grow, -1, np.int64)])
            self.fresh = np.concatenate([self.fresh, np.zeros(grow, np.bool_)])
        u = uid(node.namespace, node.id)
        self.fresh[offset] = False
        self.uid[offset] = u
        self.kind[offset] = node.kind
        self.tier[offset] = int(node.tier)
        self.key[offset] = node.key
        self.pinned[offset] = node.pinned
        self.ns[offset] = self.ns_code(node.namespace)
        self.offset[u] = offset

    def drop(self, u: str) -> None:
        o = self.offset.pop(u, None)
        if o is not None:
            self.uid[o] = None
            self.ns[o] = -1
            self.fresh[o] = False

    def live(self, namespace: str) -> Any:
        """Offsets of the namespace's memories that are not pinned and not frozen."""
        import numpy as np

        mask = (self.ns == self.ns_code(namespace)) & ~self.pinned & (self.tier < int(Tier.FROZEN))
        return np.flatnonzero(mask)


class _RowCache:
    """Stored rows (``NODE_PROPERTIES`` plus ``recent_links``) of recently used memories, by uid.

    A primary-key read costs ~0.7 ms on Kùzu; an agent keeps coming back to the same memories
    (what it recalled, what it links new ones to). Every write goes through this store, which
    updates the rows it holds (or drops them, or everything when it cannot follow a change), so
    a cached row always equals the stored one. Least recently used rows leave first.
    """

    def __init__(self, size: int = 20_000) -> None:
        self.size = size
        self.rows: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def get(self, u: str) -> dict[str, Any] | None:
        row = self.rows.get(u)
        if row is not None:
            self.rows.move_to_end(u)
        return row

    def put(self, u: str, row: dict[str, Any]) -> None:
        self.rows[u] = row
        self.rows.move_to_end(u)
        if len(self.rows) > self.size:
            self.rows.popitem(last=False)

    def drop(self, u: str) -> None:
        self.rows.pop(u, None)

    def clear(self) -> None:
        self.rows.clear()
