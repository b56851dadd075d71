"""The ``ebb`` command line: thin over Brain, tables or JSON, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from ebb_core.cli import main


@pytest.fixture
def run(tmp_path: Path):  # type: ignore[no-untyped-def]
    db = str(tmp_path / "cli.kuzu")
    runner = CliRunner()

    def invoke(*args: str) -> tuple[int, str, str]:
        result = runner.invoke(main, ["--db", db, "--namespace", "cli", *args])
        return result.exit_code, result.stdout, result.stderr

    return invoke


def test_remember_recall_json(run) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run("remember", "Acme renews in March", "--kind", "fact", "--id", "fact:acme")
    assert code == 0 and "remembered fact:acme" in out
    code, out, _ = run("remember", "Ravi owns the renewal", "--link", "fact:acme", "--json")
    assert code == 0 and json.loads(out)["id"] == "note:ravi-owns-the-renewal"
    code, out, _ = run("recall", "Acme renewal", "--json")
    hits = json.loads(out)
    assert code == 0 and hits[0]["node"]["id"] in {"fact:acme", "note:ravi-owns-the-renewal"}
    assert "summary" in hits[0]["why"]
    code, out, _ = run("recall", "Acme")
    assert code == 0 and "fact:acme" in out and "matched" in out


def test_supersede_and_history(run) -> None:  # type: ignore[no-untyped-def]
    run("remember", "We price per seat", "--kind", "decision", "--id", "decision:seats")
    code, out, _ = run(
        "remember",
        "We price per resolved ticket",
        "--kind",
        "decision",
        "--id",
        "decision:outcome",
        "--supersedes",
        "decision:seats",
    )
    assert code == 0
    code, out, _ = run("recall", "we price", "--json", "--no-reinforce")
    hits = json.loads(out)
    assert [h["node"]["id"] for h in hits] == ["decision:outcome", "decision:seats"]
    assert hits[1]["why"]["superseded_by"] == ["decision:outcome"]
    run("remember", "Per seat, $40", "--id", "fact:seat")
    run("remember", "Per ticket, $2", "--id", "fact:ticket")
    code, out, _ = run("supersede", "fact:seat", "fact:ticket")
    assert code == 0 and "fact:ticket supersedes fact:seat" in out
    code, out, _ = run("supersede", "fact:nope", "fact:ticket")
    assert code != 0 and "fact:nope" in out + _
    # a new text under the same id: a version, and the kind stays
    code, out, _ = run("remember", "We price per outcome", "--id", "decision:outcome", "--json")
    assert code == 0 and json.loads(out)["kind"] == "decision"
    code, out, _ = run("history", "decision:outcome", "--json")
    versions = json.loads(out)
    assert [(v["text"], v["current"]) for v in versions] == [
        ("We price per resolved ticket", False),
        ("We price per outcome", True),
    ]
    code, out, _ = run("history", "decision:outcome")
    assert code == 0 and "resolved ticket" in out and "(current)" in out
    code, out, _ = run("log", "--json")
    assert [e["action"] for e in json.loads(out)].count("supersede") == 2
    assert "revise" in [e["action"] for e in json.loads(out)]


def test_forget_review_approve_log(run) -> None:  # type: ignore[no-untyped-def]
    run("remember", "temporary note", "--id", "note:tmp")
    code, out, _ = run("forget", "note:tmp", "--reason", "noise")
    assert code == 0 and "review queue" in out
    code, out, _ = run("review", "--json")
    assert [i["id"] for i in json.loads(out)] == ["note:tmp"]
    code, out, _ = run("approve", "note:tmp", "--by", "tester", "--json")
    assert code == 0 and json.loads(out) == {"deleted": ["note:tmp"]}
    code, out, _ = run("log", "--json")
    assert [e["action"] for e in json.loads(out)] == ["forget", "delete"]
    code, out, _ = run("stats", "--json")
    assert json.loads(out)["nodes"] == 0


def test_other_commands(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run("remember", "alpha", "--id", "note:a")
    run("remember", "beta", "--id", "note:b")
    assert run("connect", "note:a", "note:b", "--kind", "mentions")[0] == 0
    code, out, _ = run("neighbors", "note:a", "--json")
    assert [n["node"]["id"] for n in json.loads(out)] == ["note:b"]
    assert run("reinforce", "note:a")[0] == 0
    assert run("pin", "note:a")[0] == 0
    assert run("unpin", "note:a")[0] == 0
    code, out, _ = run("maintain", "--json")
    assert code == 0 and json.loads(out)["scanned"] == 2
    export = tmp_path / "out.jsonl"
    assert run("export", str(export))[0] == 0
    imported = CliRunner().invoke(
        main, ["--db", str(tmp_path / "other.kuzu"), "import", str(export), "--json"]
    )
    assert imported.exit_code == 0
    assert json.loads(imported.stdout) == {"nodes": 2, "edges": 1, "audit": 2}
    code, out, _ = run("forget", "note:b")
    assert run("restore", "note:b")[0] == 0
    code, out, _ = run("stats")
    assert "memories" in out


def test_errors_are_one_line(run) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run("reinforce", "note:missing")
    assert code == 2
    assert err.strip().splitlines() == ["error: no memory 'note:missing' in namespace 'cli'"]
    code, _, err = run("recall", "x", "-k", "0")
    assert code == 2 and "k must be an integer" in err and "Traceback" not in err
    code, _, err = run("remember", "x", "--props", "{nope")
    assert code == 2 and "--props is not valid JSON" in err
    code, _, err = run("approve", "note:missing", "--by", "me")
    assert code == 2 and "note:missing" in err


HOLD = textwrap.dedent(
    """
    import sys, time
    from ebb_core import Brain
    b = Brain.open(sys.argv[1])
    print("ready", flush=True)
    time.sleep(600)
    """
)


def test_locked_store_says_what_it_waits_for_then_one_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "locked.kuzu"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(db)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        proc = subprocess.run(
            [sys.executable, "-m", "ebb_core.cli", "--db", str(db), "stats"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 3
        lines = proc.stderr.strip().splitlines()
        # One line saying what it waits for (it asked the holder to let go), one error line.
        assert len(lines) == 2, proc.stderr
        assert lines[0].startswith(f"ebb: waiting up to 15 s for the store at {db}")
        assert lines[1].startswith("error: the store ") and str(db) in lines[1]
        assert "another process" in lines[1] and "Traceback" not in proc.stderr
    finally:
        holder.kill()
        holder.wait()


def test_demo_json_ranks() -> None:
    result = CliRunner().invoke(main, ["demo", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["id"]: r for r in json.loads(result.stdout)}
    assert rows["decision:outcome-pricing"]["rank"] == 1
    assert rows["decision:outcome-pricing"]["raw_links"] == 3
    assert rows["decision:seat-pricing"]["rank"] == 3
    assert rows["decision:seat-pricing"]["raw_links"] == 11
    assert max(r["raw_links"] for r in rows.values()) == 11
    analysis = [r for i, r in rows.items() if i.startswith("note:analysis-")]
    assert len(analysis) == 10 and all(r["tier"] == 4 for r in analysis)
    assert all(set(r) == {"id", "raw_links", "activation", "rank", "tier"} for r in rows.values())


def test_demo_narrates() -> None:
    result = CliRunner().invoke(main, ["demo"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    for phrase in (
        "Ranking after maintain",
        "1. Recall",
        "why:",
        "2. Reinforce",
        "moved from rank",
        "3. Forget",
        "review queue",
        "approves deleting",
    ):
        assert phrase in out, phrase


def test_module_entry_points() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ebb_core.demo"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and "Raw count lost; recency won." in proc.stdout


def test_a_memory_created_meanwhile_is_a_one_line_error(run, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Another writer creates the id between remember's check and its write (forced in the
    real Kùzu store's write step): one line naming the id and what to do, exit code 2, no
    "the store failed ... run ebb doctor", and nothing written."""
    from ebb_core.kuzu_store import KuzuStore

    real_event = KuzuStore.write_event

    def created_meanwhile(self, namespace, *, new_nodes=(), **rest):  # type: ignore[no-untyped-def]
        self.insert_nodes(new_nodes)  # the other writer, just before this write
        real_event(self, namespace, new_nodes=new_nodes, **rest)

    monkeypatch.setattr(KuzuStore, "write_event", created_meanwhile)
    code, out, err = run("remember", "raced", "--id", "note:race")
    assert code == 2, (out, err)
    assert "memory 'note:race' already exists in namespace 'cli'" in err
    assert "another id" in err
    for wrong in ("doctor", "Traceback", "duplicated primary key"):
        assert wrong not in err
    assert len(err.strip().splitlines()) == 1
    monkeypatch.undo()
    code, out, err = run("get", "note:race")
    assert code != 0 and "note:race" in err
