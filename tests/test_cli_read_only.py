"""Commands that only read open a clean store read-only and leave it as it was on disk; a store a
crashed writer left (a write-ahead log beside it) or one that needs upkeep is opened read-write
and recovered first, so every read sees every acknowledged memory."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from ebb_core import Brain
from ebb_core.cli import main
from ebb_core.errors import BackendUnavailable, StorageError
from ebb_core.kuzu.queries import INDEX_STATE
from ebb_core.kuzu_store import KuzuStore

READS = (
    ("stats", "--json"),
    ("recall", "lantern", "--no-reinforce", "--json"),
    ("recall", "lantern", "--no-reinforce"),
    ("top", "--json"),
    ("list", "--json"),
    ("get", "n:1", "--json"),
    ("history", "n:1", "--json"),
    ("neighbors", "n:1", "--json"),
    ("review", "--json"),
    ("log", "--json"),
    ("namespaces", "--json"),
    ("maintain", "--dry-run", "--json"),
    ("ingest", str(Path(__file__).parents[1] / "examples" / "notes"), "--dry-run", "--json"),
)


def _ebb(db: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--db", str(db), "-n", "ro", *args])
    return result.exit_code, result.stdout, result.stderr


def _on_disk(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file in ``folder``: its content's hash and its modification time."""
    return {
        p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(folder.iterdir())
    }


@pytest.fixture
def store(tmp_path: Path) -> Path:
    folder = tmp_path / "store"
    folder.mkdir()
    db = folder / "ro.kuzu"
    with Brain.open(db, namespace="ro") as b:
        b.remember("harbor lantern at the pier", id="n:1")
        b.remember("lantern oil for the harbor", id="n:2", links=["n:1"])
    return db


def test_read_commands_change_nothing_on_disk(store: Path) -> None:
    before = _on_disk(store.parent)
    assert list(before) == ["ro.kuzu"]  # closed cleanly: no log beside it
    export = store.parent.parent / "export.jsonl"
    for args in (*READS, ("export", str(export))):
        code, out, err = _ebb(store, *args)
        assert code == 0, (args, out, err)
        assert args[0] == "export" or "lantern" in out or "nodes" in out or "[" in out, args
        assert _on_disk(store.parent) == before, args
    assert "harbor lantern at the pier" in export.read_text()


def test_a_reinforcing_recall_still_writes(store: Path) -> None:
    """Only a recall that does not reinforce counts as a read: the default one moves the
    read clock of what it returns, so it opens the store for writing."""
    code, out, _ = _ebb(store, "get", "n:1", "--json")
    read_before = json.loads(out)["last_read_at"]
    before = _on_disk(store.parent)
    code, out, _ = _ebb(store, "recall", "pier", "--json", "-k", "1")
    assert code == 0 and json.loads(out)[0]["id"] == "n:1"
    assert _on_disk(store.parent) != before
    code, out, _ = _ebb(store, "get", "n:1", "--json")
    assert json.loads(out)["last_read_at"] != read_before


def _crash_after_remembering(db: Path) -> None:
    """A child process writes a memory and dies without closing: its commit is in the WAL."""
    code = textwrap.dedent(
        f"""
        import os
        from ebb_core import Brain
        b = Brain.open({str(db)!r}, namespace="ro")
        b.remember("lighthouse keeper log", id="n:wal")
        os._exit(0)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_store_left_by_a_crash_is_recovered_by_a_read_command(store: Path) -> None:
    _crash_after_remembering(store)
    wal = Path(str(store) + ".wal")
    assert wal.stat().st_size > 0
    # Kùzu opened read-only replays the log in memory but its text index misses the replayed
    # rows: a read command must open such a store for writing, which rebuilds the index.
    code, out, err = _ebb(store, "recall", "lighthouse", "--no-reinforce", "--json")
    assert code == 0, err
    assert [h["id"] for h in json.loads(out)] == ["n:wal"]
    assert not wal.exists() or wal.stat().st_size == 0  # recovered and checkpointed
    code, out, _ = _ebb(store, "stats", "--json")
    assert json.loads(out)["nodes"] == 3
    before = _on_disk(store.parent)  # clean again: the next read leaves it alone
    assert _ebb(store, "recall", "lighthouse", "--no-reinforce", "--json")[0] == 0
    assert _on_disk(store.parent) == before


def test_only_reads_opens_read_write_where_the_store_needs_upkeep(store: Path) -> None:
    """A text index a killed build left unfinished is rebuilt even by a reading open."""
    s = KuzuStore(store)
    s.set_meta(INDEX_STATE, "building")
    s.close()
    opened = KuzuStore(store, only_reads=True)
    try:
        assert not opened.read_only
        assert opened.text_index_state() == "ready"
    finally:
        opened.close()
    opened = KuzuStore(store, only_reads=True)
    try:
        assert opened.read_only
    finally:
        opened.close()


def test_a_write_through_a_reading_brain_is_refused_and_leaves_no_trace(store: Path) -> None:
    before = _on_disk(store.parent)
    with Brain.open(store, namespace="ro", only_reads=True) as b:
        assert b.recall("pier", reinforce=False)[0].id == "n:1"
        for write in (
            lambda: b.remember("a new memory"),
            lambda: b.recall("pier"),  # reinforces
            lambda: b.pin("n:1"),
        ):
            with pytest.raises(StorageError, match="opened for reading only"):
                write()
    assert _on_disk(store.parent) == before
    # (Kùzu 0.11.3 itself, asked to write in read-only mode, leaves a .wal and a .shadow.)
    assert sorted(os.listdir(store.parent)) == ["ro.kuzu"]


@pytest.mark.parametrize("version", ["3", None])
@pytest.mark.parametrize("only_reads", [False, True])
def test_a_store_of_another_schema_is_refused_by_every_open(
    store: Path, version: str | None, only_reads: bool
) -> None:
    """Opening reads the schema version first (the tables are listed only when it is not
    this Ebb's): a store written by another schema, or one holding memories with no version,
    is refused with the way out, by a writing and a reading open alike."""
    import kuzu

    db = kuzu.Database(str(store))
    conn = kuzu.Connection(db)
    if version is None:
        conn.execute("MATCH (m:Meta {key: 'schema_version'}) DELETE m")
    else:
        conn.execute("MATCH (m:Meta {key: 'schema_version'}) SET m.value = $v", {"v": version})
    conn.close()
    db.close()
    with pytest.raises(BackendUnavailable, match=f"schema version {version!r}.*export it"):
        KuzuStore(store, only_reads=only_reads)
