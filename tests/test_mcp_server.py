"""The MCP server in-process, through the SDK's own client: tools, schemas, errors, resources.

End-to-end runs over stdio and HTTP are in ``test_mcp_e2e.py``; the MCP Inspector in
``test_mcp_inspector.py``.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

pytest.importorskip("mcp")

from mcp import Client
from mcp.types import CallToolResult

from ebb_core import Brain, FixedClock
from ebb_core.errors import InvalidInput
from ebb_core.mcp_access import BUSY, StoreAccess
from ebb_core.mcp_server import TOOL_NAMES, build_server, mcp_command, serve

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
NS = "mcp"
READ_ONLY = {"neighbors", "history", "review_queue", "stats", "read", "explore"}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "mcp.kuzu"


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(T0)


def opener(db: Path, clock: FixedClock) -> Callable[[], Brain]:
    return lambda: Brain.open(db, backend="kuzu", namespace=NS, clock=clock)


@pytest.fixture
def server(db: Path, clock: FixedClock) -> Any:
    """The server on a fixed clock; each test connects with ``async with Client(server)``.

    It opens the store for each call only (``idle_release=0``), so the test can open the same
    file between calls in this process (Kùzu's lock is per process: two opens of one file in
    one process must not overlap). The store held between calls is tested in test_mcp_hold.py.
    """
    return build_server(StoreAccess(db, namespace=NS, opener=opener(db, clock), idle_release=0))


def snapshot(db: Path) -> str:
    """Everything in the store (memories, links, audit log) as text; reads change nothing."""
    out = io.StringIO()
    with Brain.open(db, backend="kuzu", namespace=NS) as brain:
        brain.export(out, all_namespaces=True)
    return out.getvalue()


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    out: dict[str, Any] | None = result.structured_content
    assert out is not None
    return out


async def seed(client: Client) -> None:
    await call(
        client,
        "remember",
        text="We price by outcome now",
        kind="decision",
        id="decision:outcome-pricing",
    )
    await call(
        client,
        "remember",
        text="Acme signed on outcome pricing",
        kind="fact",
        id="fact:acme",
        links=["decision:outcome-pricing"],
        link_kind="about",
    )
    await call(
        client,
        "remember",
        text="Ravi runs the Acme account",
        kind="person",
        id="person:ravi",
        links=["fact:acme"],
    )


def text_of(result: CallToolResult) -> str:
    first = result.content[0]
    assert first.type == "text"
    return first.text


# -- the tool list ---------------------------------------------------------------------------


async def test_lists_exactly_the_tools_and_none_deletes(server: Any) -> None:
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
        assert sorted(t.name for t in tools) == sorted(TOOL_NAMES)
        for t in tools:
            assert not any(w in t.name for w in ("delete", "approve", "purge", "remove"))
            assert t.description and len(t.description) > 80, t.name
            assert "\n    " not in t.description  # docstring indentation is cleaned away
            assert t.output_schema and t.output_schema["type"] == "object", t.name
            for name, prop in t.input_schema.get("properties", {}).items():
                assert prop.get("description"), f"{t.name}.{name} has no description"
            assert t.annotations is not None
            assert t.annotations.destructive_hint is False
            assert t.annotations.open_world_hint is False
            assert t.annotations.read_only_hint is (t.name in READ_ONLY), t.name
        schemas = {t.name: t.input_schema for t in tools}
        assert schemas["recall"]["required"] == ["query"]
        assert schemas["remember"]["required"] == ["text"]
        assert schemas["recall"]["properties"]["k"]["maximum"] == 50


async def test_server_says_how_to_use_it(server: Any) -> None:
    async with Client(server) as client:
        assert client.instructions and "recall" in client.instructions
        assert "cannot delete" in client.instructions


# -- every tool ------------------------------------------------------------------------------


async def test_every_tool_returns_output_matching_its_schema(
    server: Any, db: Path, clock: FixedClock
) -> None:
    async with Client(server) as client:
        schemas = {t.name: t.output_schema for t in (await client.list_tools()).tools}
        outputs: dict[str, dict[str, Any]] = {}

        async def checked(tool: str, **args: Any) -> dict[str, Any]:
            out = await call(client, tool, **args)
            jsonschema.validate(out, schemas[tool])
            outputs[tool] = out
            return out

        mem = await checked(
            "remember",
            text="Seat pricing was the old model",
            kind="decision",
            id="decision:seat-pricing",
            props={"source": "board deck"},
        )
        assert mem["tier"] == "hot" and mem["props"] == {"source": "board deck"}
        await seed(client)
        link = await checked(
            "connect",
            src="decision:outcome-pricing",
            dst="decision:seat-pricing",
            kind="supersedes",
            weight=2.0,
        )
        assert link["weight"] == 2.0 and link["kind"] == "supersedes"
        clock.advance(days=3)
        again = await checked("reinforce", id="fact:acme")
        assert again["last_read_at"].startswith("2026-03-04")
        nb = await checked("neighbors", id="fact:acme")
        assert {n["id"] for n in nb["neighbors"]} == {"decision:outcome-pricing", "person:ravi"}
        about = next(n for n in nb["neighbors"] if n["id"] == "decision:outcome-pricing")
        assert about["link_kind"] == "about" and about["direction"] == "out"
        read = await checked("read", ids=["fact:acme", "nope:missing"])
        assert [m["id"] for m in read["memories"]] == ["fact:acme"]
        assert read["missing"] == ["nope:missing"] and read["reinforced"] is False
        around = await checked("explore", id="person:ravi", depth=2)
        assert [(m["id"], m["hops"]) for m in around["memories"]] == [
            ("person:ravi", 0),
            ("fact:acme", 1),
            ("decision:outcome-pricing", 2),
        ]
        versions = await checked("history", id="decision:seat-pricing")
        assert [v["current"] for v in versions["versions"]] == [True]
        pinned = await checked("pin", id="person:ravi")
        assert pinned["pinned"] is True
        hits = await checked("recall", query="outcome pricing", k=3)
        assert hits["hits"][0]["id"] == "decision:outcome-pricing"
        gone = await checked("forget", id="decision:seat-pricing", reason="superseded")
        assert gone["in_review_queue"] is True and "Nothing was deleted" in gone["message"]
        queue = await checked("review_queue")
        assert [i["id"] for i in queue["items"]] == ["decision:seat-pricing"]
        assert "ebb approve" in queue["message"]
        report = await checked("maintain")
        assert report["scanned"] >= 4
        stats = await checked("stats")
        assert stats["nodes"] == 4 and stats["review_queue"] == 1 and stats["pinned"] == 1
        assert set(outputs) == set(TOOL_NAMES)
        # forget queued, nothing was deleted: the memory is still in the store
        with Brain.open(db, backend="kuzu", namespace=NS) as brain:
            assert brain.get("decision:seat-pricing").tier == 4


async def test_read_and_explore_look_without_reinforcing_unless_asked(
    server: Any, db: Path, clock: FixedClock
) -> None:
    async with Client(server) as client:
        await seed(client)
        for i in range(8):
            await call(
                client, "remember", text=f"Acme call {i}", id=f"meeting:{i}", links=["fact:acme"]
            )
        await call(client, "remember", text="Old Acme note", id="note:old", links=["fact:acme"])
        await call(client, "forget", id="note:old", reason="obsolete")
        clock.advance(days=2)
        before = snapshot(db)

        read = await call(client, "read", ids=["person:ravi", "fact:acme", "note:old", "fact:acme"])
        assert [m["id"] for m in read["memories"]] == ["person:ravi", "fact:acme"]
        assert read["missing"] == ["note:old"]  # waiting in the review queue
        assert read["memories"][1]["text"] == "Acme signed on outcome pricing"
        around = await call(client, "explore", id="fact:acme", depth=1, per_node=3)
        ids = [m["id"] for m in around["memories"]]
        assert ids[0] == "fact:acme" and len(ids) == 4 and "note:old" not in ids
        assert around["truncated"] is True
        assert all(link["decayed_weight"] <= link["weight"] for link in around["links"])
        assert all({link["src"], link["dst"]} <= set(ids) for link in around["links"])
        capped = await call(client, "explore", id="person:ravi", depth=3, max_memories=2)
        assert [m["id"] for m in capped["memories"]] == ["person:ravi", "fact:acme"]
        assert capped["truncated"] is True
        assert snapshot(db) == before  # looking changed nothing

        again = await call(client, "read", ids=["person:ravi"], reinforce=True)
        assert again["reinforced"] is True
        assert again["memories"][0]["last_read_at"].startswith("2026-03-03")
        explored = await call(client, "explore", id="decision:outcome-pricing", reinforce=True)
        with Brain.open(db, backend="kuzu", namespace=NS) as brain:
            for m in explored["memories"]:
                assert brain.get(m["id"]).last_read_at == T0.replace(day=3), m["id"]
        message = text_of(await client.call_tool("read", {"ids": []}))
        assert "ids" in message and "at least 1" in message
        message = text_of(await client.call_tool("explore", {"id": "nope:x"}))
        assert "no memory 'nope:x'" in message


async def test_a_list_sent_as_json_text_is_read_as_the_sdk_reads_it(server: Any) -> None:
    """Ebb answers tools/call itself (mcp_server._answer_calls_directly) but validates the
    arguments with the model the SDK built: a client that sends a list argument as JSON text
    gets what it would from the SDK's own handler, and a bad one the same one-line error."""
    async with Client(server) as client:
        await seed(client)
        as_list = await call(client, "read", ids=["person:ravi", "fact:acme"])
        as_text = await call(client, "read", ids='["person:ravi", "fact:acme"]')
        assert [m["id"] for m in as_text["memories"]] == ["person:ravi", "fact:acme"]
        assert as_text == as_list
        message = text_of(await client.call_tool("read", {"ids": '["person:ravi", 7]'}))
        assert message.startswith("invalid arguments for read: ids.1:"), message
        message = text_of(await client.call_tool("read", {"ids": "person:ravi"}))
        assert message.startswith("invalid arguments for read: ids:"), message


