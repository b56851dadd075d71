"""The JSON Lines import format as a person writes it by hand (issue 18, item 4, the format
half): only a memory's ``text`` (and a link's ``src`` and ``dst``) is required."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ebb_core import Brain, FixedClock, InvalidInput, Tier
from ebb_core.cli import main


def _jsonl(*records: dict[str, object]) -> io.StringIO:
    return io.StringIO("\n".join(json.dumps(r) for r in records) + "\n")


def test_only_text_is_required(brain: Brain, clock: FixedClock) -> None:
    counts = brain.import_(
        _jsonl(
            {"text": "We bill Acme per resolved ticket", "kind": "decision"},
            {"text": "Acme is our largest client", "id": "client:acme"},
            {"text": "Acme is our largest client"},  # same text: a distinct generated id
            {"src": "decision:we-bill-acme-per-resolved-ticket", "dst": "client:acme"},
        )
    )
    assert counts == {"nodes": 3, "edges": 1, "audit": 0}
    decision = brain.get("decision:we-bill-acme-per-resolved-ticket")
    assert decision.namespace == "test" and decision.kind == "decision"
    assert decision.created_at == decision.updated_at == decision.last_read_at == clock.now()
    assert decision.tier is Tier.HOT and not decision.pinned and decision.props == {}
    assert brain.get("note:acme-is-our-largest-client").text == "Acme is our largest client"
    link = brain.neighbors("client:acme")[0]
    assert link.node.id == decision.id and link.edge.kind == "related"
    assert link.edge.weight == 1.0 and link.edge.reinforced_at == clock.now()
    assert brain.recall("bill Acme", reinforce=False)[0].id == decision.id


def test_explicit_fields_and_nulls_are_kept(brain: Brain) -> None:
    brain.import_(
        _jsonl(
            {
                "text": "old note",
                "id": "note:old",
                "created_at": "2025-01-01T00:00:00Z",
                "last_read_at": None,
                "props": {"source": "wiki"},
            }
        )
    )
    node = brain.get("note:old")
    assert node.created_at.year == 2025 and node.updated_at == node.created_at
    assert node.last_read_at is None and node.props == {"source": "wiki"}


def test_what_is_still_wrong_is_named_with_its_line(brain: Brain) -> None:
    with pytest.raises(InvalidInput, match=r"line 2 .*text must be a non-empty string"):
        brain.import_(_jsonl({"text": "fine"}, {"kind": "note"}))
    with pytest.raises(InvalidInput, match=r"line 1 .*kind 'Bad Kind' is not a valid kind"):
        brain.import_(_jsonl({"text": "x", "kind": "Bad Kind"}))
    with pytest.raises(InvalidInput, match=r"line 1 .*dst must be"):
        brain.import_(_jsonl({"src": "note:a"}))
    assert brain.stats().nodes == 0


def test_the_cli_imports_a_hand_written_file_into_its_namespace(tmp_path: Path) -> None:
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"text": "The harbor closes on Sundays"}\n{"text": "Lanterns are on"}\n')
    db = str(tmp_path / "x.kuzu")
    runner = CliRunner()
    result = runner.invoke(main, ["--db", db, "-n", "notes", "import", str(notes)])
    assert result.exit_code == 0, result.stderr
    listed = runner.invoke(main, ["--db", db, "-n", "notes", "list", "--json"]).stdout
    assert [n["id"] for n in json.loads(listed)] == [
        "note:lanterns-are-on",
        "note:the-harbor-closes-on-sundays",
    ]


def test_an_export_parsed_in_small_pieces_gives_the_same_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parser reads a file (mapped into memory) or bytes in pieces of whole lines; pieces
    that are blank, a file that ends without a newline or with blank lines, and a piece
    boundary inside a record all give the columns one piece gives."""
    from ebb_core import records

    at = "2026-01-01T00:00:00Z"
    lines = [json.dumps({"type": "ebb-export", "version": 1, "namespaces": ["x"]}), "", "  "]
    for i in range(40):
        node = {"type": "node", "id": f"m{i}", "namespace": "x", "kind": "note", "text": f"t {i}"}
        lines.append(json.dumps({**node, "created_at": at, "updated_at": at}))
        if i % 7 == 0:
            lines += ["", "\t "]
    for i in range(1, 40):
        edge = {"type": "edge", "namespace": "x", "src": f"m{i}", "dst": "m0", "kind": "related"}
        lines.append(json.dumps({**edge, "created_at": at, "reinforced_at": at, "weight": 1.0}))
    text = "\n".join(lines) + "\n\n  \n"
    path = tmp_path / "x.jsonl"

    def parsed(data: object) -> object:
        nodes, edges, audits = records.read_columns(data, None)  # type: ignore[arg-type]
        return {k: v.to_pylist() for k, v in {**nodes, **edges}.items()}, audits

    path.write_text(text)
    whole = parsed(path)
    assert len(whole[0]["id"]) == 40  # type: ignore[index]
    for chunk in (1, 37, 64, 200, 1 << 26):
        monkeypatch.setattr(records, "_CHUNK", chunk)
        for data in (text.rstrip(), text):
            path.write_text(data)
            assert parsed(path) == whole, chunk
            assert parsed(data.encode()) == whole, chunk


@pytest.mark.parametrize("threaded", [False, True])
def test_links_ends_are_matched_the_same_in_two_threads(
    brain: Brain, monkeypatch: pytest.MonkeyPatch, threaded: bool
) -> None:
    """An import matches its links' ends against its memories once (in two threads past
    ``_THREADED_FROM`` links) and hands those rows to the store: links inside a file loaded
    into an empty namespace, a link to a memory stored before, and a link to a memory nowhere
    (refused, nothing written)."""
    from ebb_core import import_job

    monkeypatch.setattr(import_job, "_THREADED_FROM", 1 if threaded else 10**9)
    counts = brain.import_(
        _jsonl(
            {"text": "Acme is our largest client", "id": "client:acme"},
            {"text": "We bill per ticket", "id": "decision:bill"},
            {"text": "Invoices go out monthly", "id": "note:monthly"},
            {"src": "decision:bill", "dst": "note:monthly", "kind": "implies"},
            {"src": "client:acme", "dst": "decision:bill"},
        )
    )
    assert counts == {"nodes": 3, "edges": 2, "audit": 0}
    with pytest.raises(InvalidInput, match="client:nowhere"):
        brain.import_(
            _jsonl(
                {"text": "Acme pays late", "id": "note:late"},
                {"src": "note:late", "dst": "client:nowhere"},
            )
        )
    with pytest.raises(KeyError):
        brain.get("note:late")
    brain.import_(
        _jsonl(
            {"text": "Acme pays late", "id": "note:late"},
            {"src": "note:late", "dst": "client:acme"},
        )
    )
    assert {(n.node.id, n.edge.kind) for n in brain.neighbors("decision:bill")} == {
        ("note:monthly", "implies"),
        ("client:acme", "related"),
    }
    assert {n.node.id for n in brain.neighbors("client:acme")} == {"decision:bill", "note:late"}
    assert brain.recall("invoices monthly", reinforce=False)[0].id == "note:monthly"
