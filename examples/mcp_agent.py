"""An agent that reaches Ebb only through ``ebb mcp``, across two separate sessions.

Each session starts its own ``ebb mcp`` server over stdio with the official MCP SDK client
(``mcp.Client``), as Claude Desktop or any MCP host would; the store on disk is all that carries
over. Session 1 tells the agent who the Acme contact is and that Acme renews in March. Session 2
says the renewal moved to June, then asks who the contact is and when the renewal is: the answers
come from memory, with the June fact outranking the March one it superseded.

The loop is model-driven: every turn the model gets Ebb's ``remember`` and ``recall`` tools as
the server describes them (``list_tools``), chooses what to call, and answers from the results.
The model is reached over plain HTTP (``/chat/completions``, any OpenAI-compatible endpoint):

- offline (the default with no key) it is ``ScriptedFakeModel``: a FAKE that follows fixed rules
  and calls the tools, no network and no key;
- with ``EBB_LLM_API_KEY`` (or ``OPENAI_API_KEY``) a real model at ``EBB_LLM_BASE_URL`` (or
  ``OPENAI_BASE_URL``, default the OpenAI endpoint), ``EBB_LLM_MODEL`` (default gpt-4o-mini);
- with ``--local`` the real small model ``scripts/local-llm start`` serves on loopback
  (SmolLM2-135M-Instruct; ``EBB_LOCAL_LLM_URL`` overrides the address). A model that small does not
  call tools reliably, so there THE APPLICATION calls Ebb's MCP tools by the same rules as the fake
  (remember what the user asks to keep, superseding the old fact when something changed; recall
  for a question) and the model only answers from the memory ``recall`` returned. The tests
  replay its recorded answers (``tests/cassettes/``; ``make record`` records them anew).

Needs ``pip install 'ebb-memory[mcp]'`` (the ``mcp`` SDK, which brings ``httpx``).

    python examples/mcp_agent.py                  # temporary store, removed afterwards
    python examples/mcp_agent.py --db ./ebb_db    # keep the store
    python examples/mcp_agent.py --offline        # the fake model even if a key is set
    python examples/mcp_agent.py --local          # the local real model (scripts/local-llm)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
from mcp import Client, StdioServerParameters

NAMESPACE = "mcp-agent"
SESSIONS = {
    "session 1": [
        "Please remember: our contact at Acme is Dana Reyes.",
        "Please remember: the Acme renewal is in March.",
    ],
    "session 2": [
        "Please remember: the Acme renewal moved to June.",
        "Who is our contact at Acme?",
        "When is the Acme renewal?",
    ],
}
SYSTEM_PROMPT = (
    "You are an assistant with long-term memory tools: remember and recall. When the user tells "
    "you something worth keeping, call remember with one self-contained statement and "
    "kind 'fact'. When the user changes something, recall the old memory first and remember the "
    "new statement with supersedes set to the old memory's id. Before answering a question that "
    "may depend on earlier conversations, call recall; results come most relevant first, so "
    "when memories disagree trust the first. Answer in one short sentence."
)
# With --local the application calls Ebb and the model only answers from what it returned.
ANSWER_PROMPT = (
    "You are a helpful assistant. Answer the user's question in one short sentence, using only "
    "this memory from earlier conversations:\n{memory}"
)
TOOLS = ("remember", "recall")  # the ones this agent offers its model, of those ebb mcp has
MAX_STEPS = 6  # model calls per user turn, tool rounds included
LOCAL_URL = "http://127.0.0.1:8765/v1"
LOCAL_MODEL = "smollm2-135m-instruct"

_REMEMBER = re.compile(r"\bremember\b\W*(?:that\s+)?(?P<fact>.+)", re.IGNORECASE | re.DOTALL)
_UPDATE = re.compile(r"\b(moved|changed|now|no longer)\b", re.IGNORECASE)


@dataclass
class Reply:
    """One model turn: text, or tool calls ``(call id, tool name, arguments)``."""

    content: str = ""
    tool_calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)


class ModelUnreachable(Exception):
    """The model's endpoint did not answer (connection refused, timeout...)."""


def _first(error: BaseException, wanted: type[Exception]) -> Exception | None:
    """``error`` itself or the first ``wanted`` inside it (the MCP client's task group wraps
    what is raised inside it in an exception group)."""
    if isinstance(error, wanted):
        return error
    for inner in getattr(error, "exceptions", ()):
        found = _first(inner, wanted)
        if found is not None:
            return found
    return None


