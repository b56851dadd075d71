"""The Neo4j store's import path: columns sent as columns, links made by element id.

An import sends each batch as one list per column (``UNWIND range(0, size($id) - 1) AS i
CREATE (n:Memory {id: $id[i], …})``) rather than as a list of row maps: no dict per row in the
client and less to encode. The statement that creates a batch of memories returns their element
ids, and a link whose two ends were created by the same call is made from them
(``MATCH (a) WHERE elementId(a) = …``): a direct record lookup instead of a seek of the
``(ns, id)`` index, which inside a transaction that has just created those nodes must also
search the transaction's own uncommitted index changes. Links to memories stored before the
call fall back to the index. Measured figures are in ``docs/neo4j.md``.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, TypeVar

from ..errors import InvalidInput
from ..records import EDGE_COLUMNS, NODE_COLUMNS
from .hubs import ends_of_links
from .queries import IMPORT_MARKER, IN_NS, _batches, _pylist
from .rescore import WATERMARK, drop_watermarks, stored_signature
from .session import Neo4jSession

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Scoring columns an import may carry (else they start at zero, as ``bulk_insert`` says).
_SCORES = {"base_key": "0.0", "key": "0.0", "degree": "0"}
_LINK = (
    "CREATE (a)-[:LINK {kind: $kind[i], weight: toFloat($weight[i]), "
    "created_us: $created_us[i], reinforced_us: $reinforced_us[i], "
    "props: CASE $props[i] WHEN '{}' THEN null ELSE $props[i] END}]->(b)"
)
#: Links whose ends were created in this call: by element id.
LINKS_BY_ELEMENT_ID = (
    "UNWIND range(0, size($a) - 1) AS i "
    "MATCH (a) WHERE elementId(a) = $a[i] MATCH (b) WHERE elementId(b) = $b[i] " + _LINK
)
#: Links to memories stored before: by the ``(ns, id)`` index.
LINKS_BY_ID = (
    "UNWIND range(0, size($src) - 1) AS i "
    "MATCH (a:Memory {ns: $namespace[i], id: $src[i]}) "
    "MATCH (b:Memory {ns: $namespace[i], id: $dst[i]}) " + _LINK
)


def create_nodes_query(columns: Sequence[str]) -> str:
    """``CREATE`` for a batch of node columns named ``columns`` (returns ``i`` and element id).

    Only this module's known column names reach the query text; anything else is refused.
    """
    unknown = set(columns) - set(NODE_COLUMNS) - set(_SCORES)
    if unknown or "id" not in columns:
        raise InvalidInput(
            f"bulk_insert node columns {sorted(unknown) or ['id (missing)']} are not import "
            f"columns: use those of ebb_core.records.NODE_COLUMNS",
            field="nodes",
        )
    props = [f"{'ns' if c == 'namespace' else c}: ${c}[i]" for c in columns]
    props += [f"{c}: {zero}" for c, zero in _SCORES.items() if c not in columns]
    return (
        "UNWIND range(0, size($id) - 1) AS i "
        f"CREATE (n:Memory {{{', '.join(props)}}}) RETURN i, elementId(n) AS e"
    )


def create_nodes(tx: Any, nodes: Mapping[str, Sequence[Any]], batch: int) -> list[str]:
    """Create ``nodes`` (columns) in batches; their element ids, in column order."""
    names = list(nodes)
    if not names or not len(nodes[names[0]]):
        return []
    query = create_nodes_query(names)
    total = len(nodes[names[0]])
    out: list[str] = [""] * total
    for lo in range(0, total, batch):
        params = {c: _pylist(nodes[c][lo : lo + batch]) for c in names}
        for r in tx.run(query, params):
            out[lo + r["i"]] = r["e"]
    return out


def link_ends(
    edges: Mapping[str, Sequence[Any]],
    nodes: Mapping[str, Sequence[Any]],
    element_ids: Sequence[str],
    ends: tuple[Any, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split ``edges`` (columns) into those whose two ends are among ``nodes`` (created with
    ``element_ids``), as ``a``/``b`` element-id columns for :data:`LINKS_BY_ELEMENT_ID`, and the
    rest, for :data:`LINKS_BY_ID` (as Arrow arrays). ``ends``, if the caller matched them (see
    ``bulk_insert``): each edge's ``src`` and ``dst`` row among ``nodes`` (null outside), taken
    as they are instead of matching the keys again (~2 s of a 1M import)."""
    if set(edges) != set(EDGE_COLUMNS):
        raise InvalidInput(
            f"bulk_insert edge columns must be {list(EDGE_COLUMNS)}, got {sorted(edges)}",
            field="edges",
        )
    import pyarrow as pa
    import pyarrow.compute as pc

    total = len(edges["src"])
    eid = {c: pa.nulls(total, pa.string()) for c in ("src", "dst")}
    if element_ids and total:
        eids = pa.array(element_ids, pa.string())
        if ends is not None:
            for c, at in zip(("src", "dst"), ends, strict=True):
                eid[c] = eids.take(_arrow(at))
        else:
            known = _keys(nodes["namespace"], nodes["id"])
            for c in ("src", "dst"):
                eid[c] = eids.take(pc.index_in(_keys(edges["namespace"], edges[c]), known))
    direct = pc.and_(pc.is_valid(eid["src"]), pc.is_valid(eid["dst"]))
    cols = {c: _arrow(edges[c]) if total else pa.array([]) for c in EDGE_COLUMNS}
    by_eid = {c: cols[c].filter(direct) for c in EDGE_COLUMNS if c not in ("namespace",)}
    by_eid["a"], by_eid["b"] = eid["src"].filter(direct), eid["dst"].filter(direct)
    del by_eid["src"], by_eid["dst"]
    by_id = {c: cols[c].filter(pc.invert(direct)) for c in EDGE_COLUMNS}
    return by_eid, by_id


