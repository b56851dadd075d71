"""Memory ids look like ``kind:slug``: whitespace and ids with nothing visible are refused, with
the same message, by the API, the CLI, the MCP server, the LangGraph store and import
(issue 18, item 6; one rule: ``ebb_core.model.id_problem`` through ``engine.validate_id``)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ebb_core import Brain, InvalidInput, NotFound
from ebb_core.cli import main

BAD = [
    ("bad id with spaces", "contains whitespace"),
    ("note:tab\there", "control characters"),
    ("note:nbsp\u00a0here", "contains whitespace"),
    ("note:ideographic\u3000space", "contains whitespace"),
    ("\u200b", "no visible characters"),
    ("\ufeff\u200d", "no visible characters"),
    ("\uffff", "no visible characters"),
]
GOOD = ["decision:outcome-pricing", "note:café", "person:李雷", "note:a\u200bb", "x"]


@pytest.mark.parametrize(("bad", "why"), BAD)
def test_the_api_refuses_bad_ids_everywhere(brain: Brain, bad: str, why: str) -> None:
    brain.remember("harbor lantern", id="note:ok")
    with pytest.raises(InvalidInput, match=why) as e:
        brain.remember("x", id=bad)
    assert e.value.field == "id"
    # ids that must name an existing memory are looked up leniently (a store written before
    # the rule can still be read, linked, forgotten and approved): here there is no such memory
    for lookup in (
        lambda: brain.remember("x", links=[bad]),
        lambda: brain.connect("note:ok", bad),
        lambda: brain.get(bad),
        lambda: brain.forget(bad),
    ):
        with pytest.raises((InvalidInput, NotFound)):
            lookup()
    assert brain.stats().nodes == 1


def test_the_message_suggests_a_slug(brain: Brain) -> None:
    with pytest.raises(InvalidInput, match=r"e\.g\. 'bad-id-with-spaces'"):
        brain.remember("x", id="bad id with spaces")


def test_unusual_but_visible_ids_are_fine(brain: Brain) -> None:
    for i in GOOD:
        assert brain.remember("harbor", id=i).id == i
        assert brain.get(i).id == i


def test_import_refuses_a_bad_id_naming_the_line(brain: Brain) -> None:
    at = "2026-01-01T00:00:00Z"
    rows = [
        {"type": "node", "id": i, "namespace": "test", "kind": "note", "text": "t",
         "created_at": at, "updated_at": at}
        for i in ("note:fine", "not fine")
    ]  # fmt: skip
    text = "\n".join(json.dumps(r) for r in rows) + "\n"
    with pytest.raises(InvalidInput, match=r"line 2 .*contains whitespace"):
        brain.import_(io.StringIO(text))
    rows[1]["id"] = "\u200b"
    text = "\n".join(json.dumps(r) for r in rows) + "\n"
    with pytest.raises(InvalidInput, match=r"line 2 .*no visible characters"):
        brain.import_(io.StringIO(text))
    assert brain.stats().nodes == 0


def test_the_cli_refuses_bad_ids(tmp_path: Path) -> None:
    runner = CliRunner()
    db = str(tmp_path / "cli.kuzu")
    r = runner.invoke(main, ["--db", db, "remember", "x", "--id", "bad id with spaces"])
    assert (
        r.exit_code == 2 and "contains whitespace" in r.stderr and "bad-id-with-spaces" in r.stderr
    )
    r = runner.invoke(main, ["--db", db, "remember", "x", "--link", "\u200b"])
    assert r.exit_code == 2 and "no visible characters" in r.stderr
    r = runner.invoke(main, ["--db", db, "stats", "--json"])
    assert json.loads(r.stdout)["nodes"] == 0


async def test_the_mcp_server_refuses_bad_ids(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from ebb_core.mcp_access import StoreAccess
    from ebb_core.mcp_server import build_server

    db = tmp_path / "mcp.kuzu"
    server = build_server(StoreAccess(db, namespace="mcp"))
    async with Client(server) as client:
        for bad, why in BAD:
            result: Any = await client.call_tool("remember", {"text": "x", "id": bad})
            assert result.is_error and why in result.content[0].text, (bad, result.content)
        stats = await client.call_tool("stats", {})
        assert stats.structured_content["nodes"] == 0


def test_the_langgraph_store_refuses_bad_keys(kuzu_brain: Brain) -> None:
    pytest.importorskip("langgraph")
    from ebb_langchain import EbbStore

    store = EbbStore(kuzu_brain)
    with pytest.raises(InvalidInput, match="contains whitespace"):
        store.put(("memories",), "user preferences", {"text": "likes tea"})
    store.put(("memories",), "user-preferences", {"text": "likes tea"})
    item = store.get(("memories",), "user-preferences")
    assert item is not None and item.value == {"text": "likes tea"}