async def test_recall_explains_each_hit(server: Any) -> None:
    async with Client(server) as client:
        await seed(client)
        # by default each hit's why is its one-line summary (what a model reads)
        brief = await call(client, "recall", query="Acme pricing", k=5, reinforce=False)
        why = {h["id"]: h["why"] for h in brief["hits"]}["fact:acme"]
        assert list(why) == ["summary"]
        assert "matched 'acme', 'pricing'" in why["summary"] and "2 live links" in why["summary"]
        result = await call(client, "recall", query="Acme pricing", k=5, explain=True)
        assert result["hint"] is None
        assert [h["id"] for h in result["hits"]] == [h["id"] for h in brief["hits"]]
        by_id = {h["id"]: h for h in result["hits"]}
        acme = by_id["fact:acme"]["why"]
        assert {"acme", "pricing"} <= set(acme["matched_terms"])
        assert {link["id"] for link in acme["live_links"]} == {
            "decision:outcome-pricing",
            "person:ravi",
        }
        assert acme["tier"] == "hot" and acme["activation"] > 0 and acme["last_reinforced_at"]
        assert "matched" in acme["summary"] and "live link" in acme["summary"]
        # the text content carries the same JSON for clients that ignore structured content
        raw = await client.call_tool("recall", {"query": "Acme", "reinforce": False})
        assert json.loads(text_of(raw))["hits"][0]["why"]["summary"]


