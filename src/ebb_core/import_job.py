"""An import's plan, for :meth:`~ebb_core.engine.Brain.import_` (:mod:`ebb_core.transfer`).

What an import reads (a path or a stream's bytes), the parsed records checked and matched
(:class:`_ImportJob`: ids unique per namespace, edge ends among the memories or named as
dangling), the refusals made before anything is written, the rows inserted in batches and the
audit entries appended; the Arrow column helpers they share; and the SIGINT gate that lets an
interrupted import say whether it committed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from . import records
from .errors import InvalidInput
from .model import AuditEntry
from .validation import validate_namespace

Progress = Callable[[int, int], None]
"""A progress callback: ``(done, total)``."""


def _import_source(src: str | os.PathLike[str] | IO[str]) -> bytes | Path:
    """What an import reads: the file's path (read in pieces by the parser, and as text only
    if the line-by-line path needs it: a 1M-memory export is ~1.5 GB, which the import held
    twice, text and bytes), or the bytes of an open stream."""
    if isinstance(src, (str, os.PathLike)):
        path = Path(src)
        if not path.is_file():
            raise InvalidInput(f"no such file to import: {path}", field="src")
        return path
    read = src.read()
    return read.encode() if isinstance(read, str) else read


def _first_line(source: bytes | Path) -> str:
    """The first non-blank line of the export (where its header is, if it has one)."""
    if isinstance(source, bytes):
        return source.lstrip().split(b"\n", 1)[0].decode("utf-8")
    with open(source, "rb") as fh:
        for line in fh:
            if line.strip():
                return line.strip().decode("utf-8")
    return ""


_THREADED_FROM = 100_000  # links from which the two ends are matched in two threads


class _ImportJob:
    """What one import stores, checked: its columns, audit entries, ids by namespace, and its
    edges' ends matched against its memories (``ends``: their positions among them, null
    outside; ``dangling``: the ends outside the file, which must already be stored)."""

    def __init__(
        self, node_cols: records.Columns, edge_cols: records.Columns, audits: list[AuditEntry]
    ) -> None:
        self.node_cols, self.edge_cols, self.audits = node_cols, edge_cols, audits
        self.n_nodes, self.n_edges = len(node_cols["id"]), len(edge_cols["src"])
        self.node_keys: Any = _keyed(node_cols["namespace"], node_cols["id"])
        self.ids_by_ns = _ids_by_namespace(node_cols, self.node_keys)
        self.edge_namespaces: set[str] = set()
        self.ends: list[Any] = []
        self.dangling: dict[str, set[str]] = {}

    @classmethod
    def plan(
        cls, node_cols: records.Columns, edge_cols: records.Columns, audits: list[AuditEntry]
    ) -> _ImportJob:
        """The job for these parsed records: ids unique per namespace, namespaces valid, and
        every edge end found among the memories or named as dangling."""
        job = cls(node_cols, edge_cols, audits)
        job._match_ends()
        return job

    def _match_ends(self) -> None:
        """Edge ends, matched against the imported memories column-wise (500k edges in Python
        loops took ~0.7 s): what is not among them must already be stored."""
        import pyarrow.compute as pc

        edge_cols = self.edge_cols
        edge_ns = _column(edge_cols["namespace"], "string")
        self.edge_namespaces = set(pc.unique(edge_ns).to_pylist())
        # each end's position among the memories (null: outside the file), matched once and
        # kept for the keys (transfer._file_keys) and the store (bulk_insert's ends); the two
        # ends in two threads (Arrow releases the GIL: 1.2-1.5 against 1.8-2.6 s for 5M links)
        node_keys = self.node_keys

        def match(c: str) -> Any:
            return pc.index_in(_keyed(edge_ns, edge_cols[c]), value_set=node_keys)

        if len(edge_ns) < _THREADED_FROM:
            self.ends = [match("src"), match("dst")]
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(2, thread_name_prefix="ebb-ends") as pool:
                self.ends = list(pool.map(match, ("src", "dst")))
        for c, at in zip(("src", "dst"), self.ends, strict=True):
            if not at.null_count:
                continue
            outside = pc.is_null(at)
            far = _column(edge_cols[c], "string").filter(outside).to_pylist()
            for ns, x in zip(edge_ns.filter(outside).to_pylist(), far, strict=True):
                self.dangling.setdefault(ns, set()).add(x)

    def release(self) -> None:
        """Let the stored columns go (the counts and namespaces stay)."""
        self.node_cols, self.edge_cols, self.ends, self.ids_by_ns = {}, {}, [], {}


def _ids_by_namespace(node_cols: records.Columns, keys: Any) -> dict[str, Any]:
    """The imported ids by namespace (Arrow arrays, in the file's order; ``keys``: the nodes'
    namespaced ids, :func:`_keyed`); an id twice in a namespace, or a bad namespace, is
    refused. Column-wise: 1M ids in Python sets took ~3 s."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pc.count_distinct(keys).as_py() < len(keys):
        _refuse_repeated_id(node_cols)
    ns = _column(node_cols["namespace"], "string")
    ids = _column(node_cols["id"], "string")
    names = pc.unique(ns).to_pylist()
    for name in names:
        validate_namespace(name)
    if len(names) <= 1:
        return {name: ids for name in names}
    grouped = pa.table({"ns": ns, "id": ids}).group_by("ns", use_threads=False)
    lists = grouped.aggregate([("id", "list")])
    return {name: lists["id_list"][i].values for i, name in enumerate(lists["ns"].to_pylist())}


