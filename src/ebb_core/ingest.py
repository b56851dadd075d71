"""Bring notes in: plain text and Markdown files (or a folder of them) become memories.

>>> from ebb_core import Brain
>>> from ebb_core.ingest import ingest
>>> brain = Brain.open("./ebb_db")                      # doctest: +SKIP
>>> ingest(brain, "examples/notes").added               # doctest: +SKIP
7

One memory per file by default (``by="file"``): a note is the unit people write, name and link
to (``[[kickoff]]`` names a file), so its id stays put when a heading is renamed and recall
returns whole thoughts. ``by="section"`` makes one memory per heading section instead, for long
documents whose sections are separate topics.

- **Ids** come from the path relative to the folder given: ``meetings/Kick off.md`` is
  ``note:meetings/kick-off`` (a section: ``note:meetings/kick-off#decisions``). The same folder
  ingested again gives the same ids.
- **Time**: a memory is written as of its file's modification time (``Brain.remember(at=)``).
- **Links**: ``[[wikilinks]]`` (``[[name]]``, ``[[folder/name]]``, ``[[name#Heading|alias]]``) and
  relative Markdown links (``[x](other.md)``, ``[x](../a/b.md#part)``) to another note of the set
  become ``links_to`` links, dated like the note that makes them; in section mode each later
  section is also ``part_of`` its file's first section. A link to a note that is not in the set
  is ignored and counted (``links_unresolved``); links in code are not links.
- **Re-ingesting**: the text's SHA-256 is kept in the memory's props (``source``, ``sha256``); an
  unchanged note is left alone (not even touched), a changed one becomes a new version under the
  same id (:meth:`Brain.history` lists them). Deleted files and removed links leave their
  memories and links in place (nothing is deleted without a human; links decay on their own).
- **Bad files** (not UTF-8, binary, too long for one memory, in the review queue) are reported
  and nothing of them is written; the rest of a folder still goes in. A bad single file, a
  missing path or a folder without notes raise :class:`~ebb_core.errors.InvalidInput`.

Many new notes (``BULK_MIN``) go in as one import, one transaction with their links; each new
version is a transaction of its own. An interrupted ingest keeps what it had written, and
running it again finishes the rest (what is in is unchanged, so it is skipped).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import InvalidInput
from .model import Tier
from .notes import (
    MARKDOWN_SUFFIXES as MARKDOWN_SUFFIXES,
)
from .notes import (
    NOTE_SUFFIXES as NOTE_SUFFIXES,
)
from .notes import (
    _File,
    _file_pieces,
    _is_note_target,
    _Piece,
    _Resolver,
    _walk,
)
from .notes import (
    note_id as note_id,
)
from .notes import (
    slug_segment as slug_segment,
)

if TYPE_CHECKING:
    from .engine import Brain

LINK_KIND = "links_to"
PART_KIND = "part_of"
BY_CHOICES = ("file", "section")
ACTOR = "ingest"
#: this many new memories (or more) go in as one import instead of one remember each
BULK_MIN = 50
#: links of this many stored notes (or more) are found by one scan of the edges, not per note
SCAN_MIN = 50

Progress = Callable[[int, int], None]
"""A progress callback: ``(done, total)``."""


@dataclass
class Skipped:
    """A file that was not ingested, and why."""

    path: str
    reason: str
    #: ``True`` when the file is bad (unreadable, binary, too long...), ``False`` when it is
    #: merely empty: the CLI exits non-zero only for problems.
    problem: bool = True


@dataclass
class IngestReport:
    """What one :func:`ingest` did (or, with ``dry_run``, would do)."""

    root: str
    by: str
    dry_run: bool
    files: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    links: int = 0
    links_unresolved: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    #: ``(from id, link target as written)`` for every link to a note outside the set
    unresolved: list[tuple[str, str]] = field(default_factory=list)
    #: ids written (added or updated), in the order written
    written: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[Skipped]:
        return [s for s in self.skipped if s.problem]

    def as_dict(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "by": self.by,
            "dry_run": self.dry_run,
            "files": self.files,
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "links": self.links,
            "links_unresolved": self.links_unresolved,
            "skipped": len(self.skipped),
            "skipped_files": [
                {"path": s.path, "reason": s.reason, "problem": s.problem} for s in self.skipped
            ],
            "unresolved": [{"from": a, "target": b} for a, b in self.unresolved],
            "written": self.written,
        }


# -- the ingest --------------------------------------------------------------------------------


def ingest(
    brain: Brain | None,
    path: str | os.PathLike[str],
    *,
    by: str = "file",
    kind: str = "note",
    dry_run: bool = False,
    progress: Progress | None = None,
) -> IngestReport:
    """Ingest the text or Markdown file, or the folder of notes, at ``path`` into ``brain``.

    See the module's docstring for what becomes what. ``by``: ``"file"`` (one memory per file,
    the default) or ``"section"`` (one per heading section). ``kind``: the memories' kind.
    ``dry_run``: read and plan everything, write nothing; the report says what would happen.
    ``progress`` hears ``(done, total)`` as files are written. ``brain=None`` (with
    ``dry_run``) plans against an empty store.

    Raises :class:`~ebb_core.errors.InvalidInput` for a missing path, a folder without notes, or
    a single file that cannot be ingested (nothing is written then). In a folder, a bad file is
    listed in the report's ``skipped`` (``problems``) and the others go in.
    """
    from .validation import validate_kind

    if by not in BY_CHOICES:
        raise InvalidInput(f"by must be 'file' or 'section', got {by!r}", field="by")
    validate_kind(kind)
    root = Path(path)
    report = IngestReport(root=str(root), by=by, dry_run=dry_run)
    paths, base = _note_paths(root)
    report.files = len(paths)
    files = _read_files(paths, base, root, by, kind, report)
    ids = [p.id for f in files for p in f.pieces]
    existing = _existing_nodes(brain, ids) if brain and ids else {}
    todo = _changed_pieces(files, existing, root, kind, report)
    wanted = _wanted_links(todo, by, report)
    had = _existing_links(brain, [i for i in wanted if i in existing]) if brain else {}
    for src, kinds in wanted.items():
        for k, dsts in kinds.items():
            report.links += sum((src, dst, k) not in had for dst in dsts)
    if dry_run:
        return report
    if brain is None:
        raise InvalidInput("ingest needs a store to write into (or dry_run=True)", field="brain")
    imported, written, linked = _write_pieces(brain, todo, existing, wanted, kind, progress, report)
    _write_links(brain, todo, existing, wanted, had, kind, imported, written, linked)
    return report


def _note_paths(root: Path) -> tuple[list[Path], Path]:
    """The note files at ``root`` (a file, or a folder's notes) and the folder their ids are
    relative to; a missing path or a folder without notes is refused."""
    if root.is_dir():
        paths = _walk(root)
        if not paths:
            raise InvalidInput(
                f"no notes in {root}: ingest reads {', '.join(NOTE_SUFFIXES)} files (hidden "
                "files and folders are left out)",
                field="path",
            )
        return paths, root
    if root.is_file():
        return [root], root.parent
    if root.exists():
        raise InvalidInput(f"{root} is neither a file nor a folder", field="path")
    raise InvalidInput(f"no such file or folder: {root}", field="path")


def _read_files(
    paths: list[Path], base: Path, root: Path, by: str, kind: str, report: IngestReport
) -> list[_File]:
    """Every file cut into its pieces, with unique ids; a bad or empty file of a folder is
    reported in ``skipped`` (a bad single file raises)."""
    files: list[_File] = []
    for file_path in paths:
        rel = file_path.relative_to(base).as_posix()
        try:
            f = _file_pieces(file_path, rel, by, kind)
        except InvalidInput as exc:
            if root.is_file():
                raise
            report.skipped.append(Skipped(rel, str(exc)))
            continue
        if not f.pieces:
            report.skipped.append(Skipped(rel, "empty: no text to remember", problem=False))
        files.append(f)
    _dedupe_ids(files)
    return files


def _changed_pieces(
    files: list[_File], existing: dict[str, Any], root: Path, kind: str, report: IngestReport
) -> list[tuple[_File, list[_Piece]]]:
    """What to write, by file: a new or changed text (counted as added, updated or
    unchanged). A piece whose memory waits in the review queue (or was not ingested from this
    file) is refused with its whole file."""
    todo: list[tuple[_File, list[_Piece]]] = []
    for f in files:
        refused = _refusal(f, existing)
        if refused:
            if root.is_file():
                raise InvalidInput(refused, field="path")
            report.skipped.append(Skipped(f.rel, refused))
            continue
        changed = []
        for p in f.pieces:
            old = existing.get(p.id)
            if old is None:
                report.added += 1
                changed.append(p)
            elif old.props.get("sha256") != p.sha256 or old.kind != kind:
                report.updated += 1
                changed.append(p)
            else:
                report.unchanged += 1
        todo.append((f, changed))
    return todo


def _wanted_links(
    todo: list[tuple[_File, list[_Piece]]], by: str, report: IngestReport
) -> dict[str, dict[str, list[str]]]:
    """The links wanted per piece, by kind; the unresolved are reported once per piece and
    target."""
    resolver = _Resolver(f for f, _ in todo)
    wanted: dict[str, dict[str, list[str]]] = {}
    for f, _ in todo:
        for p in f.pieces:
            kinds = wanted.setdefault(p.id, {})
            if p.head:
                kinds.setdefault(PART_KIND, []).append(p.head)
            seen: set[str] = set()
            for ref in p.refs:
                if not _is_note_target(ref):
                    continue
                dst = resolver.resolve(f, ref, by)
                if dst is None:
                    shown = ref[1] + (f"#{ref[2]}" if ref[2] else "")
                    if shown not in seen:
                        seen.add(shown)
                        report.unresolved.append((p.id, shown))
                    continue
                if dst != p.id and dst not in kinds.get(LINK_KIND, []):
                    kinds.setdefault(LINK_KIND, []).append(dst)
    report.links_unresolved = len(report.unresolved)
    return wanted


def _write_pieces(
    brain: Brain,
    todo: list[tuple[_File, list[_Piece]]],
    existing: dict[str, Any],
    wanted: dict[str, dict[str, list[str]]],
    kind: str,
    progress: Progress | None,
    report: IngestReport,
) -> tuple[set[str], dict[str, _Piece], set[tuple[str, str, str]]]:
    """Write the new and changed pieces: many new ones as one import (with their links), the
    rest one ``remember`` each with their links to notes already stored. Returns the ids
    imported, the pieces remembered and the links made with them."""
    new = [p for _, changed in todo for p in changed if p.id not in existing]
    imported: set[str] = set()
    if len(new) >= BULK_MIN:
        imported = _bulk_add(brain, new, wanted)
        report.written.extend(p.id for p in new)
    total = len(todo)
    written: dict[str, _Piece] = {}
    stored = set(existing) | imported
    linked: set[tuple[str, str, str]] = set()  # links made with their note's remember
    for done, (_f, changed) in enumerate(todo, 1):
        for p in changed:
            if p.id in imported:
                continue
            # its links to notes already stored go with it (one remember, not two)
            now_linkable = [d for d in wanted.get(p.id, {}).get(LINK_KIND, []) if d in stored]
            brain.remember(
                p.text,
                kind=kind,
                id=p.id,
                props=_props(p),
                at=p.at,
                links=now_linkable,
                link_kind=LINK_KIND,
                actor=ACTOR,
            )
            linked.update((p.id, d, LINK_KIND) for d in now_linkable)
            stored.add(p.id)
            written[p.id] = p
            report.written.append(p.id)
        if progress is not None:
            progress(done, total)
    return imported, written, linked


def _write_links(
    brain: Brain,
    todo: list[tuple[_File, list[_Piece]]],
    existing: dict[str, Any],
    wanted: dict[str, dict[str, list[str]]],
    had: dict[tuple[str, str, str], datetime],
    kind: str,
    imported: set[str],
    written: dict[str, _Piece],
    linked: set[tuple[str, str, str]],
) -> None:
    """The links not made yet, once every memory exists (notes link in cycles).

    As of the note's own time: a remember of the same text at the same time adds them and
    changes nothing else (no new version, no read). That holds for a note written now and for
    one untouched since it was written (an earlier ingest stopped before its links); a note used
    since then gets its new links (a target that arrived) as of now, so that its clocks never
    run backwards."""
    pieces = {p.id: p for f, _ in todo for p in f.pieces}
    for src, kinds in wanted.items():
        if src in imported:
            continue  # its links came with it
        p = pieces[src]
        old = existing.get(src)
        when = p.at if src in written or old is None else old.updated_at
        as_written = src in written or (
            old is not None and old.last_read_at == old.updated_at and old.tier == Tier.HOT
        )
        for k, dsts in kinds.items():
            # links stored later than this version (used since) are left as they are
            due = [
                d
                for d in dsts
                if (src, d, k) not in linked and ((src, d, k) not in had or had[(src, d, k)] < when)
            ]
            if not due:
                continue
            if as_written:
                brain.remember(
                    p.text,
                    kind=kind,
                    id=p.id,
                    props=_props(p),
                    at=when,
                    links=due,
                    link_kind=k,
                    actor=ACTOR,
                )
            else:
                for dst in due:
                    if (src, dst, k) not in had:
                        brain.connect(src, dst, kind=k, actor=ACTOR)


def _bulk_add(brain: Brain, new: list[_Piece], wanted: dict[str, dict[str, list[str]]]) -> set[str]:
    """Add many new memories, and their links, in one import (one transaction, scores computed
    once): what ``remember`` one by one would store, ~15x faster for a first ingest. Their links
    go to memories that are new too or already stored."""
    lines: list[dict[str, Any]] = []
    for p in new:
        when = p.at.isoformat()
        lines.append(
            {
                "type": "node",
                "id": p.id,
                "kind": p.kind,
                "text": p.text,
                "props": _props(p),
                "created_at": when,
                "updated_at": when,
                "last_read_at": when,
            }
        )
        for k, dsts in wanted.get(p.id, {}).items():
            lines.extend(
                {
                    "type": "edge",
                    "src": p.id,
                    "dst": dst,
                    "kind": k,
                    "weight": 1.0,
                    "created_at": when,
                    "reinforced_at": when,
                }
                for dst in dsts
            )
    text = "\n".join(json.dumps(line, ensure_ascii=False) for line in lines) + "\n"
    brain.import_(io.StringIO(text), namespace=brain.namespace)
    return {p.id for p in new}


def _props(p: _Piece) -> dict[str, Any]:
    props: dict[str, Any] = {"source": p.source, "sha256": p.sha256}
    if p.section is not None:
        props["section"] = p.section
    return props


def _refusal(f: _File, existing: dict[str, Any]) -> str | None:
    for p in f.pieces:
        old = existing.get(p.id)
        if old is None:
            continue
        if old.tier == Tier.FROZEN:
            return (
                f"{f.rel}: memory {p.id!r} is in the review queue: `ebb restore {p.id}` first "
                "to ingest it again; nothing of the file was ingested"
            )
        source = old.props.get("source")
        if source != p.source:
            owner = f"the file {source!r}" if source else "a memory not ingested from a file"
            return (
                f"{f.rel}: id {p.id!r} already belongs to {owner}; ingest into another "
                "namespace (-n NS) or rename the file; nothing of it was ingested"
            )
    return None


def _dedupe_ids(files: list[_File]) -> None:
    """Two files whose names slug alike (``A b.md``, ``a-b.md``): the later ones (in path
    order) get a short hash of their path, so every id is unique and stable."""
    seen: set[str] = set()
    for f in files:
        if f.stem_id in seen:
            digest = hashlib.blake2b(f.rel.encode(), digest_size=3).hexdigest()
            new = f"{f.stem_id}-{digest}"
            for p in f.pieces:
                p.id = new + p.id[len(f.stem_id) :]
                if p.head:
                    p.head = new
            f.anchors = {k: new + v[len(f.stem_id) :] for k, v in f.anchors.items()}
            f.stem_id = new
        seen.add(f.stem_id)


def _scan_pays(brain: Brain, ids: list[str]) -> bool:
    """Whether reading the whole namespace beats looking ``ids`` up one by one: a lookup costs
    about as much as reading ten memories in a scan."""
    if len(ids) < SCAN_MIN:
        return False
    return brain.store.counts(brain.namespace).nodes <= 10 * len(ids)


def _existing_nodes(brain: Brain, ids: list[str]) -> dict[str, Any]:
    """The stored memories among ``ids``: by id for a few, one scan of the namespace for many
    (2,000 notes: 2,000 lookups ~0.6-1.5 s, one scan ~0.2 s)."""
    if not _scan_pays(brain, ids):
        return brain.store.get_nodes(brain.namespace, ids)
    wanted = set(ids)
    return {
        n.id: n
        for batch in brain.store.scan_nodes(brain.namespace)
        for n in batch
        if n.id in wanted
    }


def _existing_links(brain: Brain, ids: list[str]) -> dict[tuple[str, str, str], datetime]:
    """The stored ``(src, dst, kind)`` links out of ``ids``: edge by edge for a few notes, one
    scan of the namespace's edges for many (2,000 notes: 4.7 s of lookups, one scan ~0.1 s),
    each with the time it was last reinforced."""
    if not ids:
        return {}
    if not _scan_pays(brain, ids):
        return {
            (inc.edge.src, inc.edge.dst, inc.edge.kind): inc.edge.reinforced_at
            for inc in brain.store.incident(brain.namespace, ids)
            if inc.edge.src == inc.node_id
        }
    sources = set(ids)
    return {
        (e.src, e.dst, e.kind): e.reinforced_at
        for batch in brain.store.scan_edges(brain.namespace)
        for e in batch
        if e.src in sources
    }
