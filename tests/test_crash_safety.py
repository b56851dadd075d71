"""Crash safety of the embedded store: kills, broken stores, full disks, interrupts.

Every broken store here is made by the test itself, the way it breaks in the field: a real
SIGKILL of a process, or the exact statements Kùzu had committed when it was killed. The
campaigns (bench/crash_campaign.py, bench/disk_full.py) run real subprocesses.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ebb_core import Brain
from ebb_core.cli import main
from ebb_core.errors import StorageError
from ebb_core.kuzu_store import FTS_INDEX, KuzuStore, StoreRebuilt
from ebb_core.repair import diagnose, repair

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import crash_campaign  # noqa: E402
import disk_full  # noqa: E402


def _store_with(path: Path, n: int = 40) -> list[str]:
    ids = [f"note:{i}" for i in range(n)]
    with Brain.open(path, namespace="t") as b:
        for i, mid in enumerate(ids):
            b.remember(f"harbor lantern {i} keeper", id=mid, links=ids[:i][-1:])
    return ids


def _raw(path: Path, statements: list[str], *, kill: bool = False) -> None:
    """Run ``statements`` with the raw engine in a subprocess; with ``kill``, SIGKILL it
    right after (no close, no checkpoint), as a killed Ebb would have left the files."""
    script = (
        "import kuzu, os, sys, json\n"
        "db = kuzu.Database(sys.argv[1]); c = kuzu.Connection(db)\n"
        "c.execute('LOAD EXTENSION fts')\n"
        "for q in json.loads(sys.argv[2]):\n"
        "    c.execute(q)\n" + ("os.kill(os.getpid(), 9)\n" if kill else "c.close(); db.close()\n")
    )
    p = subprocess.run([sys.executable, "-c", script, str(path), json.dumps(statements)])
    assert p.returncode == (-9 if kill else 0)


def _leftovers_of_a_killed_build(path: Path) -> None:
    """What a kill in the middle of CREATE_FTS_INDEX leaves: the index's entry gone, some of
    its internal tables made (Kùzu creates them in auto-committed steps)."""
    _raw(
        path,
        [
            f"CALL DROP_FTS_INDEX('Memory', '{FTS_INDEX}')",
            "CHECKPOINT",
            "CALL enable_internal_catalog=true",
            f"CREATE NODE TABLE `0_{FTS_INDEX}_appears_info` (ID SERIAL, term STRING, "
            "docID INT64, PRIMARY KEY(ID))",
            f"CREATE NODE TABLE `0_{FTS_INDEX}_docs` (docID INT64, len UINT64, PRIMARY KEY(docID))",
        ],
    )


def _ids_present(path: Path, ids: list[str]) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreRebuilt)
        with Brain.open(path, namespace="t") as b:
            return len(b.store.existing_ids("t", ids))


def test_leftovers_of_a_killed_index_build_wedged_raw_kuzu_and_ebb_cleans_them(
    tmp_path: Path,
) -> None:
    db = tmp_path / "leftovers.kuzu"
    ids = _store_with(db)
    _leftovers_of_a_killed_build(db)
    # the failure the issue reported, on the raw engine: every build now fails
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import kuzu,sys\nc=kuzu.Connection(kuzu.Database(sys.argv[1]))\n"
            "c.execute('LOAD EXTENSION fts')\n"
            f"c.execute(\"CALL CREATE_FTS_INDEX('Memory', '{FTS_INDEX}', ['text'])\")",
            str(db),
        ],
        capture_output=True,
        text=True,
    )
    assert "already exists" in probe.stderr
    report = diagnose(db)
    assert not report.ok
    assert any("leftovers of a killed build" in c.detail for c in report.checks)
    assert _ids_present(db, ids) == len(ids)
    with Brain.open(db, namespace="t") as b:
        assert {h.id for h in b.recall("harbor lantern keeper", 50, depth=3)} == set(ids)
    after = diagnose(db)
    assert after.ok, after.as_dict()
    index = next(c for c in after.checks if c.name == "text index")
    assert "present and complete: 40" in index.detail


def test_a_drop_left_in_the_wal_is_rebuilt_from_the_rows(tmp_path: Path) -> None:
    # A kill right after DROP_FTS_INDEX committed: replaying that WAL (before the fts
    # extension is loaded) leaves an index in storage the catalog has lost, on which Kùzu
    # fails every build and crashes on an insert. Ebb rebuilds the store from its rows.
    db = tmp_path / "replayed-drop.kuzu"
    ids = _store_with(db)
    _raw(db, [f"CALL DROP_FTS_INDEX('Memory', '{FTS_INDEX}')"], kill=True)
    with pytest.warns(StoreRebuilt, match="damaged file is kept at"):
        store = KuzuStore(db)
    store.close()
    kept = [p for p in tmp_path.iterdir() if ".damaged-" in p.name and p.suffix != ".wal"]
    assert len(kept) == 1 and kept[0].stat().st_size > 0  # the original, not deleted
    assert _ids_present(db, ids) == len(ids)
    with Brain.open(db, namespace="t") as b:
        b.remember("written after the rebuild harbor", id="note:after")
        assert "note:after" in {h.id for h in b.recall("harbor", 100, depth=3)}
    assert diagnose(db).ok


def test_the_issues_catalog_entry_error_is_reproduced_and_mended(tmp_path: Path) -> None:
    # A kill after an update and a DROP_FTS_INDEX, both still in the WAL (as when a writer is
    # killed in the middle of the index rebuild an open does after a crash): the next open
    # fails with the error reported by the field campaign, every time.
    db = tmp_path / "catalog-entry.kuzu"
    ids = _store_with(db)
    _raw(
        db,
        [
            "MATCH (m:Memory {uid: 't\x1fnote:1'}) SET m.text = 'changed lighthouse words'",
            f"CALL DROP_FTS_INDEX('Memory', '{FTS_INDEX}')",
        ],
        kill=True,
    )
    with pytest.raises(StorageError, match="Cannot find table catalog entry with id"):
        KuzuStore(db, rebuild=False)
    with pytest.warns(StoreRebuilt):
        KuzuStore(db).close()
    assert _ids_present(db, ids) == len(ids)
    with Brain.open(db, namespace="t") as b:  # the committed update survived the rebuild
        assert b.recall("lighthouse", 3, depth=3)[0].id == "note:1"
        assert b.get("note:1").text == "changed lighthouse words"
    assert diagnose(db).ok


def test_doctor_and_repair_commands_on_broken_stores(tmp_path: Path) -> None:
    runner = CliRunner()
    db = tmp_path / "broken.kuzu"
    ids = _store_with(db)
    _leftovers_of_a_killed_build(db)
    r = runner.invoke(main, ["--db", str(db), "doctor"])
    assert r.exit_code == 4 and "PROBLEM" in r.stdout and "text index" in r.stdout
    r = runner.invoke(main, ["--db", str(db), "doctor", "--json"])
    assert json.loads(r.stdout)["counts"]["memories"] == len(ids)
    r = runner.invoke(main, ["--db", str(db), "repair"])
    assert r.exit_code == 0 and "repaired" in r.stdout
    r = runner.invoke(main, ["--db", str(db), "doctor"])
    assert r.exit_code == 0 and "healthy" in r.stdout
    # salvage into another store, leaving the (again broken) original untouched
    _leftovers_of_a_killed_build(db)
    before = db.stat().st_size
    target = tmp_path / "salvaged.kuzu"
    rep = repair(db, into=target)
    assert rep.ok and rep.salvaged_to == str(target)
    assert rep.counts["salvaged Memory"] == len(ids) and db.stat().st_size == before
    assert rep.counts["salvaged Link"] == len(ids) - 1  # each memory linked to the one before
    with Brain.open(target, namespace="t") as b:
        assert {n.node.id for n in b.neighbors("note:5")} == {"note:4", "note:6"}
    assert _ids_present(target, ids) == len(ids)
    # a store Ebb cannot open (the replayed drop): repair salvages it in place
    db2 = tmp_path / "broken2.kuzu"
    _store_with(db2)
    _raw(db2, [f"CALL DROP_FTS_INDEX('Memory', '{FTS_INDEX}')"], kill=True)
    r = runner.invoke(main, ["--db", str(db2), "repair", "--json"])
    out = json.loads(r.stdout)
    assert r.exit_code == 0 and out["ok"] and out["damaged_copy"], out
    assert Path(out["damaged_copy"]).exists()
    assert _ids_present(db2, ids) == len(ids)
    r = runner.invoke(main, ["--db", str(db2), "doctor"])
    assert r.exit_code == 0 and "original(s) kept beside it" in r.stdout


def test_doctor_and_salvage_after_a_crash_leave_the_log_for_the_open_that_rebuilds_the_index(
    tmp_path: Path,
) -> None:
    # Kùzu's replay of a WAL leaves the text index without the replayed texts, so Ebb's open
    # rebuilds the index when it finds a WAL. `ebb doctor` and a salvage (`ebb repair --into`)
    # read the store with the WAL replayed in memory only: had they written the replay into
    # the file, the next open would find no WAL and keep an index that misses the revised text.
    db = tmp_path / "crashed.kuzu"
    _store_with(db)
    script = (
        "import os, sys\n"
        "from ebb_core import Brain\n"
        "b = Brain.open(sys.argv[1], namespace='t')\n"
        "b.remember('a cormorant on the breakwater', id='note:3')\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(db)], check=True)
    wal = Path(f"{db}.wal")
    size = wal.stat().st_size
    assert size > 0
    report = diagnose(db)
    assert report.ok and "rebuilds the text index" in report.checks[0].detail, report.as_dict()
    assert wal.stat().st_size == size  # nothing written into the file
    copy = tmp_path / "copy.kuzu"
    assert repair(db, into=copy).ok
    assert wal.stat().st_size == size  # the original left as it was
    for path in (copy, db):
        with Brain.open(path, namespace="t") as b:
            assert [h.id for h in b.recall("cormorant breakwater", k=1)] == ["note:3"], path


def test_a_salvage_that_leaves_vectors_out_is_not_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A later copy deletes the file an earlier one kept only when it read every table
    # (KuzuStore._reopen_after_stop): vector tables it could not even list count as left out.
    import ebb_core.salvage as salvage_module
    from ebb_core.repair import Report, _rows

    db = tmp_path / "s.kuzu"
    _store_with(db, n=5)
    whole = Report(str(db))
    salvage_module.salvage(db, tmp_path / "whole.kuzu", whole)
    assert salvage_module.salvaged_whole(whole), whole.actions

    def no_listing(conn: Any, query: str) -> list[list[Any]]:
        if "show_tables" in query:
            raise RuntimeError("cannot list")
        return _rows(conn, query)

    monkeypatch.setattr(salvage_module, "_rows", no_listing)
    part = Report(str(db))
    salvage_module.salvage(db, tmp_path / "part.kuzu", part)
    assert any(a.startswith("could not list the vector tables") for a in part.actions)
    assert not salvage_module.salvaged_whole(part)


def test_read_commands_never_create_a_store(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = tmp_path / "no-store-here"
    for args in (
        ["stats"],
        ["recall", "anything"],
        ["review"],
        ["log"],
        ["export", str(tmp_path / "out.jsonl")],
        ["neighbors", "note:x"],
        ["doctor"],
    ):
        r = runner.invoke(main, ["--db", str(missing), *args])
        assert r.exit_code == 6, (args, r.exit_code, r.stderr)
        assert "no Ebb store at" in r.stderr and str(missing) in r.stderr
        assert "unexpected" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    # a write creates it
    assert runner.invoke(main, ["--db", str(missing), "remember", "hello"]).exit_code == 0
    assert missing.exists()


def test_a_store_kuzu_cannot_read_is_a_storage_error_not_a_raw_runtime_error(
    tmp_path: Path,
) -> None:
    db = tmp_path / "garbage.kuzu"
    db.write_bytes(b"this is not a database" * 5000)
    with pytest.raises(StorageError, match="doctor"):
        KuzuStore(db)
    r = CliRunner().invoke(main, ["--db", str(db), "stats"])
    assert r.exit_code == 4 and "unexpected" not in r.stderr and str(db) in r.stderr
    assert CliRunner().invoke(main, ["--db", str(db), "doctor"]).exit_code == 4


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _import_file(path: Path, n: int) -> None:
    crash_campaign.make_import_file(path, n)


@pytest.mark.slow
def test_an_interrupted_import_either_rolled_back_or_says_it_committed(tmp_path: Path) -> None:
    data = tmp_path / "big.jsonl"
    n = 20_000
    _import_file(data, n)
    outcomes = []
    for i, delay in enumerate((0.6, 1.2, 1.8, 2.4, 3.0, 3.6, 4.5, 6.0)):
        db = tmp_path / f"int-{i}.kuzu"
        _store_with(db, 5)
        p = subprocess.Popen(
            [sys.executable, "-m", "ebb_core.cli", "--db", str(db), "import", str(data)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # a shell's background job ignores SIGINT, and a child inherits that: Ctrl-C
            # must reach this one, so it gets the default disposition back
            preexec_fn=_sigint_default,
        )
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=300)
        with Brain.open(db, namespace="bench") as b:
            stored = b.stats().nodes
        assert _ids_present(db, [f"note:{j}" for j in range(5)]) == 5
        assert stored in (0, n), (stored, out, err)  # all or nothing
        if stored == n:  # it committed, and says so (exit -2: SIGINT after it had finished)
            assert f"imported {n} memories" in out and p.returncode in (0, -2), (out, err)
            outcomes.append("committed" if "interrupted after" in err else "finished")
        elif "rolled back" in err:
            assert p.returncode == 130 and "imported" not in out, (out, err)
            outcomes.append("rolled back")
        else:  # Ctrl-C while Python was still starting, before Ebb ran: nothing happened
            assert "Aborted!" in err or "KeyboardInterrupt" in err, (out, err)
            assert p.returncode in (1, -2) and "imported" not in out, (out, err)
            outcomes.append("not started")
        assert "unexpected" not in err
    assert "rolled back" in outcomes, outcomes  # the early interrupts land before the commit


@pytest.mark.slow
def test_crash_campaign_kills_a_writer_50_times(tmp_path: Path) -> None:
    # ~2 minutes on 2 cores; `python bench/crash_campaign.py --kills 200` runs a longer one
    result = crash_campaign.run_campaign(tmp_path, 50, seed=int(os.environ.get("EBB_SEED", 7)))
    d = result.as_dict()
    assert d["failures"] == [], d
    assert d["kills"] >= 50 and set(d["kills_by_phase"]) == set(crash_campaign.PHASES)
    assert d["acknowledged_memories"] > 0 and d["imports_committed"] > 0


@pytest.mark.slow
def test_disk_full_on_a_small_tmpfs(tmp_path: Path) -> None:
    res = disk_full.run(size_mb=20, import_nodes=30_000)
    assert res["problems"] == [], res
    assert res["fill"]["error"] == "StoreFull" and res["fill"]["acks"] > 100
    assert res["after_room"]["present"] == res["fill"]["acks"]


def test_a_file_size_limit_is_store_full_and_loses_nothing(tmp_path: Path) -> None:
    # An injected I/O failure without mounting anything: RLIMIT_FSIZE makes Kùzu's writes past
    # the limit fail with EFBIG (SIGXFSZ ignored, as a shell would not), below Ebb's free-space
    # check. Each `ebb remember` must end with a clear error, never an abort, and a store
    # that opens afterwards with everything that was acknowledged.
    import resource

    db = tmp_path / "limited.kuzu"
    acked = _store_with(db, 3)
    limit = db.stat().st_size // 2  # already past it: any write to the file's end fails

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    codes = []
    for i in range(4):
        p = subprocess.run(
            [sys.executable, "-m", "ebb_core.cli", "--db", str(db), "-n", "t", "remember",
             f"limited harbor {i} " + "x" * 20_000, "--id", f"note:lim{i}"],
            preexec_fn=limited,
            capture_output=True,
            text=True,
        )  # fmt: skip
        assert p.returncode in (0, 4, 5), (p.returncode, p.stderr)  # never -6 (abort)
        assert "unexpected" not in p.stderr
        if p.returncode == 0:
            acked.append(f"note:lim{i}")
        else:
            assert str(db) in p.stderr
        codes.append(p.returncode)
    assert 5 in codes, codes
    assert _ids_present(db, acked) == len(acked)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreRebuilt)
        with Brain.open(db, namespace="t") as b:
            b.remember("after the limit was lifted harbor", id="note:after")
            assert "note:after" in {h.id for h in b.recall("lifted harbor", 5, depth=3)}


def test_a_ctrl_c_once_kuzu_rows_are_written_rolls_the_import_back(tmp_path: Path) -> None:
    # Kùzu's import writes roll back cleanly (LOAD FROM, not COPY: docs/kuzu.md, known
    # issues), so its store says bulk_rollback_safe, and a Ctrl-C after the rows went in
    # rolls the import back; the store takes the same import afterwards.
    data = tmp_path / "small.jsonl"
    _import_file(data, 300)
    with Brain.open(tmp_path / "db.kuzu", namespace="bench") as brain:
        assert brain.store.bulk_rollback_safe
        inner = brain.store.inner if hasattr(brain.store, "inner") else brain.store
        real = inner.bulk_insert

        def interrupted(*args: Any, **kwargs: Any) -> None:
            real(*args, **kwargs)
            signal.raise_signal(signal.SIGINT)  # Ctrl-C, once the rows are in

        inner.bulk_insert = interrupted  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt) as caught:
            brain.import_(data)
        assert type(caught.value) is KeyboardInterrupt  # not CommittedInterrupt
        assert brain.last_import is None and brain.stats().nodes == 0
        inner.bulk_insert = real  # type: ignore[method-assign]
        assert brain.import_(data)["nodes"] == 300
        assert brain.stats().nodes == 300


def test_an_import_too_big_for_the_pool_is_copied_and_a_ctrl_c_undoes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A rollback-safe bulk write (LOAD FROM … CREATE) keeps its rows in Kùzu's buffer pool
    # until the commit: an import bigger than the pool failed with it (a 1M import did at the
    # default budget). An import outside a unit of work is COPYed instead, each COPY committed
    # behind a marker, so the store still says bulk_rollback_safe: a Ctrl-C once the rows are
    # in deletes them again (before, the store said False here and a Ctrl-C waited for the
    # commit). The same import goes in afterwards.
    monkeypatch.setenv("EBB_MEMORY_BUDGET", "128M")  # a 77 MiB buffer pool
    data = tmp_path / "big.jsonl"
    _import_file(data, 30_000)
    with Brain.open(tmp_path / "db.kuzu", namespace="bench") as brain:
        inner = brain.store.inner if hasattr(brain.store, "inner") else brain.store
        real, said = inner.bulk_insert, []

        def interrupted(*args: Any, **kwargs: Any) -> None:
            said.append(brain.store.bulk_rollback_safe)
            real(*args, **kwargs)
            signal.raise_signal(signal.SIGINT)  # Ctrl-C, once the rows are in

        inner.bulk_insert = interrupted  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt) as caught:
            brain.import_(data)
        assert type(caught.value) is KeyboardInterrupt  # not CommittedInterrupt
        assert said == [True]
        assert brain.last_import is None and brain.stats().nodes == 0
        assert brain.stats().edges == 0
        inner.bulk_insert = real  # type: ignore[method-assign]
        assert brain.import_(data)["nodes"] == 30_000
        assert brain.stats().nodes == 30_000 and brain.stats().edges > 0


def test_a_ctrl_c_once_rows_are_written_waits_for_the_commit_unless_rollback_safe(
    tmp_path: Path,
) -> None:
    # A store that does not say its bulk writes roll back cleanly (bulk_rollback_safe false,
    # the contract's default): a Ctrl-C that arrives while the import's rows are being
    # written lets the import commit, then says so (CommittedInterrupt), and the store holds
    # every row.
    from ebb_core.transfer import CommittedInterrupt

    data = tmp_path / "small.jsonl"
    _import_file(data, 300)
    with Brain.open(tmp_path / "db.kuzu", namespace="bench") as brain:
        brain.store.bulk_rollback_safe = False  # as a store without the promise
        inner = brain.store.inner if hasattr(brain.store, "inner") else brain.store
        real = inner.bulk_insert

        def interrupted(*args: Any, **kwargs: Any) -> object:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C, as the first rows go in
            return real(*args, **kwargs)

        inner.bulk_insert = interrupted  # type: ignore[method-assign]
        with pytest.raises(CommittedInterrupt) as caught:
            brain.import_(data)
        assert caught.value.counts["nodes"] == 300
        assert brain.last_import is not None and brain.last_import["nodes"] == 300
        assert brain.stats().nodes == 300
