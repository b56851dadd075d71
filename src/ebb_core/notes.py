"""Reading notes for :mod:`ebb_core.ingest`: ids, Markdown sections and links, the folder walk.

A file becomes one :class:`_File` of :class:`_Piece` s (the whole file, or one per heading
section) with its id, time, SHA-256 and the link targets it writes; :class:`_Resolver` turns a
link target into the id of the note of the set it names. Nothing here touches a store.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import unquote

from .errors import InvalidInput
from .validation import MAX_ID_LEN, MAX_TEXT_LEN, has_visible_chars, id_problem

NOTE_SUFFIXES = (".md", ".markdown", ".txt", ".text")
MARKDOWN_SUFFIXES = (".md", ".markdown")


@dataclass
class _Piece:
    """One memory to be: a whole file or one of its sections."""

    id: str
    text: str
    source: str  # path relative to the root, with '/'
    section: str | None
    at: datetime
    sha256: str
    #: link targets as written: (kind "wiki" or "md", target, anchor)
    refs: list[tuple[str, str, str]]
    head: str | None = None  # in section mode: the id of the file's first section
    kind: str = "note"


@dataclass
class _File:
    rel: str  # relative path with '/'
    stem_id: str  # note:folder/file
    pieces: list[_Piece]
    anchors: dict[str, str]  # heading slug -> piece id


# -- ids ---------------------------------------------------------------------------------------

_SEGMENT_STRIP = re.compile(r"[\W_]+", re.UNICODE)


def slug_segment(name: str) -> str:
    """A path segment as it appears in an id: ``"Kick off (v2)"`` → ``kick-off-v2``."""
    folded = "".join(c for c in unicodedata.normalize("NFKD", name) if not unicodedata.combining(c))
    return "-".join(w for w in _SEGMENT_STRIP.split(folded.lower()) if w)


def note_id(rel: str, kind: str = "note") -> str:
    """The id of the note at ``rel`` (relative, '/'-separated, suffix kept or not).

    >>> note_id("meetings/Kick off.md")
    'note:meetings/kick-off'
    """
    stem, suffix = posixpath.splitext(rel)
    if suffix.lower() not in NOTE_SUFFIXES:
        stem = rel
    parts = [slug_segment(p) or "x" for p in stem.split("/") if p not in ("", ".")]
    ident = f"{kind}:{'/'.join(parts)}"
    if len(ident) > MAX_ID_LEN - 60:  # room for '#section' and a hash
        digest = hashlib.blake2b(rel.encode(), digest_size=4).hexdigest()
        ident = f"{ident[: MAX_ID_LEN - 70]}-{digest}"
    return ident


# -- reading -----------------------------------------------------------------------------------


def _read(path: Path) -> str:
    """The file's text; :class:`InvalidInput` naming the file when it is not UTF-8 text."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}", field="path") from None
    if b"\x00" in data[:8192]:
        raise InvalidInput(
            f"{path} looks binary (it contains NUL bytes), not text or Markdown: nothing of it "
            "was ingested",
            field="path",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"{path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}): "
            "nothing of it was ingested; save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8`) "
            "and ingest again",
            field="path",
        ) from None
    if "\x00" in text:
        raise InvalidInput(f"{path} contains NUL characters: not a text file", field="path")
    return text.removeprefix("\ufeff")


_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_INLINE_CODE = re.compile(r"`+[^`\n]*`+")
_WIKI = re.compile(r"!?\[\[([^\]\[|#\n]*)(?:#([^\]\[|\n]*))?(?:\|[^\]\[\n]*)?\]\]")
_MDLINK = re.compile(r"(!?)\[[^\]\n]*\]\(\s*(<[^>\n]+>|[^)\s]+)(?:\s+\"[^\"\n]*\")?\s*\)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _prose_lines(text: str) -> list[tuple[str, bool]]:
    """Each line with whether it is inside a fenced code block."""
    out, fence = [], ""
    for line in text.splitlines():
        m = _FENCE.match(line)
        if fence:
            out.append((line, True))
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = ""
        elif m:
            fence = m.group(1)
            out.append((line, True))
        else:
            out.append((line, False))
    return out


def _refs(lines: Iterable[tuple[str, bool]]) -> list[tuple[str, str, str]]:
    """Link targets in prose (not in code): ("wiki" | "md", target, anchor)."""
    found: list[tuple[str, str, str]] = []
    for line, code in lines:
        if code:
            continue
        line = _INLINE_CODE.sub("", line)
        for m in _WIKI.finditer(line):
            target = m.group(1).strip()
            if target:
                found.append(("wiki", target, (m.group(2) or "").strip()))
        for m in _MDLINK.finditer(_WIKI.sub("", line)):
            if m.group(1):  # an image
                continue
            target = m.group(2).strip("<>").strip()
            if _SCHEME.match(target) or target.startswith(("#", "/")):
                continue
            target, _, anchor = target.partition("#")
            found.append(("md", unquote(target), unquote(anchor)))
    return found


def _sections(text: str) -> list[tuple[str | None, str, list[tuple[str, bool]]]]:
    """The file cut at every heading: (heading or None for a preamble, text, lines)."""
    lines = _prose_lines(text)
    chunks: list[tuple[str | None, list[tuple[str, bool]]]] = [(None, [])]
    for line, code in lines:
        m = None if code else _HEADING.match(line)
        if m:
            chunks.append((m.group(2).strip() or m.group(1), [(line, code)]))
        else:
            chunks[-1][1].append((line, code))
    out = []
    for heading, chunk in chunks:
        body = "\n".join(line for line, _ in chunk).strip("\n")
        if has_visible_chars(body):
            out.append((heading, body + "\n", chunk))
    return out


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _mtime(path: Path) -> datetime:
    return datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc)