async def test_recall_with_no_match_says_what_to_try(server: Any) -> None:
    async with Client(server) as client:
        await seed(client)
        result = await call(client, "recall", query="zeppelin")
        assert result["hits"] == [] and "try other words" in result["hint"]
        result = await call(client, "recall", query="zeppelin", depth=1)
        assert "leave depth out" in result["hint"]


async def test_supersession_and_versions_through_the_tools(server: Any) -> None:
    async with Client(server) as client:
        await call(
            client, "remember", text="We price per seat", kind="decision", id="decision:seats"
        )
        await call(
            client,
            "remember",
            text="We price per resolved ticket",
            kind="decision",
            id="decision:outcome",
            supersedes=["decision:seats"],
        )
        hits = (await call(client, "recall", query="we price", k=5, reinforce=False))["hits"]
        assert [h["id"] for h in hits] == ["decision:outcome", "decision:seats"]
        # the replacement is named even in the brief why; the newer memory has none
        assert hits[1]["why"]["superseded_by"] == ["decision:outcome"]
        assert "superseded_by" not in hits[0]["why"]
        assert "superseded by decision:outcome" in hits[1]["why"]["summary"]
        full = await call(client, "recall", query="we price", k=5, reinforce=False, explain=True)
        assert full["hits"][0]["why"]["reached"] == "hot"
        assert full["hits"][0]["why"]["superseded_by"] == []
        # connect with kind supersedes does the same, audited
        await call(client, "remember", text="Seats were $40", kind="fact", id="fact:seat-price")
        await call(client, "remember", text="Tickets are $2", kind="fact", id="fact:ticket")
        await call(client, "connect", src="fact:ticket", dst="fact:seat-price", kind="supersedes")
        hits = (await call(client, "recall", query="seat price tickets", reinforce=False))["hits"]
        by_id = {h["id"]: h for h in hits}
        assert by_id["fact:seat-price"]["why"]["superseded_by"] == ["fact:ticket"]
        # a new text under the same id keeps the old one as a version; the kind stays
        memory = await call(client, "remember", text="We price per outcome", id="decision:outcome")
        assert memory["kind"] == "decision"
        history = await call(client, "history", id="decision:outcome")
        assert [(v["version"], v["text"], v["current"]) for v in history["versions"]] == [
            (1, "We price per resolved ticket", False),
            (2, "We price per outcome", True),
        ]


