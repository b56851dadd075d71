"""Salvage: every row the raw engine can read from an embedded store, copied into a new one
(``ebb repair`` when Ebb cannot open a store, ``ebb repair --into``, and an open that rebuilds
a store from its rows: :func:`rebuild_in_place`). The new store's text index is built from the
copied rows, in steps where ``EBB_MEMORY_BUDGET`` cannot build it at once (as a large import's
is: ``KuzuIndexSteps.copy_rows``), so a salvage works under any budget, only slower.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from .errors import EbbError, StorageError
from .repair import Report, _open_raw, _rows


def _beside(p: Path, what: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate = p.with_name(f"{p.name}.{what}-{stamp}")
    n = 1
    while candidate.exists():
        n += 1
        candidate = p.with_name(f"{p.name}.{what}-{stamp}-{n}")
    return candidate


_TABLES = {
    "Memory": (
        "MATCH (m:Memory) RETURN m.uid, m.id, m.ns, m.kind, m.text, m.props, m.created_us, "
        "m.updated_us, m.last_read_us, m.pinned, m.tier, m.review_reason, m.queued_us, "
        "m.base_key, m.key, m.degree, m.recent_links"
    ),
    "Link": (
        "MATCH (a:Memory)-[e:Link]->(b:Memory) RETURN a.uid, b.uid, e.kind, e.weight, "
        "e.created_us, e.reinforced_us, e.props"
    ),
    "Audit": (
        "MATCH (a:Audit) RETURN a.uid, a.ns, a.seq, a.at_us, a.action, a.node_id, a.from_tier, "
        "a.to_tier, a.actor, a.reason, a.payload"
    ),
    "Meta": "MATCH (m:Meta) RETURN m.key, m.value",
}


# Rows an interrupted import left (Memory offsets from its marker's start: see kuzu.bulk) are
# not salvaged, nor links touching them.
_BEFORE = {
    "Memory": "offset(id(m)) < {0}",
    "Link": "offset(id(a)) < {0} AND offset(id(b)) < {0}",
}


def _interrupted_import(conn: Any) -> int | None:
    """The first Memory offset of an import a kill interrupted (see kuzu.bulk), if any."""
    import json

    from .kuzu.bulk import IMPORT_PENDING

    try:
        rows = _rows(conn, f"MATCH (m:Meta) WHERE m.key = '{IMPORT_PENDING}' RETURN m.value")
    except RuntimeError:
        return None
    return int(json.loads(rows[0][0])["start"]) if rows else None


def salvage(
    src: str | Path,
    dest: str | Path,
    report: Report | None = None,
    *,
    memory_budget: int | None = None,
) -> Report:
    """Copy every row the raw engine can read from the store at ``src`` into a new store at
    ``dest`` (which must not exist); the index is built from the copied rows, in steps when
    ``memory_budget`` (default: ``EBB_MEMORY_BUDGET``) cannot build it at once."""
    from .kuzu.bulk import IMPORT_PENDING
    from .kuzu.engine import _buffer_pool, memory_budget_from_env
    from .kuzu.rescored import WATERMARK
    from .kuzu_store import INDEX_STATE, KuzuStore

    src, dest = Path(src), Path(dest)
    report = report or Report(str(src))
    if dest.exists():
        raise StorageError(f"{dest} already exists: choose another path to salvage into")
    budget = memory_budget_from_env() if memory_budget is None else memory_budget
    # Rows only (the index is built anew), through the budget's pool, read-only: a WAL is
    # replayed in memory, and the source is left as it was (its WAL for its own next open).
    db, conn = _open_raw(str(src), fts=False, pool=_buffer_pool(budget), read_only=True)
    tables: dict[str, Any] = {}
    try:
        start = _interrupted_import(conn)
        for name, query in _TABLES.items():
            if start is not None and name in _BEFORE:  # an interrupted import stays out
                query = query.replace(
                    " RETURN ", f" WHERE {_BEFORE[name].format(start)} RETURN ", 1
                )
            try:
                result = conn.execute(query)
                assert not isinstance(result, list)
                tables[name] = result.get_as_arrow(chunk_size=1_000_000)
            except RuntimeError as exc:
                report.actions.append(f"could not read {name} ({exc}): not salvaged")
        _apply_link_lists(conn, tables)
        vectors = _read_vectors(conn, report)
    finally:
        conn.close()
        db.close()
    store = KuzuStore(dest, memory_budget=budget)
    try:
        memories = tables["Memory"].num_rows if "Memory" in tables else 0
        with store.bulk_load(memories):  # a big copy builds the index once, after it
            for name in ("Memory", "Link", "Audit"):
                table = tables.get(name)
                if table is not None and table.num_rows:
                    # memories past what the budget indexes at once go in steps (copy_rows)
                    store.copy_rows(name, table)
            meta = tables.get("Meta")
            for key, value in zip(
                meta.column(0).to_pylist() if meta is not None else [],
                meta.column(1).to_pylist() if meta is not None else [],
                strict=True,
            ):
                # not the scores' watermark (kuzu.rescored): what is salvaged may lack links
                if key not in (INDEX_STATE, IMPORT_PENDING, WATERMARK):
                    store.set_meta(key, value)
        # vectors go to each namespace's unindexed tail: maintain indexes them (kuzu/vectors)
        for ns, (ids, mat) in vectors.items():
            for start in range(0, len(ids), 50_000):
                part = slice(start, start + 50_000)
                store.put_vectors(ns, ids[part], mat[part], new=True)
    finally:
        store.close()
    for name in ("Memory", "Link", "Audit", "Meta"):
        table = tables.get(name)
        report.counts[f"salvaged {name}"] = 0 if table is None else int(table.num_rows)
    report.counts["salvaged vectors"] = sum(len(ids) for ids, _ in vectors.values())
    report.actions.append(
        f"salvaged into {dest}: "
        + ", ".join(f"{report.counts[f'salvaged {n}']} {n}" for n in ("Memory", "Link", "Audit"))
        + f", {report.counts['salvaged vectors']} vectors"
    )
    return report


def _read_vectors(conn: Any, report: Report) -> dict[str, tuple[list[str], Any]]:
    """Every vector the raw engine can read (indexed tables and tails), by namespace: the
    memories' ids and a float32 matrix. A table it cannot read is reported and left out
    (``ebb embed`` makes those vectors again)."""
    import numpy as np

    from .kuzu.vector_rows import COLUMN, decode, dim_of
    from .kuzu.vectors import OLD_TAIL_PREFIX, PREFIX, TAIL_PREFIX

    out: dict[str, tuple[list[str], Any]] = {}
    try:
        names = [
            str(r[0])
            for r in _rows(conn, "CALL show_tables() RETURN name")
            if str(r[0]).startswith((PREFIX, TAIL_PREFIX, OLD_TAIL_PREFIX))
        ]
        # a base64 tail beside an older FLOAT[dim] one is a conversion not finished: the old
        # one holds every row
        names = [
            n
            for n in names
            if not (n.startswith(TAIL_PREFIX) and OLD_TAIL_PREFIX + n[len(TAIL_PREFIX) :] in names)
        ]
    except RuntimeError as exc:
        report.actions.append(f"could not list the vector tables ({exc}): vectors not salvaged")
        return out
    for name in sorted(names):
        try:
            # a tail keeps base64 strings (``vb``), an older tail or an indexed table FLOAT[]
            columns = [str(r[1]) for r in _rows(conn, f"CALL table_info('{name}') RETURN *")]
            column = "vec" if "vec" in columns else COLUMN
            result = conn.execute(f"MATCH (v:{name}) RETURN v.uid, v.ns, v.{column}")
            assert not isinstance(result, list)
            arrow = result.get_as_arrow(chunk_size=1_000_000)
            if not arrow.num_rows:
                continue
            uids, spaces = arrow.column(0).to_pylist(), arrow.column(1).to_pylist()
            if column == COLUMN:
                strings = arrow.column(2).to_pylist()
                mat = decode(strings, dim_of(strings[0]))
            else:
                flat = arrow.column(2).combine_chunks().flatten().to_numpy(zero_copy_only=False)
                mat = np.asarray(flat, dtype=np.float32).reshape(len(uids), -1)
        except (RuntimeError, EbbError) as exc:
            report.actions.append(f"could not read {name} ({exc}): its vectors not salvaged")
            continue
        for row, (u, ns) in enumerate(zip(uids, spaces, strict=True)):
            ids, rows = out.setdefault(ns, ([], []))
            ids.append(u[len(ns) + 1 :])
            rows.append(mat[row])
    return {ns: (ids, np.stack(rows)) for ns, (ids, rows) in out.items()}


def rebuild_in_place(
    path: str | Path,
    *,
    memory_budget: int | None = None,
    kept_as: str = "damaged",
    report: Report | None = None,
) -> Path:
    """Salvage the store at ``path`` into a new file that takes its place; return where the old
    file was kept (``<path>.<kept_as>-<time>``). Used on open when a kill left the index
    unrecoverable, or when the index must be built again and ``memory_budget``'s pool cannot
    build it at once (the copy builds it in steps: ``KuzuBulk.copy_rows``), or after a
    checkpoint ran out of the pool. ``report`` gets what the salvage did (``salvaged_whole``)."""
    p = Path(path)
    target = _beside(p, "rebuilding")
    try:
        salvage(p, target, report, memory_budget=memory_budget)
    except BaseException:
        for suffix in ("", ".wal", ".shadow"):  # our own unfinished copy, not the store
            Path(f"{target}{suffix}").unlink(missing_ok=True)
        raise
    return _swap_in(p, target, kept_as)


def salvaged_whole(report: Report) -> bool:
    """Whether a salvage read every table it copies: what it leaves out it says with "could
    not ..." (a table it could not read, the vector tables it could not list)."""
    return not any(a.startswith("could not ") for a in report.actions)