def _file_pieces(path: Path, rel: str, by: str, kind: str) -> _File:
    """Read one file into the memories it becomes; :class:`InvalidInput` if it cannot be."""
    text = _read(path)
    at = _mtime(path)
    stem_id = note_id(rel, kind)
    markdown = path.suffix.lower() not in (".txt", ".text")  # any other name: Markdown
    if by == "file" or not markdown:
        if not has_visible_chars(text):
            return _File(rel, stem_id, [], {})
        piece = _Piece(
            stem_id,
            text,
            rel,
            None,
            at,
            _digest(text),
            _refs(_prose_lines(text)) if markdown else [],
        )
        anchors = {slug_segment(h): stem_id for h, _, _ in _sections(text) if h} if markdown else {}
        pieces = [piece]
    else:
        pieces, anchors = [], {}
        used: set[str] = set()
        for heading, body, chunk in _sections(text):
            if not pieces:
                pid = stem_id
            else:
                base = slug_segment(heading or "") or "section"
                slug, n = base, 1
                while slug in used:
                    n += 1
                    slug = f"{base}-{n}"
                used.add(slug)
                pid = f"{stem_id}#{slug}"
            if heading:
                anchors.setdefault(slug_segment(heading), pid)
            pieces.append(
                _Piece(pid, body, rel, heading, at, _digest(body), _refs(chunk), head=None)
            )
        for p in pieces[1:]:
            p.head = stem_id
    for p in pieces:
        p.kind = kind
        if len(p.text) > MAX_TEXT_LEN:
            where = f"its section {p.section!r}" if p.section else "it"
            hint = "" if by == "section" else ": ingest it with --by section"
            raise InvalidInput(
                f"{path}: {where} is {len(p.text):,} characters, over the {MAX_TEXT_LEN:,} a "
                f"memory holds{hint}; nothing of it was ingested",
                field="path",
            )
        problem = id_problem(p.id)
        if problem:
            raise InvalidInput(f"{path}: {problem}", field="path")
    return _File(rel, stem_id, pieces, anchors)


def _walk(root: Path) -> list[Path]:
    """The note files under ``root``, sorted; hidden files and folders (``.git``,
    ``.obsidian``) are left out."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith(".") and name.lower().endswith(NOTE_SUFFIXES):
                found.append(Path(folder) / name)
    return found


# -- resolving links ---------------------------------------------------------------------------


class _Resolver:
    """Link targets → ids among the notes of this ingest."""

    def __init__(self, files: Iterable[_File]) -> None:
        self.by_path: dict[str, _File] = {}
        self.by_name: dict[str, list[_File]] = {}
        for f in files:
            key = f.stem_id.split(":", 1)[1]
            self.by_path[key] = f
            self.by_name.setdefault(key.rsplit("/", 1)[-1], []).append(f)

    def resolve(self, src: _File, ref: tuple[str, str, str], by: str) -> str | None:
        how, target, anchor = ref
        found: _File | None
        if how == "wiki":
            key = note_id(target).split(":", 1)[1]
            found = self.by_path.get(key)
            if found is None and "/" not in key:
                same = self.by_name.get(key, [])
                here = posixpath.dirname(src.rel)
                local = [f for f in same if posixpath.dirname(f.rel) == here]
                # Obsidian's rule: the same folder first, then the shortest path.
                pick = local or sorted(same, key=lambda f: (f.rel.count("/"), f.rel))
                found = pick[0] if pick else None
        else:
            if not target:
                return None
            joined = posixpath.normpath(posixpath.join(posixpath.dirname(src.rel), target))
            if joined.startswith("../") or joined == "..":
                return None
            found = self.by_path.get(note_id(joined).split(":", 1)[1])
        if found is None or not found.pieces:
            return None
        if by == "section" and anchor:
            return found.anchors.get(slug_segment(anchor), found.stem_id)
        return found.stem_id


def _is_note_target(ref: tuple[str, str, str]) -> bool:
    """Whether a link points at a note at all (``![[photo.png]]``, ``[pdf](a.pdf)`` do not)."""
    _, target, _ = ref
    suffix = posixpath.splitext(target)[1].lower()
    return suffix in NOTE_SUFFIXES or not suffix or not suffix[1:].isalpha() or len(suffix) > 6
