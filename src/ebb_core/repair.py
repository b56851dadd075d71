"""``ebb doctor`` and ``ebb repair``: check an embedded store, and mend it without losing a row.

:func:`diagnose` opens the file read-only with the raw engine (Kùzu replays its WAL in memory,
nothing is written) and reports what it finds: whether it opens, the counts, the schema version, the
full-text index (present, finished, complete: one entry per memory with an indexable word,
and no internal tables left over by a killed build), and WAL / ``.shadow`` files.

:func:`repair` first lets :class:`~ebb_core.kuzu_store.KuzuStore` open the store (which cleans
up after a killed writer and rebuilds the index). If that fails, it **salvages**: every row the
raw engine can still read (memories, links, audit entries, metadata) is copied into a new store,
the damaged file is moved aside (never deleted) and the new store takes its place, unless
``into`` names another path, in which case the original is left untouched. A salvage works
under any ``EBB_MEMORY_BUDGET``: its index is built in steps where it must, as an import's.
"""

from __future__ import annotations

import re
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import EbbError, NoStore, StoreLocked
from .kuzu import module as _kuzu
from .kuzu.engine import CHECKPOINT_FAILED

_TOKEN_SPLIT = re.compile(r"[0-9!@#$%^&*()_+={}\[\]:;<>,.?~\\/|'\"`-]+")


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class Report:
    """What :func:`diagnose` or :func:`repair` found or did (``ok``: nothing is wrong now)."""

    path: str
    checks: list[Check] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    actions: list[str] = field(default_factory=list)
    salvaged_to: str | None = None
    damaged_copy: str | None = None

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def add(self, name: str, ok: bool, detail: str) -> None:
        self.checks.append(Check(name, ok, detail))

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "ok": self.ok,
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks],
            "counts": dict(self.counts),
            "actions": list(self.actions),
            "salvaged_to": self.salvaged_to,
            "damaged_copy": self.damaged_copy,
        }


def _rows(conn: Any, query: str) -> list[list[Any]]:
    result = conn.execute(query)
    assert not isinstance(result, list)
    rows: list[list[Any]] = []
    while result.has_next():
        rows.append(result.get_next())
    return rows


def _internal(conn: Any, query: str) -> list[list[Any]]:
    conn.execute("CALL enable_internal_catalog=true")
    try:
        return _rows(conn, query)
    finally:
        conn.execute("CALL enable_internal_catalog=false")


def _tokens(text: str | None, stop: set[str]) -> bool:
    """Whether Kùzu's FTS tokenizer finds an indexable word in ``text`` (its macro, in Python)."""
    if not text:
        return False
    return any(t and t not in stop for t in _TOKEN_SPLIT.sub(" ", text.lower()).split(" "))


def _open_raw(
    path: str, *, fts: bool = True, pool: int = 0, read_only: bool = False
) -> tuple[Any, Any]:
    """The raw engine on ``path`` (``pool``: its buffer pool's bytes, else Kùzu's default);
    with ``fts``, the extension loaded (which fails on a store whose index storage and
    catalog disagree: rows are still readable without it). ``read_only``: a leftover WAL is
    replayed in memory only, and the files are left as they are."""
    kuzu = _kuzu.load()
    try:
        db = kuzu.Database(path, buffer_pool_size=pool, read_only=read_only)
    except RuntimeError as exc:
        if "lock" in str(exc).lower():
            raise StoreLocked(
                f"the store {path} is open in another process: stop it, then run this again",
                path=path,
            ) from None
        raise
    conn = kuzu.Connection(db)
    if fts:
        conn.execute("LOAD EXTENSION fts")
    return db, conn


def diagnose(path: str | Path) -> Report:
    """Check the embedded store at ``path`` (see the module docstring). Changes nothing."""
    p = Path(path).expanduser().absolute()
    report = Report(str(p))
    if not p.exists():
        raise NoStore(f"there is no Ebb store at {p}: nothing to check", path=str(p))
    wal_size = _check_files(p, report)
    if wal_size and not _room_to_replay(p, report):
        return report
    try:
        # Read-only: a replay that wrote the WAL into the file would leave the text index
        # without the replayed texts, and the next open, seeing no WAL, would not rebuild it.
        db, conn = _open_raw(str(p), fts=False, read_only=True)
    except StoreLocked:
        raise
    except RuntimeError as exc:
        report.add("opens", False, f"Kùzu cannot open it: {exc} (`ebb repair` salvages it)")
        return report
    try:
        report.add("opens", True, "Kùzu opens it")
        _check_contents(conn, report)
    finally:
        conn.close()
        db.close()
    return report