class ChatModel(Protocol):
    name: str

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply: ...


class OpenAICompatibleModel:
    """A real model behind any OpenAI-compatible ``/chat/completions`` endpoint (plain httpx)."""

    def __init__(self, name: str, base_url: str, key: str, max_tokens: int | None = None) -> None:
        self.name = name
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.key = key
        self.max_tokens = max_tokens

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        body: dict[str, Any] = {"model": self.name, "messages": messages, "temperature": 0}
        if tools:
            body["tools"] = tools
        if self.max_tokens:
            body["max_tokens"] = self.max_tokens
        try:
            async with httpx.AsyncClient(timeout=600) as http:
                response = await http.post(
                    self.url, json=body, headers={"Authorization": f"Bearer {self.key}"}
                )
        except httpx.HTTPError as error:
            raise ModelUnreachable(
                f"the model at {self.url} did not answer ({type(error).__name__}: {error}): for "
                "--local start it with `scripts/local-llm start` (`make local-llm` builds it "
                "once), or run --offline"
            ) from error
        if response.status_code != 200:
            sys.exit(f"the model at {self.url} answered {response.status_code}: {response.text}")
        message = response.json()["choices"][0]["message"]
        calls = [
            (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
            for c in message.get("tool_calls") or []
        ]
        return Reply(content=(message.get("content") or "").strip(), tool_calls=calls)


class ScriptedFakeModel:
    """A FAKE model for running offline: fixed rules, no language model behind it.

    - a user message asking to "remember ..." -> call ``remember`` with the rest of it; when it
      says something changed ("moved", "now"...), first ``recall`` the old fact, then
      ``remember`` the new one with ``supersedes`` naming it;
    - a user question (ends with "?") -> call ``recall`` with the question, ``k=1``;
    - a tool result -> answer from it (the top recalled memory is quoted verbatim).
    """

    name = "ScriptedFakeModel"

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        last = messages[-1]
        asked = next(m for m in reversed(messages) if m["role"] == "user")["content"].strip()
        wanted = _REMEMBER.search(asked)
        text = wanted["fact"].strip() if wanted else ""
        text = text[:1].upper() + text[1:]
        if last["role"] == "tool":
            result = json.loads(last["content"])
            called = next(m for m in reversed(messages) if m.get("tool_calls"))
            if called["tool_calls"][0]["function"]["name"] == "recall":
                hits = result.get("hits", [])
                if wanted:  # the old fact was looked up: the new one supersedes it
                    old = [hits[0]["id"]] if hits else []
                    return _call("remember", text=text, kind="fact", supersedes=old)
                return Reply(f"From memory: {hits[0]['text']}" if hits else "I don't know yet.")
            return Reply("Got it, I'll remember that.")
        if wanted and _UPDATE.search(text):
            return _call("recall", query=text, k=1, kinds=["fact"], reinforce=False)
        if wanted:
            return _call("remember", text=text, kind="fact")
        if asked.endswith("?"):
            return _call("recall", query=asked, k=1)
        return Reply("OK.")


def _call(tool: str, **args: Any) -> Reply:
    return Reply(tool_calls=[(f"call-{tool}", tool, args)])


def build_model(offline: bool, local: bool) -> ChatModel:
    """The scripted fake offline; a real model when a key is set or with ``local``."""
    if local:
        name = os.environ.get("EBB_LOCAL_LLM_MODEL", LOCAL_MODEL)
        url = os.environ.get("EBB_LOCAL_LLM_URL", LOCAL_URL)
        print(f"model: {name} at {url} (a real local model; the application calls Ebb)")
        return OpenAICompatibleModel(name, url, "local", max_tokens=48)
    key = os.environ.get("EBB_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY")
    if offline or not key:
        print("model: ScriptedFakeModel (a scripted FAKE, not an AI; runs offline)")
        return ScriptedFakeModel()
    name = os.environ.get("EBB_LLM_MODEL", "gpt-4o-mini")
    url = (
        os.environ.get("EBB_LLM_BASE_URL")
        or os.environ.get("OPENAI_BASE_URL")
        or "https://api.openai.com/v1"
    )
    print(f"model: {name} at {url} (the model calls Ebb's tools)")
    return OpenAICompatibleModel(name, url, key)


def ebb_mcp(db: Path) -> StdioServerParameters:
    """How to start ``ebb mcp`` on ``db``: the ``ebb`` script beside this Python, else -m."""
    script = Path(sys.executable).with_name("ebb")
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "ebb_core.cli"]
    env = {"EBB_DB_PATH": str(db), "EBB_NAMESPACE": NAMESPACE, "EBB_BACKEND": "kuzu"}
    return StdioServerParameters(command=argv[0], args=[*argv[1:], "mcp"], env=env)


