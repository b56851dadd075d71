"""Export and import of a :class:`~ebb_core.engine.Brain`'s memories as JSON Lines.

:class:`TransferMixin` holds ``Brain.export`` and ``Brain.import_`` (with the vectors an export
carries); the record parsing and Arrow column helpers they use are the functions below.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from . import records, scoring
from .brain_base import BrainBase
from .embeddings import META_DIM, META_MODEL
from .errors import InvalidInput
from .import_job import Progress as Progress
from .import_job import (
    _append_audits,
    _column,
    _first_line,
    _import_source,
    _ImportJob,
    _insert_in_batches,
    _InterruptGate,
    _pylist,
    _refuse_clashes,
)
from .model import AuditEntry, Node, Tier, slugify
from .validation import is_valid_kind, validate_namespace

EXPORT_FORMAT = "ebb-export"
VECTOR_RECORD = "vector"
EXPORT_VERSION = 1
_AUDIT_PAGE = 5000  # audit entries per read while exporting


class TransferMixin(BrainBase):
    """``Brain.export`` and ``Brain.import_`` (on :class:`BrainBase`)."""

    last_import: dict[str, int] | None = None

    # -- export / import -------------------------------------------------------------------------
    def export(
        self, dest: str | os.PathLike[str] | IO[str], *, all_namespaces: bool = False
    ) -> int:
        """Write this namespace (or every namespace) as JSON Lines. Returns the records written.

        Lossless: ids, text, props, timestamps, weights, tiers, pins, the review queue, the
        audit log and the memories' vectors (``{"type": "vector", ...}`` records naming their
        model, float32 values written exactly). Keys are derived state and are recomputed on
        import.
        """
        if isinstance(dest, (str, os.PathLike)):
            with open(dest, "w", encoding="utf-8") as fh:
                return self.export(fh, all_namespaces=all_namespaces)
        store = self._s.store
        namespaces = store.namespaces() if all_namespaces else [self._ns]
        header = {"type": EXPORT_FORMAT, "version": EXPORT_VERSION, "namespaces": namespaces}
        dest.write(json.dumps(header) + "\n")
        n = 1
        for ns in namespaces:
            for batch in store.scan_nodes(ns):
                for node in batch:
                    dest.write(json.dumps({"type": "node", **_node_record(node)}) + "\n")
                    n += 1
            for ebatch in store.scan_edges(ns):
                for edge in ebatch:
                    dest.write(json.dumps({"type": "edge", **edge.model_dump(mode="json")}) + "\n")
                    n += 1
            model = store.get_meta(META_MODEL) if store.supports_vectors else None
            if model is not None:
                for batch in store.scan_nodes(ns):
                    vecs = store.vectors_of(ns, [x.id for x in batch])
                    for x in batch:
                        if x.id in vecs:
                            rec: dict[str, Any] = {"type": VECTOR_RECORD, "namespace": ns}
                            rec["id"] = x.id
                            rec |= {"model": model, "vector": [float(v) for v in vecs[x.id]]}
                            dest.write(json.dumps(rec) + "\n")
                            n += 1
            after = 0  # forward pages: the oldest entries above `after`, every one in turn
            while True:
                entries = store.audit_log(ns, _AUDIT_PAGE, after_seq=after)
                if not entries:
                    break
                for a in entries:
                    dest.write(json.dumps({"type": "audit", **a.model_dump(mode="json")}) + "\n")
                    n += 1
                after = entries[-1].seq
        return n

    def import_(
        self,
        src: str | os.PathLike[str] | IO[str],
        *,
        namespace: str | None = None,
        progress: Progress | None = None,
        batch: int = 100_000,
    ) -> dict[str, int]:
        """Load an export. Memories keep their namespaces unless ``namespace`` puts them all in one.

        Refuses (changing nothing) if a memory id already exists or the file is malformed.
        Returns counts of nodes, edges and audit entries loaded, which are also kept in
        ``last_import`` from the moment the import commits (so that a caller interrupted
        afterwards can tell that it did). A Ctrl-C before the commit rolls it back (the store
        undoes what it committed, see its ``bulk_load``; on a store whose
        ``bulk_rollback_safe`` is false, only before the first row is written: from then on
        it waits for the commit); after it,
        :class:`CommittedInterrupt` (a ``KeyboardInterrupt``) carries the counts.
        """
        self.last_import = None
        source = _import_source(src)
        target = validate_namespace(namespace) if namespace else None
        parsed, carried = self._read_export(source, target)
        source = b""  # parsed: the file's bytes are not needed again
        job = _ImportJob.plan(*parsed)
        del parsed
        counts = {"nodes": job.n_nodes, "edges": job.n_edges, "audit": len(job.audits)}
        # What the vectors step needs once the import has committed (the columns are let go).
        to_embed = (
            {c: job.node_cols[c] for c in ("namespace", "id", "text")}
            if carried or self._s.embedder is not None
            else None
        )
        gate, committed = _InterruptGate(), False
        try:
            with gate, self._s.lock, self._s.store.bulk_load(job.n_nodes):
                try:
                    with self._tx():
                        self._load(job, batch, progress, gate)
                        # The columns are stored: let them go before the text index is built
                        # (as bulk_load ends), which needs the memory at a million memories.
                        job.release()
                        # Ctrl-C from here waits for the commit to end, so that an interrupted
                        # import is reported as what it is: rolled back, or committed.
                        gate.hold()
                except BaseException:
                    # The store undoes what the import committed (Kùzu's bulk_load deletes the
                    # rows its COPYs committed): a Ctrl-C waits for that.
                    gate.hold()
                    raise
                committed = True
                self.last_import = counts  # set before any Ctrl-C can be raised again
                gate.release()  # a Ctrl-C during the commit is raised now, after it
        except KeyboardInterrupt:
            if committed:
                raise CommittedInterrupt(counts) from None
            raise
        if to_embed is not None:
            counts["vectors"] = self._import_vectors(to_embed, carried)
            self.last_import = counts
        return counts

    def _read_export(
        self, source: bytes | Path, target: str | None
    ) -> tuple[
        tuple[records.Columns, records.Columns, list[AuditEntry]],
        dict[tuple[str, str], tuple[str, Any]],
    ]:
        """The parsed export and its vector records by (namespace, id) (``_split_vectors``).

        The column-wise parse is tried on the file as it is first: it refuses every record
        type it does not know (:class:`records.SlowPath`), vector records included, so a
        file it reads to the end carries none and is not searched for them (the search took
        ~4 s of a 1M-memory import, 2026-12-03). Otherwise the vector records are taken out
        and the rest parsed again (column-wise, else line by line), as before."""
        try:
            return self._parse_import(source, target, fallback=False), {}
        except records.SlowPath:
            source, carried = _split_vectors(source, target)
            return self._parse_import(source, target), carried

    def _parse_import(
        self, source: bytes | Path, target: str | None, *, fallback: bool = True
    ) -> tuple[records.Columns, records.Columns, list[AuditEntry]]:
        """The export's node and edge columns and its audit entries: parsed column-wise with
        Arrow, or line by line when the file needs it (:class:`records.SlowPath`, raised
        instead without ``fallback``)."""

        def lines() -> list[str]:
            data = source.read_bytes() if isinstance(source, Path) else source
            return [line for line in data.decode("utf-8").splitlines() if line.strip()]

        try:
            node_cols, edge_cols, audit_rows = records.read_columns(source, target)
            if audit_rows:
                numbered = lines()
                audits = [_audit_record(numbered[i], i + 1, target) for i in audit_rows]
            else:
                audits = []
            head = _first_line(source)
            if '"ebb-export"' in head:
                _check_header(head)
        except records.SlowPath:
            if not fallback:
                raise
            defaults = records.Defaults(self._ns, self._now_us())
            node_cols, edge_cols, audits = _parse_lines(lines(), target, defaults)
        return node_cols, edge_cols, audits

    def _load(
        self, job: _ImportJob, batch: int, progress: Progress | None, gate: _InterruptGate
    ) -> None:
        """Store what ``job`` imports (inside the import's transaction): refused, with nothing
        written, on an id clash or an edge to a memory that is nowhere; then the rows, the
        audit entries and the keys."""
        store = self._s.store
        _refuse_clashes(store, job)
        if not store.bulk_rollback_safe:
            # A store that cannot promise to undo a bulk load cleanly (see the attribute on
            # the store contract): from the first row written a Ctrl-C waits for the commit.
            gate.hold()
        # Into empty namespaces, with every edge inside the file, the keys follow from the
        # file alone: they are stored with the rows instead of recomputed from the store.
        fresh = (
            not job.dangling
            and job.edge_namespaces <= set(job.ids_by_ns)
            and not any(store.top_by_key(ns, Tier.FROZEN, 1) for ns in job.ids_by_ns)
        ) and job.n_nodes > 0
        if fresh:
            scores = self._file_keys(job.node_cols, job.edge_cols, job.ends)
            # The namespaced ids are done with: they go before Kùzu's COPY, which needs
            # memory of its own. The ends' rows (~40 MB at 5M links) save the store
            # matching them again.
            src_at, dst_at = job.ends
            job.ends, job.node_keys = [], None
            store.bulk_insert({**job.node_cols, **scores}, job.edge_cols, ends=(src_at, dst_at))
            del src_at, dst_at
            if progress:
                total = job.n_nodes + job.n_edges
                progress(total, total)
        else:
            _insert_in_batches(store, job, batch, progress)
        _append_audits(store, job.audits)
        for ns in set(job.ids_by_ns) | job.edge_namespaces:  # keys are derived: recompute
            if fresh:
                self._reference_from(ns, job.node_cols, scores["key"])
            else:
                self._recompute(ns)

    def _import_vectors(
        self, node_cols: Mapping[str, Any], carried: Mapping[tuple[str, str], tuple[str, Any]]
    ) -> int:
        """After an import commits: keep the vectors the file carried when they are the
        store's model's (or the store has none yet), else embed the imported memories' texts
        with this Brain's embedder, in batches. Returns the vectors stored."""
        store = self._s.store
        if not store.supports_vectors:
            return 0
        emb = self._s.embedder
        stored = store.get_meta(META_MODEL)
        models = {m for m, _ in carried.values()}
        usable = len(models) == 1 and (
            (stored or (emb.name if emb is not None else None) or next(iter(models))) in models
        )
        by_ns: dict[str, list[tuple[str, str]]] = {}
        for ns, i, t in zip(
            _pylist(node_cols["namespace"]),
            _pylist(node_cols["id"]),
            _pylist(node_cols["text"]),
            strict=True,
        ):
            by_ns.setdefault(ns, []).append((i, t))
        n = 0
        import numpy as np

        for ns, items in by_ns.items():
            if usable:
                keep = [(i, carried[(ns, i)][1]) for i, _ in items if (ns, i) in carried]
                if keep:
                    model = next(iter(models))
                    mat = np.asarray([v for _, v in keep], dtype=np.float32)
                    with self._s.lock:
                        store.ensure_vectors(int(mat.shape[1]))
                        if stored is None:
                            with self._tx():
                                store.set_meta(META_MODEL, model)
                                store.set_meta(META_DIM, str(mat.shape[1]))
                            stored = model
                        store.put_vectors(ns, [i for i, _ in keep], mat, new=True)
                    n += len(keep)
                items = [(i, t) for i, t in items if (ns, i) not in carried]
            if emb is None or (stored is not None and stored != emb.name):
                continue
            for lo in range(0, len(items), 2048):
                part = items[lo : lo + 2048]
                vecs = self._embed([t for _, t in part])
                with self._s.lock:
                    store.put_vectors(ns, [i for i, _ in part], vecs, new=True)
                n += len(part)
            with self._s.lock:  # a large first import builds its index once (kuzu/vectors)
                store.index_vectors(ns, limit=0)
        return n

    def _file_keys(
        self,
        node_cols: Mapping[str, Any],
        edge_cols: Mapping[str, Any],
        ends: Sequence[Any],
    ) -> dict[str, Any]:
        """``base_key``, ``key`` and ``degree`` columns for imported nodes whose edges are all in
        the same import (see :func:`scoring.graph_keys`); ``ends``: each edge end's position
        among the nodes (``_ImportJob.ends``)."""
        import pyarrow as pa

        src, dst = ends
        read = _column(node_cols["last_read_us"], "int64")
        cfg = self._s.config
        base, key, degree = scoring.graph_keys(
            len(node_cols["id"]),
            src.to_numpy(),
            dst.to_numpy(),
            _column(edge_cols["weight"], "float64").to_numpy(),
            _column(edge_cols["reinforced_us"], "int64").to_numpy(),
            read.fill_null(0).to_numpy(),
            read.is_valid().to_numpy(),
            self._s.epoch_us,
            cfg.half_life_us,
            cfg.read_bonus,
            cfg.spread,
        )
        return {"base_key": pa.array(base), "key": pa.array(key), "degree": pa.array(degree)}

    def _reference_from(self, namespace: str, node_cols: Mapping[str, Any], keys: Any) -> None:
        """Set the tier reference of ``namespace`` from imported columns (as ``maintain`` would
        from the store): the top-percentile key of its unpinned, unfrozen memories."""
        import pyarrow.compute as pc

        live = pc.and_(
            pc.and_(
                pc.equal(_column(node_cols["namespace"], "string"), namespace),
                pc.invert(_column(node_cols["pinned"], "bool")),
            ),
            pc.less(_column(node_cols["tier"], "int64"), int(Tier.FROZEN)),
        )
        key, rank = scoring.reference_of(
            keys.filter(live.combine_chunks()).to_numpy(), self._s.config.reference_quantile
        )
        self._s.store.set_meta(f"reference:{namespace}", f"{key!r} {rank}")


class CommittedInterrupt(KeyboardInterrupt):
    """Ctrl-C arrived after an import had committed (while its text index was being rebuilt,
    which the next open of the store finishes): ``counts`` is what the import stored."""

    def __init__(self, counts: dict[str, int]) -> None:
        super().__init__(
            f"interrupted after the import had committed: {counts['nodes']} memories, "
            f"{counts['edges']} edges and {counts['audit']} audit entries are stored"
        )
        self.counts = counts


def _split_vectors(
    source: bytes | Path, target: str | None
) -> tuple[bytes | Path, dict[tuple[str, str], tuple[str, Any]]]:
    """An export without its vector records, and those records by (namespace, id).

    A file without vector records is left where it is (the parser reads it in pieces); only an
    export that carries vectors is read whole to take them out.
    """
    marker = f'{{"type": "{VECTOR_RECORD}"'.encode()
    if isinstance(source, Path):
        if not _file_contains(source, marker):
            return source, {}
        data = source.read_bytes()
    else:
        data = source
        if marker not in data:
            return source, {}
    kept, carried = [], {}
    for lineno, line in enumerate(data.splitlines(), 1):
        if not line.startswith(marker):
            kept.append(line)
            continue
        try:
            rec = json.loads(line)
            ns = target or str(rec["namespace"])
            vec = [float(v) for v in rec["vector"]]
            if not vec or not all(math.isfinite(v) for v in vec):
                raise ValueError("not a vector of finite numbers")
            carried[(ns, str(rec["id"]))] = (str(rec["model"]), vec)
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidInput(
                f"line {lineno}: a malformed vector record ({exc}); nothing was imported",
                field="src",
            ) from None
    return b"\n".join(kept) + b"\n", carried


def _file_contains(path: Path, needle: bytes) -> bool:
    """Whether ``needle`` occurs in the file, read in pieces of 16 MiB (~0.3 s for 1.5 GB from
    the page cache). Not mapped: a mapping searched to its end counted the whole file in the
    process's RSS (1.5 GB at a million memories)."""
    keep = len(needle) - 1
    tail = b""
    with open(path, "rb") as fh:
        while piece := fh.read(1 << 24):
            if needle in tail + piece[: len(needle)] or needle in piece:
                return True
            tail = piece[-keep:] if keep else b""
    return False


def _check_header(line: str) -> None:
    header = json.loads(line)
    if header.get("version") != EXPORT_VERSION:
        raise InvalidInput(
            f"line 1: unsupported export version {header.get('version')!r} "
            f"(this Ebb reads version {EXPORT_VERSION})",
            field="src",
        )


def _audit_record(line: str, lineno: int, target: str | None) -> AuditEntry:
    try:
        rec = json.loads(line)
        rec.pop("type", None)
        if target:
            rec["namespace"] = target
        return AuditEntry(**rec)
    except (ValueError, TypeError) as exc:
        raise InvalidInput(
            f"line {lineno} of the import is not valid: {exc}", field="src"
        ) from None


def _parse_lines(
    lines: list[str], target: str | None, defaults: records.Defaults | None = None
) -> tuple[records.Columns, records.Columns, list[AuditEntry]]:
    """The per-line reader: slower, handles any props, and names the first bad line.

    With ``defaults``, hand-written records may leave fields out (only ``text`` is required of a
    memory, ``src`` and ``dst`` of a link; see docs/cli.md); a memory without an id gets
    ``kind:slug`` from its text, unique in the file."""
    node_cols = records.empty(records.NODE_COLUMNS)
    edge_cols = records.empty(records.EDGE_COLUMNS)
    audits: list[AuditEntry] = []
    unnamed: list[tuple[int, dict[str, Any]]] = []
    named: set[tuple[str, str]] = set()
    for lineno, line in enumerate(lines, 1):
        try:
            rec = json.loads(line)
            if not isinstance(rec, dict):
                raise ValueError("a record must be a JSON object")
            kind = rec.pop("type", None)
            if kind is None and defaults is not None:
                kind = "edge" if "src" in rec and "text" not in rec else "node"
            if kind == "node":
                records.with_defaults(rec, defaults)
                if "id" not in rec and defaults is not None:
                    unnamed.append((lineno, rec))  # named once every explicit id is known
                    continue
                node_id = records.add_node(node_cols, rec, target)
                named.add((target or rec["namespace"], node_id))
            elif kind == "edge":
                records.with_defaults(rec, defaults, edge=True)
                records.add_edge(edge_cols, rec, target)
            elif kind == "audit":
                audits.append(_audit_record(line, lineno, target))
            elif kind == EXPORT_FORMAT and lineno == 1:
                _check_header(line)
            else:
                raise ValueError(f"unknown record type {kind!r}")
        except (ValueError, TypeError) as exc:
            raise InvalidInput(
                f"line {lineno} of the import is not valid: {exc}", field="src"
            ) from None
    for lineno, rec in unnamed:
        try:
            ns, kind, text = str(target or rec.get("namespace")), rec.get("kind"), rec.get("text")
            if not isinstance(text, str) or not text.strip():
                raise ValueError("text must be a non-empty string: a memory needs some text")
            if isinstance(kind, str) and is_valid_kind(kind):
                base = f"{kind}:{slugify(text)}"
                rec["id"], n = base, 1
                while (ns, rec["id"]) in named:
                    n += 1
                    rec["id"] = f"{base}-{n}"
            named.add((ns, records.add_node(node_cols, rec, target)))
        except (ValueError, TypeError) as exc:
            raise InvalidInput(
                f"line {lineno} of the import is not valid: {exc}", field="src"
            ) from None
    return node_cols, edge_cols, audits


def _node_record(node: Node) -> dict[str, Any]:
    """A node as exported: everything but the derived scoring keys."""
    return node.model_dump(mode="json", exclude={"base_key", "key", "degree"})
