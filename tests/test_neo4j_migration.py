"""Lossless migration between backends: kuzu → neo4j → kuzu gives an identical export (ids, text,
props, timestamps, weights, tiers, pins, review queue and audit log), through ``Brain`` and
through ``ebb export`` / ``ebb import`` with ``EBB_BACKEND``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ebb_core import Brain, FixedClock, Tier
from ebb_core.cli import main
from ebb_core.kuzu_store import KuzuStore
from ebb_core.neo4j import Neo4jStore

pytestmark = pytest.mark.neo4j


def _rich_graph(brain: Brain, clock: FixedClock) -> None:
    """Everything an export carries, including awkward ids, props and every tier."""
    brain.remember(
        "Acme Corp, our largest client",
        kind="client",
        id="client:acme",
        props={"tier": "gold", "seats": 120, "tags": ["b2b", "eu"], "nested": {"ok": True}},
        pinned=True,
    )
    brain.remember("Maya runs product", kind="person", id="person:maya")
    brain.remember("Ünïcödé note ✓", id="note:ünï-✓")
    brain.remember("astral id", id="note:a\U0001f642")
    brain.remember("full-width id", id="note:a\uff01")
    clock.advance(days=10)
    brain.remember(
        "We bill Acme per resolved ticket",
        kind="decision",
        id="decision:outcome",
        links=["client:acme", "person:maya", "note:ünï-✓"],
        weight=2.5,
    )
    brain.connect("person:maya", "decision:outcome", kind="wrote", props={"pr": 42})
    brain.connect("note:a\U0001f642", "note:a\uff01", kind="mentions", weight=0.25)
    clock.advance(days=5)
    brain.remember("Old seat pricing notes", id="note:seats", links=["client:acme"])
    brain.remember("a note to delete", id="note:gone", links=["note:seats"])
    clock.advance(days=200)
    brain.recall("Acme ticket")
    brain.forget("note:gone", "noise")
    brain.approve_deletion(["note:gone"], approved_by="ana", note="ok")
    brain.maintain()  # archives what decayed: warm, cold and frozen tiers, audited
    brain.forget("note:seats", "superseded")
    brain.scoped("other space").remember("another namespace", id="note:o", props={"x": None})


def _export(brain: Brain) -> str:
    buf = io.StringIO()
    brain.export(buf, all_namespaces=True)
    return buf.getvalue()


def test_kuzu_to_neo4j_to_kuzu_is_identical(
    neo4j_uri: str, tmp_path: Path, clock: FixedClock
) -> None:
    source = Brain(KuzuStore(tmp_path / "source.kuzu"), namespace="test", clock=clock)
    _rich_graph(source, clock)
    first = _export(source)
    tiers = {json.loads(x).get("tier") for x in first.splitlines()[1:]}
    assert {1, 4} <= tiers  # hot and frozen (and whatever maintain archived)
    assert '"action": "delete"' in first and '"payload"' in first

    records = [json.loads(x)["type"] for x in first.splitlines()[1:]]
    expected = {t: records.count(t) for t in ("node", "edge", "audit")}

    on_neo4j = Brain(Neo4jStore(neo4j_uri), namespace="test", clock=clock)
    counts = on_neo4j.import_(io.StringIO(first))
    assert counts == {
        "nodes": expected["node"],
        "edges": expected["edge"],
        "audit": expected["audit"],
    }
    second = _export(on_neo4j)
    assert second == first

    back = Brain(KuzuStore(tmp_path / "back.kuzu"), namespace="test", clock=clock)
    back.import_(io.StringIO(second))
    assert _export(back) == first

    # Derived state agrees too: keys are recomputed on import, on each engine.
    for brain in (on_neo4j, back):
        for ns in ("test", "other space"):
            view, orig = brain.scoped(ns), source.scoped(ns)
            for batch in orig.store.scan_nodes(ns):
                for n in batch:
                    assert view.activation(n.id) == pytest.approx(orig.activation(n.id), rel=1e-9)
        assert [i.id for i in brain.review_queue()] == [i.id for i in source.review_queue()]
        assert brain.get("client:acme").pinned and brain.get("note:seats").tier is Tier.FROZEN
    for b in (source, on_neo4j, back):
        b.close()


def test_cli_export_import_across_backends(
    neo4j_uri: str, tmp_path: Path, clock: FixedClock
) -> None:
    """``ebb export`` from Kùzu, ``EBB_BACKEND=neo4j ebb import``/``export``, back to Kùzu."""
    with Brain(KuzuStore(tmp_path / "cli.kuzu"), namespace="test", clock=clock) as source:
        _rich_graph(source, clock)
    runner = CliRunner()
    kuzu_env = {"EBB_BACKEND": "kuzu"}
    neo_env = {"EBB_BACKEND": "neo4j", "NEO4J_URI": neo4j_uri}
    dumps = [tmp_path / f"dump{i}.jsonl" for i in range(3)]

    def ebb(env: dict[str, str], *args: str) -> str:
        result = runner.invoke(main, list(args), env=env)
        assert result.exit_code == 0, result.stderr
        return result.stdout

    ebb(kuzu_env, "--db", str(tmp_path / "cli.kuzu"), "export", "--all-namespaces", str(dumps[0]))
    assert "imported" in ebb(neo_env, "import", str(dumps[0]))
    ebb(neo_env, "export", "--all-namespaces", str(dumps[1]))
    ebb(kuzu_env, "--db", str(tmp_path / "again.kuzu"), "import", str(dumps[1]))
    ebb(kuzu_env, "--db", str(tmp_path / "again.kuzu"), "export", "--all-namespaces", str(dumps[2]))
    first = dumps[0].read_text()
    assert len(first.splitlines()) > 15
    assert dumps[1].read_text() == first
    assert dumps[2].read_text() == first


def test_plain_export_takes_the_arrow_path_and_round_trips(
    neo4j_uri: str, tmp_path: Path, clock: FixedClock
) -> None:
    """An export without props is read column-wise with Arrow: bulk_insert gets Arrow arrays."""
    source = Brain(KuzuStore(tmp_path / "plain.kuzu"), namespace="p", clock=clock)
    topics = ["apples", "rivers", "copper", "violins", "glaciers", "ledgers", "orchids"]
    for i in range(300):
        links = [f"note:n{j}" for j in (i // 2, i // 3) if j < i] if i else []
        text = f"plain note about {topics[i % 7]} and {topics[i % 5]}"
        source.remember(text, id=f"note:n{i}", links=links)
        clock.advance(minutes=37)
    first = _export(source)
    on_neo4j = Brain(Neo4jStore(neo4j_uri, batch_size=64), namespace="p", clock=clock)
    on_neo4j.import_(io.StringIO(first))
    assert _export(on_neo4j) == first
    copy = Brain(KuzuStore(tmp_path / "copy.kuzu"), namespace="p", clock=clock)
    copy.import_(io.StringIO(first))
    # (Queries without digits: Lucene indexes numbers, Kùzu's full-text index leaves them out.)
    for query in ("copper", "violins orchids", "plain glaciers"):
        hits = [h.id for h in on_neo4j.recall(query, k=5, reinforce=False)]
        assert hits == [h.id for h in copy.recall(query, k=5, reinforce=False)], query
    for b in (source, on_neo4j, copy):
        b.close()