async def test_cypher_looking_and_odd_unicode_text_round_trips(server: Any, db: Path) -> None:
    async with Client(server) as client:
        await seed(client)
        texts = {
            "note:cypher": "MATCH (n) DETACH DELETE n; RETURN 1 // '}) CALL db.drop() \\",
            "note:unicode": "😀 👩‍👩‍👧 Z̷̢a̸l̵g̶o RTL\u202eoverride zero\u200bwidth \ufeffBOM 東京 会議",
            "note:controls": "line one\nline two\ttabbed\x07bell",
        }
        for id_, text in texts.items():
            await call(client, "remember", text=text, id=id_, props={"q": "') RETURN n //"})
        with Brain.open(db, backend="kuzu", namespace=NS) as brain:
            for id_, text in texts.items():
                assert brain.get(id_).text == text
            assert brain.stats().nodes == 6  # nothing else was touched
        hits = await call(client, "recall", query="MATCH DETACH DELETE")
        assert hits["hits"][0]["id"] == "note:cypher"
        hits = await call(client, "recall", query="東京")
        assert [h["id"] for h in hits["hits"]] in ([], ["note:unicode"])


# -- bad input: a clear tool error, the server keeps serving, the store is unchanged -----------

MB = "x" * 1_000_000

BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("remember", {}, "text is required"),
    ("remember", {"text": 123}, "text: Input should be a valid string (got int)"),
    ("remember", {"text": ""}, "text is empty"),
    ("remember", {"text": "   "}, "text is empty"),
    ("remember", {"text": MB}, "the limit is 200,000"),
    ("remember", {"text": "ok", "id": MB}, "at most 200 characters"),
    ("remember", {"text": "ok", "kind": "Not A Kind!"}, "kind 'Not A Kind!' must be lowercase"),
    ("remember", {"text": "ok", "links": ["nope:missing"]}, "no memory 'nope:missing'"),
    ("remember", {"text": "ok", "links": "fact:acme"}, "links: Input should be a valid list"),
    ("remember", {"text": "ok", "props": [1, 2]}, "props: Input should be a valid dictionary"),
    ("remember", {"text": "nul \x00 inside"}, "NUL"),
    ("remember", {"text": "bad \ud800 half"}, "unpaired UTF-16 surrogate"),
    ("remember", {"text": "ok", "id": "note:\x07bell"}, "without control characters"),
    ("remember", {"text": "ok", "id": "fact:acme", "links": ["fact:acme"]}, "link to itself"),
    ("remember", {"text": "ok", "pinned": True}, "unknown argument 'pinned'"),
    ("recall", {}, "query is required"),
    ("recall", {"query": None}, "query: Input should be a valid string (got null)"),
    ("recall", {"query": "x", "k": 0}, "k: Input should be greater than or equal to 1"),
    ("recall", {"query": "x", "k": 10_000}, "k: Input should be less than or equal to 50"),
    ("recall", {"query": "x", "k": "many"}, "k: Input should be a valid integer"),
    ("recall", {"query": "x", "k": 2.5}, "k: Input should be a valid integer"),
    ("recall", {"query": "x", "depth": 7}, "depth: Input should be 1, 2 or 3"),
    ("recall", {"query": "x", "kinds": ["BAD KIND"]}, "kinds 'BAD KIND' must be lowercase"),
    ("recall", {"query": MB}, "query is 1,000,000 characters"),
    ("recall", {"query": "x", "limt": 3}, "unknown argument 'limt'"),
    ("connect", {"src": "fact:acme"}, "dst is required"),
    ("connect", {"src": "fact:acme", "dst": "nope:x"}, "no memory 'nope:x'"),
    ("connect", {"src": "fact:acme", "dst": "fact:acme"}, "cannot link to itself"),
    (
        "connect",
        {"src": "fact:acme", "dst": "person:ravi", "weight": -1},
        "weight: Input should be greater than 0",
    ),
    (
        "connect",
        {"src": "fact:acme", "dst": "person:ravi", "weight": "heavy"},
        "weight: Input should be a valid number",
    ),
    ("reinforce", {"id": "nope:x"}, "no memory 'nope:x' in namespace 'mcp'"),
    (
        "reinforce",
        {"id": "person:ravi", "with_id": "decision:outcome-pricing"},
        "no edge between 'person:ravi' and 'decision:outcome-pricing'",
    ),
    ("reinforce", {"id": ["fact:acme"]}, "id: Input should be a valid string (got array)"),
    ("forget", {"id": "nope:x"}, "no memory 'nope:x'"),
    ("forget", {"id": "fact:acme", "reason": MB}, "reason is longer than 2,000 characters"),
    ("forget", {"id": "x'}) MATCH (n) DETACH DELETE n //"}, "no memory"),
    ("neighbors", {"id": ""}, "a memory id must be a non-empty string"),
    ("neighbors", {"id": "fact:acme", "limit": -1}, "limit: Input should be greater than"),
    ("pin", {"id": "nope:x"}, "no memory 'nope:x'"),
    ("pin", {"id": 42}, "id: Input should be a valid string (got int)"),
    ("maintain", {"spreading": "pagerank"}, "unknown argument 'spreading'"),
    ("review_queue", {"limit": "all"}, "limit: Input should be a valid integer"),
    ("stats", {"namespace": "someone-else"}, "unknown argument 'namespace'"),
    ("delete", {"id": "fact:acme"}, "Unknown tool: delete"),
    ("approve_deletion", {"ids": ["fact:acme"]}, "Unknown tool: approve_deletion"),
]


