"""An import larger than the memory budget can index in one build still completes.

Kùzu 0.11.3 builds the full-text index in its buffer pool, at ~120 bytes per indexed word: a
pool too small for the whole table fails the build ("buffer pool is full"). A large import into
such a budget therefore builds the index over the memories that fit and ``COPY``s the rest into
it in steps (``KuzuIndexSteps._copy_memories``). These tests import 100k memories (~1.2M words)
under a 128M budget (a 77 MiB pool, which builds ~0.6M words) and check that nothing differs from an
import built at once. Rebuilding the whole index, which Kùzu builds only over the whole table,
needs a larger budget: such a rebuild is refused before anything is dropped, with the budget
that can, and an import that would drop the index keeps it instead, creating its memories in it
in parts. An open that must build it again (after a crash) copies the store into a new file
through the stepped import instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ebb_core import Brain, StorageError
from ebb_core.kuzu_store import KuzuStore

N = 100_000
ANIMALS = ["otter", "heron", "badger", "lynx", "marten", "plover", "newt"]
PLACES = ["harbour", "orchard", "quarry", "meadow", "estuary", "chapel", "ridge", "weir"]


def _tag(i: int) -> str:
    """A word of its own for memory ``i`` (letters: the text index splits words at digits)."""
    letters = ""
    while True:
        i, r = divmod(i, 26)
        letters += chr(97 + r)
        if not i:
            return "zq" + letters


def _export(path: Path) -> Path:
    with path.open("w") as fh:
        fh.write(json.dumps({"type": "ebb-export", "version": 1, "namespaces": ["t"]}) + "\n")
        for i in range(N):
            text = (
                f"a note that tells of a {ANIMALS[i % 7]} seen near the {PLACES[i % 8]} "
                f"at dawn with its mark {_tag(i)}"
            )
            rec = {"type": "node", "namespace": "t", "id": f"n{i}", "text": text}
            fh.write(json.dumps(rec) + "\n")
        for i in range(1, N, 3):
            rec = {"type": "edge", "namespace": "t", "src": f"n{i}", "dst": f"n{i - 1}"}
            fh.write(json.dumps(rec) + "\n")
    return path


def _kuzu(brain: Brain) -> KuzuStore:
    store = getattr(brain.store, "inner", brain.store)
    assert isinstance(store, KuzuStore)
    return store


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same export imported under a 128M budget (in steps) and the default one (at once)."""
    folder = tmp_path_factory.mktemp("steps")
    export = _export(folder / "export.jsonl")
    small, whole = folder / "small.kuzu", folder / "whole.kuzu"
    mp = pytest.MonkeyPatch()
    try:
        mp.setenv("EBB_MEMORY_BUDGET", "128M")
        with Brain.open(small, namespace="t") as brain:
            assert brain.import_(export) == {"nodes": N, "edges": len(range(1, N, 3)), "audit": 0}
        mp.delenv("EBB_MEMORY_BUDGET")
        with Brain.open(whole, namespace="t") as brain:
            brain.import_(export)
    finally:
        mp.undo()
    return small, whole


QUERIES = [_tag(0), _tag(54_321), _tag(99_999), "otter harbour", "heron quarry dawn", "lynx"]


