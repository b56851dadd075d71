"""The Kùzu store with its mirror off (``ebb_core.kuzu.mirror``): no in-process copy is kept,
so every answer comes from the table. The engine's and the store's tests run once more that
way: a copy that drifted from the table would show as a test passing with the mirror and
failing without it (or the reverse)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from ebb_core import Brain, FixedClock
from ebb_core.embeddings import FakeEmbedder
from ebb_core.kuzu_store import KuzuStore
from ebb_core.model import Tier

ROOT = Path(__file__).resolve().parents[1]


def test_a_store_with_the_mirror_off_keeps_no_copy(tmp_path: Path) -> None:
    answers = []
    for on in (True, False):
        clock = FixedClock(datetime(2026, 1, 1, tzinfo=timezone.utc))
        store = KuzuStore(tmp_path / f"m-{on}.kuzu", mirror=on)
        brain = Brain(store, namespace="m", clock=clock)
        for i in range(5):
            links = [f"n{i - 1}"] if i else []
            brain.remember(f"pricing note {i}", id=f"n{i}", links=links)
        brain.remember("pricing note 2, revised", id="n5", supersedes=["n2"])
        clock.advance(days=3)
        for _ in range(2):  # the second recall reads what the first one reinforced
            hits = brain.recall("pricing note", k=5)
            answers.append([(h.id, round(h.score, 9), len(h.why.live_links)) for h in hits])
        mirror = store._mirror
        assert mirror.enabled is on
        if not on:
            assert not mirror.rows.rows and not mirror.meta
            assert mirror.supersedes is None and mirror.text is None
        store.close()
    assert answers[:2] == answers[2:] and answers[0]


def test_the_vector_copy_is_the_mirrors(tmp_path: Path) -> None:
    """The unindexed vectors are searched from the mirror's copy, written through and dropped
    with the other copies; with the mirror off none is kept and the answers are the same."""
    fake = FakeEmbedder(16)
    texts = [f"note {i} about item{i} and colour{7 * i} in shelf{i % 3}" for i in range(8)]
    q = fake.embed_query(texts[5])
    answers = []
    for on in (True, False):
        store = KuzuStore(tmp_path / f"v-{on}.kuzu", mirror=on)
        brain = Brain(store, namespace="v", embedder=fake)
        for i, text in enumerate(texts):
            brain.remember(text, id=f"n{i}")
        got = [(m.id, round(s, 4)) for m, s in store.vector_matches("v", q, 4, Tier.COLD)]
        assert ("v" in store._mirror.vectors) is on
        store.put_vectors("v", ["n1"], fake.embed_documents([texts[5]]))
        if on:  # written through: the copy holds the new vector
            assert len(store._mirror.vectors["v"]) == 8
        got += [(m.id, round(s, 4)) for m, s in store.vector_matches("v", q, 4, Tier.COLD)]
        store.delete_vectors("v", ["n5"])
        got += [(m.id, round(s, 4)) for m, s in store.vector_matches("v", q, 4, Tier.COLD)]
        assert store.vector_tail_count("v") == 7
        store._mirror.invalidate()
        assert not store._mirror.vectors
        if not on:
            assert not store._mirror.rows.rows and not store._mirror.meta
        answers.append(got)
        brain.close()
    assert answers[0] == answers[1] and answers[0][4][0] == "n1"


def test_the_mirror_is_turned_off_by_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EBB_KUZU_MIRROR", "0")
    store = KuzuStore(tmp_path / "env.kuzu")
    assert store._mirror.enabled is False
    store.close()


def test_engine_and_store_tests_pass_with_the_mirror_off() -> None:
    env = {**os.environ, "EBB_KUZU_MIRROR": "0"}
    env.pop("EBB_TEST_NEO4J_URI", None)  # the mirror is the Kùzu store's: Neo4j runs once
    files = ["tests/test_engine.py", "tests/test_kuzu_store.py"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *files],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