async def test_bad_calls_get_tool_errors_and_change_nothing(server: Any, db: Path) -> None:
    async with Client(server) as client:
        await seed(client)
        before = snapshot(db)
        for tool, args, expected in BAD_CALLS:
            result = await client.call_tool(tool, args)
            assert result.is_error, (tool, args)
            message = text_of(result)
            assert expected in message, (tool, message)
            assert len(message) < 1000, "an error never echoes a huge argument back"
        assert snapshot(db) == before
        # still serving, and nothing changed
        stats = await call(client, "stats")
        assert stats["nodes"] == 3 and stats["edges"] == 2 and stats["audit_entries"] == 0


async def test_pinned_memory_cannot_be_forgotten_by_an_agent(server: Any, db: Path) -> None:
    async with Client(server) as client:
        await seed(client)
        await call(client, "pin", id="fact:acme")
        before = snapshot(db)
        result = await client.call_tool("forget", {"id": "fact:acme"})
        assert result.is_error and "pinned" in text_of(result)
        assert snapshot(db) == before


async def test_a_failure_half_way_through_a_write_leaves_nothing_behind(
    db: Path, clock: FixedClock
) -> None:
    """The node is written, then writing its links fails: the whole call is rolled back."""

    def failing() -> Brain:
        brain = Brain.open(db, backend="kuzu", namespace=NS, clock=clock)
        store: Any = brain.store
        real = store.insert_nodes

        def write_node_then_fail(namespace: str, *, new_nodes: Any = (), **rest: Any) -> None:
            real(new_nodes)  # as a backend writing an event step by step would
            raise RuntimeError("disk unplugged")

        store.write_event = write_node_then_fail
        return brain

    async with Client(
        build_server(StoreAccess(db, namespace=NS, opener=opener(db, clock), idle_release=0))
    ) as c:
        await seed(c)
    before = snapshot(db)
    async with Client(
        build_server(StoreAccess(db, namespace=NS, opener=failing, idle_release=0))
    ) as c:
        result = await c.call_tool(
            "remember", {"text": "half written", "id": "note:half", "links": ["fact:acme"]}
        )
        assert result.is_error
        assert "unexpected RuntimeError in remember: disk unplugged" in text_of(result)
        assert "all of this call's change or none of it" in text_of(result)
        assert (await c.call_tool("stats", {})).is_error is False
    assert snapshot(db) == before


