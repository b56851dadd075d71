"""Agents on Ebb: ``create_agent(store=EbbStore)`` with LangMem's tools, and Ebb's own tools.

The only fake here is the chat model: a scripted policy picks the next message from the
conversation so far, so the agent loop, the tools and the store all run for real.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langmem import create_manage_memory_tool, create_search_memory_tool
from pydantic import BaseModel

from ebb_core import Brain, FixedClock, Tier
from ebb_langchain import EbbStore, create_ebb_tools

Policy = Callable[[list[BaseMessage]], AIMessage]


class ScriptedFakeChatModel(BaseChatModel):
    """A fake chat model for tests: a scripted policy, not a language model, writes each turn."""

    policy: Policy

    @property
    def _llm_type(self) -> str:
        return "scripted-fake"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.policy(messages))])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        return self


def call(tool: str, n: int, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": tool, "args": args, "id": f"call-{n}"}])


def since_last_human(messages: list[BaseMessage]) -> tuple[str, list[ToolMessage]]:
    """The last user message and the tool results that came after it."""
    i = max(n for n, m in enumerate(messages) if isinstance(m, HumanMessage))
    return messages[i].text, [m for m in messages[i + 1 :] if isinstance(m, ToolMessage)]


ALICE = {"configurable": {"langgraph_user_id": "alice"}}


def langmem_policy(messages: list[BaseMessage]) -> AIMessage:
    """Remember / answer / forget with LangMem's manage_memory and search_memory tools."""
    said, results = since_last_human(messages)
    if said.startswith("Remember"):
        if not results:
            return call("manage_memory", 1, content=said.removeprefix("Remember: "))
        return AIMessage("Saved.")
    if said.startswith("Forget"):
        if not results:
            return call("search_memory", 1, query=said.removeprefix("Forget: "))
        if len(results) == 1:
            found = json.loads(results[0].text)
            return call("manage_memory", 2, action="delete", id=found[0]["key"])
        return AIMessage(results[-1].text)
    if not results:
        return call("search_memory", 1, query=said)
    found = json.loads(results[0].text)
    return AIMessage(found[0]["value"]["content"] if found else "I don't know.")


@pytest.fixture
def alice(kuzu_brain: Brain) -> Brain:
    return kuzu_brain.scoped("memories.alice")


def langmem_agent(brain: Brain) -> Any:
    namespace = ("memories", "{langgraph_user_id}")
    return create_agent(
        ScriptedFakeChatModel(policy=langmem_policy),
        [create_manage_memory_tool(namespace), create_search_memory_tool(namespace)],
        store=EbbStore(brain),
    )


def ask(agent: Any, text: str) -> str:
    state = agent.invoke({"messages": [HumanMessage(text)]}, config=ALICE)
    return str(state["messages"][-1].text)


async def aask(agent: Any, text: str) -> str:
    state = await agent.ainvoke({"messages": [HumanMessage(text)]}, config=ALICE)
    return str(state["messages"][-1].text)


def test_langmem_tools_on_ebb_store_in_create_agent(
    kuzu_brain: Brain, alice: Brain, clock: FixedClock
) -> None:
    agent = langmem_agent(kuzu_brain)
    assert ask(agent, "Remember: Alice drinks dark roast coffee") == "Saved."
    (node,) = alice.read([h.id for h in alice.recall("coffee", reinforce=False)], reinforce=False)
    assert node.text == "Alice drinks dark roast coffee"

    clock.advance(days=12)
    before = alice.activation(node.id)
    assert ask(agent, "What coffee does Alice drink?") == "Alice drinks dark roast coffee"
    assert alice.activation(node.id) > before  # the agent's search reinforced it

    assert ask(agent, "Forget: coffee") == f"Deleted memory {node.id}"
    assert [i.id for i in alice.review_queue()] == [node.id]
    assert alice.get(node.id).tier == Tier.FROZEN  # kept for a person to review
    assert ask(agent, "What coffee does Alice drink?") == "I don't know."


async def test_langmem_tools_async_agent(
    kuzu_brain: Brain, alice: Brain, clock: FixedClock
) -> None:
    agent = langmem_agent(kuzu_brain)
    assert await aask(agent, "Remember: Alice drinks green tea in the morning") == "Saved."
    (hit,) = alice.recall("tea", reinforce=False)
    clock.advance(days=12)
    before = alice.activation(hit.id)
    assert await aask(agent, "tea") == "Alice drinks green tea in the morning"
    assert alice.activation(hit.id) > before
    assert await aask(agent, "Forget: tea") == f"Deleted memory {hit.id}"
    assert [i.id for i in alice.review_queue()] == [hit.id]