def _check_files(p: Path, report: Report) -> int:
    """The files beside the store (a pending WAL, an interrupted checkpoint, the damaged
    originals a rebuild kept), reported; returns the WAL's size."""
    wal, shadow = Path(f"{p}.wal"), Path(f"{p}.shadow")
    wal_size = wal.stat().st_size if wal.exists() else 0
    report.add(
        "wal",
        True,
        f"a WAL of {wal_size} bytes: the last writer did not close cleanly; the next open "
        "replays it and rebuilds the text index (read here without writing it into the file)"
        if wal_size
        else "no pending WAL (the last writer closed cleanly)",
    )
    if shadow.exists():
        report.add("shadow", True, f"{shadow} exists: a checkpoint was interrupted; Kùzu redoes it")
    if Path(f"{p}{CHECKPOINT_FAILED}").exists():
        report.add(
            "stopped",
            True,
            "the last writer stopped after a checkpoint ran out of the buffer pool: the next "
            "open copies the store into a fresh file, nothing lost",
        )
    files = [q for w in _KEPT_AS for q in p.parent.glob(f"{p.name}.{w}-*")]
    kept = sorted(q for q in files if q.suffix not in (".wal",))
    if kept:
        size = sum(q.stat().st_size for q in files)
        report.add(
            "kept copies",
            True,
            f"{len(kept)} original(s) kept beside it after a rebuild ({size >> 20} MiB, "
            f"e.g. {kept[-1].name}): delete them once you have checked the store",
        )
    return wal_size


_KEPT_AS = ("damaged", "before-rebuild")  # what rebuild_in_place names the originals it keeps


def _room_to_replay(p: Path, report: Report) -> bool:
    """Whether the disk has room to replay the WAL (which opening does); reported when not,
    since a replay could then fail half-way."""
    from .kuzu_store import _room_for

    free, need = _room_for(str(p), str(p.parent))
    if free < need:
        report.add(
            "room",
            False,
            f"{free >> 20} MiB free; replaying the WAL needs {need >> 20} MiB: free some "
            "space, then run this again (nothing was opened or changed)",
        )
        return False
    return True


def _check_contents(conn: Any, report: Report) -> None:
    """What an opened store holds: the text index loads, the schema and its version, the
    rows of each table can be counted, and the text index covers them."""
    from .kuzu.schema import MIGRATES_FROM
    from .kuzu_store import FTS_INDEX, INDEX_STATE, SCHEMA_VERSION

    try:
        conn.execute("LOAD EXTENSION fts")
    except RuntimeError as exc:
        report.add(
            "text index",
            False,
            f"the full-text extension cannot load its index ({exc}): the rows are "
            "readable; `ebb repair` (or opening it with Ebb) rebuilds the store from them",
        )
        fts_ok = False
    else:
        fts_ok = True
    tables = {r[0] for r in _rows(conn, "CALL show_tables() RETURN name")}
    missing = {"Memory", "Link", "Audit", "Meta"} - tables
    if missing:
        report.add("schema", False, f"tables missing: {sorted(missing)}")
        return
    meta = {r[0]: r[1] for r in _rows(conn, "MATCH (m:Meta) RETURN m.key, m.value")}
    version = meta.get("schema_version")
    older = version in MIGRATES_FROM  # brought up to date by the next writing open
    if "LinkList" in tables:
        report.add("schema", True, "Memory, Link, LinkList, Audit, Meta")
    elif older:  # schema 4 kept every recent-link list in its Memory row
        report.add("schema", True, "Memory, Link, Audit, Meta (opening it with Ebb adds LinkList)")
    else:
        report.add("schema", False, "tables missing: ['LinkList']")
    report.add(
        "schema version",
        version == SCHEMA_VERSION or older,
        f"{version!r} (this Ebb writes {SCHEMA_VERSION!r}"
        + ("; opening it with Ebb adds what it lacks)" if older else ")"),
    )
    for name, query in (
        ("memories", "MATCH (m:Memory) RETURN count(*)"),
        ("links", "MATCH ()-[e:Link]->() RETURN count(*)"),
        ("audit entries", "MATCH (a:Audit) RETURN count(*)"),
        ("namespaces", "MATCH (m:Memory) RETURN count(DISTINCT m.ns)"),
    ):
        try:
            report.counts[name] = int(_rows(conn, query)[0][0])
        except RuntimeError as exc:
            report.add(f"read {name}", False, f"cannot read them: {exc}")
    report.add("rows", True, ", ".join(f"{v} {k}" for k, v in report.counts.items()))
    if fts_ok:
        try:
            _check_index(conn, report, meta.get(INDEX_STATE), FTS_INDEX)
        except RuntimeError as exc:
            report.add("text index", False, f"cannot be read: {exc} (`ebb repair` mends it)")