def _refuse_repeated_id(node_cols: records.Columns) -> None:
    """Refuse the import, naming the first id that appears twice in a namespace."""
    seen: set[tuple[str, str]] = set()
    for ns, node_id in zip(_pylist(node_cols["namespace"]), _pylist(node_cols["id"]), strict=True):
        if (ns, node_id) in seen:
            raise InvalidInput(
                f"memory {node_id!r} appears twice in the import (namespace {ns!r})",
                field="src",
            )
        seen.add((ns, node_id))


def _refuse_clashes(store: Any, job: _ImportJob) -> None:
    """Refuse (nothing written) an import whose ids already exist, or whose edges point at a
    memory neither in the file nor stored."""
    for ns, ids in job.ids_by_ns.items():
        clash = store.existing_ids(ns, _pylist(ids))
        if clash:
            raise InvalidInput(
                f"memory {sorted(clash)[0]!r} already exists in namespace {ns!r} "
                f"({len(clash)} clash in all): import into an empty namespace "
                "(--into) or a new store; nothing was imported",
                field="src",
            )
    for ns, missing in job.dangling.items():
        absent = missing - store.existing_ids(ns, list(missing))
        if absent:
            raise InvalidInput(
                f"an edge points at memory {sorted(absent)[0]!r}, which is neither in the "
                f"import nor in namespace {ns!r}; nothing was imported",
                field="src",
            )


def _insert_in_batches(store: Any, job: _ImportJob, batch: int, progress: Progress | None) -> None:
    """Insert the rows ``batch`` memories at a time, then the edges (in one pass)."""
    total, done = job.n_nodes + job.n_edges, 0
    node_cols, edge_cols = job.node_cols, job.edge_cols
    for lo in range(0, job.n_nodes, batch):
        nodes_part = {c: v[lo : lo + batch] for c, v in node_cols.items()}
        store.bulk_insert(nodes_part, {c: [] for c in edge_cols})
        done += len(nodes_part["id"])
        if progress:
            progress(done, total)
    for lo in range(0, job.n_edges, 10 * batch):  # one pass
        edges_part = {c: v[lo : lo + 10 * batch] for c, v in edge_cols.items()}
        store.bulk_insert({c: [] for c in node_cols}, edges_part)
        done += len(edges_part["src"])
        if progress:
            progress(done, total)


def _append_audits(store: Any, audits: list[AuditEntry]) -> None:
    """Append the imported audit entries after each namespace's own, renumbered."""
    by_audit_ns: dict[str, list[AuditEntry]] = {}
    for a in audits:
        by_audit_ns.setdefault(a.namespace, []).append(a)
    for ns, entries in by_audit_ns.items():
        offset = store.last_audit_seq(ns)
        entries.sort(key=lambda a: a.seq)
        store.append_audit([a.model_copy(update={"seq": a.seq + offset}) for a in entries])


class _InterruptGate:
    """SIGINT handling for a critical stretch: while held, Ctrl-C is recorded instead of raised,
    and ``release`` raises it. Only the main thread receives signals; elsewhere it does nothing."""

    def __init__(self) -> None:
        self._held = self._pending = False
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> _InterruptGate:
        import signal

        if threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGINT)
            if previous is signal.default_int_handler:  # only replace Python's own handler
                self._previous = previous
                signal.signal(signal.SIGINT, self._on_sigint)
                self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self._held:
            self._pending = True
        else:
            raise KeyboardInterrupt

    def hold(self) -> None:
        self._held = True

    def release(self) -> None:
        self._held = False
        if self._pending:
            self._pending = False
            raise KeyboardInterrupt


def _column(column: Any, typ: str) -> Any:
    """``column`` (a list or an Arrow array, as import columns come) as an Arrow chunked array."""
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):
        return column.cast(typ)
    if isinstance(column, pa.Array):
        return pa.chunked_array([column]).cast(typ)
    return pa.chunked_array([pa.array(column, typ)], typ)


def _keyed(namespaces: Any, ids: Any) -> Any:
    """``namespace`` and ``id`` joined by a control character (neither may hold one): one
    string per row naming a memory across namespaces."""
    import pyarrow.compute as pc

    return pc.binary_join_element_wise(
        _column(namespaces, "string"), _column(ids, "string"), "\x1f"
    )


def _pylist(column: Any) -> list[Any]:
    return column if isinstance(column, list) else column.to_pylist()
