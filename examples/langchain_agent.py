"""A LangChain agent with Ebb long-term memory across two separate sessions.

Session 1 (day 0) tells the agent who the Acme contact is and that Acme renews in March.
Session 2 (45 days later) is a fresh agent, with no conversation state, on the memory file
reopened from disk. The user says the renewal moved to June, then asks who the contact is
(learned in session 1) and when the renewal is. Told of the change, the agent looks the old fact
up and remembers the new one as superseding it, so the June fact outranks the March one because
it replaced it (the March fact is kept, ranked below, with ``why`` naming its replacement), not
merely because it is newer. Time is a simulated clock (each turn a minute after the one before),
so every run prints the same ranking.

The agent is ``langchain.agents.create_agent`` with Ebb's tools (remember, recall, connect,
forget) from ``ebb_langchain.create_ebb_tools``.

Offline (the default when no key is set) the model is ``ScriptedFakeChatModel``: a FAKE that
follows fixed rules and calls the tools, with no network and no key. With ``OPENAI_API_KEY`` (or
``EBB_LLM_API_KEY``) set it runs on a real model behind any OpenAI-compatible endpoint:
``OPENAI_BASE_URL`` (or ``EBB_LLM_BASE_URL``), ``EBB_CHAT_MODEL`` (or ``EBB_LLM_MODEL``; default
``gpt-4o-mini``); that path needs ``pip install langchain-openai``.

With ``--local`` it runs on the real small model that ``scripts/local-llm start`` serves on
loopback (SmolLM2-135M-Instruct; ``EBB_LOCAL_LLM_URL`` overrides the address). A model that small
does not call tools reliably, so there THE APPLICATION calls Ebb and the model only answers: the
application remembers what the user asks it to keep (looking the old fact up and superseding it
when the user says something changed), recalls with ``ebb_langchain.EbbRetriever`` for each
question, and the model answers from the one memory Ebb returned. The tests replay the local
model's recorded answers (``tests/cassettes/``; ``make record`` records them anew).

    python examples/langchain_agent.py                  # temporary store, removed afterwards
    python examples/langchain_agent.py --db ./ebb_db    # keep the store
    python examples/langchain_agent.py --offline        # the fake model even if a key is set
    python examples/langchain_agent.py --local          # the local real model (scripts/local-llm)
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable
from pydantic import SecretStr

from ebb_core import Brain, FixedClock
from ebb_langchain import EbbRetriever, create_ebb_tools

NAMESPACE = "example-agent"
DAY_0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
SESSIONS = [
    (
        "session 1",
        timedelta(days=0),
        [
            "Please remember: our contact at Acme is Dana Reyes.",
            "Please remember: the Acme renewal is in March.",
        ],
    ),
    (
        "session 2",
        timedelta(days=45),
        [
            "Please remember: the Acme renewal moved to June.",
            "Who is our contact at Acme?",
            "When is the Acme renewal?",
        ],
    ),
]
SYSTEM_PROMPT = (
    "You are an assistant with long-term memory tools: remember, recall, connect and forget. "
    "When the user tells you something worth keeping, call remember with one self-contained "
    "statement. When the user changes or corrects something, recall the old memory first and "
    "remember the new statement with supersedes set to the old memory's id. Before answering a "
    "question that may depend on earlier conversations, call recall; results come most "
    "relevant first, so when memories disagree trust the first. "
    "Answer in one short sentence."
)

# The local model's default address (scripts/local-llm) and the name it serves the model under.
LOCAL_URL = "http://127.0.0.1:8765/v1"
LOCAL_MODEL = "smollm2-135m-instruct"
# With --local the application calls Ebb and the model only answers from what it returned.
ANSWER_PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            "You are a helpful assistant. Answer the user's question in one short sentence, "
            "using only this memory from earlier conversations:\n{memory}",
        ),
        ("human", "{question}"),
    ]
)

_REMEMBER = re.compile(r"\bremember\b\W*(?:that\s+)?(?P<fact>.+)", re.IGNORECASE | re.DOTALL)
_HIT = re.compile(r"^1\. \[(?P<id>[^\]]+)\] \([^)]*\) (?P<text>.+)$", re.MULTILINE)
_UPDATE = re.compile(r"\b(moved|changed|now|no longer)\b", re.IGNORECASE)


class ScriptedFakeChatModel(BaseChatModel):
    """A FAKE chat model for running offline: fixed rules, no language model behind it.

    - a user message asking to "remember ..." -> call ``remember`` with the rest of it; when it
      says something changed ("moved", "now"...), first ``recall`` the old fact, then
      ``remember`` the new one with ``supersedes`` naming it;
    - a user question (ends with "?") -> call ``recall`` with the question;
    - a tool result -> answer from it (the top recalled memory is quoted verbatim);
    - anything else -> a short acknowledgement.
    """

    @property
    def _llm_type(self) -> str:
        return "scripted-fake"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        return self  # the rules already know the tools by name

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=_script(messages))])


def _script(messages: Sequence[BaseMessage]) -> AIMessage:
    last = messages[-1]
    asked = next(m for m in reversed(messages) if isinstance(m, HumanMessage)).text.strip()
    fact = _REMEMBER.search(asked)
    text = fact["fact"].strip() if fact else ""
    text = text[:1].upper() + text[1:]
    if isinstance(last, ToolMessage):
        if last.name == "recall":
            top = _HIT.search(last.text)
            if fact:  # the old fact was looked up: the new one supersedes it
                old = [top["id"]] if top else []
                return _call("remember", text=text, kind="fact", supersedes=old)
            return AIMessage(f"From memory: {top['text']}" if top else "I don't know yet.")
        return AIMessage("Got it, I'll remember that.")
    said = last.text.strip()
    if fact and _UPDATE.search(text):
        return _call("recall", query=text, k=1)
    if fact:
        return _call("remember", text=text, kind="fact")
    if said.endswith("?"):
        # Only the single best memory: recall reinforces everything it returns.
        return _call("recall", query=said, k=1)
    return AIMessage("OK.")


def _call(tool: str, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": tool, "args": args, "id": f"call-{tool}"}])


def build_model(offline: bool, local: bool = False) -> BaseChatModel:
    """The scripted fake offline; a real OpenAI-compatible chat model when a key is set or with
    ``local`` (the small model ``scripts/local-llm`` serves on loopback)."""
    key = os.environ.get("EBB_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY")
    if local:
        key = "local"  # the local server checks no key; the client wants one
    if offline or not key:
        print("model: ScriptedFakeChatModel (a scripted FAKE, not an AI; runs offline)")
        return ScriptedFakeChatModel()
    try:
        from langchain_openai import ChatOpenAI
    except ImportError:
        sys.exit("a real model needs langchain-openai: pip install langchain-openai")
    if local:
        name = os.environ.get("EBB_LOCAL_LLM_MODEL", LOCAL_MODEL)
        base_url: str | None = os.environ.get("EBB_LOCAL_LLM_URL", LOCAL_URL)
        print(f"model: {name} at {base_url} (a real local model; the application calls Ebb)")
        return ChatOpenAI(
            model=name,
            base_url=base_url,
            api_key=SecretStr(key),
            temperature=0,
            max_completion_tokens=48,  # the field max_tokens, by its alias
            max_retries=0,
        )
    name = os.environ.get("EBB_CHAT_MODEL") or os.environ.get("EBB_LLM_MODEL") or "gpt-4o-mini"
    base_url = os.environ.get("EBB_LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
    print(f"model: {name} at {base_url or 'the OpenAI default endpoint'}")
    return ChatOpenAI(model=name, base_url=base_url, api_key=SecretStr(key), temperature=0)


def run_session(db: Path, clock: FixedClock, turns: list[str], model: BaseChatModel) -> list[str]:
    """One session: a new agent on the store opened afresh. Returns the assistant's replies."""
    replies: list[str] = []
    with Brain.open(db, namespace=NAMESPACE, clock=clock, wait=10) as brain:
        agent = create_agent(model, create_ebb_tools(brain), system_prompt=SYSTEM_PROMPT)
        messages: list[BaseMessage] = []
        start = clock.now()
        for minute, turn in enumerate(turns):
            clock.set(start + timedelta(minutes=minute))
            print(f"user: {turn}")
            state = agent.invoke({"messages": [*messages, HumanMessage(turn)]})
            new = state["messages"][len(messages) + 1 :]
            messages = state["messages"]
            for message in new:
                _show(message)
            replies.append(str(messages[-1].text))
    return replies