def write_links(tx: Any, query: str, part: Mapping[str, Any], lo: int, hi: int, batch: int) -> int:
    """Rows ``lo``..``hi`` of ``part`` (from :func:`link_ends`) through ``query``, ``batch``
    rows per statement; returns the number of rows written."""
    hi = min(hi, rows(part))
    for at in range(lo, hi, batch):
        params = {c: v.slice(at, min(batch, hi - at)).to_pylist() for c, v in part.items()}
        tx.run(query, params).consume()
    return max(0, hi - lo)


def rows(part: Mapping[str, Any]) -> int:
    return len(next(iter(part.values()))) if part else 0


def create_links(
    tx: Any,
    edges: Mapping[str, Sequence[Any]],
    nodes: Mapping[str, Sequence[Any]],
    element_ids: Sequence[str],
    batch: int,
    ends: tuple[Any, Any] | None = None,
) -> None:
    """Create ``edges`` (columns): by element id where both ends are among ``nodes`` (created
    by this call, with ``element_ids``), else through the ``(ns, id)`` index. ``ends``: as for
    :func:`link_ends`."""
    if not len(edges.get("src", ())) and set(edges) == set(EDGE_COLUMNS):
        return
    by_eid, by_id = link_ends(edges, nodes, element_ids, ends)
    for query, part in ((LINKS_BY_ELEMENT_ID, by_eid), (LINKS_BY_ID, by_id)):
        write_links(tx, query, part, 0, rows(part), batch)


def _arrow(column: Any) -> Any:
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks()
    if isinstance(column, pa.Array):
        return column
    return pa.array(list(column))


def _keys(namespaces: Any, ids: Any) -> Any:
    """One string per row naming a memory across namespaces (neither part holds ``\\x1f``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.binary_join_element_wise(
        _arrow(namespaces).cast(pa.string()), _arrow(ids).cast(pa.string()), "\x1f"
    )


def _namespaces(
    nodes: Mapping[str, Sequence[Any]], edges: Mapping[str, Sequence[Any]]
) -> list[str]:
    """The namespaces of an import's memories and links."""
    names = set(_pylist(nodes.get("namespace", [])))
    return sorted(names | set(_pylist(edges.get("namespace", []))))


def _ends_inside(
    nodes: Mapping[str, Sequence[Any]],
    edges: Mapping[str, Sequence[Any]],
    ends: tuple[Any, Any] | None,
) -> bool:
    """Whether both ends of every edge are among ``nodes`` (``ends``: their rows among them,
    if the caller matched them)."""
    if not len(edges.get("src", ())):
        return True
    import pyarrow.compute as pc

    if ends is not None:
        return all(at.null_count == 0 for at in ends)
    known = _keys(nodes["namespace"], nodes["id"])
    return all(
        bool(pc.all(pc.is_in(_keys(edges["namespace"], edges[c]), value_set=known)).as_py())
        for c in ("src", "dst")
    )


class _Stage:
    """An import being committed batch by batch: its marker and what it has created."""

    def __init__(self) -> None:
        self.marker: str | None = None
        self.created: list[str] = []
        #: The memories its links end at (by namespace) whose hubs' lists it may have changed
        #: (``Neo4jStore.bulk_load`` makes them again at its end): those with more than
        #: ``HUB_LINKS`` links in a staged import (into empty namespaces), else every end.
        self.ends: dict[str, set[str]] = {}


