"""Importing into a Kùzu store whose memories were revised, superseded or deleted.

Kùzu 0.11.3 cannot ``COPY`` into the Memory table while its full-text index is in place once
rows of it were rewritten: the COPY fails with "Found duplicated primary key value N" and the
rollback after it crashes the process (SIGSEGV). Every import into such a store did that, small
or large, through ``Brain.import_`` and ``ebb import`` alike. The store now COPYs memories only
while a bulk load has dropped the index, and otherwise creates them one by one (see
``KuzuStore.bulk_load``).

Each scenario edits a store and imports in a child process (a crash there is reported as a
failure, not a dead test run); this process then reopens the store and checks every memory.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ebb_core import Brain

NS = "test"
REVISED = 150  # every third of the first 150 memories gets a new text

# argv: db, base memories, edits ("revise,supersede,delete"), new memories, how ("api"/"batch"
# or "none": only prepare the store), the export to import. Prints the import's counts.
CHILD = r"""
import io, json, sys
from datetime import datetime, timezone
from ebb_core import Brain, FixedClock

db, base, edits, new, how, export = sys.argv[1:7]
base, new, edits = int(base), int(new), set(edits.split(","))
REVISED = %d
clock = FixedClock(datetime(2026, 1, 1, tzinfo=timezone.utc))
b = Brain.open(db, namespace="test", clock=clock)
if not b.stats().nodes:
    lines = [json.dumps({"type": "ebb-export", "version": 1, "namespaces": ["test"]})]
    lines += [
        json.dumps({"type": "node", "namespace": "test", "id": f"old{i}",
                    "text": f"old memory {i} about apples"})
        for i in range(base)
    ]
    lines += [
        json.dumps({"type": "edge", "namespace": "test", "src": f"old{i}",
                    "dst": f"old{i // 2}", "kind": "related"})
        for i in range(1, base)
    ]
    b.import_(io.StringIO("\n".join(lines) + "\n"))
    if "supersede" in edits:
        b.remember("replacement about plums", id="plum", supersedes=["old1", "old4"])
    if "delete" in edits:
        for i in (2, 5):
            b.forget(f"old{i}", "wrong")
        b.approve_deletion(["old2", "old5"], approved_by="tester")
    if "revise" in edits:  # last: a new memory stored after the revisions hid the bug
        for i in range(0, REVISED, 3):
            b.remember(f"revised memory {i} about pears", id=f"old{i}")
if how == "api":
    print(json.dumps(b.import_(export)))
elif how == "batch":  # inside a unit of work the index cannot be dropped: rows, one by one
    with b.batch():
        counts = b.import_(export)
    print(json.dumps(counts))
