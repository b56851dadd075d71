"""The offline bulk path (``ebb neo4j-bulk``, :mod:`ebb_core.neo4j.offline`) against real servers.

The same export is loaded both ways: ``Brain.import_`` through Bolt into the test server, and
``ebb neo4j-bulk prepare`` + ``neo4j-admin database import full`` (the harness's own 5.26 jars,
``scripts/neo4j-test-server admin``) + ``ebb neo4j-bulk finish`` into a throwaway server of its
own. Every node and relationship, with each property's value and type, the export and the
recall answers must be the same; and neo4j-admin must refuse the database once it exists.
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from ebb_core import Brain, FixedClock, InvalidInput
from ebb_core.kuzu_store import KuzuStore
from ebb_core.neo4j import Neo4jStore, hubs
from ebb_core.neo4j.offline import prepare
from ebb_core.testing._base import populate, small_namespace
from test_neo4j_failures import SCRIPT, Throwaway, free_port, run_cli

AT = datetime(2026, 6, 1, 12, tzinfo=timezone.utc)
QUERIES = ["harbor lantern", "ledger tide", "pricing outcome", "item3 item7", "quoted, comma"]


def _export(tmp_path: Path) -> Path:
    """A small export with what a CSV can get wrong: links, a replacement, tiers, a frozen
    memory with its reason, the audit log, several namespaces, and text with commas, quotes,
    line breaks and non-ASCII letters."""
    clock = FixedClock(datetime(2026, 1, 1, tzinfo=timezone.utc))
    brain = Brain(KuzuStore(tmp_path / "kuzu"), namespace="alpha", clock=clock, embedder=False)
    populate(brain)
    other = brain.scoped("beta")
    small_namespace(other, clock)
    other.remember(
        'a "quoted, comma" text\nover two lines, naïve café ünïcode',
        id="note:odd",
        props={"why": 'a "quote", a comma\nand a line', "n": 3},
        links=["note:lantern-1"],
    )
    other.connect("note:odd", "fact:tides", kind="about", weight=2.5)
    # a hub (more links than hubs.HUB_LINKS): prepare finds it, finish makes its list
    other.remember("the hub of the harbor", id="note:hub")
    for i in range(hubs.HUB_LINKS + 4):
        other.remember(f"harbor leaf {i}", id=f"note:leaf{i}", links=["note:hub"])
    path = tmp_path / "export.jsonl"
    brain.export(path, all_namespaces=True)
    brain.close()
    return path


def _graph(uri: str) -> tuple[list[Any], list[Any]]:
    """Every node and relationship with each property as ``(type, value)``."""
    import neo4j

    def typed(props: dict[str, Any]) -> list[tuple[str, str, Any]]:
        # a hub's list names its links by element id, which differs between two databases
        props = {k: len(v) if k == "hub_links" else v for k, v in props.items()}
        return sorted((k, type(v).__name__, v) for k, v in props.items())

    with neo4j.GraphDatabase.driver(uri) as driver:
        nodes = driver.execute_query("MATCH (n) RETURN labels(n) AS l, properties(n) AS p").records
        rels = driver.execute_query(
            "MATCH (a)-[e]->(b) RETURN a.ns AS ns, a.id AS a, b.id AS b, type(e) AS t, "
            "properties(e) AS p"
        ).records
    return (
        sorted((r["l"], typed(r["p"])) for r in nodes),
        sorted((r["ns"], r["a"], r["b"], r["t"], typed(r["p"])) for r in rels),
    )


def _schema(uri: str) -> list[Any]:
    """Every index and constraint Ebb made (name, type, what it covers, its options), but the
    vector ones: those are made by the first embedding (``ensure_vectors``), never by an import
    without vectors (``prepare`` refuses vectors), and the shared test server keeps the ones
    earlier tests made."""
    import neo4j

    with neo4j.GraphDatabase.driver(uri) as driver:
        rows = driver.execute_query(
            "SHOW INDEXES YIELD name, type, entityType, labelsOrTypes, properties, options, "
            "owningConstraint WHERE name STARTS WITH 'ebb_' "
            "AND NOT 'MemoryVector' IN labelsOrTypes RETURN *"
        ).records
    return sorted(
        (r["name"], r["type"], r["entityType"], r["labelsOrTypes"], r["properties"],
         r["options"]["indexConfig"].get("fulltext.analyzer"), r["owningConstraint"])
        for r in rows
    )  # fmt: skip


def _answers(uri: str, tmp_path: Path, name: str) -> tuple[str, list[Any]]:
    """The store's export and recall answers (ids, scores) in both namespaces, as of ``AT``."""
    brain = Brain(Neo4jStore(uri), namespace="alpha", clock=FixedClock(AT), embedder=False)
    try:
        path = tmp_path / f"{name}.jsonl"
        brain.export(path, all_namespaces=True)
        answers = [
            [(h.id, round(h.score, 12)) for h in b.recall(q, k=10, depth=2, reinforce=False)]
            for b in (brain, brain.scoped("beta"))
            for q in QUERIES
        ]
        return path.read_text(encoding="utf-8"), answers
    finally:
        brain.close()