def _swap_in(p: Path, new: Path, kept_as: str = "damaged") -> Path:
    """Put the store ``new`` at ``p``, keeping the old file beside it. A kill at any point
    leaves either the old store or the new one at ``p``, never nothing."""
    aside = _beside(p, kept_as)
    os.link(p, aside)  # the old file stays reachable under its new name
    for suffix in (".wal", ".shadow"):  # the old file's own logs go with it
        log = Path(f"{p}{suffix}")
        if log.exists():
            os.replace(log, f"{aside}{suffix}")
    os.replace(new, p)
    return aside


def _apply_link_lists(conn: Any, tables: dict[str, Any]) -> None:
    """Put the recent-link lists kept in LinkList (schema 5, see ``kuzu.tables``) into the
    salvaged Memory rows, whose own lists they override; a store without the table (schema 4)
    or whose table cannot be read keeps the rows' lists (a stale list is only a short one)."""
    memory = tables.get("Memory")
    if memory is None or not memory.num_rows:
        return
    try:
        result = conn.execute("MATCH (l:LinkList) RETURN l.uid, l.links")
        assert not isinstance(result, list)
        rows = result.get_all()
    except RuntimeError:
        return
    if not rows:
        return
    import pyarrow as pa

    override = {u: links for u, links in rows}
    uids = memory.column(0).to_pylist()
    lists = memory.column(memory.num_columns - 1).to_pylist()
    merged = [override.get(u, old) for u, old in zip(uids, lists, strict=True)]
    last = memory.num_columns - 1
    tables["Memory"] = memory.set_column(last, memory.field(last), pa.array(merged, pa.string()))