def _note_ends(stage: _Stage, ends: Mapping[str, Sequence[str]]) -> None:
    for ns, ids in ends.items():
        stage.ends.setdefault(ns, set()).update(ids)


#: A staged batch's progress, kept on its marker in the batch's own transaction.
_PROGRESS = "MATCH (m:Meta {key: $k}) SET m.memories = m.memories + $n, m.links = m.links + $l"


class Neo4jBulk(Neo4jSession):
    """The import half of ``Neo4jStore``: ``bulk_load`` and ``bulk_insert``."""

    # A failed or interrupted import deletes what its committed batches created (bulk_load).
    bulk_rollback_safe = True
    #: How many batch transactions a staged import keeps running at once (sessions of their
    #: own); 1 (the default) writes them one after the other. Two at once measured x0.87-0.93
    #: at 10k under load, but x0.90-1.30 at 100k into a growing store (docs/neo4j.md).
    import_writers = 1

    @contextmanager
    def bulk_load(self, rows: int) -> Iterator[None]:
        """An import (``Brain.import_``) into empty namespaces is committed in batches.

        Within this block, a ``bulk_insert`` whose nodes carry their keys (the Brain computes them
        from the file only when the namespaces are empty and every link is inside the file) writes
        its memories, then its links, in transactions of ``batch_size`` rows (``import_writers`` of
        them at once), so the server's transaction memory stays bounded however large the file. A
        ``Meta`` marker (``import:<hex>``), committed first, names the namespaces and counts what
        each batch committed (in that batch's transaction); it is deleted in the caller's
        transaction, which commits the audit entries and tier reference: so the marker is gone
        exactly when the whole import is in. On an error or Ctrl-C the memories this import created
        are deleted again (with their links) and the marker with them; if that is impossible (the
        server is gone, or the process was killed), the marker stays, and opening the store warns
        (:class:`~ebb_core.errors.ImportInterrupted`) with what is there and how to remove it
        (:meth:`discard_import`). Readers see the batches as they commit.
        """
        state = self._local
        if state.stage is not None or state.tx is not None:
            yield
            return
        stage = state.stage = _Stage()
        try:
            yield
        except BaseException:
            if stage.marker is not None:
                self._undo(stage)
            raise
        finally:
            state.stage = None

    def bulk_insert(
        self,
        nodes: Mapping[str, Sequence[Any]],
        edges: Mapping[str, Sequence[Any]],
        *,
        ends: tuple[Any, Any] | None = None,
    ) -> None:
        # Columns go as columns, batch by batch (a million memories and five million links as
        # row dicts at once took ~8 GB in the client); links between memories created here are
        # made by element id.
        stage = self._local.stage
        if (
            stage is not None
            and stage.marker is None
            and set(_SCORES) <= set(nodes)
            and len(nodes["id"])
            and _ends_inside(nodes, edges, ends)
        ):
            _note_ends(stage, ends_of_links(edges, hubs=True))
            self._staged(stage, nodes, edges, ends)
            return
        if stage is not None:
            _note_ends(stage, ends_of_links(edges))

        def work(tx: Any) -> None:
            # Imported memories carry no :Rescore label: their namespaces' next re-score is a
            # full one (.rescore).
            drop_watermarks(self, tx, _namespaces(nodes, edges))
            element_ids = create_nodes(tx, nodes, self._batch)
            create_links(tx, edges, nodes, element_ids, self._batch, ends)

        self._unit(work)

    def _staged(
        self,
        stage: _Stage,
        nodes: Mapping[str, Sequence[Any]],
        edges: Mapping[str, Sequence[Any]],
        ends: tuple[Any, Any] | None,
    ) -> None:
        n, m, step = len(nodes["id"]), len(edges["src"]), self._batch
        info = {
            "namespaces": sorted(set(_pylist(nodes["namespace"]))),
            "memories": n,
            "links": m,
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        marker = f"{IMPORT_MARKER}{uuid.uuid4().hex}"

        def begin(tx: Any) -> None:
            drop_watermarks(self, tx, _namespaces(nodes, edges))  # see bulk_insert
            tx.run(
                "CREATE (:Meta {key: $k, value: $v, memories: 0, links: 0})",
                {"k": marker, "v": json.dumps(info)},
            ).consume()

        self._apart(begin)
        stage.marker = marker
        parts: list[list[str]] = [[] for _ in range(0, n, step)]

        def make(lo: int) -> Callable[[Any], list[str]]:
            def work(tx: Any) -> list[str]:
                got = create_nodes(tx, {c: v[lo : lo + step] for c, v in nodes.items()}, step)
                tx.run(_PROGRESS, {"k": marker, "n": len(got), "l": 0}).consume()
                return got

            return work

        def made(i: int, got: list[str]) -> None:
            parts[i] = got
            stage.created.extend(got)

        self._batches_apart([make(lo) for lo in range(0, n, step)], made)
        by_eid, _ = link_ends(edges, nodes, [e for part in parts for e in part], ends)

        def link(lo: int) -> Callable[[Any], None]:
            def work(tx: Any) -> None:
                done = write_links(tx, LINKS_BY_ELEMENT_ID, by_eid, lo, lo + step, step)
                tx.run(_PROGRESS, {"k": marker, "n": 0, "l": done}).consume()

            return work

        self._batches_apart([link(lo) for lo in range(0, m, step)], lambda i, _: None)
        self._run("MATCH (m:Meta {key: $k}) DELETE m", {"k": marker})
        # Keys computed from the file with this store's epoch and settings (the Brain's):
        # the first maintain re-scores only what changes after the import (.rescore).
        mark = stored_signature(self.get_meta)
        if mark is not None:
            for ns in _namespaces(nodes, edges):
                self.set_meta(WATERMARK + ns, mark)
        if self._local.tx is None:  # committed just now: nothing left to undo
            stage.marker = None

    def _batches_apart(
        self, works: Sequence[Callable[[Any], T]], done: Callable[[int, T], None]
    ) -> None:
        """Run each of ``works`` in a write transaction of its own (:meth:`_apart`), up to
        ``import_writers`` at once, and call ``done(i, result)`` in this thread as work ``i``
        commits. On the first error no more are started, the running ones are waited for (and
        reported as they commit), then the error is raised; a Ctrl-C while waiting does the
        same. So every batch that committed has been reported to ``done``, and an undo can
        find it."""
        self._local.reads = None  # the batches write: what recall read ahead is stale
        writers = max(1, int(self.import_writers))
        if writers == 1 or len(works) <= 1:
            for i, work in enumerate(works):
                done(i, self._apart(work))
            return
        from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

        todo = list(enumerate(works))[::-1]
        running: dict[Future[T], int] = {}
        error: BaseException | None = None
        pool = ThreadPoolExecutor(writers, thread_name_prefix="ebb-import")
        try:
            while todo or running:
                while todo and error is None and len(running) < writers:
                    i, work = todo.pop()
                    running[pool.submit(self._apart, work)] = i
                if not running:
                    break
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for f in finished:
                    i = running.pop(f)
                    exc = f.exception()
                    if exc is None:
                        done(i, f.result())
                    elif error is None:
                        error = exc
        except BaseException:  # Ctrl-C while waiting: let the running batches end, report them
            for f, i in running.items():
                if f.cancel():
                    continue
                try:
                    done(i, f.result())
                except Exception:  # that batch rolled back: nothing to report
                    continue
            raise
        finally:
            pool.shutdown(wait=True)
        if error is not None:
            raise error

    def _undo(self, stage: _Stage) -> None:
        """Delete what a failed staged import created, then its marker (best effort)."""
        try:
            gone = "UNWIND $e AS e MATCH (n) WHERE elementId(n) = e DETACH DELETE n"
            for part in _batches(stage.created, self._batch):

                def work(tx: Any, ids: Sequence[str] = part) -> None:
                    tx.run(gone, {"e": list(ids)}).consume()

                self._apart(work)
            drop = "MATCH (m:Meta {key: $k}) DELETE m"
            self._apart(lambda tx: tx.run(drop, {"k": stage.marker}).consume())
        except Exception as exc:  # the import's own error is what the caller gets
            log.warning(
                "could not remove the unfinished import's %d memories (%s): opening the store "
                "will report them",
                len(stage.created),
                exc,
            )

    def discard_import(self, marker: str) -> int:
        """Remove an unfinished import (see :meth:`unfinished_imports`): every memory of its
        namespaces, with their links, then its marker. Its namespaces were empty when it began,
        but anything written to them since goes too: a human's call. Returns memories deleted.
        """
        found = [i for i in self.unfinished_imports() if i["marker"] == marker]
        if not found:
            raise InvalidInput(
                f"no unfinished import {marker!r}: see Neo4jStore.unfinished_imports()",
                field="marker",
            )
        deleted = 0
        for ns in found[0]["namespaces"]:
            deleted += self._read(
                f"MATCH (n:Memory) WHERE {IN_NS} RETURN count(n) AS c", {"ns": ns}
            )[0]["c"]
            self._autocommit(
                f"MATCH (n:Memory) WHERE {IN_NS} "
                "CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF $batch ROWS",
                {"ns": ns, "batch": self._batch},
            )
        self._run("MATCH (m:Meta {key: $k}) DELETE m", {"k": marker})
        return int(deleted)