async def test_a_memory_created_by_another_writer_meanwhile_is_a_clear_tool_error(
    db: Path, clock: FixedClock
) -> None:
    """Another writer creates the id between remember's check and its write (forced here in the
    store's write step, on the real store): the tool error names the id and what to do, not a
    store failure to run ``ebb doctor`` on, and the call changes nothing."""

    def racing() -> Brain:
        brain = Brain.open(db, backend="kuzu", namespace=NS, clock=clock)
        store: Any = brain.store
        real_insert, real_event = store.insert_nodes, store.write_event

        def created_meanwhile(namespace: str, *, new_nodes: Any = (), **rest: Any) -> None:
            real_insert(new_nodes)  # the other writer, just before this write
            real_event(namespace, new_nodes=new_nodes, **rest)

        store.write_event = created_meanwhile
        return brain

    async with Client(
        build_server(StoreAccess(db, namespace=NS, opener=opener(db, clock), idle_release=0))
    ) as c:
        await seed(c)
    before = snapshot(db)
    async with Client(
        build_server(StoreAccess(db, namespace=NS, opener=racing, idle_release=0))
    ) as c:
        result = await c.call_tool("remember", {"text": "raced", "id": "note:race"})
        assert result.is_error
        message = text_of(result)
        assert f"memory 'note:race' already exists in namespace '{NS}'" in message
        assert "another id" in message
        for wrong in ("doctor", "unexpected", "Traceback", "duplicated primary key"):
            assert wrong not in message
    assert snapshot(db) == before


# -- the store is held only during a call ----------------------------------------------------