def test_it_completes_with_every_memory_found_and_nothing_left_beside_it(
    stores: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    small, _ = stores
    monkeypatch.setenv("EBB_MEMORY_BUDGET", "128M")
    with Brain.open(small, namespace="t") as brain:
        assert brain.stats().nodes == N
        assert _kuzu(brain).text_index_state() == "ready"  # reopened without a rebuild
        # the first memories (in the build), the middle and the last (COPYed into it)
        for i in (0, 1, 54_321, 99_998, 99_999):
            assert brain.recall(_tag(i), k=1)[0].id == f"n{i}"
    assert not [p for p in small.parent.iterdir() if p.suffix == ".parquet"]


def test_it_answers_as_an_index_built_at_once(stores: tuple[Path, Path]) -> None:
    answers = []
    for db in stores:
        with Brain.open(db, namespace="t") as brain:
            hits = {q: brain.recall(q, k=10, reinforce=False) for q in QUERIES}
            answers.append({q: [(h.id, h.score) for h in v] for q, v in hits.items()})
    small, whole = answers
    for q in QUERIES:
        assert small[q], q
        assert [i for i, _ in small[q]] == [i for i, _ in whole[q]], q
        # the index's document statistics are kept as a build's are (scores differ at 1e-7)
        assert [s for _, s in small[q]] == pytest.approx([s for _, s in whole[q]], rel=1e-6)


def _small_copy(stores: tuple[Path, Path], tmp_path: Path, mp: pytest.MonkeyPatch) -> Path:
    """A copy of the store imported in steps, opened from now on under its 128M budget."""
    import shutil

    db = tmp_path / "copy.kuzu"
    shutil.copy(stores[0], db)
    mp.setenv("EBB_MEMORY_BUDGET", "128M")
    return db


def _named_budget(said: str) -> str:
    """The budget a refusal names (``Run this once with EBB_MEMORY_BUDGET=...G``)."""
    import re

    named = re.search(r"Run this once with EBB_MEMORY_BUDGET=(\S+G)", said)
    assert named, said
    return named.group(1)


def test_a_rebuild_the_budget_cannot_hold_copies_the_store_and_repair_keeps_the_index(
    stores: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # One build over the whole table does not fit this pool (why the import went in steps),
    # and Kùzu builds an index only over a whole table: so a rebuild copies the store into a
    # fresh file whose index is built in steps, in this process, and the store goes on there;
    # `ebb repair` keeps the index (it is whole) and checks it; inside a unit of work the
    # rebuild is refused before the index is dropped, naming the budget that builds it.
    import warnings

    from ebb_core.kuzu_store import StoreRebuilt
    from ebb_core.repair import repair

    db = _small_copy(stores, tmp_path, monkeypatch)
    with Brain.open(db, namespace="t") as brain:
        store = _kuzu(brain)
        with store.transaction(), pytest.raises(StorageError, match="Nothing was changed") as no:
            store.rebuild_text_index()
        assert store.rebuild_text_index(or_keep=True) is False
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", StoreRebuilt)
            assert store.rebuild_text_index() is True
        said = [str(w.message) for w in caught if issubclass(w.category, StoreRebuilt)]
        assert len(said) == 1 and "as rebuild_text_index asked" in said[0], said
        assert Path(said[0].rsplit(" ", 1)[-1]).exists()  # the file as it was, kept
        assert store.text_index_state() == "ready"  # the same store object goes on
        assert brain.recall(_tag(77_777), k=1)[0].id == "n77777"
        brain.remember("a dipper under the weir after the rebuild", id="after")
        assert brain.recall("dipper", k=1)[0].id == "after"
    said_no = str(no.value)
    assert "EBB_MEMORY_BUDGET=128M gives it 76 MB" in said_no, said_no
    report = repair(db)  # `ebb repair` under this budget keeps the index, and checks it
    assert report.ok and "kept its text index" in " ".join(report.actions), report.actions
    monkeypatch.setenv("EBB_MEMORY_BUDGET", _named_budget(said_no))  # builds it in place
    with Brain.open(db, namespace="t") as brain:
        assert _kuzu(brain).rebuild_text_index() is True
    monkeypatch.setenv("EBB_MEMORY_BUDGET", "128M")  # ... and the store works under 128M
    with Brain.open(db, namespace="t") as brain:
        store = _kuzu(brain)
        assert store.text_index_state() == "ready"
        assert brain.recall(_tag(12_345), k=1)[0].id == "n12345"
        assert brain.stats().nodes == N + 1
        # The copy is not over-cautious: a build at once fails in this pool.
        store._drop_text_index()
        with pytest.raises(StorageError, match="Raise EBB_MEMORY_BUDGET"):
            store._create_text_index()
    monkeypatch.delenv("EBB_MEMORY_BUDGET")
    with Brain.open(db, namespace="t") as brain:  # rebuilt at open, nothing lost
        assert _kuzu(brain).text_index_state() == "ready"
        assert brain.stats().nodes == N + 1


def _more(path: Path, n: int) -> Path:
    with path.open("w") as fh:
        fh.write(json.dumps({"type": "ebb-export", "version": 1, "namespaces": ["u"]}) + "\n")
        for i in range(n):
            text = f"a later note of a {ANIMALS[i % 7]} by the {PLACES[i % 5]} marked {_tag(N + i)}"
            fh.write(json.dumps({"type": "node", "namespace": "u", "id": f"u{i}", "text": text}))
            fh.write("\n")
    return path


_KILLED_AT_FIRST_PART = """
import os, sys
from ebb_core import Brain
from ebb_core.kuzu_store import KuzuStore

run = KuzuStore._exec

def _exec(self, query):
    run(self, query)
    if query == "COMMIT":  # the first part of the import's memories is committed: killed
        os._exit(0)

KuzuStore._exec = _exec
with Brain.open(sys.argv[1], namespace="w") as brain:
    brain.import_(sys.argv[2], namespace="w")
"""


def test_an_import_into_a_store_past_the_pool_keeps_its_index(
    stores: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A large import drops the index and builds it again after; the stored memories' words
    # alone pass what this pool can build, so the import keeps the index and creates its
    # memories in it: in the caller's transaction when that fits in half the pool, else in
    # parts that each commit on their own, behind the import's marker (all or nothing).
    import subprocess
    import sys
    import warnings

    from ebb_core.kuzu_store import StoreRebuilt

    db = _small_copy(stores, tmp_path, monkeypatch)
    big = _more(tmp_path / "big.jsonl", 20_000)
    with Brain.open(db, namespace="u") as brain:
        assert brain.import_(big)["nodes"] == 20_000  # in two parts
        assert _kuzu(brain).text_index_state() == "ready"
        assert brain.stats().nodes == 20_000
        for i in (0, 10_065, 10_066, 19_999):  # the first part, the second
            assert brain.recall(_tag(N + i), k=1)[0].id == f"u{i}"
        assert brain.import_(_more(tmp_path / "part.jsonl", 5_000), namespace="v")["nodes"]
    with Brain.open(db, namespace="v") as brain:  # a small one, in the caller's transaction
        assert brain.recall(_tag(N + 4_999), k=1)[0].id == "u4999"
    with Brain.open(db, namespace="t") as brain:
        assert _kuzu(brain).text_index_state() == "ready"
        assert brain.recall(_tag(99_999), k=1)[0].id == "n99999"
        assert brain.stats().nodes == N
    # Killed once its first part is committed: the next open removes the whole import.
    script = [sys.executable, "-c", _KILLED_AT_FIRST_PART, str(db), str(big)]
    subprocess.run(script, check=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreRebuilt)  # its index is rebuilt after the crash
        with Brain.open(db, namespace="w") as brain:
            assert brain.stats().nodes == 0
            assert not brain.recall(_tag(N + 5), k=1)
            assert _kuzu(brain).text_index_state() == "ready"
    with Brain.open(db, namespace="u") as brain:
        assert brain.recall(_tag(N + 5), k=1)[0].id == "u5"
        assert brain.stats().nodes == 20_000


def test_an_import_in_batches_goes_on_in_steps_once_the_index_is_built(
    stores: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Into a namespace that holds a memory, an import writes its memories a batch at a time:
    # the batch that passes what the pool can build builds the index, the later ones are
    # COPYed into it in steps.
    export = stores[0].parent / "export.jsonl"
    db = tmp_path / "batches.kuzu"
    monkeypatch.setenv("EBB_MEMORY_BUDGET", "128M")
    with Brain.open(db, namespace="t") as brain:
        brain.remember("an osprey over the weir before the import", id="first")
        counts = brain.import_(export, batch=30_000)
        assert counts["nodes"] == N
    with Brain.open(db, namespace="t") as brain:
        assert _kuzu(brain).text_index_state() == "ready"
        assert brain.stats().nodes == N + 1
        for i in (0, 29_999, 30_000, 65_432, 99_999):
            assert brain.recall(_tag(i), k=1)[0].id == f"n{i}"
        assert brain.recall("osprey", k=1)[0].id == "first"


_CRASH = """
import os, sys
sys.path.insert(0, sys.argv[2])
from test_kuzu_index_steps import _tag
from ebb_core import Brain
brain = Brain.open(sys.argv[1], namespace="t")
brain.remember("a kingfisher by the weir, noted just before the crash " + _tag(200_001), id="new")
brain.remember("n7 revised: a stoat in the quarry " + _tag(200_002), id="n7")
os._exit(0)  # killed: the writes are in the write-ahead log only
"""


def test_a_crash_under_a_budget_too_small_to_rebuild_the_index_copies_the_store_in_steps(
    stores: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # After a crash, Kùzu's replay leaves the text index without the replayed rows, so the
    # open builds it again; this pool cannot build it at once, so the open copies the store
    # into a new file that builds it in steps (as an import does) and keeps the old one.
    import subprocess
    import sys
    import warnings

    from ebb_core.kuzu_store import StoreRebuilt
    from ebb_core.repair import diagnose, repair

    db = _small_copy(stores, tmp_path, monkeypatch)
    tests = str(Path(__file__).parent)
    subprocess.run([sys.executable, "-c", _CRASH, str(db), tests], check=True)
    assert Path(f"{db}.wal").stat().st_size > 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StoreRebuilt)
        with Brain.open(db, namespace="t") as brain:
            store = _kuzu(brain)
            assert store.text_index_state() == "ready"
            assert brain.stats().nodes == N + 1
            assert brain.recall(_tag(200_001), k=1)[0].id == "new"  # written, then the crash
            assert brain.recall(_tag(200_002), k=1)[0].id == "n7"  # revised, then the crash
            assert "n7" not in [h.id for h in brain.recall(_tag(7), k=5)]  # old text gone
            for i in (0, 54_321, 99_999):  # in the early build, and in the steps after it
                assert brain.recall(_tag(i), k=1)[0].id == f"n{i}"
    said = [str(w.message) for w in caught if issubclass(w.category, StoreRebuilt)]
    assert len(said) == 1 and "built its text index in steps" in said[0], said
    assert "EBB_MEMORY_BUDGET=128M gives it 76 MB" in said[0]
    kept = Path(said[0].rsplit(" ", 1)[-1])
    assert kept.name.startswith("copy.kuzu.before-rebuild-") and kept.exists()
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".parquet" or "rebuilding" in p.name]
    assert diagnose(db).ok
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreRebuilt)  # opened as it is from now on
        with Brain.open(db, namespace="t") as brain:
            assert brain.recall(_tag(200_001), k=1)[0].id == "new"
    # The file kept aside says its index misses the replayed rows: opened where the pool
    # builds the index at once, it builds it and answers with every row.
    monkeypatch.delenv("EBB_MEMORY_BUDGET")
    with Brain.open(kept, namespace="t") as brain:
        assert brain.recall(_tag(200_001), k=1)[0].id == "new"
        assert brain.stats().nodes == N + 1
    # A salvage into a new file (`ebb repair --into`) builds in steps under the budget too.
    monkeypatch.setenv("EBB_MEMORY_BUDGET", "128M")
    report = repair(db, into=tmp_path / "into.kuzu")
    assert report.ok and report.counts["salvaged Memory"] == N + 1, report.as_dict()
    with Brain.open(tmp_path / "into.kuzu", namespace="t") as brain:
        assert brain.recall(_tag(99_998), k=1)[0].id == "n99998"
