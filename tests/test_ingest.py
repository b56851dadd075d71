"""`ebb ingest` / :func:`ebb_core.ingest.ingest`: notes on disk become memories (issue 18, item 4).

Real files in ``tmp_path``, a real Kùzu store.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from ebb_core import Brain
from ebb_core import ingest as ebb_ingest
from ebb_core.cli import main
from ebb_core.errors import InvalidInput, NotFound
from ebb_core.ingest import ingest, note_id
from ebb_core.validation import id_problem

ROOT = Path(__file__).resolve().parent.parent


def day(n: int) -> datetime:
    return datetime(2025, 3, n, 9, 30, tzinfo=timezone.utc)


def write(root: Path, rel: str, text: str | bytes, when: datetime | None = None) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    stamp = (when or day(1)).timestamp()
    os.utime(path, (stamp, stamp))
    return path


def links_from(brain: Brain, id: str, kind: str = "links_to") -> dict[str, datetime]:
    return {
        n.node.id: n.edge.reinforced_at
        for n in brain.neighbors(id, limit=1000)
        if n.edge.src == id and n.edge.kind == kind
    }


@pytest.fixture(params=["one-by-one", "bulk"])
def bulk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """New notes go in by ``remember`` one by one, or (many at once) as one import, and stored
    links are looked up per note or by one scan: the same memories, times and links either way."""
    many = request.param == "bulk"
    monkeypatch.setattr(ebb_ingest, "BULK_MIN", 1 if many else 10**9)
    monkeypatch.setattr(ebb_ingest, "SCAN_MIN", 1 if many else 10**9)
    return str(request.param)


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    write(root, "alpha.md", "# Alpha\nSee [[Beta Note]] and [gamma](sub/gamma.md).\n", day(1))
    write(
        root,
        "Beta Note.md",
        "# Beta\nBack to [[alpha|the start]]; [[nowhere]] is not here.\n",
        day(2),
    )
    write(
        root,
        "sub/gamma.md",
        "Gamma links [up](../alpha.md) and ![a picture](pic.png) and [[pic.png]].\n"
        "```\n[[Beta Note]] in code is not a link\n```\n"
        "Inline `[[Beta Note]]` is not one either.\n",
        day(3),
    )
    write(root, "todo.txt", "buy rope\n[[alpha]] stays text in a .txt file\n", day(4))
    write(root, "pic.png", b"\x89PNG\r\n\x1a\n\x00\x00")
    write(root, ".obsidian/workspace.md", "hidden")
    return root


def test_a_folder_becomes_one_memory_per_note_with_ids_from_paths(
    kuzu_brain: Brain, notes: Path, bulk: str
) -> None:
    report = ingest(kuzu_brain, notes)
    assert (report.files, report.added, report.updated, report.unchanged) == (4, 4, 0, 0)
    ids = sorted(n.id for n in kuzu_brain.memories())
    assert ids == ["note:alpha", "note:beta-note", "note:sub/gamma", "note:todo"]
    assert all(id_problem(i) is None for i in ids)
    beta = kuzu_brain.get("note:beta-note")
    assert beta.kind == "note" and beta.text.startswith("# Beta\nBack to [[alpha")
    assert beta.props["source"] == "Beta Note.md" and len(beta.props["sha256"]) == 64
    assert note_id("meetings/Kick off (v2).md") == "note:meetings/kick-off-v2"


def test_the_files_modification_time_is_the_memorys_time(
    kuzu_brain: Brain, notes: Path, bulk: str
) -> None:
    ingest(kuzu_brain, notes)
    for id, n in (("note:alpha", 1), ("note:beta-note", 2), ("note:sub/gamma", 3)):
        node = kuzu_brain.get(id)
        assert node.created_at == node.updated_at == node.last_read_at == day(n)


def test_wikilinks_and_relative_links_become_links_others_are_counted(
    kuzu_brain: Brain, notes: Path, bulk: str
) -> None:
    report = ingest(kuzu_brain, notes)
    # alpha -> beta (wikilink by name), alpha -> gamma (relative), beta -> alpha (alias),
    # gamma -> alpha (../): four, in a cycle, each dated like the note that makes it
    assert links_from(kuzu_brain, "note:alpha") == {
        "note:beta-note": day(1),
        "note:sub/gamma": day(1),
    }
    assert links_from(kuzu_brain, "note:beta-note") == {"note:alpha": day(2)}
    # links in code, images and a .txt file's brackets are not links
    assert links_from(kuzu_brain, "note:sub/gamma") == {"note:alpha": day(3)}
    assert links_from(kuzu_brain, "note:todo") == {}
    assert report.links == 4
    assert report.unresolved == [("note:beta-note", "nowhere")]
    assert report.links_unresolved == 1
    assert kuzu_brain.get("note:alpha").degree == 4  # two out, two in


def test_re_ingesting_unchanged_notes_does_nothing(
    kuzu_brain: Brain, notes: Path, bulk: str
) -> None:
    ingest(kuzu_brain, notes)
    before = [n.model_dump() for n in kuzu_brain.memories()]
    log = kuzu_brain.audit_log(1000)
    for path in notes.rglob("*.md"):  # a touch without a change of content
        os.utime(path, (day(20).timestamp(), day(20).timestamp()))
    kuzu_brain.clock.advance(days=3)  # type: ignore[attr-defined]
    report = ingest(kuzu_brain, notes)
    assert (report.added, report.updated, report.unchanged, report.links) == (0, 0, 4, 0)
    assert report.written == []
    assert [n.model_dump() for n in kuzu_brain.memories()] == before
    assert kuzu_brain.audit_log(1000) == log


def test_a_changed_note_becomes_a_new_version_under_the_same_id(
    kuzu_brain: Brain, notes: Path, bulk: str
) -> None:
    ingest(kuzu_brain, notes)
    write(notes, "Beta Note.md", "# Beta\nNow about [[sub/gamma]] instead.\n", day(9))
    report = ingest(kuzu_brain, notes)
    assert (report.added, report.updated, report.unchanged) == (0, 1, 3)
    assert report.written == ["note:beta-note"]
    history = kuzu_brain.history("note:beta-note")
    assert len(history) == 2
    assert "[[nowhere]]" in history[0].text and not history[0].current
    assert history[1].text == "# Beta\nNow about [[sub/gamma]] instead.\n" and history[1].current
    node = kuzu_brain.get("note:beta-note")
    assert node.updated_at == day(9) and node.created_at == day(2)
    assert node.props["sha256"] != history[0].props["sha256"]
    # the new link is made as of the new version; the old one is kept (links decay)
    assert links_from(kuzu_brain, "note:beta-note") == {
        "note:alpha": day(2),
        "note:sub/gamma": day(9),
    }
    assert report.links == 1 and report.links_unresolved == 0


def test_a_note_that_arrives_later_is_linked_from_unchanged_ones(
    kuzu_brain: Brain, notes: Path, bulk: str
) -> None:
    ingest(kuzu_brain, notes)
    kuzu_brain.clock.advance(days=1)  # type: ignore[attr-defined]
    used = kuzu_brain.reinforce("note:beta-note")  # used since it was ingested
    write(notes, "nowhere.md", "Now it exists.\n", day(10))
    report = ingest(kuzu_brain, notes)
    assert (report.added, report.unchanged, report.links) == (1, 4, 1)
    # a note used since it was written gets its new link as of now (its clocks never go back)
    assert links_from(kuzu_brain, "note:beta-note")["note:nowhere"] == kuzu_brain.clock.now()
    assert kuzu_brain.get("note:beta-note").last_read_at == used.last_read_at
    assert len(kuzu_brain.history("note:beta-note")) == 1  # linked, not rewritten


def test_sections_mode_makes_one_memory_per_heading_section(
    kuzu_brain: Brain, tmp_path: Path, bulk: str
) -> None:
    root = tmp_path / "doc"
    write(
        root,
        "plan.md",
        "# Plan\nThe overview.\n\n## Budget\nTen boats.\n\n## Budget\nRevised: twelve.\n"
        "\n```\n# not a heading\n```\n\n### People\nSee [[team]].\n",
        day(5),
    )
    write(root, "team.md", "# Team\nMara and Tomas; the [[plan#Budget|budget]].\n", day(6))
    report = ingest(kuzu_brain, root, by="section")
    assert report.added == 5
    ids = sorted(n.id for n in kuzu_brain.memories())
    assert ids == [
        "note:plan",
        "note:plan#budget",
        "note:plan#budget-2",
        "note:plan#people",
        "note:team",
    ]
    assert kuzu_brain.get("note:plan").text == "# Plan\nThe overview.\n"
    budget2 = kuzu_brain.get("note:plan#budget-2")
    assert budget2.text.startswith("## Budget\nRevised: twelve.\n\n```\n# not a heading")
    assert budget2.props == {
        "source": "plan.md",
        "sha256": budget2.props["sha256"],
        "section": "Budget",
    }
    assert budget2.created_at == day(5)
    for section in ("note:plan#budget", "note:plan#budget-2", "note:plan#people"):
        assert links_from(kuzu_brain, section, "part_of") == {"note:plan": day(5)}
    assert links_from(kuzu_brain, "note:plan#people") == {"note:team": day(5)}
    assert links_from(kuzu_brain, "note:team") == {"note:plan#budget": day(6)}
    # one section edited: only that section is a new version
    text = (root / "plan.md").read_text().replace("Ten boats.", "Eleven boats.")
    write(root, "plan.md", text, day(7))
    again = ingest(kuzu_brain, root, by="section")
    assert (again.added, again.updated, again.unchanged) == (0, 1, 4)
    assert len(kuzu_brain.history("note:plan#budget")) == 2
    assert len(kuzu_brain.history("note:plan")) == 1


def test_a_missing_path_or_a_folder_without_notes_is_a_clear_error(
    kuzu_brain: Brain, tmp_path: Path
) -> None:
    with pytest.raises(InvalidInput, match="no such file or folder"):
        ingest(kuzu_brain, tmp_path / "nope")
    write(tmp_path / "pics", "a.png", b"\x89PNG\x00")
    with pytest.raises(InvalidInput, match=r"no notes in .*\.md"):
        ingest(kuzu_brain, tmp_path / "pics")
    with pytest.raises(InvalidInput, match="by must be"):
        ingest(kuzu_brain, tmp_path, by="paragraph")
    assert kuzu_brain.memories() == []


def test_a_bad_single_file_is_refused_and_nothing_is_written(
    kuzu_brain: Brain, tmp_path: Path
) -> None:
    binary = write(tmp_path, "blob.md", b"# x\n\x00\x01\x02")
    with pytest.raises(InvalidInput, match="looks binary"):
        ingest(kuzu_brain, binary)
    latin = write(tmp_path, "latin.md", "# Café\nnoté\n".encode("latin-1"))
    with pytest.raises(InvalidInput, match=r"not UTF-8 text \(byte 0xe9 at offset 5\)"):
        ingest(kuzu_brain, latin)
    big = write(tmp_path, "big.md", "# Big\n" + "word " * 50_000)
    with pytest.raises(InvalidInput, match="--by section"):
        ingest(kuzu_brain, big)
    assert kuzu_brain.memories() == []


def test_in_a_folder_bad_files_are_reported_and_the_others_go_in(
    kuzu_brain: Brain, notes: Path
) -> None:
    write(notes, "latin.md", "# Café\n[[alpha]]\n".encode("latin-1"))
    write(notes, "blob.txt", b"\x00\x01")
    write(notes, "empty.md", "  \n")
    report = ingest(kuzu_brain, notes)
    assert report.added == 4
    assert {s.path: s.problem for s in report.skipped} == {
        "latin.md": True,
        "blob.txt": True,
        "empty.md": False,
    }
    reasons = {s.path: s.reason for s in report.skipped}
    assert "not UTF-8" in reasons["latin.md"] and "looks binary" in reasons["blob.txt"]
    with pytest.raises(NotFound):
        kuzu_brain.get("note:latin")
    assert "note:latin" not in links_from(kuzu_brain, "note:alpha")


def test_a_memory_that_was_not_ingested_is_never_overwritten(
    kuzu_brain: Brain, notes: Path
) -> None:
    kuzu_brain.remember("my own todo list", id="note:todo")
    report = ingest(kuzu_brain, notes)
    assert report.added == 3
    assert [s.path for s in report.problems] == ["todo.txt"]
    assert "already belongs to a memory not ingested" in report.problems[0].reason
    assert kuzu_brain.get("note:todo").text == "my own todo list"
    with pytest.raises(InvalidInput, match="not ingested from a file"):
        ingest(kuzu_brain, notes / "todo.txt")


def test_a_dry_run_counts_what_would_happen_and_writes_nothing(
    kuzu_brain: Brain, notes: Path
) -> None:
    plan = ingest(kuzu_brain, notes, dry_run=True)
    assert kuzu_brain.memories() == [] and kuzu_brain.audit_log(10) == []
    done = ingest(kuzu_brain, notes)
    keys = ("added", "updated", "unchanged", "links", "links_unresolved", "skipped")
    assert {k: plan.as_dict()[k] for k in keys} == {k: done.as_dict()[k] for k in keys}
    assert ingest(None, notes, dry_run=True).added == 4
    with pytest.raises(InvalidInput, match="needs a store"):
        ingest(None, notes)


# -- the command line ------------------------------------------------------------------------------
def test_ebb_ingest_prints_counts_and_json(tmp_path: Path, notes: Path) -> None:
    runner = CliRunner()
    db = str(tmp_path / "cli.kuzu")
    result = runner.invoke(main, ["--db", db, "ingest", str(notes), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["dry_run"] is True and plan["added"] == 4
    assert not Path(db).exists()  # a dry run creates no store
    result = runner.invoke(main, ["--db", db, "ingest", str(notes)])
    assert result.exit_code == 0, result.output
    assert "ingested 4 files" in result.stdout and "4 added" in result.stdout
    assert "links: 4 made, 1 to notes not ingested" in result.stdout
    assert "not linked: note:beta-note -> nowhere" in result.stdout
    result = runner.invoke(main, ["--db", db, "ingest", str(notes), "--json"])
    counts = json.loads(result.stdout)
    assert {k: counts[k] for k in ("added", "updated", "unchanged", "links", "skipped")} == {
        "added": 0,
        "updated": 0,
        "unchanged": 4,
        "links": 0,
        "skipped": 0,
    }
    result = runner.invoke(main, ["--db", db, "history", "note:alpha", "--json"])
    assert len(json.loads(result.stdout)) == 1


def test_ebb_ingest_bad_input_exits_2_with_one_clear_line(tmp_path: Path, notes: Path) -> None:
    runner = CliRunner()
    db = str(tmp_path / "cli.kuzu")
    result = runner.invoke(main, ["--db", db, "ingest", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "no such file or folder" in result.stderr
    assert "Traceback" not in result.output
    write(notes, "latin.md", "caf\xe9".encode("latin-1"))
    result = runner.invoke(main, ["--db", db, "ingest", str(notes), "--json"])
    assert result.exit_code == 2
    assert "error: " in result.stderr and "latin.md is not UTF-8" in result.stderr
    assert json.loads(result.stdout)["added"] == 4  # the others went in


def test_the_shipped_example_notes_ingest_as_the_readme_shows(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    shutil.copytree(ROOT / "examples" / "notes", notes)
    code = (
        "import sys\n"
        "from ebb_core.cli import main\n"
        "try:\n"
        f"    main(['--db', {str(tmp_path / 'ex.kuzu')!r}, 'ingest', {str(notes)!r}, '--json'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('RICH', 'rich' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    body, _, last = done.stdout.rpartition("RICH ")
    assert last.strip() == "False"  # --json loads no table library
    counts = json.loads(body)
    assert (counts["files"], counts["added"], counts["links"], counts["links_unresolved"]) == (
        7,
        7,
        14,
        1,
    )
    assert counts["unresolved"] == [{"from": "note:risks", "target": "vendor contract"}]


def test_tables_show_wikilinks_and_brackets_as_typed(tmp_path: Path) -> None:
    notes = tmp_path / "n"
    write(notes, "mara.md", "[[roadmap]], [b]x[/b] money.\n")
    write(notes, "roadmap.md", "March.\n")
    runner = CliRunner()
    db = str(tmp_path / "t.kuzu")
    assert runner.invoke(main, ["--db", db, "ingest", str(notes)]).exit_code == 0
    for args in (["list"], ["top"]):
        result = runner.invoke(main, ["--db", db, *args])
        assert "[[roadmap]], [b]x[/b] money." in result.stdout, args
    result = runner.invoke(main, ["--db", db, "recall", "money", "--no-reinforce"])
    assert "[[roadmap]]" in result.stdout  # the cell is narrow: the start of it


def test_names_resolve_like_obsidian_and_alike_names_get_distinct_ids(
    kuzu_brain: Brain, tmp_path: Path
) -> None:
    root = tmp_path / "vault"
    write(root, "a/todo.md", "A's list.\n")
    write(root, "b/deep/todo.md", "B's list.\n")
    write(root, "a/x.md", "Mine: [[todo]]. Theirs: [[b/deep/todo]]. [sp](<../My Note.md>)\n")
    write(root, "top.md", "Nearest by path: [[Todo]]; [enc](My%20Note.md); [[todo.md]].\n")
    write(root, "My Note.md", "spaces\n")
    write(root, "my-note.md", "dashes\n")
    report = ingest(kuzu_brain, root)
    assert report.added == 6 and report.links_unresolved == 0
    assert links_from(kuzu_brain, "note:a/x") == {
        "note:a/todo": day(1),
        "note:b/deep/todo": day(1),
        "note:my-note": day(1),
    }
    assert set(links_from(kuzu_brain, "note:top")) == {"note:a/todo", "note:my-note"}
    # "My Note.md" and "my-note.md" slug alike: the second in path order gets a hash of its path
    others = [n for n in kuzu_brain.memories() if n.id.startswith("note:my-note-")]
    assert len(others) == 1 and others[0].props["source"] == "my-note.md"
    assert kuzu_brain.get("note:my-note").props["source"] == "My Note.md"
    again = ingest(kuzu_brain, root)
    assert (again.added, again.unchanged) == (0, 6)  # the same ids the second time


def test_an_interrupted_ingest_keeps_what_it_wrote_and_a_rerun_finishes(
    kuzu_brain: Brain, notes: Path
) -> None:
    def stop_after_two(done: int, total: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ingest(kuzu_brain, notes, progress=stop_after_two)
    assert len(kuzu_brain.memories()) == 2
    log = kuzu_brain.audit_log(100)
    report = ingest(kuzu_brain, notes)
    assert kuzu_brain.audit_log(100) == log  # no new version of what was in
    # "Beta Note.md", then "alpha.md" with its link to beta, were in: three links are left
    assert (report.added, report.unchanged, report.links) == (2, 2, 3)
    assert links_from(kuzu_brain, "note:alpha") == {
        "note:beta-note": day(1),
        "note:sub/gamma": day(1),
    }  # a note untouched since it went in gets its links as of its own time


def test_ingest_works_the_same_on_every_backend(brain: Brain, tmp_path: Path, bulk: str) -> None:
    root = tmp_path / "notes"
    write(root, "a.md", "# A\n[[b]] and [c](c.md) and [[gone]].\n", day(1))
    write(root, "b.md", "# B\nBack to [[a]].\n", day(2))
    write(root, "c.md", "# C\n", day(3))
    report = ingest(brain, root)
    assert (report.added, report.links, report.links_unresolved) == (3, 3, 1)
    assert links_from(brain, "note:a") == {"note:b": day(1), "note:c": day(1)}
    assert brain.get("note:b").created_at == day(2)
    again = ingest(brain, root)
    assert (again.added, again.updated, again.unchanged, again.links) == (0, 0, 3, 0)
    write(root, "c.md", "# C\nnow with text\n", day(4))
    assert ingest(brain, root).updated == 1
    assert [v.text for v in brain.history("note:c")] == ["# C\n", "# C\nnow with text\n"]
