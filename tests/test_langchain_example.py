"""``examples/langchain_agent.py`` runs offline, as a user would run it, and does what it says."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from ebb_core import Brain, FixedClock

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "langchain_agent.py"
KEYS = ("OPENAI_API_KEY", "EBB_LLM_API_KEY", "OPENAI_BASE_URL", "EBB_LLM_BASE_URL")


def run_example(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in KEYS}
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_example_runs_offline_across_two_sessions(tmp_path: Path) -> None:
    db = tmp_path / "agent.kuzu"
    done = run_example("--db", str(db))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "model: ScriptedFakeChatModel (a scripted FAKE" in out
    session_2 = out.split("== session 2")[1]
    # Learned in session 1, used by a fresh agent in session 2.
    assert "assistant: From memory: Our contact at Acme is Dana Reyes." in session_2
    # The newer fact wins over the one it superseded.
    assert "assistant: From memory: The Acme renewal moved to June." in session_2
    ranking = out.split('== What Ebb ranks for "Acme renewal" now ==')[1].splitlines()
    assert ranking[1].startswith("1. fact:the-acme-renewal-moved-to-june")
    assert ranking[4].startswith("2. fact:the-acme-renewal-is-in-march")

    # The memory is really on disk: reopen it the way a third session would.
    day_45 = datetime(2026, 1, 5, 9, tzinfo=timezone.utc) + timedelta(days=45)
    with Brain.open(db, namespace="example-agent", clock=FixedClock(day_45)) as brain:
        dana = brain.get("fact:our-contact-at-acme-is-dana")
        assert dana.created_at == datetime(2026, 1, 5, 9, tzinfo=timezone.utc)
        hits = brain.recall("Acme renewal", k=2, reinforce=False)
        assert [h.id for h in hits] == [
            "fact:the-acme-renewal-moved-to-june",
            "fact:the-acme-renewal-is-in-march",
        ]
        # June ranks first because it replaced March, which is kept and says so
        assert hits[1].why.superseded_by == ["fact:the-acme-renewal-moved-to-june"]


def test_offline_flag_wins_over_a_key(tmp_path: Path) -> None:
    done = run_example("--offline", OPENAI_API_KEY="not-a-real-key")
    assert done.returncode == 0, done.stderr
    assert "ScriptedFakeChatModel" in done.stdout
    assert "From memory: The Acme renewal moved to June." in done.stdout