def run_session_app_calls_ebb(
    db: Path, clock: FixedClock, turns: list[str], model: BaseChatModel
) -> list[str]:
    """One session where the APPLICATION calls Ebb and the model only answers (for models too
    small to call tools): a "remember ..." turn is stored by the application (a change looks the
    old fact up and supersedes it); a question is answered by the model from the one memory
    ``EbbRetriever`` returns (which reinforces it). Returns the assistant's replies."""
    replies: list[str] = []
    with Brain.open(db, namespace=NAMESPACE, clock=clock, wait=10) as brain:
        # Only the single best memory: the retriever reinforces everything it returns.
        retriever = EbbRetriever(brain=brain, k=1)
        start = clock.now()
        for minute, turn in enumerate(turns):
            clock.set(start + timedelta(minutes=minute))
            print(f"user: {turn}")
            fact = _REMEMBER.search(turn)
            if fact:
                text = fact["fact"].strip()
                text = text[:1].upper() + text[1:]
                old = []
                if _UPDATE.search(text):
                    old = [h.id for h in brain.recall(text, k=1, kinds=["fact"], reinforce=False)]
                node = brain.remember(text, kind="fact", supersedes=old)
                replaced = f", superseding {old[0]}" if old else ""
                print(f"  app -> remembered {node.id}{replaced}")
                replies.append("Noted.")
                print("assistant: Noted.")
                continue
            docs = retriever.invoke(turn)
            memory = _memory_lines(docs)
            print(f"  app -> recalled: {', '.join(str(d.id) for d in docs) or 'nothing'}")
            prompt = ANSWER_PROMPT.invoke({"memory": memory, "question": turn})
            try:
                answer = model.invoke(prompt)
            except Exception as error:  # the OpenAI client's connection and status errors
                sys.exit(unreachable(error))
            replies.append(str(answer.text).strip())
            print(f"assistant: {replies[-1]}")
    return replies


