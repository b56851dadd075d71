"""The tool catalog's promise: every tool in ``ebb_core.tools.CATALOG`` is exposed by the MCP
server, the LangChain tools and the LlamaIndex tools with the same name, description and
arguments, and behaves the same through each: one script of calls, run through the catalog
itself and through each adapter on four stores with the same clock, gives the same texts, the
same structured results and the same stores.

Everything is real: Kùzu on disk, the MCP SDK's in-process client, LangChain's and LlamaIndex's
tool objects. No model is involved (the calls are the script's).
"""

from __future__ import annotations

import io
import json
import re
import warnings
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from ebb_core import Brain, EbbError, FixedClock
from ebb_core.mcp_access import StoreAccess
from ebb_core.mcp_server import TOOL_NAMES, build_server
from ebb_core.tools import AGENT_TOOLS, CATALOG, TOOLS, select
from ebb_langchain import create_ebb_tools
from ebb_llamaindex import EbbToolSpec
from test_langchain_agents import call_schema

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
NS = "catalog"

SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("remember", {"text": "Acme is a logistics client", "kind": "client", "id": "client:acme"}),
    ("remember", {"text": "Dana Reyes runs the Acme account", "kind": "person", "id": "p:dana"}),
    ("remember", {"text": "Acme renews in March", "kind": "fact", "links": ["client:acme"]}),
    (
        "remember",
        {
            "text": "Acme renews in June",
            "kind": "fact",
            "id": "fact:june",
            "supersedes": ["fact:acme-renews-in-march"],
            "props": {"source": "call"},
        },
    ),
    ("connect", {"src": "p:dana", "dst": "client:acme", "kind": "works_on", "weight": 2.0}),
    ("reinforce", {"id": "client:acme"}),
    ("recall", {"query": "Acme renewal", "k": 3}),
    ("recall", {"query": "zeppelin"}),
    ("neighbors", {"id": "client:acme"}),
    ("history", {"id": "fact:june"}),
    ("read", {"ids": ["p:dana", "nope:missing"]}),
    ("explore", {"id": "p:dana", "depth": 2}),
    ("pin", {"id": "p:dana"}),
    ("forget", {"id": "fact:acme-renews-in-march", "reason": "superseded"}),
    ("review_queue", {}),
    ("maintain", {}),
    ("stats", {}),
    ("connect", {"src": "p:dana", "dst": "nope:missing"}),  # an error, the same everywhere
]


def test_the_script_calls_every_tool() -> None:
    assert {name for name, _ in SCRIPT} == set(TOOLS)
    assert tuple(TOOLS) == TOOL_NAMES  # the MCP server serves the catalog, in its order


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(T0)


@pytest.fixture
def open_brain(tmp_path: Path, clock: FixedClock) -> Iterator[Callable[[str], Brain]]:
    opened: list[Brain] = []

    def open_(name: str) -> Brain:
        brain = Brain.open(tmp_path / f"{name}.kuzu", backend="kuzu", namespace=NS, clock=clock)
        opened.append(brain)
        return brain

    yield open_
    for brain in opened:
        brain.close()


def same(text: str, brain: Brain) -> str:
    """``text`` with the store's own path (which stats name) made the same for every store."""
    return text.replace(json.dumps(brain.store.location)[1:-1], "<store>")