HOLDER = textwrap.dedent(
    """
    import sys, time
    from ebb_core import Brain
    brain = Brain.open(sys.argv[1], backend="kuzu", namespace="mcp")
    print("holding", flush=True)
    sys.stdin.readline()
    brain.close()
    """
)


async def test_a_call_waits_for_a_person_then_reports_busy(db: Path, clock: FixedClock) -> None:
    async with Client(
        build_server(StoreAccess(db, namespace=NS, opener=opener(db, clock), idle_release=0))
    ) as c:
        await seed(c)
    # Between calls the server holds nothing: another process opens the store.
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        access = StoreAccess(db, backend="kuzu", namespace=NS, wait=0.3, idle_release=0)
        async with Client(build_server(access)) as c:
            result = await c.call_tool("remember", {"text": "while a person reviews"})
            assert result.is_error and text_of(result).endswith(BUSY)
            assert holder.stdin is not None
            holder.stdin.write("\n")
            holder.stdin.flush()
            assert holder.wait(30) == 0
            assert (await call(c, "stats"))["nodes"] == 3  # the busy call wrote nothing
            await call(c, "remember", text="after the person is done")
            assert (await call(c, "stats"))["nodes"] == 4
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_neo4j_keeps_one_connection_kuzu_keeps_it_between_calls_or_per_call() -> None:
    opened: list[object] = []

    class FakeBrain:
        def close(self) -> None:
            opened.append("closed")

    def fake() -> Any:
        opened.append("opened")
        return FakeBrain()

    held = StoreAccess(backend="neo4j", namespace="n", opener=fake)
    assert held.hold
    for _ in range(3):
        with held.brain():
            pass
    held.close()
    assert opened == ["opened", "closed"]
    opened.clear()
    per_call = StoreAccess(backend="kuzu", namespace="n", opener=fake, idle_release=0)
    assert not per_call.hold
    for _ in range(2):
        with per_call.brain():
            pass
    assert opened == ["opened", "closed", "opened", "closed"]
    opened.clear()
    between = StoreAccess(backend="kuzu", namespace="n", opener=fake, idle_release=60)
    for _ in range(3):
        with between.brain():
            pass
    assert opened == ["opened"] and between.is_open
    between.close()
    assert opened == ["opened", "closed"] and not between.is_open


# -- resources -------------------------------------------------------------------------------


async def test_read_only_resources_for_stats_and_review_queue(server: Any, db: Path) -> None:
    async with Client(server) as client:
        await seed(client)
        await call(client, "forget", id="person:ravi", reason="left the company")
        resources = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert set(resources) == {"ebb://stats", "ebb://review-queue"}
        assert all(r.mime_type == "application/json" for r in resources.values())
        before = snapshot(db)
        stats = json.loads((await client.read_resource("ebb://stats")).contents[0].text)  # type: ignore[union-attr]
        assert stats["nodes"] == 3 and stats["review_queue"] == 1
        queue = json.loads(
            (await client.read_resource("ebb://review-queue")).contents[0].text  # type: ignore[union-attr]
        )
        assert queue["count"] == 1 and queue["items"][0]["id"] == "person:ravi"
        assert "left the company" in queue["items"][0]["reason"]
        assert snapshot(db) == before


# -- the command -----------------------------------------------------------------------------