b.close()
"""


def _export(path: Path, new: int) -> Path:
    """``new`` memories about kiwis linked in a tree, one of them to a stored memory."""
    lines = [json.dumps({"type": "ebb-export", "version": 1, "namespaces": [NS]})]
    for i in range(new):
        text = f"new imported memory {i} about kiwis"
        lines.append(json.dumps({"type": "node", "namespace": NS, "id": f"new{i}", "text": text}))
    for i in range(1, new):
        edge = {"type": "edge", "namespace": NS, "src": f"new{i}", "dst": f"new{i // 2}"}
        lines.append(json.dumps({**edge, "kind": "related"}))
    lines.append(json.dumps({"type": "edge", "namespace": NS, "src": "new0", "dst": "old3"}))
    path.write_text("\n".join(lines) + "\n")
    return path


def _child(db: Path, base: int, edits: str, new: int, how: str, export: Path) -> str:
    args = [str(db), str(base), edits, str(new), how, str(export)]
    proc = subprocess.run(
        [sys.executable, "-c", CHILD % REVISED, *args], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    return proc.stdout


def _check(db: Path, base: int, edits: str, new: int) -> None:
    """Every memory readable with its text, recall finds old, revised and new ones, the text
    index is complete, and the store opens again."""
    expected = {f"old{i}": f"old memory {i} about apples" for i in range(base)}
    if "revise" in edits:
        expected |= {f"old{i}": f"revised memory {i} about pears" for i in range(0, REVISED, 3)}
    if "supersede" in edits:
        expected["plum"] = "replacement about plums"
    deleted = {"old2", "old5"} if "delete" in edits else set()
    for i in deleted:
        del expected[i]
    expected |= {f"new{i}": f"new imported memory {i} about kiwis" for i in range(new)}
    for _ in range(2):  # and once more: the store reopens after the first look
        with Brain.open(db, namespace=NS) as b:
            assert b.stats().nodes == len(expected)
            assert b.store.existing_ids(NS, sorted(deleted)) == set()
            nodes = b.read(sorted(expected), reinforce=False)
            assert {n.id: n.text for n in nodes} == expected
            assert b.stats().edges >= new  # the file's links (and the base's) are there
            near = {n.node.id for n in b.neighbors("new0")}
            assert near == {"new1", "old3"}
            for word, prefix in (("kiwis", "new"), ("apples", "old"), ("pears", "old")):
                if word == "pears" and "revise" not in edits:
                    continue
                # (the memory that supersedes old1 and old4 comes up with them: by design)
                hits = [h for h in b.recall(word, k=5, reinforce=False) if h.id != "plum"]
                assert len(hits) >= 4 and all(h.id.startswith(prefix) for h in hits), hits
                assert all(word in h.text for h in hits)
            if "supersede" in edits:
                assert b.recall("plums", k=1, reinforce=False)[0].id == "plum"
            assert b.store.text_index_state() == "ready"  # type: ignore[attr-defined]


# base 600: an import of 10 is under 1/30 of the table (rows one by one, the index kept), one of
# 100 drops and rebuilds the index; both COPYed with the index in place before the fix.
@pytest.mark.parametrize(
    ("edits", "new"),
    [
        ("revise", 10),
        ("revise", 100),
        ("supersede,delete", 10),
        ("revise,supersede,delete", 10),
        ("revise,supersede,delete", 100),
    ],
)
def test_brain_import_after_edits(tmp_path: Path, edits: str, new: int) -> None:
    db, export = tmp_path / "ebb.kuzu", _export(tmp_path / "new.jsonl", new)
    out = _child(db, 600, edits, new, "api", export)
    assert json.loads(out) == {"nodes": new, "edges": new, "audit": 0}
    _check(db, 600, edits, new)


def test_import_inside_a_batch_after_edits(tmp_path: Path) -> None:
    """Inside a unit of work the index cannot be dropped, whatever the import's size."""
    db, export = tmp_path / "ebb.kuzu", _export(tmp_path / "new.jsonl", 300)
    out = _child(db, 200, "revise,delete", 300, "batch", export)
    assert json.loads(out) == {"nodes": 300, "edges": 300, "audit": 0}
    _check(db, 200, "revise,delete", 300)


def test_a_large_import_after_edits(tmp_path: Path) -> None:
    """5,000 memories into 5,100 (the old rule copied with the index in place into a larger
    table): now the index is dropped, the rows copied, and the index rebuilt."""
    db, export = tmp_path / "ebb.kuzu", _export(tmp_path / "new.jsonl", 5000)
    out = _child(db, 5100, "revise,supersede,delete", 5000, "api", export)
    assert json.loads(out) == {"nodes": 5000, "edges": 5000, "audit": 0}
    _check(db, 5100, "revise,supersede,delete", 5000)


@pytest.mark.parametrize("new", [10, 100])
def test_ebb_import_after_edits(tmp_path: Path, new: int) -> None:
    db, export = tmp_path / "ebb.kuzu", _export(tmp_path / "new.jsonl", new)
    _child(db, 600, "revise,supersede,delete", new, "none", export)
    cli = [sys.executable, "-m", "ebb_core.cli", "--db", str(db), "-n", NS]
    proc = subprocess.run(
        [*cli, "import", str(export), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert json.loads(proc.stdout)["nodes"] == new
    _check(db, 600, "revise,supersede,delete", new)