def export(brain: Brain) -> list[dict[str, Any]]:
    out = io.StringIO()
    brain.export(out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def mcp_client(brain: Brain) -> Client:
    """An in-process MCP client of a server holding ``brain`` (it closes it when done)."""
    access = StoreAccess(brain.store.location, namespace=NS, hold=True, opener=lambda: brain)
    return Client(build_server(access))


def test_every_adapter_exposes_every_tool_with_the_same_arguments(
    open_brain: Callable[[str], Brain],
) -> None:
    brain = open_brain("one")
    lc = {t.name: t for t in create_ebb_tools(brain, tools="all")}
    li = {t.metadata.name: t for t in EbbToolSpec(brain, tools="all").to_tool_list()}
    assert list(lc) == list(li) == list(TOOLS)
    for spec in CATALOG:
        fields = spec.args.model_json_schema()
        names = list(fields.get("properties", {}))
        required = fields.get("required", [])
        lc_schema = call_schema(lc[spec.name])
        li_schema = li[spec.name].metadata.get_parameters_dict()
        for schema in (lc_schema, li_schema):
            assert list(schema.get("properties", {})) == names, spec.name
            assert schema.get("required", []) == required, spec.name
            for arg, prop in schema.get("properties", {}).items():
                assert prop.get("description") == fields["properties"][arg]["description"]
        assert lc[spec.name].description == spec.description
        assert li[spec.name].metadata.description == spec.description


async def test_the_mcp_server_lists_the_catalog(open_brain: Callable[[str], Brain]) -> None:
    client = mcp_client(open_brain("mcp"))
    async with client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert list(listed) == list(TOOLS)
    for spec in CATALOG:
        tool = listed[spec.name]
        schema = spec.args.model_json_schema()
        assert list(tool.input_schema.get("properties", {})) == list(schema.get("properties", {}))
        assert tool.input_schema.get("required", []) == schema.get("required", [])
        assert tool.description == spec.description and tool.title == spec.title
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is spec.read_only
        assert tool.annotations.idempotent_hint is spec.idempotent


def test_the_default_agent_tools_and_unknown_names(open_brain: Callable[[str], Brain]) -> None:
    brain = open_brain("one")
    assert [t.name for t in create_ebb_tools(brain)] == list(AGENT_TOOLS)
    assert [t.metadata.name for t in EbbToolSpec(brain).to_tool_list()] == list(AGENT_TOOLS)
    picked = create_ebb_tools(brain, tools=["stats", "read"])
    assert [t.name for t in picked] == ["stats", "read"]
    with pytest.raises(ValueError, match="no tool named 'delete'"):
        select(["recall", "delete"])


async def test_one_script_through_every_adapter_gives_the_same_results(
    open_brain: Callable[[str], Brain],
) -> None:
    core, lc_brain, li_brain, mcp_brain = (open_brain(n) for n in ("core", "lc", "li", "mcp"))
    lc = {t.name: t for t in create_ebb_tools(lc_brain, tools="all")}
    li = {t.metadata.name: t for t in EbbToolSpec(li_brain, tools="all").to_tool_list()}
    client = mcp_client(mcp_brain)
    async with client:
        for name, args in SCRIPT:
            spec = TOOLS[name]
            parsed = spec.args.model_validate(args)
            try:
                result = spec.run(core, parsed, "agent")
            except EbbError as exc:  # the script's last call fails on purpose
                error: EbbError | None = exc
                expected_text, structured = str(exc), None
            else:
                error = None
                expected_text = spec.text(parsed, result)
                structured = spec.structured(parsed, result).model_dump(mode="json")
            assert same(lc[name].invoke(args), lc_brain) == same(expected_text, core), name
            if error is None:
                li_text = li[name].call(**args).content
                assert same(li_text, li_brain) == same(expected_text, core), name
            else:  # LlamaIndex raises; its agents show the model the error's text
                with pytest.raises(type(error), match=re.escape(expected_text)):
                    li[name].call(**args)
            mcp_out = await client.call_tool(name, args)
            assert mcp_out.is_error is (structured is None), name
            if structured is None:
                assert expected_text in mcp_out.content[0].text  # type: ignore[union-attr]
            else:
                got = json.dumps(mcp_out.structured_content)
                assert same(got, mcp_brain) == same(json.dumps(structured), core), name
    stores = [export(b) for b in (core, lc_brain, li_brain, mcp_brain)]
    assert stores[1:] == [stores[0]] * 3


def test_the_old_argument_names_still_work_for_one_release(
    open_brain: Callable[[str], Brain],
) -> None:
    brain = open_brain("one")
    brain.remember("Acme", kind="client", id="client:acme")
    brain.remember("Dana", kind="person", id="p:dana")
    brain.remember("Ravi", kind="person", id="p:ravi")
    lc_connect = {t.name: t for t in create_ebb_tools(brain)}["connect"]
    with pytest.warns(DeprecationWarning, match="'src_id' is now 'src'"):
        out = lc_connect.invoke({"src_id": "p:dana", "dst_id": "client:acme", "relation": "of"})
    assert out == "Linked p:dana -of-> client:acme."
    li_connect = EbbToolSpec(brain).to_tool_list(["connect"])[0]
    with pytest.warns(DeprecationWarning, match="'source_id' is now 'src'"):
        li_out = li_connect.call(source_id="p:ravi", target_id="client:acme", kind="of")
    assert li_out.content == "Linked p:ravi -of-> client:acme."
    assert {(n.node.id, n.edge.kind) for n in brain.neighbors("client:acme")} == {
        ("p:dana", "of"),
        ("p:ravi", "of"),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new names warn about nothing
        lc_connect.invoke({"src": "p:ravi", "dst": "p:dana"})


def test_adapter_settings_become_argument_defaults(
    open_brain: Callable[[str], Brain], clock: FixedClock
) -> None:
    brain = open_brain("one")
    for n in range(3):
        brain.remember(f"Acme note number {n}", id=f"note:acme-{n}")
    clock.advance(days=200)
    brain.remember("Something fresh keeps the namespace active")
    brain.maintain()
    assert brain.get("note:acme-0").tier.label in ("warm", "cold")
    everywhere = {t.name: t for t in create_ebb_tools(brain)}["recall"]
    hot_only = {t.name: t for t in create_ebb_tools(brain, depth=1)}["recall"]
    assert call_schema(hot_only)["properties"]["depth"]["default"] == 1
    assert "note:acme-0" in everywhere.invoke({"query": "Acme", "reinforce": False})
    assert hot_only.invoke({"query": "Acme"}) == "No memories found."
    assert "note:acme-" in hot_only.invoke({"query": "Acme", "depth": 3, "reinforce": False})

    one = EbbToolSpec(brain, k=1, reinforce=False).to_tool_list(["recall"])[0]
    before = brain.activation("note:acme-1")
    text = one.call(query="Acme", depth=3).content
    assert text.count("\n   why:") == 1  # k=1: one hit
    assert brain.activation("note:acme-1") == before  # reinforce=False: nothing counted as used
    # the catalog's own call gives the same text as the adapters
    assert TOOLS["recall"](brain, {"query": "Acme", "k": 1, "depth": 3, "reinforce": False}) == (
        text
    )


def test_a_tools_plain_result_equals_its_models_dump(open_brain: Callable[[str], Brain]) -> None:
    """What the MCP server sends (``json_data``: for recall built without the output models) is
    exactly what the output models give, for hits that were superseded or not, with props, with
    the one-line and the full ``why``, and for no hits at all (the hint)."""
    brain = open_brain("plain")
    brain.remember("Acme renews in March", kind="fact", id="fact:march")
    brain.remember(
        "Acme renews in June",
        kind="fact",
        id="fact:june",
        supersedes=["fact:march"],
        props={"source": "call", "at": {"n": [1, 2.5, None, True]}},
    )
    brain.remember("Dana runs the Acme renewal", kind="person", id="p:dana", links=["fact:june"])
    spec = TOOLS["recall"]
    assert spec.plain is not None
    seen_superseded = False
    for args in (
        {"query": "Acme renews", "k": 5},
        {"query": "Acme renews", "k": 5, "explain": True},
        {"query": "Acme renewal Dana", "k": 2, "reinforce": False},
        {"query": "zeppelin"},
        {"query": "zeppelin", "depth": 1},
    ):
        parsed = spec.args.model_validate(args)
        hits = spec.run(brain, parsed, "agent")
        data = spec.json_data(parsed, hits)
        assert data == spec.structured(parsed, hits).model_dump(mode="json", by_alias=True), args
        seen_superseded |= any("superseded_by" in h["why"] for h in data["hits"])
    assert seen_superseded  # the case where why carries more than its summary was covered
