"""The example agents on a REAL language model, replayed from vcrpy cassettes.

``make record`` ran each example with ``--local`` against SmolLM2-135M-Instruct served by
``scripts/local-llm`` and recorded every HTTP exchange with the model into ``tests/cassettes/``.
Here the same examples run again, in process, with vcrpy in ``record_mode="none"``: each request
to the model must match a recorded one on method, path and JSON body (so a changed prompt, a
different memory shown to the model or an extra call fails), and every recorded exchange must be
used. Ebb itself is real throughout: Kùzu on disk, and for the MCP agent a real ``ebb mcp``
process over stdio (not HTTP, so not recorded).

The tests assert what Ebb did (what was stored, superseded, recalled and reinforced) and what
the model was shown; the model's recorded answers are checked only for what memory supplied.
``EBB_VCR_RECORD=1`` (set by ``make record``) records instead of replaying.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

# Imported here, not first inside a test: the SDK's stdio client takes the sys.stderr of its
# import time as the server's stderr, and capsys's stand-in has no file descriptor.
import mcp.client.stdio  # noqa: F401
import pytest
import vcr  # dev dependencies, like the examples' real-model clients: missing ones fail loudly
from vcr.errors import CannotOverwriteExistingCassetteException

from ebb_core import Brain, FixedClock

ROOT = Path(__file__).resolve().parents[1]
CASSETTES = Path(__file__).resolve().parent / "cassettes"
RECORDING = os.environ.get("EBB_VCR_RECORD") == "1"
KEEP_HEADERS = {"content-type"}
LLM_ENV = ("OPENAI_API_KEY", "EBB_LLM_API_KEY", "OPENAI_BASE_URL", "EBB_LLM_BASE_URL")
DAY_0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)


def _slim_request(request: Any) -> Any:
    # Only the content type (the body matcher reads JSON by it): no key, no client versions.
    request.headers = {k: v for k, v in request.headers.items() if k.lower() in KEEP_HEADERS}
    return request


def _slim_response(response: dict[str, Any]) -> dict[str, Any]:
    response["headers"] = {
        k: v for k, v in response["headers"].items() if k.lower() in KEEP_HEADERS
    }
    # The completion's random id and time change on every recording: fixed, a re-recording that
    # gets the same answers leaves the cassettes byte for byte as they were.
    body = response["body"]["string"]
    try:
        data = json.loads(body)
    except ValueError:
        return response
    if isinstance(data, dict) and "choices" in data:
        data.update(id="chatcmpl-recorded", created=0)
        text = json.dumps(data, separators=(",", ":"))
        response["body"]["string"] = text.encode() if isinstance(body, bytes) else text
    return response


VCR = vcr.VCR(
    cassette_library_dir=str(CASSETTES),
    record_mode="once" if RECORDING else "none",
    match_on=["method", "path", "body"],
    filter_headers=["authorization", "api-key", "x-api-key"],
    before_record_request=_slim_request,
    before_record_response=_slim_response,
    decode_compressed_response=True,
)


def load_example(name: str) -> ModuleType:
    """``examples/NAME.py`` as a module (a fresh copy each time)."""
    path = ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"ebb_example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _no_real_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    if not RECORDING:  # replay never needs the server: any address will do
        monkeypatch.setenv("EBB_LOCAL_LLM_URL", "http://127.0.0.1:8765/v1")
    yield


def shown(cassette: Any) -> list[dict[str, Any]]:
    """The JSON bodies sent to the model, in order: what the model was shown."""
    return [json.loads(r.body) for r in cassette.requests]


def answers(cassette: Any) -> list[str]:
    """The model's recorded answers, in order."""
    out = []
    for response in cassette.responses:
        body = json.loads(response["body"]["string"])
        out.append(body["choices"][0]["message"]["content"] or "")
    return out


def system_text(body: dict[str, Any]) -> str:
    [system] = [m for m in body["messages"] if m["role"] == "system"]
    content = system["content"]
    return content if isinstance(content, str) else " ".join(p["text"] for p in content)


# --- LangChain: the application recalls with EbbRetriever, the model answers ----------------