async def call_tool(client: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """One MCP tool call; prints it and returns its structured result (hits trimmed to id and
    text, which is all the model is shown: scores and timestamps vary from run to run)."""
    result = await client.call_tool(name, args)
    shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
    if result.is_error or result.structured_content is None:
        text = " ".join(getattr(c, "text", "") for c in result.content)
        print(f"  -> {name}({shown}) failed: {text}")
        return {"error": text}
    data = dict(result.structured_content)
    if name == "recall":
        hits = [{"id": h["id"], "text": h["text"]} for h in data.get("hits", [])]
        print(f"  -> recall({shown}): {[h['id'] for h in hits]}")
        return {"hits": hits}
    print(f"  -> {name}({shown}): {data.get('id')}")
    return {"id": data.get("id")}


async def model_turn(
    client: Client, model: ChatModel, tools: list[dict[str, Any]], messages: list[dict[str, Any]]
) -> str:
    """The model-driven loop: ask the model, run the tools it calls over MCP, until it answers."""
    for _ in range(MAX_STEPS):
        reply = await model.chat(messages, tools)
        if not reply.tool_calls:
            messages.append({"role": "assistant", "content": reply.content})
            return reply.content
        messages.append(
            {
                "role": "assistant",
                "content": reply.content or None,
                "tool_calls": [
                    {
                        "id": i,
                        "type": "function",
                        "function": {"name": n, "arguments": json.dumps(a)},
                    }
                    for i, n, a in reply.tool_calls
                ],
            }
        )
        for call_id, name, args in reply.tool_calls:
            result = await call_tool(client, name, args) if name in TOOLS else {"error": "no tool"}
            messages.append(
                {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)}
            )
    return "(no answer within the step limit)"


async def app_turn(client: Client, model: ChatModel, turn: str) -> str:
    """The application calls Ebb over MCP; the model only answers from what recall returned."""
    wanted = _REMEMBER.search(turn)
    if wanted:
        text = wanted["fact"].strip()
        text = text[:1].upper() + text[1:]
        old: list[str] = []
        if _UPDATE.search(text):
            found = await call_tool(
                client, "recall", {"query": text, "k": 1, "kinds": ["fact"], "reinforce": False}
            )
            old = [h["id"] for h in found.get("hits", [])]
        await call_tool(client, "remember", {"text": text, "kind": "fact", "supersedes": old})
        return "Noted."
    found = await call_tool(client, "recall", {"query": turn, "k": 1})
    memory = "\n".join(f"- {h['text']}" for h in found.get("hits", [])) or "- (nothing)"
    messages = [
        {"role": "system", "content": ANSWER_PROMPT.format(memory=memory)},
        {"role": "user", "content": turn},
    ]
    return (await model.chat(messages, [])).content


async def run_session(db: Path, turns: Sequence[str], model: ChatModel, app_calls: bool) -> None:
    """One session: a new ``ebb mcp`` server and client, a new conversation."""
    async with Client(ebb_mcp(db)) as client:
        listed = (await client.list_tools()).tools
        tools = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                },
            }
            for t in listed
            if t.name in TOOLS
        ]
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]
        for turn in turns:
            print(f"user: {turn}")
            if app_calls:
                answer = await app_turn(client, model, turn)
            else:
                messages.append({"role": "user", "content": turn})
                answer = await model_turn(client, model, tools, messages)
            print(f"assistant: {answer}")


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--db", type=Path, help="Kùzu database file to use (kept afterwards)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--offline", action="store_true", help="use the scripted fake model")
    mode.add_argument(
        "--local", action="store_true", help="use the local real model (scripts/local-llm start)"
    )
    args = parser.parse_args(argv)
    model = build_model(args.offline, args.local)
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "ebb.kuzu"
        for name, turns in SESSIONS.items():
            print(f"\n== {name}: a new ebb mcp server on {db.name} ==")
            try:
                await run_session(db, turns, model, app_calls=args.local)
            except Exception as error:
                unreachable = _first(error, ModelUnreachable)
                if unreachable is None:
                    raise
                sys.exit(str(unreachable))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
