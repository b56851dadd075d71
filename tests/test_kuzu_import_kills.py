"""A Kùzu import killed (SIGKILL) or failing at each of its steps leaves the store as it was or
with the whole import, never half of it.

A large import ``COPY``s its memories and links, each ``COPY`` committed on its own behind a
marker (Kùzu 0.11.3 damages a table when a ``COPY`` is rolled back: docs/kuzu.md, known
issues); the transaction that commits the rest deletes the marker, and a failed import, or the
next open after a kill, deletes what the ``COPY``s wrote (``KuzuBulk.bulk_load``). Each case
runs the import in a child process that kills itself at one point, then opens the store here
and checks what it holds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ebb_core import Brain, StorageError
from ebb_core.kuzu.bulk import IMPORT_PENDING
from ebb_core.kuzu_store import KuzuStore

KEPT, NEW = 2_000, 20_000

CHILD = textwrap.dedent(
    """
    import json, os, resource, signal, sys
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 20, 256 << 20))  # no runaway file
    import ebb_core.kuzu.bulk as bulk
    import ebb_core.kuzu.index_steps as index_steps
    from ebb_core import Brain, StorageError

    path, folder, point, where, kept, new = sys.argv[1:7]
    kept, new = int(kept), int(new)
    bulk._UNDO_STEP = 4_000  # an undo of several statements, to be killed between them
    if point.startswith("stepped-"):  # the text index built early, the rest COPYed into it
        index_steps._INDEX_BYTES_PER_WORD = 1_000  # a 77 MiB pool builds ~80k words: ~14k memories
        point = point[len("stepped-"):]
    copies = []

    def export(tag, n, ns, links_to_kept):
        name = os.path.join(folder, tag + ".jsonl")
        with open(name, "w") as fh:
            for i in range(n):
                rec = {"type": "node", "id": f"note:{tag}{i}", "kind": "note", "namespace": ns}
                word = "walrus" if tag == "kept" else "quokka"
                fh.write(json.dumps({**rec, "text": f"{word} memory harbor number {i}"}) + "\\n")
            for i in range(n - 1):
                rec = {"type": "edge", "src": f"note:{tag}{i}", "dst": f"note:{tag}{i + 1}"}
                fh.write(json.dumps({**rec, "namespace": ns}) + "\\n")
            for i in range(0, n, 10) if links_to_kept else ():  # links to stored memories
                rec = {"type": "edge", "src": f"note:{tag}{i}", "dst": f"note:kept{i % kept}"}
                fh.write(json.dumps({**rec, "namespace": ns}) + "\\n")
        return name

    with Brain.open(path, namespace="t") as b:
        if not os.path.exists(os.path.join(folder, "kept.jsonl")):
            b.import_(export("kept", kept, "t", False))
            print("kept")
            sys.exit(0)
        inner = b.store.inner if hasattr(b.store, "inner") else b.store
        real_run, real_exec = inner._run, inner._exec
        real_params = getattr(inner, "_exec_params", None)
        undoing = []

        def die():
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)

        def run(query, *args, **kwargs):
            q = query if isinstance(query, str) else ""
            failing = point in ("fail-at-links", "during-undo")
            if failing and ("COPY Link" in q or ":Link" in q):
                raise StorageError("injected: out of memory at the links' write")
            if point == "during-undo" and "DETACH DELETE" in q and undoing:  # the 2nd
                die()
            out = real_run(query, *args, **kwargs)
            if "DETACH DELETE" in q:
                undoing.append(1)
            if point == "after-marker" and IMPORT_PENDING_SET in q:
                die()
            if q.startswith("COPY Memory"):
                copies.append(1)
            if point == "after-memories" and q.startswith("COPY Memory"):
                die()
            if point == "after-a-step" and len(copies) == 3:  # the first part, two steps
                die()
            if point == "after-links" and q.startswith("COPY Link"):
                die()
            return out

        def exec_(query):
            if point == "at-commit" and query == "COMMIT":
                die()
            real_exec(query)
            if point == "after-commit" and query == "COMMIT":
                die()
            if point == "in-index-build" and "CREATE_FTS_INDEX" in query:
                die()

        def params(query, p):
            real_params(query, p)
            if point == "after-marker-dropped" and "Meta" in query:
                die()

        IMPORT_PENDING_SET = "MERGE (m:Meta {key: $k})"
        inner._run, inner._exec = run, exec_
        if real_params is not None:
            inner._exec_params = params
        ns = "t" if where == "into-stored" else "fresh"
        try:
            b.import_(export("gone", new, ns, where == "into-stored"))
        except StorageError as exc:
            print("failed", exc, "memory copies:", len(copies))
            if point == "during-undo":
                raise SystemExit("the undo was not killed")
            inner._run, inner._exec = real_run, real_exec
            for i in range(3):  # writes after the failure, each with its checkpoint
                b.remember(f"walrus written after the failed import {i}", id=f"note:w{i}")
                inner._maybe_checkpoint(force=True)
        else:
            print("imported")
    """
)


def _run(script: str, *args: object) -> subprocess.CompletedProcess[str]:
    # A 77 MiB buffer pool: the import does not fit in half of it, so before the committed
    # COPYs it was COPYed into one transaction, which a failure rolled back (the damage).
    env = {**os.environ, "EBB_MEMORY_BUDGET": "128M"}
    try:
        return subprocess.run(
            [sys.executable, "-c", script, *map(str, args)],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the child was still running after 300 s")


def _check(db: Path, whole: bool, where: str, written: int = 0) -> None:
    """The store opens and holds the stored memories and links, and the import whole or not
    at all; no marker is left; recall and writes work."""
    ns = "t" if where == "into-stored" else "fresh"
    with Brain.open(db, namespace="fresh") as b:
        store = b.store.inner if hasattr(b.store, "inner") else b.store
        assert store.get_meta(IMPORT_PENDING) is None
        other = b.stats()
        if ns == "fresh":
            assert (other.nodes, other.edges) == ((NEW, NEW - 1) if whole else (0, 0))
            if whole:
                assert b.get("note:gone19999").id == "note:gone19999"
                assert any(h.id.startswith("note:gone") for h in b.recall("quokka", 3))
    with Brain.open(db, namespace="t") as b:
        kept = b.stats()
        if ns == "t":
            assert kept.nodes == KEPT + written + (NEW if whole else 0)
            assert kept.edges == (KEPT - 1) + ((NEW - 1) + NEW // 10 if whole else 0)
            if whole:
                assert b.get("note:gone19999").id == "note:gone19999"
                assert any(h.id.startswith("note:gone") for h in b.recall("quokka", 3))
        else:
            assert (kept.nodes, kept.edges) == (KEPT + written, KEPT - 1)
        assert b.get("note:kept1999").id == "note:kept1999"
        assert any(h.id.startswith("note:kept") for h in b.recall("walrus", 3))
        b.remember("written after the import harbor", id="note:after")
    with Brain.open(db, namespace="t") as b:
        assert b.get("note:after").id == "note:after"


# point -> whether the import is whole after it (None: the import fails and is undone)
POINTS = {
    "after-marker": False,
    "after-memories": False,
    "after-links": False,
    "after-marker-dropped": False,  # inside the import's last transaction
    "at-commit": False,
    "after-commit": True,
    "in-index-build": True,
    "fail-at-links": False,  # an error (not a kill): the import undoes itself
    "during-undo": False,  # killed while undoing a failed import: the next open finishes
    # The index built early (a pool too small for its whole build: see
    # KuzuIndexSteps._copy_memories): the build and its steps come before the links and commit.
    "stepped-in-index-build": False,
    "stepped-after-a-step": False,
    "stepped-fail-at-links": False,  # undone with the index in place; the next open rebuilds
}


@pytest.mark.parametrize("where", ["into-stored", "fresh"])
@pytest.mark.parametrize("point", list(POINTS))
def test_an_import_killed_at_any_step_leaves_the_store_as_before_or_whole(
    tmp_path: Path, point: str, where: str
) -> None:
    db = tmp_path / "store.kuzu"
    first = _run(CHILD, db, tmp_path, point, where, KEPT, NEW)
    assert first.returncode == 0 and "kept" in first.stdout, first.stderr[-2000:]
    p = _run(CHILD, db, tmp_path, point, where, KEPT, NEW)
    if point.endswith("fail-at-links"):
        assert p.returncode == 0 and "failed" in p.stdout, p.stderr[-2000:]
        copies = int(p.stdout.split("memory copies:")[1].split()[0])
        assert copies > 2 if point.startswith("stepped-") else copies == 1, p.stdout
        written = 3
    else:
        assert p.returncode == -9, (p.returncode, p.stdout, p.stderr[-2000:])  # killed there
        written = 0
    _check(db, POINTS[point], where, written)
    assert db.stat().st_size < 128 << 20


def test_a_read_only_open_refuses_a_store_holding_an_interrupted_import(tmp_path: Path) -> None:
    db = tmp_path / "store.kuzu"
    assert _run(CHILD, db, tmp_path, "after-links", "fresh", KEPT, NEW).returncode == 0
    assert _run(CHILD, db, tmp_path, "after-links", "fresh", KEPT, NEW).returncode == -9
    with pytest.raises(StorageError, match="import that was interrupted"):
        KuzuStore(db, read_only=True)
    # A read command's open (only_reads) finds the index unfinished and opens for writing,
    # which removes the import first.
    store = KuzuStore(db, only_reads=True)
    try:
        assert not store.read_only and store.get_meta(IMPORT_PENDING) is None
        assert store.counts("fresh").nodes == 0
    finally:
        store.close()
    store = KuzuStore(db, read_only=True)
    try:
        assert store.get_meta(IMPORT_PENDING) is None
    finally:
        store.close()


def test_a_salvage_leaves_an_interrupted_import_out(tmp_path: Path) -> None:
    # `ebb repair` (and the rebuild on open) copies rows the raw engine reads into a new store:
    # the rows of an interrupted import, past its marker's offset, are not among them.
    from ebb_core.salvage import salvage

    db = tmp_path / "store.kuzu"
    assert _run(CHILD, db, tmp_path, "after-links", "into-stored", KEPT, NEW).returncode == 0
    assert _run(CHILD, db, tmp_path, "after-links", "into-stored", KEPT, NEW).returncode == -9
    salvage(db, tmp_path / "copy.kuzu")
    with Brain.open(tmp_path / "copy.kuzu", namespace="t") as b:
        store = b.store.inner if hasattr(b.store, "inner") else b.store
        assert store.get_meta(IMPORT_PENDING) is None
        assert (b.stats().nodes, b.stats().edges) == (KEPT, KEPT - 1)


def test_a_read_only_open_of_a_store_without_metadata_still_opens(tmp_path: Path) -> None:
    # The look for an interrupted import reads Meta; a store whose creation was killed before
    # that table was made opens read-only as before (nothing to refuse).
    import importlib.util  # noqa: F401  (kuzu's binding needs it loaded)

    from ebb_core.kuzu import module as kuzu_module

    kuzu = kuzu_module.load()
    db = kuzu.Database(str(tmp_path / "bare.kuzu"))
    conn = kuzu.Connection(db)
    conn.execute("CREATE NODE TABLE X(a INT64, PRIMARY KEY(a))")
    conn.close()
    db.close()
    store = KuzuStore(tmp_path / "bare.kuzu", read_only=True)
    try:
        assert store.read_only
    finally:
        store.close()
