"""The everyday commands a new user expects (issue 18), through Click's runner on a real store."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ebb_core.cli import main

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(tmp_path: Path) -> Run:
    db = str(tmp_path / "cli.kuzu")
    runner = CliRunner()

    def invoke(
        *args: str, input: str | None = None, namespace: str = "cli"
    ) -> tuple[int, str, str]:
        result = runner.invoke(main, ["--db", db, "--namespace", namespace, *args], input=input)
        return result.exit_code, result.stdout, result.stderr

    return invoke


# -- item 2: reading one memory, listing, top, namespaces ----------------------------------------
def test_get_and_show_print_one_memory_without_reinforcing(run: Run) -> None:
    run("remember", "Acme renews in March", "--kind", "fact", "--id", "fact:acme")
    code, out, _ = run("get", "fact:acme", "--json")
    node = json.loads(out)
    assert code == 0 and node["id"] == "fact:acme" and node["text"] == "Acme renews in March"
    assert node["tier"] == 1 and node["activation"] > 0
    code, out, _ = run("show", "fact:acme")
    assert code == 0 and "fact:acme" in out and "Acme renews in March" in out and "hot" in out
    assert json.loads(run("get", "fact:acme", "--json")[1])["last_read_at"] == node["last_read_at"]
    code, _, err = run("get", "fact:nope")
    assert code == 2 and "fact:nope" in err


def test_list_filters_by_kind_and_tier_and_pages(run: Run) -> None:
    for i in range(5):
        run("remember", f"note number {i}", "--id", f"note:n{i}")
    run("remember", "a decision", "--kind", "decision", "--id", "decision:d")
    run("forget", "note:n3")
    code, out, _ = run("list", "--json")
    assert code == 0 and [n["id"] for n in json.loads(out)] == [
        "decision:d",
        *(f"note:n{i}" for i in range(5)),
    ]
    code, out, _ = run("list", "--kind", "note", "--tier", "hot", "--json")
    assert [n["id"] for n in json.loads(out)] == ["note:n0", "note:n1", "note:n2", "note:n4"]
    code, out, _ = run("list", "--tier", "frozen", "--json")
    assert [n["id"] for n in json.loads(out)] == ["note:n3"]
    code, out, _ = run("list", "--limit", "2")
    assert code == 0 and "decision:d" in out and "ebb list --after note:n0" in out
    code, out, _ = run("list", "--after", "note:n0", "--limit", "2", "--json")
    assert [n["id"] for n in json.loads(out)] == ["note:n1", "note:n2"]
    code, _, err = run("list", "--tier", "lukewarm")
    assert code == 2 and "lukewarm" in err


def test_top_and_namespaces(run: Run) -> None:
    run("remember", "hub memory", "--id", "note:hub")
    for i in range(3):
        run("remember", f"spoke {i}", "--id", f"note:s{i}", "--link", "note:hub")
    run("remember", "elsewhere", "--id", "note:x", namespace="other")
    code, out, _ = run("top", "-k", "2", "--json")
    rows = json.loads(out)
    assert code == 0 and rows[0]["id"] == "note:hub" and len(rows) == 2
    assert rows[0]["activation"] >= rows[1]["activation"]
    code, out, _ = run("top")
    assert code == 0 and "note:hub" in out and "note:x" not in out
    code, out, _ = run("namespaces", "--json")
    assert json.loads(out) == ["cli", "other"]
    code, out, _ = run("namespaces")
    assert out.split() == ["cli", "other"]


# -- item 3: long or piped text ------------------------------------------------------------------
def test_remember_reads_standard_input_and_files(run: Run, tmp_path: Path) -> None:
    big = "harbor lantern " * 13_000  # 195k characters: over Linux's 128 KiB per argument
    code, out, _ = run("remember", "-", "--id", "note:piped", input=big)
    assert code == 0 and "note:piped" in out
    assert json.loads(run("get", "note:piped", "--json")[1])["text"] == big
    code, _, err = run("remember", "-", input="x" * 1_000_000)  # over Ebb's own limit
    assert code == 2 and "the limit is 200,000" in err
    path = tmp_path / "note.md"
    path.write_text("# Notes\n\nThe harbor is closed on Sundays.\n", encoding="utf-8")
    code, out, _ = run("remember", "--file", str(path), "--kind", "fact", "--json")
    assert code == 0 and json.loads(out)["text"].startswith("# Notes")
    code, _, err = run("remember", "text", "--file", str(path))
    assert code == 2 and "not both" in err
    code, _, err = run("remember", "--file", str(tmp_path / "missing.md"))
    assert code == 2 and "missing.md" in err
    code, _, err = run("remember")
    assert code == 2 and "standard input" in err
    code, _, err = run("remember", "-", input="   \n")
    assert code == 2 and "empty" in err


# -- item 5: namespaces on import ----------------------------------------------------------------
def test_import_goes_where_n_or_into_says(tmp_path: Path) -> None:
    db, dump = str(tmp_path / "x.kuzu"), str(tmp_path / "src.jsonl")
    runner = CliRunner()

    def ebb(*args: str) -> tuple[int, str, str]:
        result = runner.invoke(main, ["--db", db, *args])
        return result.exit_code, result.stdout, result.stderr

    ebb("-n", "src", "remember", "harbor lantern", "--id", "note:a")
    assert ebb("-n", "src", "export", dump)[0] == 0
    code, out, _ = ebb("-n", "big", "import", dump)
    assert code == 0 and "into namespace 'big'" in out
    assert [n["id"] for n in json.loads(ebb("-n", "big", "list", "--json")[1])] == ["note:a"]
    code, out, _ = ebb("import", dump, "--into", "copy")
    assert code == 0 and "into namespace 'copy'" in out
    code, _, err = ebb("-n", "big2", "import", dump, "--into", "other")
    assert code == 2 and "-n 'big2' and --into 'other' disagree" in err
    assert ebb("-n", "same", "import", dump, "--into", "same")[0] == 0
    assert json.loads(ebb("namespaces", "--json")[1]) == ["big", "copy", "same", "src"]


def test_import_without_n_keeps_the_files_namespaces(tmp_path: Path) -> None:
    db, dump = str(tmp_path / "x.kuzu"), str(tmp_path / "x.jsonl")
    runner = CliRunner()
    env = {"EBB_NAMESPACE": "from-env"}
    runner.invoke(main, ["--db", db, "-n", "orig", "remember", "x", "--id", "note:x"])
    runner.invoke(main, ["--db", db, "-n", "orig", "export", dump])
    db2 = str(tmp_path / "y.kuzu")
    result = runner.invoke(main, ["--db", db2, "import", dump], env=env)
    assert result.exit_code == 0 and "the file's own namespaces" in result.stdout
    names = runner.invoke(main, ["--db", db2, "namespaces", "--json"], env=env).stdout
    assert json.loads(names) == ["orig"]  # EBB_NAMESPACE is a default, not an instruction


# -- item 7: readable output ---------------------------------------------------------------------
def test_recall_table_keeps_one_line_per_hit_and_names_a_neighbour_once(tmp_path: Path) -> None:
    db = str(tmp_path / "t.kuzu")
    runner = CliRunner()

    def ebb(*args: str) -> str:
        result = runner.invoke(main, ["--db", db, *args], env={"COLUMNS": "100"})
        assert result.exit_code == 0, result.stderr
        return result.stdout

    long = "The cache layer notes mention SQLite and the local cache decision " * 8
    ebb("remember", "We chose SQLite for the local cache", "--id", "decision:sqlite")
    ebb("remember", long, "--id", "note:cache", "--link", "decision:sqlite")
    ebb("connect", "decision:sqlite", "note:cache", "--kind", "mentions")  # a second link
    table = ebb("recall", "sqlite cache", "--no-reinforce")
    rows = [line for line in table.splitlines() if line.startswith("│")]
    assert len(rows) == 2 and all(len(line) <= 100 for line in table.splitlines())
    assert "decision:sqlite" in rows[0] + rows[1] and "note:cache" in rows[0] + rows[1]
    assert "--why" in table
    full = ebb("recall", "sqlite cache", "--no-reinforce", "--why")
    assert "2 live links to 1 memory (note:cache);" in full
    assert "note:cache, note:cache" not in full
    hits = json.loads(ebb("recall", "sqlite cache", "--no-reinforce", "--json"))
    summary = next(h for h in hits if h["node"]["id"] == "decision:sqlite")["why"]["summary"]
    assert "2 live links to 1 memory (note:cache)" in summary


def test_demo_footer_says_tier_4() -> None:
    result = CliRunner().invoke(main, ["demo"])
    assert result.exit_code == 0
    assert "tier 4 (frozen, waiting for review)" in result.stdout
    assert "tier [4]" not in result.stdout


# -- item 8: the JSON of a hit -------------------------------------------------------------------
def test_a_hits_json_has_id_text_kind_and_tier_at_the_top(run: Run) -> None:
    run("remember", "We bill Acme per resolved ticket", "--kind", "decision", "--id", "decision:b")
    code, out, _ = run("recall", "bill Acme", "--json")
    hit = json.loads(out)[0]
    assert code == 0
    assert hit["id"] == "decision:b" and hit["kind"] == "decision" and hit["tier"] == 1
    assert hit["text"] == "We bill Acme per resolved ticket"
    assert hit["node"]["id"] == hit["id"] and "score" in hit and "why" in hit


# -- item 9: time --------------------------------------------------------------------------------
def test_backdated_writes_then_a_dry_run_then_maintain_at_a_time(run: Run) -> None:
    for i in range(3):
        run("remember", f"old pricing note {i}", "--id", f"note:old{i}", "--at", "2025-01-01")
    for i in range(12):
        run("remember", f"fresh note {i}", "--id", f"note:new{i}", "--at", "2026-05-30T12:00Z")
    run("connect", "note:new0", "note:new1", "--at", "2026-05-31")
    code, out, _ = run("reinforce", "note:new2", "--at", "2026-05-31T08:00:00+02:00", "--json")
    assert code == 0 and json.loads(out)["node"]["last_read_at"] == "2026-05-31T06:00:00Z"
    old = json.loads(run("get", "note:old0", "--json")[1])
    assert old["created_at"] == "2025-01-01T00:00:00Z" == old["last_read_at"]

    code, out, _ = run("maintain", "--now", "2026-06-01", "--dry-run", "--json")
    preview = json.loads(out)
    assert code == 0 and preview["dry_run"] is True
    planned = {(m["id"], m["from"], m["to"]) for m in preview["moves"]}
    # decay alone archives (cold), it never queues for deletion: nothing of these was replaced
    assert {(f"note:old{i}", "hot", "cold") for i in range(3)} <= planned
    assert not any(to == "frozen" for _, _, to in planned)
    code, out, _ = run("maintain", "--dry-run")
    assert code == 0 and "nothing was changed" in out and "note:old0" in out
    assert json.loads(run("get", "note:old0", "--json")[1])["tier"] == 1  # dry runs change nothing

    code, out, _ = run("maintain", "--now", "2026-06-01", "--json")
    report = json.loads(out)
    assert code == 0 and report["newly_queued"] == []
    assert sum(report["moved"].values()) == len(planned)  # the preview foretold every move
    for i in range(3):
        assert json.loads(run("get", f"note:old{i}", "--json")[1])["tier"] == 3
    log = json.loads(run("log", "--action", "demote", "--json")[1])
    assert {e["node_id"] for e in log} >= {"note:old0", "note:old1", "note:old2"}
    assert {e["at"] for e in log} == {"2026-06-01T00:00:00Z"}


def test_bad_times_are_refused(run: Run) -> None:
    code, _, err = run("remember", "x", "--at", "last tuesday")
    assert code == 2 and "--at 'last tuesday' is not an ISO-8601 time" in err
    code, _, err = run("maintain", "--now", "soon")
    assert code == 2 and "--now 'soon'" in err


# -- item 10: knowing what Ebb is doing ----------------------------------------------------------
def test_ebb_log_debug_shows_each_call_its_store_and_timing(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    db = str(tmp_path / "log.kuzu")
    ebb = [sys.executable, "-m", "ebb_core.cli", "--db", db]
    quiet = {k: v for k, v in os.environ.items() if k != "EBB_LOG"}
    first = subprocess.run(
        [*ebb, "remember", "harbor lantern", "--id", "note:h"],
        capture_output=True, text=True, env=quiet, timeout=120,
    )  # fmt: skip
    assert first.returncode == 0 and first.stderr == ""  # nothing by default
    logged = subprocess.run(
        [*ebb, "recall", "harbor"],
        capture_output=True, text=True, env={**quiet, "EBB_LOG": "debug"}, timeout=120,
    )  # fmt: skip
    assert logged.returncode == 0 and "note:h" in logged.stdout
    lines = [line for line in logged.stderr.splitlines() if " ebb DEBUG " in line]
    assert len(lines) == 1, logged.stderr
    assert "recall('harbor'" in lines[0] and f"store=kuzu:{db}" in lines[0]
    assert "ns=default" in lines[0] and " ms -> 1 item" in lines[0]


def test_the_ebb_logger_reports_calls_and_failures(
    kuzu_brain: Any, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from ebb_core import NotFound

    caplog.set_level(logging.DEBUG, logger="ebb")
    kuzu_brain.remember("harbor", id="note:h")
    with pytest.raises(NotFound):
        kuzu_brain.get("note:missing")
    messages = [r.getMessage() for r in caplog.records if r.name == "ebb"]
    assert messages[0].startswith("remember('harbor', id='note:h') ns=test store=kuzu:")
    assert messages[0].endswith("-> note:h")
    assert messages[1].startswith("get('note:missing')") and "-> NotFound:" in messages[1]
    assert len(messages) == 2  # nested public calls are not logged twice
