"""A LlamaIndex agent with Ebb long-term memory across two separate sessions.

Session 1 tells the agent who looks after the Acme account and asks it to remember when Acme
renews. Session 2 is a fresh agent with a fresh chat ``Memory`` on the store reopened from disk:
it answers "who looks after Acme, and when does it renew?" from what Ebb kept.

Ebb plugs in twice: ``EbbToolSpec`` gives the agent remember / recall / connect / forget, and
``EbbMemoryBlock`` stores the chat messages ``Memory`` flushes and injects relevant memories.

Offline (the default when no key is set) the model is ``ScriptedFakeLLM``: a fake that follows
fixed rules and calls tools, with no network and no key. With ``EBB_LLM_API_KEY`` (or
``OPENAI_API_KEY``) set it runs on a real model behind any OpenAI-compatible endpoint:
``EBB_LLM_BASE_URL`` (or ``OPENAI_BASE_URL``), ``EBB_LLM_MODEL`` (default ``gpt-4o-mini``); that
path needs ``pip install llama-index-llms-openai-like``.

With ``--local`` it runs on the real small model that ``scripts/local-llm start`` serves on
loopback (SmolLM2-135M-Instruct; ``EBB_LOCAL_LLM_URL`` overrides the address). A model that small
does not call tools reliably, so there THE APPLICATION calls Ebb and the model only answers: the
application stores what the user asks it to keep (``EbbToolSpec.remember``), ``Memory`` flushes
the user's messages into Ebb through ``EbbMemoryBlock``, and every turn the model is shown the
memories the block recalled (a plain chat, no tools). The tests replay the local model's recorded
answers (``tests/cassettes/``; ``make record`` records them anew).

Time is a simulated clock (session 2 is a day after session 1), so every run ranks alike.

    python examples/llamaindex_agent.py                  # temporary store, removed afterwards
    python examples/llamaindex_agent.py --db ./ebb_db    # keep the store
    python examples/llamaindex_agent.py --offline        # the fake model even if a key is set
    python examples/llamaindex_agent.py --local          # the local real model (scripts/local-llm)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ToolCallBlock
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import Memory
from llama_index.core.tools import BaseTool

from ebb_core import Brain, FixedClock
from ebb_llamaindex import EbbMemoryBlock, EbbToolSpec

NAMESPACE = "example-agent"
SESSIONS = {
    "session-1": [
        "Hi, I'm Dana and I look after the Acme account.",
        "Please remember: Acme renews its contract on March 14.",
        "Thanks, that's all for today.",
    ],
    "session-2": [
        "Who looks after the Acme account, and when does Acme renew?",
    ],
}
SYSTEM_PROMPT = (
    "You are an assistant with long-term memory tools: remember, recall, connect and forget. "
    "When the user tells you something worth keeping, call remember with one self-contained "
    "statement. Before answering a question that may depend on earlier conversations, call "
    "recall. Memories relevant to the conversation may also appear in a <memory> block. "
    "Answer briefly."
)
DAY_0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
# With --local the application calls Ebb and the model only answers from what it returned.
LOCAL_URL = "http://127.0.0.1:8765/v1"
LOCAL_MODEL = "smollm2-135m-instruct"
LOCAL_SYSTEM_PROMPT = (
    "You are a helpful assistant. Reply in one short sentence. Use these memories from "
    "earlier conversations when they answer the user:"
)
# Small on purpose, so that Memory flushes old messages into Ebb within a short conversation.
CHAT_TOKEN_LIMIT = 100

_REMEMBER = re.compile(r"\bremember\b\W*(?:that\s+)?(?P<fact>.+)", re.IGNORECASE | re.DOTALL)
_HIT = re.compile(r"^\d+\. \[[^\]]+\] \([^)]*\) (?P<text>.+)$", re.MULTILINE)


class ScriptedFakeLLM(MockFunctionCallingLLM):
    """A FAKE model for running offline: fixed rules, no language model behind it.

    - a user message asking to "remember ..." -> call ``remember`` with the rest of it;
    - a user question (ends with "?") -> call ``recall`` with the question;
    - a tool result -> answer from it (recalled memories are quoted verbatim);
    - anything else -> a short acknowledgement.
    """

    @classmethod
    def class_name(cls) -> str:
        return "ScriptedFakeLLM"

    def _get_response_generator(self) -> Any:
        return _script


def _script(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
    last = messages[-1]
    text = last.content or ""
    if last.role == MessageRole.TOOL:
        hits = _HIT.findall(text)
        if hits:
            return _say("Here is what I remember: " + " | ".join(h.strip() for h in hits[:3]))
        return _say(f"Done. {text.strip()}")
    if last.role == MessageRole.USER:
        wanted = _REMEMBER.search(text)
        if wanted:
            return _call("remember", text=wanted.group("fact").strip(), kind="fact")
        if text.rstrip().endswith("?"):
            return _call("recall", query=text.strip())
    return _say("Understood.")


def _say(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


_calls = 0


def _call(tool: str, **kwargs: Any) -> ChatMessage:
    global _calls
    _calls += 1
    block = ToolCallBlock(tool_call_id=f"fake-call-{_calls}", tool_name=tool, tool_kwargs=kwargs)
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=[block])


def build_llm(offline: bool, local: bool = False) -> FunctionCallingLLM:
    """The scripted fake offline, else a real model behind an OpenAI-compatible endpoint (with
    ``local``, the small model ``scripts/local-llm`` serves on loopback)."""
    key = os.environ.get("EBB_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY")
    if local:
        key = "local"  # the local server checks no key; the client wants one
    if offline or not key:
        return ScriptedFakeLLM()
    try:
        # Imported only here: the offline path must not need the integration installed.
        from llama_index.llms.openai_like import OpenAILike
    except ImportError:
        sys.exit(
            "A real model needs the OpenAI-compatible integration: "
            "pip install llama-index-llms-openai-like (or run with --offline)."
        )
    if local:
        name = os.environ.get("EBB_LOCAL_LLM_MODEL", LOCAL_MODEL)
        url = os.environ.get("EBB_LOCAL_LLM_URL", LOCAL_URL)
        print(f"model: {name} at {url} (a real local model; the application calls Ebb)")
        local_llm: FunctionCallingLLM = OpenAILike(
            model=name,
            api_base=url,
            api_key=key,
            is_chat_model=True,
            is_function_calling_model=False,
            context_window=4096,
            temperature=0.0,
            max_tokens=48,
            max_retries=0,
        )
        return local_llm
    llm: FunctionCallingLLM = OpenAILike(
        model=os.environ.get("EBB_LLM_MODEL", "gpt-4o-mini"),
        api_base=os.environ.get("EBB_LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL"),
        api_key=key,
        is_chat_model=True,
        is_function_calling_model=True,
        context_window=32_000,
    )
    return llm


async def run_session(
    db: Path, session: str, turns: list[str], llm: FunctionCallingLLM, clock: FixedClock
) -> str:
    """One conversation: its own Brain handle, chat Memory and agent. Returns the last answer."""
    answer = ""
    with Brain.open(db, namespace=NAMESPACE, clock=clock) as brain:
        memory = Memory.from_defaults(
            session_id=session,
            token_limit=CHAT_TOKEN_LIMIT,
            memory_blocks=[EbbMemoryBlock(brain=brain, k=3)],
        )
        tools: list[BaseTool | Callable[..., Any]] = [*EbbToolSpec(brain).to_tool_list()]
        agent = FunctionAgent(tools=tools, llm=llm, system_prompt=SYSTEM_PROMPT)
        for turn in turns:
            print(f"[{session}] user:  {turn}")
            handler = agent.run(turn, memory=memory)
            async for event in handler.stream_events():
                if isinstance(event, ToolCallResult):
                    shown = str(event.tool_output.content).splitlines()[0]
                    print(f"[{session}]   tool {event.tool_name}({event.tool_kwargs}) -> {shown}")
            answer = str(await handler)
            print(f"[{session}] agent: {answer}")
        stats = brain.stats()
        print(f"[{session}] ebb holds {stats.nodes} memories and {stats.edges} links\n")
    return answer


async def run_session_app_calls_ebb(
    db: Path, session: str, turns: list[str], llm: FunctionCallingLLM, clock: FixedClock
) -> str:
    """One conversation where the APPLICATION calls Ebb and the model only answers (for models
    too small to call tools): "remember ..." is stored by the application, ``Memory`` flushes the
    user's messages into Ebb, and the model sees what ``EbbMemoryBlock`` recalled. Returns the
    last answer."""
    answer = ""
    with Brain.open(db, namespace=NAMESPACE, clock=clock) as brain:
        # The model is shown memories as plain lines (no ids), the three most relevant; only
        # the user's messages are kept (a small model's replies would crowd recall).
        block = EbbMemoryBlock(brain=brain, k=3, template="- {text}", roles=["user"])
        memory = Memory.from_defaults(
            session_id=session, token_limit=CHAT_TOKEN_LIMIT, memory_blocks=[block]
        )
        spec = EbbToolSpec(brain)
        for turn in turns:
            print(f"[{session}] user:  {turn}")
            wanted = _REMEMBER.search(turn)
            if wanted:
                stored = spec.remember(text=wanted.group("fact").strip(), kind="fact")
                print(f"[{session}]   app remember -> {stored.splitlines()[0]}")
            await memory.aput(ChatMessage(role=MessageRole.USER, content=turn))
            shown = _flatten(await memory.aget())
            recalled = (shown[0].content or "").splitlines()[1:]
            print(f"[{session}]   ebb recalled {len(recalled)}: {' | '.join(recalled)}")
            try:
                reply = await llm.achat(shown)
            except Exception as error:  # the OpenAI client's connection and status errors
                url = os.environ.get("EBB_LOCAL_LLM_URL", LOCAL_URL)
                sys.exit(
                    f"the local model at {url} did not answer ({type(error).__name__}: {error}): "
                    "start it with `scripts/local-llm start` (`make local-llm` builds it once), "
                    "or run --offline"
                )
            answer = (reply.message.content or "").strip()
            await memory.aput(ChatMessage(role=MessageRole.ASSISTANT, content=answer))
            print(f"[{session}] agent: {answer}")
        stats = brain.stats()
        print(f"[{session}] ebb holds {stats.nodes} memories and {stats.edges} links\n")
    return answer


def _flatten(messages: list[ChatMessage]) -> list[ChatMessage]:
    """What the model is shown: one system message (the prompt, then each memory Ebb recalled
    on a line of its own, without Memory's XML wrapping, which confuses a small model) and the
    chat turns still in the short-term queue."""
    recalled = [
        line
        for m in messages
        if m.role == MessageRole.SYSTEM
        for line in (m.content or "").splitlines()
        if line.startswith("- ")
    ]
    system = "\n".join([LOCAL_SYSTEM_PROMPT, *recalled])
    chat = [
        ChatMessage(role=m.role, content=m.content or "")
        for m in messages
        if m.role != MessageRole.SYSTEM
    ]
    return [ChatMessage(role=MessageRole.SYSTEM, content=system), *chat]


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="Kùzu database file to use (kept afterwards)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--offline", action="store_true", help="use the scripted fake model")
    mode.add_argument(
        "--local", action="store_true", help="use the local real model (scripts/local-llm start)"
    )
    args = parser.parse_args(argv)
    llm = build_llm(args.offline, args.local)
    print(f"model: {type(llm).__name__}\n")
    scratch = None if args.db else tempfile.mkdtemp(prefix="ebb-llamaindex-")
    db = args.db or Path(scratch or ".") / "ebb.kuzu"
    clock = FixedClock(DAY_0)
    session_fn = run_session_app_calls_ebb if args.local else run_session
    try:
        for day, (session, turns) in enumerate(SESSIONS.items()):
            clock.set(DAY_0 + timedelta(days=day))
            await session_fn(db, session, turns, llm, clock)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