def _admin(server: Throwaway, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), "admin", *args], env=server.env, capture_output=True, text=True
    )


def test_bulk_path_loads_what_import_loads(neo4j_uri: str, tmp_path: Path) -> None:
    export = _export(tmp_path)
    # Through Bolt, into the test server (a new store: its epoch is AT).
    brain = Brain(Neo4jStore(neo4j_uri), namespace="alpha", clock=FixedClock(AT), embedder=False)
    brain.import_(export)
    brain.close()
    graph_a, schema_a = _graph(neo4j_uri), _schema(neo4j_uri)
    export_a, answers_a = _answers(neo4j_uri, tmp_path, "a")

    # Offline: the CLI prepares, neo4j-admin imports, the CLI finishes.
    files = tmp_path / "csv"
    done = run_cli("neo4j-bulk", "prepare", str(export), str(files), "--at", AT.isoformat(), env={})
    assert done.returncode == 0, done.stderr
    command = done.stdout.strip().splitlines()[-1].split()
    assert command[:5] == ["neo4j-admin", "database", "import", "full", "neo4j"]
    manifest = json.loads((files / "manifest.json").read_text())
    assert manifest["multiline"] is True  # the line breaks were seen: parsed as such
    assert manifest["hubs"] == {"beta": ["note:hub"]}

    server = Throwaway(tmp_path / "state", EBB_NEO4J_PORT=str(free_port()), EBB_NEO4J_KEEP_DATA="1")
    imported = _admin(server, *command[1:])
    if imported.returncode != 0 and "java not found" in imported.stderr + imported.stdout:
        pytest.skip("no Java for neo4j-admin")
    assert imported.returncode == 0, imported.stdout[-2000:] + imported.stderr[-2000:]
    uri = server.start()
    try:
        done = run_cli("neo4j-bulk", "finish", str(files), "--json", env={"NEO4J_URI": uri})
        assert done.returncode == 0, done.stderr
        found = json.loads(done.stdout)
        assert {k: found[k] for k in ("memories", "links", "audit")} == {
            k: manifest[k] for k in ("memories", "links", "audit")
        }
        graph_b, schema_b = _graph(uri), _schema(uri)
        probe = Neo4jStore(uri)  # the hub's list, made by finish from the manifest
        try:
            hub = probe._read(
                "MATCH (s:Memory {id: 'note:hub'}) RETURN s.hub_deg AS deg, size(s.hub_links) AS n"
            )
        finally:
            probe.close()
        assert [dict(r) for r in hub] == [{"deg": hubs.HUB_LINKS + 4, "n": hubs.HUB_LINKS}]
        export_b, answers_b = _answers(uri, tmp_path, "b")
    finally:
        server.stop()

    assert graph_b == graph_a  # every node, link and property, with its type
    assert schema_b == schema_a and len(schema_a) >= 7  # the same indexes and constraints
    assert export_b == export_a
    assert answers_b == answers_a
    assert any(answers_a)

    # The database exists now: neo4j-admin refuses to import over it, and nothing changed.
    again = _admin(server, *command[1:])
    assert again.returncode != 0
    assert "overwrite-destination" in again.stdout + again.stderr
    uri = server.start()
    try:
        assert _graph(uri) == graph_a
    finally:
        server.stop()


def test_prepare_refuses_what_it_cannot_load(tmp_path: Path) -> None:
    export = tmp_path / "e.jsonl"
    export.write_text(
        json.dumps({"type": "ebb-export", "version": 1, "namespaces": ["x"]})
        + "\n"
        + json.dumps({"type": "edge", "namespace": "x", "src": "a", "dst": "b", "kind": "k"})
        + "\n"
    )
    with pytest.raises(InvalidInput, match="neither in the import"):
        prepare(export, tmp_path / "out")
    full = tmp_path / "full"
    full.mkdir()
    (full / "something").write_text("x")
    with pytest.raises(InvalidInput, match="not empty"):
        prepare(export, full)
    with_vectors = tmp_path / "v.jsonl"
    with_vectors.write_text(
        export.read_text().splitlines()[0]
        + '\n{"type": "vector", "namespace": "x", "id": "a", "model": "m", "vector": [1.0]}\n'
    )
    with pytest.raises(InvalidInput, match="carries vectors"):
        prepare(with_vectors, tmp_path / "out2")
