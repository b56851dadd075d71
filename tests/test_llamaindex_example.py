"""The LlamaIndex example agent runs offline, on its scripted fake model, across two sessions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ebb_core import Brain

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llamaindex_agent.py"


@pytest.mark.slow
def test_example_learns_in_one_session_and_answers_in_the_next(tmp_path: Path) -> None:
    db = tmp_path / "ebb.kuzu"
    env = {k: v for k, v in os.environ.items() if k not in ("EBB_LLM_API_KEY", "OPENAI_API_KEY")}
    env["EBB_BACKEND"] = "kuzu"

    run = subprocess.run(
        [sys.executable, str(EXAMPLE), "--db", str(db)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "model: ScriptedFakeLLM" in out
    session2 = [line for line in out.splitlines() if line.startswith("[session-2] agent:")]
    assert len(session2) == 1
    assert "March 14" in session2[0] and "Dana" in session2[0]
    assert "[session-2]   tool recall(" in out

    with Brain.open(db, backend="kuzu", namespace="example-agent") as brain:
        [fact] = brain.top(10, kinds=["fact"])
        assert fact.text == "Acme renews its contract on March 14."
        messages = {n.text: n for n in brain.top(50, kinds=["message"])}
        dana = messages["Hi, I'm Dana and I look after the Acme account."]
        # the session's transcript: message:<session>:<n>, as LangChain's history writes it
        assert dana.props == {"role": "user", "session_id": "session-1", "index": 0}
        assert dana.id == "message:session-1:000000"
        [reply] = brain.neighbors(dana.id)
        assert (reply.edge.kind, reply.edge.dst) == ("follows", dana.id)
        mentions = {n.edge.src for n in brain.neighbors(fact.id) if n.edge.kind == "mentions"}
        assert messages["Please remember: Acme renews its contract on March 14."].id in mentions