def test_agent_tools_can_use_the_store_through_the_runtime(kuzu_brain: Brain) -> None:
    """A tool reaching the store that ``create_agent(store=...)`` injects (``ToolRuntime``)."""

    @tool
    def save_profile(name: str, runtime: ToolRuntime) -> str:
        """Save the user's name."""
        assert runtime.store is not None
        runtime.store.put(("profiles",), "user", {"name": name})
        return "ok"

    def policy(messages: list[BaseMessage]) -> AIMessage:
        _, results = since_last_human(messages)
        return AIMessage("done") if results else call("save_profile", 1, name="Ada")

    agent = create_agent(
        ScriptedFakeChatModel(policy=policy), [save_profile], store=EbbStore(kuzu_brain)
    )
    assert ask(agent, "I'm Ada") == "done"
    assert kuzu_brain.scoped("profiles").get("user").props["langgraph_value"] == {"name": "Ada"}


# -- Ebb's own tools ----------------------------------------------------------------------------
def tools_by_name(brain: Brain) -> dict[str, BaseTool]:
    return {t.name: t for t in create_ebb_tools(brain)}


def call_schema(tool: BaseTool) -> dict[str, Any]:
    """The JSON schema a model is given for ``tool``'s arguments (Ebb's tools declare a
    pydantic model)."""
    schema = tool.tool_call_schema
    assert isinstance(schema, type) and issubclass(schema, BaseModel)
    return schema.model_json_schema()


def test_tool_names_schemas_and_descriptions(kuzu_brain: Brain) -> None:
    tools = tools_by_name(kuzu_brain)
    assert list(tools) == ["remember", "recall", "connect", "forget"]
    schemas = {n: call_schema(t) for n, t in tools.items()}
    assert schemas["remember"]["required"] == ["text"]
    assert schemas["recall"]["required"] == ["query"]
    assert schemas["connect"]["required"] == ["src", "dst"]
    assert schemas["forget"]["required"] == ["id"]
    for name, schema in schemas.items():
        assert all(p.get("description") for p in schema["properties"].values()), name
    assert "review" in tools["forget"].description
    assert "not deleted" in tools["forget"].description
    # What an OpenAI-compatible model is sent for each tool.
    for name, t in tools.items():
        function = convert_to_openai_tool(t)["function"]
        assert function["name"] == name
        assert function["parameters"]["required"] == schemas[name]["required"]


def ebb_policy(messages: list[BaseMessage]) -> AIMessage:
    """Drive remember / recall / connect / forget from the user's words."""
    said, results = since_last_human(messages)
    verb, _, rest = said.partition(": ")
    if results:
        return AIMessage(results[-1].text)
    if verb == "remember":
        return call("remember", 1, text=rest, kind="fact")
    if verb == "connect":
        src, dst = rest.split(" -> ")
        return call("connect", 1, src=src, dst=dst, kind="supersedes")
    if verb == "forget":
        return call("forget", 1, id=rest, reason="user says it is wrong")
    return call("recall", 1, query=rest)


def test_ebb_tools_in_create_agent(kuzu_brain: Brain, clock: FixedClock) -> None:
    agent = create_agent(ScriptedFakeChatModel(policy=ebb_policy), create_ebb_tools(kuzu_brain))
    assert (
        ask(agent, "remember: Acme renews in March")
        == "Remembered fact:acme-renews-in-march (fact)."
    )
    clock.advance(days=40)
    assert (
        ask(agent, "remember: Acme renews in June") == "Remembered fact:acme-renews-in-june (fact)."
    )
    reply = ask(agent, "connect: fact:acme-renews-in-june -> fact:acme-renews-in-march")
    assert reply == "Linked fact:acme-renews-in-june -supersedes-> fact:acme-renews-in-march."

    clock.advance(days=1)
    before = kuzu_brain.activation("fact:acme-renews-in-june")
    answer = ask(agent, "recall: Acme renewal")
    assert answer.startswith("1. [fact:acme-renews-in-june] (fact, hot) Acme renews in June")
    assert "2. [fact:acme-renews-in-march]" in answer
    assert "why: matched 'acme'" in answer
    assert kuzu_brain.activation("fact:acme-renews-in-june") > before

    reply = ask(agent, "forget: fact:acme-renews-in-march")
    assert reply.startswith("Forgot fact:acme-renews-in-march")
    assert [i.id for i in kuzu_brain.review_queue()] == ["fact:acme-renews-in-march"]
    assert kuzu_brain.get("fact:acme-renews-in-march").tier == Tier.FROZEN
    hits = [line for line in ask(agent, "recall: Acme renewal").splitlines() if line[0].isdigit()]
    assert hits == ["1. [fact:acme-renews-in-june] (fact, hot) Acme renews in June"]