def _check_index(conn: Any, report: Report, state: str | None, name: str) -> None:
    from .kuzu_store import STOPWORDS_TABLE

    present = any(r[1] == name for r in _rows(conn, "CALL show_indexes() RETURN *"))
    table_id = _rows(conn, "CALL show_tables() WHERE name = 'Memory' RETURN id")[0][0]
    prefix = f"{table_id}_{name}_"
    internal = [r[0] for r in _internal(conn, "CALL show_tables() RETURN name")]
    own = sorted(t for t in internal if str(t).startswith(prefix))
    if not present:
        report.add(
            "text index",
            False,
            "missing"
            + (f", with leftovers of a killed build: {own}" if own else "")
            + " (opening the store with Ebb, or `ebb repair`, rebuilds it)",
        )
        return
    if state == "building":
        report.add(
            "text index",
            False,
            "present but its last build did not finish (rebuilt on the next open)",
        )
        return
    expected = {f"{prefix}docs", f"{prefix}terms", f"{prefix}appears_in"}
    if set(own) != expected:
        report.add("text index", False, f"internal tables {own}, expected {sorted(expected)}")
        return
    stop = {r[0] for r in _internal(conn, f"MATCH (s:`{STOPWORDS_TABLE}`) RETURN s.sw")}
    docs = int(_internal(conn, f"MATCH (d:`{prefix}docs`) RETURN count(*)")[0][0])
    texts = _rows(conn, "MATCH (m:Memory) RETURN m.text")
    want = sum(1 for (t,) in texts if _tokens(t, stop))
    report.add(
        "text index",
        docs == want,
        f"present and complete: {docs} memories indexed"
        if docs == want
        else f"incomplete: {docs} memories indexed, {want} have indexable words "
        "(`ebb repair` rebuilds it)",
    )


_REBUILT = "opened it and rebuilt the text index from the table"
_KEPT = (
    "opened it and kept its text index, which EBB_MEMORY_BUDGET could not build again "
    "(the checks below read it whole)"
)


def repair(path: str | Path, *, into: str | Path | None = None) -> Report:
    """Mend the store at ``path`` without losing a committed row (see the module docstring)."""
    from .errors import StoreRebuilt
    from .kuzu_store import KuzuStore
    from .salvage import _beside, _swap_in, salvage

    p = Path(path).expanduser().absolute()
    if not p.exists():
        raise NoStore(f"there is no Ebb store at {p}: nothing to repair", path=str(p))
    report = Report(str(p))
    if into is None:
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", StoreRebuilt)
                store = KuzuStore(p)
        except StoreLocked:
            raise
        except EbbError as exc:
            report.actions.append(f"Ebb could not open it ({exc}); salvaging its rows")
        else:
            for w in caught:
                report.actions.append(str(w.message))
                report.damaged_copy = str(w.message).rsplit(" ", 1)[-1]
            try:
                rebuilt = store.rebuild_text_index(or_keep=True)
                report.actions.append(_REBUILT if rebuilt else _KEPT)
            finally:
                store.close()
            after = diagnose(p)
            report.checks, report.counts = after.checks, after.counts
            return report
    target = Path(into).expanduser().absolute() if into else _beside(p, "salvaged")
    partial = False
    try:
        salvage(p, target, report)
    except RuntimeError as exc:
        partial = True
        # Kùzu cannot open the file with its WAL (e.g. a checkpoint that ran out of space
        # left a truncated .shadow it insists on replaying). The last checkpoint, in the file
        # alone, is what can still be read: salvage that, and say what it leaves out.
        wal = Path(f"{p}.wal")
        wal_size = wal.stat().st_size if wal.exists() else 0
        report.actions.append(
            f"Kùzu cannot open it with its WAL ({exc}); salvaging the last checkpoint in the "
            f"file itself. Changes committed after that checkpoint ({wal_size} bytes of WAL) "
            "are not in the salvaged store; the original files are kept"
        )
        for suffix in ("", ".wal", ".shadow"):
            Path(f"{target}{suffix}").unlink(missing_ok=True)
        alone = _beside(p, "checkpoint")
        shutil.copyfile(p, alone)
        try:
            salvage(alone, target, report)
        finally:
            for suffix in ("", ".wal", ".shadow"):
                Path(f"{alone}{suffix}").unlink(missing_ok=True)
    if partial:
        # Not a replacement: the original may hold more than Kùzu can read today.
        report.salvaged_to = str(target)
        report.add(
            "wal",
            False,
            f"Kùzu cannot replay this store's WAL; {target} holds what its last checkpoint "
            f"had ({report.counts.get('salvaged Memory', 0)} memories). The original is "
            "untouched: keep it",
        )
        return report
    if into is None:
        aside = _swap_in(p, target)
        report.damaged_copy = str(aside)
        report.salvaged_to = str(p)
        report.actions.append(f"moved the damaged file to {aside} (kept, not deleted)")
        report.actions.append(f"put the salvaged store in its place at {p}")
    else:
        report.salvaged_to = str(target)
    after = diagnose(report.salvaged_to)
    report.checks = after.checks
    return report
