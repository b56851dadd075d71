"""The Kùzu store's mirror: the one owner of every in-process copy of what the store holds.

Only this process can write the store file (Kùzu's lock), so copies of what it read stay true
until a write of its own changes the table. The copies (measured in ``copies``, ``search`` and
``reads``: each spares Kùzu a scan or a ~0.5 ms primary-key read) are

* ``recall``: :class:`_RecallCache`, per-offset columns for recall and the row snapshot;
* ``rows``: :class:`_RowCache`, recently used rows with their recent-link lists;
* ``meta``: the ``Meta`` rows read so far;
* ``supersedes``: every ``supersedes`` edge, old uid to the uids that supersede it;
* ``text``: the copy of the full-text index (``kuzu.text_index``), when it fits;
* ``vectors``: per namespace, its vectors outside a built HNSW index (``tail._Tail``,
  searched exactly in process up to ``in_process_cap``).

A write tells the mirror what it changed with :meth:`Mirror.apply` (one of the change types
below), as it sends the change (write-through: the copies take the change first, and a write
event sends values read from them, see ``writes._change_sets``); a rollback, a failed commit or
a change the copies cannot follow calls :meth:`Mirror.invalidate`, which drops every copy
(rebuilt from the table on next use). No other code changes a copy.

With the mirror off (``Mirror(enabled=False)``: ``KuzuStore(mirror=False)`` or
``EBB_KUZU_MIRROR=0``), every :meth:`~Mirror.apply` drops every copy instead, what a read
fetches is not kept (rows, metadata, ``supersedes`` edges) and the text copy is not built:
every answer comes from the table as it is now. The engine's tests run once more that way
(``tests/test_kuzu_mirror_off.py``), so a copy that drifted from the table would show as a
difference between the two runs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..model import Edge, Node
from ..records import field_value, node_row
from ..store import SUPERSEDES, Adjustment
from .copies import _RecallCache, _RowCache
from .queries import uid

if TYPE_CHECKING:
    from .tail import _Tail


@dataclass(frozen=True)
class NodesWritten:
    """Memories created (``fresh``: their rows, recent-link list empty) or overwritten (their
    cached rows keep their recent-link lists), at these offsets of the Memory table."""

    nodes: Sequence[Node]
    offsets: Sequence[int]
    fresh: bool


@dataclass(frozen=True)
class Adjusted:
    """``changes`` applied to memories of ``namespace`` (``pushed``: neighbours' keys changed
    too, by eager spreading)."""

    namespace: str
    changes: Mapping[str, Adjustment]
    pushed: bool = False


@dataclass(frozen=True)
class FieldsSet:
    """Stored columns set for many memories: ``uids`` and, by column, their new values."""

    namespace: str
    texts: Mapping[str, str]  # id -> new text, for the text copy
    uids: Sequence[str]
    columns: Mapping[str, Sequence[Any]]


@dataclass(frozen=True)
class LinksSet:
    """Memories' encoded recent-link lists set (by uid); those of ``apart`` into LinkList rows
    (see ``kuzu.tables``), the others into their Memory rows."""

    lists: Mapping[str, str]
    apart: Collection[str] = ()


@dataclass(frozen=True)
class Deleted:
    """Memories deleted (with their edges: their neighbours' link lists were unset)."""

    namespace: str
    ids: Sequence[str]


@dataclass(frozen=True)
class EdgesWritten:
    edges: Sequence[Edge]


@dataclass(frozen=True)
class MetaSet:
    key: str
    value: str


@dataclass(frozen=True)
class KeysSet:
    """The scoring pass stored new keys (``keys``, by offset) for the memories at ``offsets``
    (``size``: the Memory table's offsets it saw); the rows at ``stale`` changed otherwise
    too (base, degree, recent links). ``offsets=None``: every key and base was rescaled."""

    offsets: Any = None
    keys: Any = None
    stale: Any = None
    size: int = 0


@dataclass(frozen=True)
class VectorsWritten:
    """Vectors stored (by uid, rows of ``matrix``) in ``namespace``'s unindexed tail."""

    namespace: str
    uids: Sequence[str]
    matrix: Any


@dataclass(frozen=True)
class VectorsRemoved:
    """Vectors deleted, or moved into ``namespace``'s built index, no longer searched in process."""

    namespace: str
    uids: Sequence[str]


@dataclass(frozen=True)
class VectorsReset:
    """``namespace``'s vector tables changed as a whole (its index was built; None: every
    vector table was dropped): its vector copy is read again when next needed."""

    namespace: str | None


@dataclass(frozen=True)
class Reloaded:
    """Rows were loaded in bulk (an import): every copy is built again when next needed."""


Change = (
    NodesWritten
    | Adjusted
    | FieldsSet
    | LinksSet
    | Deleted
    | EdgesWritten
    | MetaSet
    | KeysSet
    | VectorsWritten
    | VectorsRemoved
    | VectorsReset
    | Reloaded
)


class Mirror:
    """Every in-process copy of the store's tables, kept equal to them (see the module)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.recall = _RecallCache()
        self.rows = _RowCache()
        self.meta: dict[str, str | None] = {}
        self.supersedes: dict[str, list[str]] | None = None
        self.text: Any = None
        self.vectors: dict[str, _Tail] = {}

    # -- reads: what a read fetched, kept while the mirror is on ------------------------------
    def row_read(self, u: str, row: dict[str, Any]) -> None:
        if self.enabled:
            self.rows.put(u, row)

    def meta_read(self, key: str, value: str | None) -> None:
        if self.enabled:
            self.meta[key] = value

    def listed_read(self, uids: list[str]) -> None:
        """The uids of every LinkList row: the recall columns keep which memories have one."""
        if self.enabled and self.recall.ready:
            self.recall.take_listed(uids)

    def supersedes_read(self, found: dict[str, list[str]]) -> None:
        if self.enabled:
            self.supersedes = found

    def text_read(self, index: Any) -> None:
        """The text copy, built from Kùzu's index tables (``kuzu.text_index``; None: too big)."""
        if self.enabled:
            self.text = index

    def vectors_read(self, namespace: str, tail: _Tail) -> None:
        if self.enabled:
            self.vectors[namespace] = tail

    def drop_snapshot(self) -> None:
        """Let go of the row snapshot (a pass about to hold a namespace's columns makes room:
        see ``maintain``); the next read that needs it takes it again."""
        self.recall.drop_snapshot()

    # -- writes --------------------------------------------------------------------------------
    def invalidate(self) -> None:
        """Drop every copy (after a change the copies cannot follow, or a rollback)."""
        self.recall.ready = False
        self.recall.end = None
        self.rows.clear()
        self.meta.clear()
        self.supersedes = None
        self.text = None
        self.vectors = {}

    def release(self) -> None:
        """Drop every copy and let go of what it holds (closing): :meth:`invalidate` keeps
        the recall columns' arrays until they are built again."""
        self.invalidate()
        self.recall = _RecallCache()

    def apply(self, change: Change) -> None:
        """Make the copies follow ``change``, a write this process sends to the table."""
        if not self.enabled:
            self.invalidate()
        elif isinstance(change, NodesWritten):
            self._nodes_written(change)
        elif isinstance(change, Adjusted):
            self._adjusted(change)
        elif isinstance(change, FieldsSet):
            self._fields_set(change)
        elif isinstance(change, LinksSet):
            for u, encoded in change.lists.items():
                self.recall.touched(u)
                if self.recall.ready:
                    self.recall.listed_now(u, u in change.apart)
                row = self.rows.get(u)
                if row is not None:
                    row["recent_links"] = encoded
        elif isinstance(change, Deleted):
            self._texts_changed(change.namespace, dict.fromkeys(change.ids))
            for i in change.ids:
                self.recall.drop(uid(change.namespace, i))
            self.supersedes = None
            self.rows.clear()  # the neighbours' recent-link lists changed
            self.recall.ready = False  # ... and their snapshot rows: rebuilt
        elif isinstance(change, EdgesWritten):
            if any(e.kind == SUPERSEDES for e in change.edges):
                self.supersedes = None  # read again at the next recall
        elif isinstance(change, MetaSet):
            self.meta[change.key] = change.value
        elif isinstance(change, KeysSet):
            self.rows.clear()  # many rows' keys changed: read them again
            cache = self.recall
            if change.offsets is None or not cache.ready or len(cache.key) < change.size:
                cache.ready = False
            else:
                cache.key[change.offsets] = change.keys[change.offsets]
                cache.stale(change.stale)
        elif isinstance(change, VectorsWritten):
            tail = self.vectors.get(change.namespace)
            if tail is not None:
                tail.add(change.uids, change.matrix)
        elif isinstance(change, VectorsRemoved):
            tail = self.vectors.get(change.namespace)
            if tail is not None:
                tail.remove(change.uids)
        elif isinstance(change, VectorsReset):
            if change.namespace is None:
                self.vectors = {}
            else:
                self.vectors.pop(change.namespace, None)
        elif isinstance(change, Reloaded):
            self.invalidate()
        else:  # pragma: no cover - a change type this mirror does not know
            self.invalidate()

    def _nodes_written(self, change: NodesWritten) -> None:
        recall, text = self.recall, self.text
        for n, o in zip(change.nodes, change.offsets, strict=True):
            u = uid(n.namespace, n.id)
            if change.fresh:
                self.rows.put(u, {**node_row(n), "recent_links": ""})
            else:
                cached = self.rows.get(u)
                if cached is not None:
                    cached.update(node_row(n))  # its recent-link list is kept as it was
            if text is not None:
                text.put(o, n.text)
            if change.fresh or recall.end is not None:  # Kùzu 0.11.3 appends new rows
                recall.end = max(recall.end or 0, o + 1)
            if recall.ready:
                recall.put(o, n)

    def _adjusted(self, change: Adjusted) -> None:
        namespace, changes = change.namespace, change.changes
        self._texts_changed(
            namespace, {i: a.fields["text"] for i, a in changes.items() if "text" in a.fields}
        )
        cache = self.recall
        if cache.ready:
            if change.pushed:
                cache.ready = False  # neighbours' keys change: rebuilt on next use
            for node_id, adj in changes.items():
                o = cache.offset.get(uid(namespace, node_id))
                if o is None:
                    continue
                cache.fresh[o] = False
                cache.key[o] += adj.key_delta
                for f, v in adj.fields.items():
                    if f == "tier":
                        cache.tier[o] = int(v)
                    elif f == "pinned":
                        cache.pinned[o] = bool(v)
                    elif f == "key":
                        cache.key[o] = float(v)
                    elif f == "kind":
                        cache.kind[o] = v
        if change.pushed:
            self.rows.clear()  # neighbours' keys change too: read them again
            return
        for node_id, adj in changes.items():
            row = self.rows.get(uid(namespace, node_id))
            if row is None:
                continue
            row["base_key"] = (row["base_key"] or 0.0) + adj.base_delta
            row["degree"] = (row["degree"] or 0) + adj.degree_delta
            row["key"] = (row["key"] or 0.0) + adj.key_delta
            for f, v in adj.fields.items():
                col, value = field_value(f, v)
                row[col] = value

    def _fields_set(self, change: FieldsSet) -> None:
        import numpy as np

        self._texts_changed(change.namespace, change.texts)
        uids, table = change.uids, change.columns
        cache = self.recall
        if cache.ready:
            at = [cache.offset.get(u, -1) for u in uids]
            found = np.array([o >= 0 for o in at], np.bool_)
            offs = np.array(at, np.int64)[found]
            cache.stale(offs)
            for f in ("tier", "pinned", "key"):
                if f in table:
                    getattr(cache, f)[offs] = np.array(table[f])[found]
            if "kind" in table:
                for o, v in zip(at, table["kind"], strict=True):
                    if o >= 0:
                        cache.kind[o] = v
        for k, u in enumerate(uids):
            row = self.rows.rows.get(u)
            if row is not None:
                for name, values in table.items():
                    row[name] = values[k]

    def _texts_changed(self, namespace: str, texts: Mapping[str, str | None]) -> None:
        """Memories of ``namespace`` have new ``texts`` (None: deleted): the text copy
        follows (or is dropped, to be built again, when it cannot tell their offsets)."""
        if self.text is None or not texts:
            return
        for node_id, text in texts.items():
            o = self.recall.offset.get(uid(namespace, node_id)) if self.recall.ready else None
            if o is None:
                self.text = None
                return
            if text is None:
                self.text.drop(o)
            else:
                self.text.put(o, text)