def test_langchain_example_on_the_recorded_local_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = load_example("langchain_agent")
    db = tmp_path / "agent.kuzu"
    with VCR.use_cassette("langchain_agent.yaml") as cassette:
        assert example.main(["--local", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "(a real local model; the application calls Ebb)" in out
    assert RECORDING or cassette.all_played  # every recorded exchange was asked for again
    bodies = shown(cassette)
    # Two questions, two model calls; remembering is the application's, with no model call.
    assert len(bodies) == 2
    assert [b["messages"][-1]["content"] for b in bodies] == [
        "Who is our contact at Acme?",
        "When is the Acme renewal?",
    ]
    # The model was shown exactly the one memory Ebb ranked first, never the superseded fact.
    assert system_text(bodies[0]).endswith("\n- Our contact at Acme is Dana Reyes.")
    assert system_text(bodies[1]).endswith("\n- The Acme renewal moved to June.")
    assert "March" not in json.dumps(bodies)
    # The answers, checked only for what memory supplied.
    first, second = answers(cassette)
    assert "Dana" in first
    assert "June" in second

    day_45 = DAY_0 + timedelta(days=45)  # session 2: June told at 0 min, questions at 1 and 2
    with Brain.open(db, namespace="example-agent", clock=FixedClock(day_45)) as brain:
        dana = brain.get("fact:our-contact-at-acme-is-dana")
        june = brain.get("fact:the-acme-renewal-moved-to-june")
        march = brain.get("fact:the-acme-renewal-is-in-march")
        assert (dana.created_at, june.created_at) == (DAY_0, day_45)
        # What the retriever returned was reinforced when each question was asked; the
        # superseded fact, looked up without reinforcing to be replaced, was never read again.
        assert dana.last_read_at == day_45 + timedelta(minutes=1)
        assert june.last_read_at == day_45 + timedelta(minutes=2)
        assert march.last_read_at == march.created_at == DAY_0 + timedelta(minutes=1)
        hits = brain.recall("Acme renewal", k=2, reinforce=False)
        assert [h.id for h in hits] == [june.id, march.id]
        assert hits[1].why.superseded_by == [june.id]


def test_a_changed_prompt_is_not_in_the_cassette(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if RECORDING:
        pytest.skip("checks replay only")  # recording writes cassettes; this one must not
    example = load_example("langchain_agent")
    changed = example.ANSWER_PROMPT.messages[0].prompt.template.replace("one short", "a short")
    monkeypatch.setattr(
        example,
        "ANSWER_PROMPT",
        example.ChatPromptTemplate.from_messages([("system", changed), ("human", "{question}")]),
    )
    with (
        pytest.raises(SystemExit) as failed,
        VCR.use_cassette("langchain_agent.yaml"),
    ):
        example.main(["--local", "--db", str(tmp_path / "agent.kuzu")])
    # The example stops with its message; the OpenAI client's error under it was caused by
    # vcrpy's refusal to answer a request it has no recording of.
    assert "did not answer" in str(failed.value.code)
    chain: list[BaseException] = []
    error: BaseException | None = failed.value
    while error is not None:
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert any(isinstance(e, CannotOverwriteExistingCassetteException) for e in chain), chain


# --- LlamaIndex: Memory with EbbMemoryBlock shows the model what Ebb recalled ----------------


def test_llamaindex_example_on_the_recorded_local_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = load_example("llamaindex_agent")
    db = tmp_path / "agent.kuzu"
    with VCR.use_cassette("llamaindex_agent.yaml") as cassette:
        assert asyncio.run(example.main(["--local", "--db", str(db)])) == 0
    out = capsys.readouterr().out
    assert "(a real local model; the application calls Ebb)" in out
    assert RECORDING or cassette.all_played  # every recorded exchange was asked for again
    bodies = shown(cassette)
    assert len(bodies) == 4  # one model call per user turn, three turns then one
    question = bodies[-1]
    # Session 2 starts a fresh chat: the model sees only the question and what Ebb recalled.
    assert [m["role"] for m in question["messages"]] == ["system", "user"]
    memory = system_text(question)
    assert "- Acme renews its contract on March 14." in memory
    assert "- Hi, I'm Dana and I look after the Acme account." in memory
    assert "March 14" in answers(cassette)[-1] or "Dana" in answers(cassette)[-1]

    day_1 = DAY_0 + timedelta(days=1)
    with Brain.open(db, namespace="example-agent", clock=FixedClock(day_1)) as brain:
        [fact] = brain.top(10, kinds=["fact"])
        assert fact.text == "Acme renews its contract on March 14."
        # Recalled for the question in session 2, and so reinforced then (a hit below the top one
        # has its read clock moved part of the way to now, the top hit all the way).
        assert fact.last_read_at is not None and DAY_0 < fact.last_read_at <= day_1
        messages = brain.top(50, kinds=["message"])
        # Only the user's messages are kept (roles=["user"]), each tagged with its session.
        assert {m.props["role"] for m in messages} == {"user"}
        dana = next(m for m in messages if m.text.startswith("Hi, I'm Dana"))
        assert dana.props["session_id"] == "session-1"
        assert dana.last_read_at is not None and DAY_0 < dana.last_read_at <= day_1


# --- MCP: the application calls ebb mcp's tools over stdio; the model answers ---------------


async def test_mcp_example_on_the_recorded_local_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = load_example("mcp_agent")
    db = tmp_path / "agent.kuzu"
    with VCR.use_cassette("mcp_agent.yaml") as cassette:
        assert await example.main(["--local", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "(a real local model; the application calls Ebb)" in out
    assert RECORDING or cassette.all_played  # every recorded exchange was asked for again
    bodies = shown(cassette)
    assert len(bodies) == 2
    assert system_text(bodies[0]).endswith("\n- Our contact at Acme is Dana Reyes.")
    assert system_text(bodies[1]).endswith("\n- The Acme renewal moved to June.")
    assert "March" not in json.dumps(bodies)
    first, second = answers(cassette)
    assert "Dana" in first
    assert "June" in second
    # What ebb mcp did, read back from the store it wrote (a third session would see this).
    assert (
        "-> recall(query='When is the Acme renewal?', k=1): ['fact:the-acme-renewal-moved-to-june']"
        in out
    )
    with Brain.open(db, namespace="mcp-agent", wait=10) as brain:
        dana = brain.get("fact:our-contact-at-acme-is-dana")
        june = brain.get("fact:the-acme-renewal-moved-to-june")
        march = brain.get("fact:the-acme-renewal-is-in-march")
        # Each recalled for a question, after it was written: reinforced then.
        assert dana.last_read_at is not None and dana.last_read_at > dana.created_at
        assert june.last_read_at is not None and june.last_read_at > june.created_at
        # Looked up with reinforce=False to be replaced, never returned for a question: its read
        # clock is still the one remember set.
        assert march.last_read_at == march.created_at
        hits = brain.recall("Acme renewal", k=2, reinforce=False)
        assert [h.id for h in hits] == [june.id, march.id]
        assert hits[1].why.superseded_by == [june.id]


def test_mcp_example_model_driven_loop_offline(capsys: pytest.CaptureFixture[str]) -> None:
    """The model-driven loop (the path a capable model takes) on the scripted fake, no HTTP."""
    example = load_example("mcp_agent")
    assert asyncio.run(example.main(["--offline"])) == 0
    out = capsys.readouterr().out
    assert "model: ScriptedFakeModel (a scripted FAKE" in out
    assert "supersedes=['fact:the-acme-renewal-is-in-march']" in out
    assert "assistant: From memory: Our contact at Acme is Dana Reyes." in out
    assert "assistant: From memory: The Acme renewal moved to June." in out


def test_cassettes_hold_no_secrets_and_are_small() -> None:
    cassettes = sorted(CASSETTES.glob("*.yaml"))
    assert {p.name for p in cassettes} >= {
        "langchain_agent.yaml",
        "llamaindex_agent.yaml",
        "mcp_agent.yaml",
    }
    for path in cassettes:
        text = path.read_text()
        assert "authorization" not in text.lower(), path
        assert "bearer" not in text.lower(), path
        assert path.stat().st_size < 40_000, (path, path.stat().st_size)


@pytest.mark.parametrize("name", ["langchain_agent", "llamaindex_agent", "mcp_agent"])
def test_local_flag_with_no_model_running_says_how_to_start_it(tmp_path: Path, name: str) -> None:
    """Nothing listens on the address: the example stops with what to do, not a traceback."""
    env = {k: v for k, v in os.environ.items() if k not in LLM_ENV}
    env["EBB_LOCAL_LLM_URL"] = "http://127.0.0.1:9/v1"  # the discard port: nothing answers
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / f"{name}.py"), "--local"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert "127.0.0.1:9/v1" in last and "did not answer" in last, done.stderr
    assert "scripts/local-llm start" in last
    assert "Traceback" not in done.stderr