def test_ebb_errors_come_back_to_the_model(kuzu_brain: Brain) -> None:
    agent = create_agent(ScriptedFakeChatModel(policy=ebb_policy), create_ebb_tools(kuzu_brain))
    assert ask(agent, "forget: note:nothing") == "no memory 'note:nothing' in namespace 'test'"
    state = agent.invoke({"messages": [HumanMessage("forget: note:nothing")]})
    tool_message = state["messages"][-2]
    assert isinstance(tool_message, ToolMessage) and tool_message.status == "error"
    tools = tools_by_name(kuzu_brain)
    # The catalog's rule and message, the same as the MCP server's.
    reply = tools["remember"].invoke({"text": "x", "kind": "Not A Kind"})
    assert reply.startswith("kind 'Not A Kind' must be lowercase letters, digits, '-' or '_'")
    reply = tools["recall"].invoke({"query": "x", "k": 0})
    assert reply.startswith("Invalid arguments (k: Input should be greater than or equal to 1")


async def test_recall_tool_async_gives_hits_as_artifact(
    kuzu_brain: Brain, clock: FixedClock
) -> None:
    kuzu_brain.remember("Globex prefers email", kind="fact", id="fact:globex-email")
    clock.advance(days=3)
    before = kuzu_brain.activation("fact:globex-email")
    tools = tools_by_name(kuzu_brain)
    message = await tools["recall"].ainvoke(
        {"type": "tool_call", "name": "recall", "id": "c1", "args": {"query": "Globex"}}
    )
    assert isinstance(message, ToolMessage)
    assert message.artifact[0]["id"] == "fact:globex-email"
    assert message.artifact[0]["why"].startswith("matched 'globex'")
    assert kuzu_brain.activation("fact:globex-email") > before
    empty = await tools["recall"].ainvoke({"query": "nothing like this"})
    assert empty == "No memories found."


def test_remember_tool_supersedes_and_recall_marks_the_outdated(kuzu_brain: Brain) -> None:
    tools = tools_by_name(kuzu_brain)
    tools["remember"].invoke({"text": "The team standup is at 9:00", "id": "fact:standup-9"})
    out = tools["remember"].invoke(
        {"text": "The team standup is at 10:00", "kind": "fact", "supersedes": ["fact:standup-9"]}
    )
    assert "superseding fact:standup-9" in out
    text = tools["recall"].invoke({"query": "team standup"})
    first, second = text.split("\n")[0], text.split("\n")[2]
    assert "10:00" in first and "OUTDATED" not in first
    assert "fact:standup-9" in second and "OUTDATED: superseded by" in second
    assert kuzu_brain.get("fact:standup-9").kind == "note"
    # rewriting by id keeps the old text as a version, and the kind
    tools["remember"].invoke({"text": "Standup moved to 9:30", "id": "fact:standup-9"})
    assert [v.text for v in kuzu_brain.history("fact:standup-9")] == [
        "The team standup is at 9:00",
        "Standup moved to 9:30",
    ]
    assert kuzu_brain.get("fact:standup-9").kind == "note"
    (entry,) = kuzu_brain.audit_log(action="supersede")
    assert entry.node_id == "fact:standup-9" and entry.actor == "agent"


def langmem_update_policy(messages: list[BaseMessage]) -> AIMessage:
    """ "Update: <query> -> <new content>" with LangMem's search then manage_memory update."""
    said, results = since_last_human(messages)
    if said.startswith("Remember"):
        if not results:
            return call("manage_memory", 1, content=said.removeprefix("Remember: "))
        return AIMessage("Saved.")
    query, _, content = said.removeprefix("Update: ").partition(" -> ")
    if not results:
        return call("search_memory", 1, query=query)
    if len(results) == 1:
        found = json.loads(results[0].text)
        return call("manage_memory", 2, action="update", id=found[0]["key"], content=content)
    return AIMessage(results[-1].text)


def test_langmem_update_keeps_the_old_memory_as_a_version(kuzu_brain: Brain, alice: Brain) -> None:
    namespace = ("memories", "{langgraph_user_id}")
    agent = create_agent(
        ScriptedFakeChatModel(policy=langmem_update_policy),
        [create_manage_memory_tool(namespace), create_search_memory_tool(namespace)],
        store=EbbStore(kuzu_brain),
    )
    assert ask(agent, "Remember: Alice drinks dark roast coffee") == "Saved."
    ask(agent, "Update: coffee -> Alice switched to green tea")
    (hit,) = alice.recall("green tea", reinforce=False)
    assert hit.node.text == "Alice switched to green tea"
    assert [v.text for v in alice.history(hit.id)] == [
        "Alice drinks dark roast coffee",
        "Alice switched to green tea",
    ]
    assert [e.action for e in alice.audit_log(node_id=hit.id)] == ["revise"]