def test_command_options_and_the_group_options_reach_serve(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ebb_core import cli, mcp_server

    seen: dict[str, Any] = {}

    def fake_serve(*args: Any, **kwargs: Any) -> None:
        seen["args"], seen["kwargs"] = args, kwargs

    monkeypatch.setattr(mcp_server, "serve", fake_serve)
    runner = CliRunner()
    result = runner.invoke(cli.main, ["--db", str(tmp_path / "g.kuzu"), "-n", "team", "mcp"])
    assert result.exit_code == 0, result.output
    assert seen["args"] == ("stdio", "127.0.0.1", 8000, str(tmp_path / "g.kuzu"), None, "team")
    result = runner.invoke(
        cli.main,
        [
            "mcp",
            "--transport",
            "http",
            "--port",
            "9123",
            "--db",
            "x.kuzu",
            "--namespace",
            "me",
            "--wait",
            "2",
        ],
    )
    assert result.exit_code == 0, result.output
    assert seen["args"] == ("http", "127.0.0.1", 9123, "x.kuzu", None, "me")
    assert seen["kwargs"] == {"wait": 2.0, "idle_release": 5.0, "reinforcement_delay": 1.0}
    result = runner.invoke(cli.main, ["mcp", "--idle-release", "0.5", "--reinforcement-delay", "0"])
    assert result.exit_code == 0, result.output
    assert seen["kwargs"] == {"wait": 10.0, "idle_release": 0.5, "reinforcement_delay": 0.0}
    result = runner.invoke(cli.main, ["mcp", "--reinforcement-delay", "-1"])
    assert result.exit_code != 0 and "--reinforcement-delay" in result.output
    result = runner.invoke(mcp_command, ["--transport", "carrier-pigeon"])
    assert result.exit_code != 0 and "carrier-pigeon" in result.output


def test_command_reports_a_bad_store_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(mcp_command, ["--db", str(tmp_path / "no" / "such" / "dir.kuzu")])
    assert result.exit_code == 1
    assert "does not exist" in result.output and "Traceback" not in result.output


def test_serve_refuses_an_unknown_transport() -> None:
    with pytest.raises(InvalidInput, match="unknown transport"):
        serve("smoke-signals")


def test_python_dash_m_ebb_core_cli_runs_the_server_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ebb_core.cli", "mcp", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "--transport [stdio|http]" in done.stdout and "EBB_NAMESPACE" in done.stdout


async def test_the_sdks_tracing_layer_is_left_out_when_no_tracer_is_configured(
    server: Any,
) -> None:
    from mcp.server.lowlevel import Server

    # The SDK's default: every message wrapped in an OpenTelemetry span (if the SDK renames or
    # drops that layer, this test says so rather than the server silently keeping it).
    assert "OpenTelemetryMiddleware" in [type(m).__name__ for m in Server("x").middleware]
    names = [type(m).__name__ for m in server.middleware]
    assert "OpenTelemetryMiddleware" not in names
    assert "RequestStateBoundary" in names  # the SDK's other layers stay
    async with Client(server) as client:
        await seed(client)
        hits = (await call(client, "recall", query="outcome pricing"))["hits"]
        assert hits[0]["id"] == "decision:outcome-pricing"


def test_a_configured_tracer_keeps_the_sdks_spans(tmp_path: Path) -> None:
    """A program that set a tracer provider before building the server gets a span per call.

    In a child process: OpenTelemetry's provider is global to a process, once set."""
    script = textwrap.dedent(
        f"""
        import asyncio, contextlib
        from opentelemetry import trace
        from mcp import Client
        from ebb_core.mcp_access import StoreAccess
        from ebb_core.mcp_server import build_server

        names = []

        class Tracer(trace.NoOpTracer):
            def start_span(self, name, *args, **kwargs):
                names.append(name)
                return trace.INVALID_SPAN

            @contextlib.contextmanager
            def start_as_current_span(self, name, *args, **kwargs):
                names.append(name)
                yield trace.INVALID_SPAN

        class Provider(trace.NoOpTracerProvider):
            def get_tracer(self, *args, **kwargs):
                return Tracer()

        trace.set_tracer_provider(Provider())
        server = build_server(StoreAccess({str(tmp_path / "t.kuzu")!r}, namespace="t"))
        assert "OpenTelemetryMiddleware" in [type(m).__name__ for m in server.middleware]

        async def main():
            async with Client(server) as client:
                result = await client.call_tool("stats", {{}})
                assert not result.is_error, result

        asyncio.run(main())
        print(names)
        assert "tools/call stats" in names, names
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