def unreachable(error: Exception) -> str:
    url = os.environ.get("EBB_LOCAL_LLM_URL", LOCAL_URL)
    return (
        f"the local model at {url} did not answer ({type(error).__name__}: {error}): start it "
        "with `scripts/local-llm start` (`make local-llm` builds it once), or run --offline"
    )


def _memory_lines(docs: list[Document]) -> str:
    return "\n".join(f"- {d.page_content}" for d in docs) or "- (nothing remembered)"


def _show(message: BaseMessage) -> None:
    if isinstance(message, AIMessage) and message.tool_calls:
        for c in message.tool_calls:
            args = ", ".join(f"{k}={v!r}" for k, v in c["args"].items())
            print(f"  -> {c['name']}({args})")
    elif isinstance(message, ToolMessage):
        for line in message.text.splitlines():
            print(f"     {line}")
    elif isinstance(message, AIMessage):
        print(f"assistant: {message.text}")


def show_ranking(db: Path, clock: FixedClock, query: str) -> None:
    """What Ebb ranks for ``query`` now, and why (without reinforcing anything)."""
    print(f'\n== What Ebb ranks for "{query}" now ==')
    with Brain.open(db, namespace=NAMESPACE, clock=clock, wait=10) as brain:
        for n, hit in enumerate(brain.recall(query, k=3, reinforce=False), 1):
            print(f"{n}. {hit.id}  score {hit.score:.3f}\n   {hit.node.text}")
            print(f"   why: {hit.why.summary}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--db", type=Path, help="Kùzu database file to use (kept afterwards)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--offline", action="store_true", help="use the scripted fake model")
    mode.add_argument(
        "--local", action="store_true", help="use the local real model (scripts/local-llm start)"
    )
    args = parser.parse_args(argv)
    model = build_model(args.offline, args.local)
    session = run_session_app_calls_ebb if args.local else run_session
    clock = FixedClock(DAY_0)
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "ebb.kuzu"
        for name, offset, turns in SESSIONS:
            clock.set(DAY_0 + offset)
            print(f"\n== {name}, {clock.now():%Y-%m-%d}: a new agent on {db.name} ==")
            session(db, clock, turns, model)
        show_ranking(db, clock, "Acme renewal")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
