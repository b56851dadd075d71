"""What only the Neo4j backend has: server schema, Lucene escaping, explicit transactions shared by
store calls (and isolated between threads), batched server-side scoring equal to Kùzu's. What it
shares with every backend is in the contract suite (tests/test_store_contract.py).

Needs the Neo4j test server (``make test`` starts one); skipped without it, failed under CI.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ebb_core import Brain, FixedClock, InvalidInput, Tier
from ebb_core.errors import BackendUnavailable, StorageError
from ebb_core.kuzu_store import KuzuStore
from ebb_core.neo4j import SCHEMA_VERSION, TEXT_INDEX, Neo4jStore, lucene_query
from ebb_core.store import GraphStore

pytestmark = pytest.mark.neo4j


@pytest.fixture
def neo(neo4j_uri: str) -> Iterator[Neo4jStore]:
    s = Neo4jStore(neo4j_uri, retry_seconds=5.0)
    yield s
    s.close()


def _keys(brain: Brain) -> dict[str, tuple[float, float, int]]:
    return {
        n.id: (n.base_key, n.key, n.degree)
        for batch in brain.store.scan_nodes(brain.namespace)
        for n in batch
    }


def _workload(brain: Brain, clock: FixedClock) -> None:
    """A graph with a hub, parallel edges of two kinds, reads, a frozen and a deleted memory."""
    brain.remember("the hub of the garden notes", id="note:hub")
    for i in range(12):
        links = ["note:hub"] + ([f"note:g{i - 1}"] if i else [])
        brain.remember(f"garden note {i} about roses", id=f"note:g{i}", links=links, weight=1 + i)
        clock.advance(hours=13)
    brain.connect("note:g3", "note:g5", kind="mentions", weight=2.5)
    brain.connect("note:g5", "note:g3", kind="wrote")
    clock.advance(days=12)
    brain.recall("garden roses", k=4)
    brain.reinforce("note:g7", with_id="note:g6")
    brain.forget("note:g2", "superseded")
    brain.forget("note:g9")
    brain.approve_deletion(["note:g9"], approved_by="tester")
    clock.advance(days=40)


def test_schema_is_created_once_and_reopening_is_idempotent(neo4j_uri: str) -> None:
    first = Neo4jStore(neo4j_uri)
    first.close()
    again = Neo4jStore(neo4j_uri)
    try:
        assert again.get_meta("schema_version") == SCHEMA_VERSION
        import neo4j

        with neo4j.GraphDatabase.driver(neo4j_uri) as d:
            rows = d.execute_query(
                "SHOW INDEXES YIELD name, type, properties, owningConstraint "
                "WHERE name STARTS WITH 'ebb_' RETURN name, type, properties, owningConstraint"
            ).records
        found = {r["name"]: (r["type"], r["properties"], r["owningConstraint"]) for r in rows}
        assert found["ebb_memory_key"] == ("RANGE", ["ns", "id"], "ebb_memory_key")
        assert found["ebb_audit_key"] == ("RANGE", ["ns", "seq"], "ebb_audit_key")
        assert found["ebb_meta_key"] == ("RANGE", ["key"], "ebb_meta_key")
        assert found["ebb_memory_rank"] == ("RANGE", ["ns", "key"], None)
        assert found[TEXT_INDEX] == ("FULLTEXT", ["text"], None)
    finally:
        again.close()


def test_other_schema_version_is_refused(neo: Neo4jStore, neo4j_uri: str) -> None:
    neo.set_meta("schema_version", "0")
    with pytest.raises(BackendUnavailable, match=r"schema version '0'.*export"):
        Neo4jStore(neo4j_uri)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("acme pricing", "acme pricing"),
        ('o\'brien "quoted" (x) [y] {z}', 'o\'brien \\"quoted\\" \\(x\\) \\[y\\] \\{z\\}'),
        ("a+b -c !d ~e f* g? h:i j\\k l/m n^2 &&o ||p", None),
        ("AND OR NOT and", "and or not and"),
        ("   ", ""),
    ],
)
def test_lucene_query_escapes_every_operator(text: str, expected: str | None) -> None:
    escaped = lucene_query(text)
    if expected is not None:
        assert escaped == expected
    special = set('+-!(){}[]^"~*?:\\/&|')
    chars = iter(escaped)
    for ch in chars:  # every special character comes escaped
        if ch == "\\":
            assert next(chars) in special
        else:
            assert ch not in special, escaped
    assert not {"AND", "OR", "NOT"} & set(escaped.split())


def test_store_calls_join_the_open_transaction_and_roll_back(
    neo: Neo4jStore, clock: FixedClock
) -> None:
    brain = Brain(neo, namespace="t", clock=clock)
    brain.remember("anchor", id="note:a")
    seen_inside: list[bool] = []
    with pytest.raises(RuntimeError, match="boom"), neo.transaction():
        brain.remember("inside a failed transaction", id="note:b", links=["note:a"])
        with neo.transaction():  # nested: joins
            assert neo.get_nodes("t", ["note:b"])
        # another thread does not see the uncommitted write (it has its own transaction)
        other = threading.Thread(
            target=lambda: seen_inside.append(bool(neo.get_nodes("t", ["note:b"])))
        )
        other.start()
        other.join(30)
        raise RuntimeError("boom")
    assert seen_inside == [False]
    assert neo.get_nodes("t", ["note:b"]) == {}
    assert brain.get("note:a").degree == 0
    assert brain.stats().nodes == 1


@pytest.mark.parametrize("batch_size", [3, 10_000])
def test_server_side_scoring_equals_kuzu(
    neo4j_uri: str, tmp_path: Path, clock: FixedClock, batch_size: int
) -> None:
    """Same events, same clock: keys, tiers, rankings, review queue and audit log agree."""
    from datetime import datetime, timezone

    results: dict[str, dict[str, Any]] = {}
    for name in ("kuzu", "neo4j"):
        store: GraphStore = (
            KuzuStore(tmp_path / "k.kuzu")
            if name == "kuzu"
            else Neo4jStore(neo4j_uri, batch_size=batch_size)
        )
        c = FixedClock(datetime(2026, 1, 1, tzinfo=timezone.utc))
        brain = Brain(store, namespace="same", clock=c)
        _workload(brain, c)
        incremental = _keys(brain)
        report = brain.maintain()
        results[name] = {
            "incremental": incremental,
            "exact": _keys(brain),
            "moved": report.moved,
            "queued": report.newly_queued,
            "tiers": {n.id: n.tier for b in store.scan_nodes("same") for n in b},
            "top": [n.id for n in brain.top(20)],
            "recall": [h.id for h in brain.recall("garden roses", k=6, reinforce=False)],
            "review": [(r.id, r.reason) for r in brain.review_queue()],
            "audit": [e.model_dump() for e in brain.audit_log(1000)],
            "reference": brain.store.reference_key("same", 0.99),
        }
        store.close()
    k, n = results["kuzu"], results["neo4j"]
    for part in ("incremental", "exact"):
        assert k[part].keys() == n[part].keys()
        for i, (b, key, d) in k[part].items():
            assert n[part][i][0] == pytest.approx(b, rel=1e-9), (part, i)
            assert n[part][i][1] == pytest.approx(key, rel=1e-9), (part, i)
            assert n[part][i][2] == d, (part, i)
    for part in ("moved", "queued", "tiers", "top", "recall", "review", "audit"):
        assert n[part] == k[part], part
    assert n["reference"][1] == k["reference"][1]
    assert n["reference"][0] == pytest.approx(k["reference"][0], rel=1e-9)
    assert k["tiers"]["note:g2"] is Tier.FROZEN


@pytest.mark.parametrize("writers", [1, 2])
def test_maintain_outside_a_transaction_is_batched(
    neo4j_uri: str, clock: FixedClock, writers: int
) -> None:
    """recompute_keys in auto-commit batches of 2 (one at a time, or two at once: ``IN 2
    CONCURRENT TRANSACTIONS``) and inside one transaction agree."""
    batched = Neo4jStore(neo4j_uri, batch_size=2)
    batched.scoring_writers = writers
    brain = Brain(batched, namespace="b", clock=clock)
    _workload(brain, clock)
    brain.maintain()
    outside = _keys(brain)
    cfg = brain.config
    with batched.transaction():
        epoch = int(batched.get_meta("epoch_us") or 0)
        n = batched.recompute_keys("b", epoch, cfg.half_life_us, cfg.read_bonus, cfg.spread)
    assert n == len(outside)
    for i, (b, k, d) in _keys(brain).items():
        assert b == pytest.approx(outside[i][0], rel=1e-12), i
        assert k == pytest.approx(outside[i][1], rel=1e-12), i
        assert d == outside[i][2], i
    with pytest.raises(InvalidInput, match="'default', 'pagerank'"):
        batched.recompute_keys("b", epoch, cfg.half_life_us, 1.0, 0.1, spreading="louvain")
    batched.close()


def test_rescore_leaves_a_memory_changed_since_its_read_alone(
    neo4j_uri: str, clock: FixedClock
) -> None:
    """The re-score writes a memory's new scores only where its stored ones are still those it
    read (pages of 2 memories, writes of 2): one adjusted in between (another process's event)
    keeps its own value, every other stale one is rewritten, and the numbers are those of
    ``scoring.graph_keys`` (the Kùzu store's code) on the columns read."""
    from ebb_core import scoring
    from ebb_core.neo4j.columns import read_score_columns, write_changed_keys
    from ebb_core.store import Adjustment

    store = Neo4jStore(neo4j_uri, batch_size=2)
    brain = Brain(store, namespace="cas", clock=clock)
    _workload(brain, clock)
    brain.maintain()
    exact = _keys(brain)
    store.scale_keys(2.0)  # every stored score stale
    cfg = brain.config
    epoch = int(store.get_meta("epoch_us") or 0)
    cols = read_score_columns(store, "cas")
    assert cols is not None and sorted(cols.ids) == sorted(exact)
    assert len(cols.src) == store.counts("cas").edges
    base, key, degree = scoring.graph_keys(
        len(cols.ids), cols.src, cols.dst, cols.weight, cols.reinforced_us, cols.read_us,
        cols.has_read, epoch, cfg.half_life_us, cfg.read_bonus, cfg.spread,
    )  # fmt: skip
    victim = "note:g4"
    store.adjust("cas", {victim: Adjustment(key_delta=1.0)})
    assert write_changed_keys(store, "cas", cols, base, key, degree) == len(cols.ids)
    after = _keys(brain)
    assert after[victim][1] == pytest.approx(2 * exact[victim][1] + 1.0, rel=1e-12)
    for row, i in enumerate(cols.ids):
        if i != victim:
            assert after[i] == (float(base[row]), float(key[row]), int(degree[row])), i
            assert after[i][1] == pytest.approx(exact[i][1], rel=1e-12), i
    store.close()


@pytest.mark.parametrize("matched", [False, True], ids=["ends-matched-here", "ends-given"])
def test_bulk_insert_links_new_memories_and_stored_ones_in_each_namespace(
    neo: Neo4jStore, matched: bool
) -> None:
    """Links between memories of the same call go by element id, the rest by (ns, id): one id
    in two namespaces must link within its own namespace either way, whether the store matches
    the ends itself or takes the caller's ``ends`` (rows among the nodes, null outside)."""
    import pyarrow as pa

    us = 1_767_225_600_000_000

    def nodes(ns: list[str], ids: list[str]) -> dict[str, list[Any]]:
        n = len(ids)
        return {
            "namespace": ns,
            "id": ids,
            "kind": ["note"] * n,
            "text": [f"text {i}" for i in ids],
            "props": ["{}"] * n,
            "created_us": [us] * n,
            "updated_us": [us] * n,
            "last_read_us": [None] * n,
            "pinned": [False] * n,
            "tier": [2] * n,
            "review_reason": [None] * n,
            "queued_us": [None] * n,
        }

    def edges(rows: list[tuple[str, str, str, float]]) -> dict[str, list[Any]]:
        return {
            "namespace": [r[0] for r in rows],
            "src": [r[1] for r in rows],
            "dst": [r[2] for r in rows],
            "kind": ["related"] * len(rows),
            "weight": [r[3] for r in rows],
            "created_us": [us] * len(rows),
            "reinforced_us": [us] * len(rows),
            "props": ["{}"] * len(rows),
        }

    neo.bulk_insert(nodes(["x", "y"], ["note:old", "note:old"]), edges([]))
    ends = (pa.array([0, 2, None], pa.int32()), pa.array([1, None, 0], pa.int32()))
    neo.bulk_insert(
        nodes(["x", "x", "y"], ["note:a", "note:b", "note:a"]),
        edges(
            [
                ("x", "note:a", "note:b", 1.0),  # both new
                ("y", "note:a", "note:old", 2.0),  # new to stored
                ("x", "note:old", "note:a", 3.0),  # stored to new
            ]
        ),
        ends=ends if matched else None,
    )
    got = {(ns, e.src, e.dst): e.weight for ns in ("x", "y") for b in neo.scan_edges(ns) for e in b}
    assert got == {
        ("x", "note:a", "note:b"): 1.0,
        ("y", "note:a", "note:old"): 2.0,
        ("x", "note:old", "note:a"): 3.0,
    }
    assert neo.counts("x").edges == 2 and neo.counts("y").edges == 1


def test_from_env_reads_the_connection_settings(
    neo4j_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEO4J_URI", neo4j_uri)
    monkeypatch.setenv("NEO4J_DATABASE", "neo4j")
    monkeypatch.setenv("NEO4J_USER", "anyone")
    monkeypatch.setenv("NEO4J_PASSWORD", "anything")  # auth is off on the test server
    monkeypatch.setenv("EBB_BACKEND", "neo4j")
    with Brain.open(namespace="env") as brain:
        assert brain.store.backend == "neo4j"
        assert brain.stats().location == f"{neo4j_uri} (database neo4j)"
    monkeypatch.setenv("EBB_NEO4J_RETRY_SECONDS", "soon")
    with pytest.raises(InvalidInput, match="EBB_NEO4J_RETRY_SECONDS"):
        Neo4jStore.from_env()


def test_old_import_path_still_works_with_a_deprecation_warning() -> None:
    import ebb_core.neo4j as current

    with pytest.warns(DeprecationWarning, match=r"from ebb_core\.neo4j import Neo4jStore"):
        from ebb_core.neo4j_store import Neo4jStore as Old
    assert Old is current.Neo4jStore
    with pytest.warns(DeprecationWarning, match="lucene_query"):
        from ebb_core.neo4j_store import lucene_query as old_query
    assert old_query is current.lucene_query
    with pytest.raises(ImportError):
        from ebb_core.neo4j_store import Brain  # noqa: F401


def test_a_memory_created_meanwhile_is_refused_as_bad_input(
    neo: Neo4jStore, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check before the write cannot see another writer's memory created just after it:
    the (ns, id) key constraint refuses it, and that too comes out as bad input naming it."""
    import ebb_core.neo4j.store as neo4j_store

    brain = Brain(neo, namespace="a", clock=clock)
    node = brain.remember("only once", id="note:x")
    monkeypatch.setattr(neo4j_store, "refuse_existing", lambda store, nodes: None)  # the race
    with pytest.raises(InvalidInput, match=r"memory 'note:x' already exists.*another writer"):
        neo.insert_nodes([node.model_copy(update={"text": "second"})])
    assert brain.get("note:x").text == "only once"
    assert brain.stats().nodes == 1


def _graph_file(path: Path, n: int) -> Path:
    """``n`` memories, each linked to the one before it and to its half (an import file)."""
    lines = [json.dumps({"type": "ebb-export", "version": 1})]
    lines += [
        json.dumps({"type": "node", "id": f"m{i}", "text": f"memory {i} about word{i % 97}"})
        for i in range(n)
    ]
    for i in range(1, n):
        for j in {i - 1, i // 2}:  # one link for m1 and m2, two for the others
            lines.append(
                json.dumps({"type": "edge", "src": f"m{i}", "dst": f"m{j}", "weight": 2.0})
            )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_an_import_committed_in_batches_equals_one_in_a_single_batch(
    neo4j_uri: str, tmp_path: Path, clock: FixedClock
) -> None:
    """An import into an empty namespace commits batch by batch (7 rows a transaction here, two
    transactions at once): the same memories, links and keys as one written in a single batch,
    and no marker left."""
    data = _graph_file(tmp_path / "g.jsonl", 60)
    small = Neo4jStore(neo4j_uri, batch_size=7)
    small.import_writers = 2  # nine batches of memories, seventeen of links, two at once
    big = Neo4jStore(neo4j_uri)
    try:
        assert Brain(small, namespace="a", clock=clock).import_(data) == Brain(
            big, namespace="b", clock=clock
        ).import_(data)
        assert small.unfinished_imports() == []
        for s in (small, big):
            assert not s._read("MATCH (m:Meta) WHERE m.key STARTS WITH 'import:' RETURN m")
        got = {ns: Brain(big, namespace=ns, clock=clock) for ns in ("a", "b")}
        assert _keys(got["a"]) == _keys(got["b"]) and len(_keys(got["a"])) == 60
        assert big.counts("a") == big.counts("b") and big.counts("a").edges == 2 * 59 - 2
    finally:
        small.close()
        big.close()


@pytest.mark.parametrize("writers", [1, 2])
@pytest.mark.parametrize("fails", ["write_links", "create_nodes"])
def test_a_failed_batched_import_removes_what_it_committed(
    neo4j_uri: str,
    tmp_path: Path,
    clock: FixedClock,
    monkeypatch: pytest.MonkeyPatch,
    writers: int,
    fails: str,
) -> None:
    """The third batch of memories or of links fails: the batches committed before it (and,
    with two writers, the one running beside it) are deleted again, the marker with them."""
    import ebb_core.neo4j.bulk as bulk

    data = _graph_file(tmp_path / "g.jsonl", 40)
    real, calls = getattr(bulk, fails), []

    def failing(*args: Any) -> Any:
        calls.append(1)
        if len(calls) == 3:
            raise BackendUnavailable("the server went away (test)")
        return real(*args)

    monkeypatch.setattr(bulk, fails, failing)
    store = Neo4jStore(neo4j_uri, batch_size=5)
    store.import_writers = writers
    try:
        Brain(store, namespace="kept", clock=clock).remember("stays", id="note:kept")
        with pytest.raises(BackendUnavailable, match="went away"):
            Brain(store, namespace="big", clock=clock).import_(data)
        # Batches committed before the failure (one at most began beside it), then undone.
        assert 3 <= len(calls) <= 2 + writers
        assert store.counts("big").nodes == 0 and store.counts("big").edges == 0
        assert store.unfinished_imports() == []
        assert store.counts("kept").nodes == 1
    finally:
        store.close()


def test_a_killed_import_is_reported_at_open_and_can_be_discarded(
    neo4j_uri: str, tmp_path: Path, clock: FixedClock
) -> None:
    """SIGKILL in the middle of a batched import: the committed batches stay, with a marker
    whose counts match them exactly; opening the store warns with what is there and how to
    remove it; ``discard_import`` removes it and the file imports again."""
    import os
    import subprocess
    import sys
    import time

    from ebb_core.errors import ImportInterrupted

    data = _graph_file(tmp_path / "g.jsonl", 3000)
    code = (
        "import sys; from ebb_core import Brain; from ebb_core.neo4j import Neo4jStore; "
        "Brain(Neo4jStore(sys.argv[1], batch_size=20), namespace='big').import_(sys.argv[2])"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, neo4j_uri, str(data)], env=os.environ)
    watch = Neo4jStore(neo4j_uri)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            seen = watch.unfinished_imports()
            if seen and seen[0]["memories_committed"] >= 100:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the import ended before it could be killed"
        proc.kill()
        proc.wait()
    finally:
        watch.close()
    with pytest.warns(ImportInterrupted, match=r"'big' started at .* of its 3,000 memories"):
        store = Neo4jStore(neo4j_uri)
    try:
        (info,) = store.unfinished_imports()
        assert info["namespaces"] == ["big"] and info["memories"] == 3000
        assert 100 <= info["memories_committed"] <= 3000
        counts = store.counts("big")
        assert (counts.nodes, counts.edges) == (info["memories_committed"], info["links_committed"])
        assert store.discard_import(info["marker"]) == info["memories_committed"]
        assert store.unfinished_imports() == [] and store.counts("big").nodes == 0
        with pytest.raises(InvalidInput, match="no unfinished import"):
            store.discard_import(info["marker"])
        assert Brain(store, namespace="big", clock=clock).import_(data)["nodes"] == 3000
        assert store.counts("big").edges == 2 * 2999 - 2
    finally:
        store.close()


def test_existing_ids_of_many_ids_looks_at_the_namespace_first(
    neo4j_uri: str, clock: FixedClock
) -> None:
    """More ids than a batch: an empty namespace answers at once, one with memories is still
    searched id by id (and another namespace's memories never count)."""
    store = Neo4jStore(neo4j_uri, batch_size=2)
    try:
        Brain(store, namespace="full", clock=clock).remember("here", id="note:b")
        ids = ["note:a", "note:b", "note:c"]
        assert store.existing_ids("empty", ids) == set()
        assert store.existing_ids("full", ids) == {"note:b"}
        Brain(store, namespace="empty", clock=clock).remember("now here", id="note:c")
        assert store.existing_ids("empty", ids) == {"note:c"}
    finally:
        store.close()


def _maintain_state(store: Neo4jStore, ns: str) -> dict[str, Any]:
    """Tiers, keys and the maintain audit entries of ``ns`` (namespace left out)."""
    audit = [
        {k: v for k, v in e.model_dump().items() if k != "namespace"}
        for e in store.audit_log(ns, limit=10_000)
        if e.actor == "maintain"
    ]
    tiers = {n.id: n.tier for b in store.scan_nodes(ns) for n in b}
    return {"tiers": tiers, "audit": audit}


def _moving_namespace(store: Neo4jStore, ns: str, clock: FixedClock) -> Brain:
    """40 memories written days apart, a few read since: a first maintain moves most of them."""
    brain = Brain(store, namespace=ns, clock=clock)
    for i in range(40):
        links = [f"note:{i - 1}"] if i else []
        brain.remember(f"note {i} about word{i % 7}", id=f"note:{i}", links=links)
        clock.advance(days=3)
    brain.recall("word3", k=3)
    return brain


def test_maintain_commits_tier_moves_in_batches_like_one_transaction(
    neo4j_uri: str, tmp_path: Path
) -> None:
    """Tier moves and their audit entries in transactions of 4 rows: the same tiers, report
    and audit log as all of them in one transaction."""
    from datetime import datetime, timezone

    small = Neo4jStore(neo4j_uri, batch_size=4)
    one = Neo4jStore(neo4j_uri)
    try:
        assert small.tier_moves_per_transaction == 4
        reports = {}
        for ns, store in (("small", small), ("one", one)):
            clock = FixedClock(datetime(2026, 1, 1, tzinfo=timezone.utc))
            reports[ns] = _moving_namespace(store, ns, clock).maintain()
        moved = sum(reports["small"].moved.values())
        assert moved > 3 * 4, reports["small"].moved  # several batches
        assert reports["small"].model_dump(exclude={"namespace"}) == reports["one"].model_dump(
            exclude={"namespace"}
        )
        assert _maintain_state(small, "small") == _maintain_state(one, "one")
        assert len(_maintain_state(small, "small")["audit"]) == moved
    finally:
        small.close()
        one.close()


def test_a_maintain_cut_short_between_batches_leaves_whole_moves_and_the_next_finishes(
    neo4j_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The third batch of tier moves fails: each memory is moved and audited, or untouched;
    the next maintain moves the rest, and the end state equals an uninterrupted run."""
    from datetime import datetime, timezone

    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    store = Neo4jStore(neo4j_uri, batch_size=4)
    try:
        reference = _moving_namespace(store, "whole", FixedClock(start))
        reference.maintain()
        want = _maintain_state(store, "whole")

        brain = _moving_namespace(store, "cut", FixedClock(start))
        before = {n.id: n.tier for b in store.scan_nodes("cut") for n in b}
        real, calls = store.set_tiers, []

        def failing(*args: Any) -> None:
            calls.append(1)
            if len(calls) == 3:
                raise BackendUnavailable("the server went away (test)")
            real(*args)

        monkeypatch.setattr(store, "set_tiers", failing)
        with pytest.raises(BackendUnavailable, match="went away"):
            brain.maintain()
        monkeypatch.undo()
        half = _maintain_state(store, "cut")
        audited = {e["node_id"]: e for e in half["audit"]}
        assert len(audited) == len(half["audit"]) == 2 * 4  # two whole batches committed
        for i, tier in half["tiers"].items():
            if i in audited:
                assert audited[i]["from_tier"] == before[i] and audited[i]["to_tier"] == tier
                assert tier == want["tiers"][i]
            else:
                assert tier == before[i], i
        brain.maintain()
        done = _maintain_state(store, "cut")
        assert done["tiers"] == want["tiers"]
        moves = {(e["node_id"], e["from_tier"], e["to_tier"]) for e in done["audit"]}
        assert moves == {(e["node_id"], e["from_tier"], e["to_tier"]) for e in want["audit"]}
        assert len(done["audit"]) == len(want["audit"])
    finally:
        store.close()


def test_a_transient_error_the_retries_do_not_get_past_becomes_a_storage_error(
    neo4j_uri: str, clock: FixedClock
) -> None:
    """The server's transaction-memory error (the driver's own TransientError for that code),
    after the driver's retries and inside an explicit transaction, reaches the caller as
    ``StorageError`` naming what failed and what to do, never as a raw driver exception."""
    from neo4j.exceptions import Neo4jError

    store = Neo4jStore(neo4j_uri, retry_seconds=1.0, batch_size=500)
    memory = Neo4jError._hydrate_neo4j(
        code="Neo.TransientError.General.MemoryPoolOutOfMemoryError",
        message="The allocation of an extra 2.0 MiB would use more than the limit 716.8 MiB.",
    )
    other = Neo4jError._hydrate_neo4j(
        code="Neo.TransientError.Transaction.DeadlockDetected", message="a deadlock"
    )

    def failing(error: Neo4jError) -> Any:
        def work(tx: Any) -> None:
            tx.run("MERGE (m:Meta {key: 'transient-test'})").consume()
            raise error

        return work

    try:
        with pytest.raises(StorageError) as caught:
            store._unit(failing(memory))  # the driver retries it for retry_seconds, then gives up
        message = str(caught.value)
        assert "ran out of transaction memory" in message
        assert "MemoryPoolOutOfMemoryError" in message and "rolled back" in message
        assert "dbms.memory.transaction.total.max" in message and "batch_size (now 500)" in message
        with (
            pytest.raises(StorageError, match=r"DeadlockDetected.*retry later"),
            store.transaction(),
        ):
            store._unit(failing(other))
        assert store.get_meta("transient-test") is None
        Brain(store, namespace="after", clock=clock).remember("still works", id="note:a")
        assert store.counts("after").nodes == 1
    finally:
        store.close()


def test_whole_namespace_queries_seek_the_namespace_and_answer_the_same(
    neo4j_uri: str, clock: FixedClock
) -> None:
    """``IN_NS`` (``n.ns = $ns AND n.id IS NOT NULL``) plans an index seek where ``n.ns = $ns``
    alone scans every memory, and gives the same answers."""
    from ebb_core.neo4j.queries import IN_NS

    store = Neo4jStore(neo4j_uri)
    try:
        for ns, n in (("one", 5), ("two", 3)):
            brain = Brain(store, namespace=ns, clock=clock)
            for i in range(n):
                brain.remember(f"memory {i}", id=f"note:{i}", pinned=i == 0)
        shapes = [
            "RETURN count(n) AS c",
            "RETURN sum(n.base_key) AS c",
            "AND n.pinned RETURN count(*) AS c",
            "RETURN n.tier AS t, count(*) AS c ORDER BY t",
        ]
        for tail in shapes:
            fast = f"MATCH (n:Memory) WHERE {IN_NS} {tail}"
            slow = f"MATCH (n:Memory) WHERE n.ns = $ns {tail}"
            with store._session() as session:
                plan = json.dumps(session.run("EXPLAIN " + fast, {"ns": "one"}).consume().plan)
                slow_plan = json.dumps(session.run("EXPLAIN " + slow, {"ns": "one"}).consume().plan)
            assert "NodeUniqueIndexSeek" in plan and "NodeByLabelScan" not in plan, tail
            assert "NodeByLabelScan" in slow_plan, tail  # what the predicate avoids
            for ns in ("one", "two", "none"):
                got = [r.data() for r in store._read(fast, {"ns": ns})]
                assert got == [r.data() for r in store._read(slow, {"ns": ns})], (tail, ns)
        assert store.counts("one").nodes == 5 and store.counts("two").nodes == 3
        assert store.counts("one").pinned == 1
    finally:
        store.close()


def test_every_supersession_of_a_namespace_is_found_by_the_link_kind_index(
    neo4j_uri: str, clock: FixedClock
) -> None:
    """``superseded_by(ns)`` seeks the ``ebb_link_kind`` relationship index instead of expanding
    every link of the namespace, and finds exactly the namespace's live supersessions."""
    store = Neo4jStore(neo4j_uri)
    try:
        for ns in ("one", "two"):
            brain = Brain(store, namespace=ns, clock=clock)
            brain.remember(f"old plan of {ns}", id="note:old")
            brain.remember(f"other {ns}", id="note:other", links=["note:old"])
            brain.remember(f"new plan of {ns}", id="note:new", supersedes=["note:old"])
        Brain(store, namespace="two", clock=clock).remember(
            "newest", id="note:newest", supersedes=["note:new", "note:old"]
        )
        asked: list[str] = []
        read = store._read

        def recording(query: str, params: Any = None) -> list[Any]:
            asked.append(query)
            return read(query, params)

        store._read = recording  # type: ignore[method-assign]
        assert store.superseded_by("one") == {"note:old": ["note:new"]}
        assert store.superseded_by("two") == {
            "note:new": ["note:newest"],
            "note:old": ["note:new", "note:newest"],
        }
        assert store.superseded_by("none") == {}
        with store._session() as session:
            plan = json.dumps(
                session.run("EXPLAIN " + asked[0], {"ns": "one", "k": "supersedes"}).consume().plan
            )
        assert "RelationshipIndexSeek" in plan and "Expand" not in plan, re.findall(
            r'"operatorType": "([^"]+)"', plan
        )
    finally:
        store.close()


def test_an_imported_link_without_props_stores_none_and_reads_back_empty(
    neo4j_uri: str, tmp_path: Path, clock: FixedClock
) -> None:
    """An import leaves an empty ``props`` off the link (one property less to write per link)
    and keeps a non-empty one; both read back as the file had them."""
    data = tmp_path / "g.jsonl"
    rows = [
        {"type": "ebb-export", "version": 1},
        {"type": "node", "id": "a", "text": "alpha"},
        {"type": "node", "id": "b", "text": "beta"},
        {"type": "edge", "src": "a", "dst": "b", "kind": "related"},
        {"type": "edge", "src": "b", "dst": "a", "kind": "cites", "props": {"page": 3}},
    ]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    store = Neo4jStore(neo4j_uri)
    try:
        Brain(store, namespace="p", clock=clock).import_(data)
        stored = {
            r["k"]: r["p"]
            for r in store._read("MATCH ()-[e:LINK]->() RETURN e.kind AS k, e.props AS p")
        }
        assert stored == {"related": None, "cites": '{"page": 3}'}
        plain, cited = (
            store.get_edge("p", "a", "b", "related"),
            store.get_edge("p", "b", "a", "cites"),
        )
        assert plain is not None and plain.props == {}
        assert cited is not None and cited.props == {"page": 3}
    finally:
        store.close()


def test_the_tier_reference_walks_the_key_index_in_order(neo4j_uri: str, clock: FixedClock) -> None:
    """``reference_key`` reads the ``(ns, key)`` index in key order (no sort of every memory)
    and answers as sorting would: the key at the quantile's rank among live, unpinned memories."""
    store = Neo4jStore(neo4j_uri)
    try:
        brain = Brain(store, namespace="r", clock=clock)
        for i in range(12):
            brain.remember(f"memory {i}", id=f"note:{i}", pinned=i == 0)
        Brain(store, namespace="other", clock=clock).remember("elsewhere", id="note:x")
        store._run("MATCH (n:Memory {ns: 'r'}) SET n.key = toFloat(toInteger(substring(n.id, 5)))")
        store._run("MATCH (n:Memory {ns: 'other'}) SET n.key = 100.0")
        # 11 live unpinned (keys 1..11); quantile 0.75 -> rank int(11 * 0.25) = 2 -> key 9
        assert store.reference_key("r", 0.75) == (9.0, 2)
        assert store.reference_key("r", 1.0) == (11.0, 0)
        assert store.reference_key("none", 0.75) == (0.0, 0)
        asked: list[str] = []
        run = store._unit

        def recording(work: Any, **kw: Any) -> Any:
            class Tx:
                def __init__(self, tx: Any) -> None:
                    self.tx = tx

                def run(self, query: str, params: Any = None) -> Any:
                    asked.append(query)
                    return self.tx.run(query, params)

            return run(lambda tx: work(Tx(tx)), **kw)

        store._unit = recording  # type: ignore[method-assign]
        store.reference_key("r", 0.75)
        with store._session() as session:
            plan = json.dumps(
                session.run("EXPLAIN " + asked[-1], {"ns": "r", "r": 2}).consume().plan
            )
        ops = re.findall(r'"operatorType": "([^"@]+)', plan)
        assert "NodeIndexSeek" in ops and "Top" not in ops and "Sort" not in ops, ops
    finally:
        store.close()


def test_recall_read_ahead_answers_as_the_plain_queries_in_fewer_round_trips(
    neo: Neo4jStore, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recall fetches its candidates' links, nodes and replacements with the text matches
    (prepare_recall); the hits and every part of their `why` are those the plain queries give
    (spreading over two hops, a replacement, a hub), in fewer reads (none more than
    the plain queries take)."""
    brain = Brain(neo, namespace="ahead", clock=clock)
    _workload(brain, clock)
    brain.remember("roses replaced by tulips in the garden", id="note:new", links=["note:g4"])
    brain.connect("note:new", "note:g4", kind="supersedes")
    live = [0, 1, 3, 4, 5, 6, 7, 8, 10, 11]  # g2 and g9 are gone
    for i in range(30):  # memories reached only by spreading (no shared word)
        brain.remember(f"unrelated text {i}", id=f"note:u{i}", links=[f"note:g{live[i % 10]}"])
    brain.maintain()
    reads: list[str] = []
    plain_read = Neo4jStore._read

    def counted(self: Neo4jStore, query: str, params: Any = None) -> list[Any]:
        reads.append(query)
        return plain_read(self, query, params)

    monkeypatch.setattr(Neo4jStore, "_read", counted)

    def hits(query: str) -> list[dict[str, Any]]:
        return [h.model_dump() for h in brain.recall(query, k=10, reinforce=False)]

    queries = ["garden roses", "hub notes", "tulips", "note 7 roses", "nothing matches zz"]
    ahead, fewer = {}, {}
    for q in queries:
        reads.clear()
        ahead[q] = hits(q)
        fewer[q] = len(reads)
    monkeypatch.setattr(Neo4jStore, "prepare_recall", lambda *a, **k: None)
    plain = {}
    for q in queries:
        reads.clear()
        assert hits(q) == ahead[q], q
        plain[q] = len(reads)
        assert fewer[q] <= plain[q], (q, fewer[q], plain[q])
    assert sum(fewer.values()) < sum(plain.values()) - len(queries), (fewer, plain)
    assert any(len(ahead[q]) == 10 for q in queries)
    assert any(h["why"]["spread_from"] for q in queries for h in ahead[q])


@pytest.mark.parametrize("eager", [False, True])
def test_an_incremental_rescore_equals_a_full_one_after_a_mix_of_writes(
    neo4j_uri: str, clock: FixedClock, monkeypatch: pytest.MonkeyPatch, eager: bool
) -> None:
    """After a full pass, maintain re-scores only the memories writes labelled (new ones,
    reinforced or re-linked ones, a deleted memory's neighbours) and their neighbours: the
    stored scores then equal what a full pass over every memory gives, and a pass with
    nothing labelled reads nothing and changes nothing."""
    from ebb_core import Config
    from ebb_core.neo4j import keys as neo4j_keys
    from ebb_core.neo4j.columns import read_score_columns as real
    from ebb_core.neo4j.rescore import MARK, WATERMARK

    store = Neo4jStore(neo4j_uri, batch_size=3)
    ns = f"inc-{eager}"
    brain = Brain(store, namespace=ns, clock=clock, config=Config(eager_spreading=eager))
    _workload(brain, clock)
    for i in range(8):  # a chain apart from the hub: what is not near a write keeps its keys
        links = [f"side:{i - 1}"] if i else []
        brain.remember(f"side chain link {i} word{i}", id=f"side:{i}", links=links)
    brain.maintain()  # full: no watermark yet
    assert store.get_meta(WATERMARK + ns) is not None
    brain.remember("a fresh garden note on the hub", id="note:new", links=["note:hub", "note:g8"])
    brain.remember("an unlinked note", id="note:alone")
    clock.advance(days=3)
    brain.recall("garden roses", k=5)
    brain.connect("note:g10", "note:g1", kind="mentions", weight=3.0)
    brain.reinforce("note:g11", with_id="note:g10")
    brain.forget("note:g6")
    brain.approve_deletion(["note:g6"], approved_by="tester")  # g5 and g7 lose a link
    assert [h.id for h in brain.recall("word2", k=1)] == ["side:2"]  # reinforced
    brain.forget("side:6")
    brain.approve_deletion(["side:6"], approved_by="tester")
    clock.advance(days=2)
    stale = _keys(brain)
    full_reads: list[tuple[Any, ...]] = []

    def counted(*a: Any) -> Any:
        full_reads.append(a)
        return real(*a)

    monkeypatch.setattr(neo4j_keys, "read_score_columns", counted)
    report = brain.maintain()
    assert full_reads == [] and report.scanned == len(stale)  # incremental
    incremental = _keys(brain)
    assert not store._read(f"MATCH (n:{MARK}) WHERE n.ns = $ns RETURN n.id", {"ns": ns})
    store._run("MATCH (m:Meta {key: $k}) DELETE m", {"k": WATERMARK + ns})
    cfg = brain.config
    epoch = int(store.get_meta("epoch_us") or 0)
    store.recompute_keys(ns, epoch, cfg.half_life_us, cfg.read_bonus, cfg.spread)
    assert len(full_reads) == 1  # full
    full = _keys(brain)
    assert incremental.keys() == full.keys()
    changed = [i for i in full if stale[i][1] != pytest.approx(full[i][1], rel=1e-9)]
    if not eager:  # eager spreading keeps neighbours exact at each event already
        assert {"note:new", "note:hub", "note:g5", "note:g7", "note:g10"} <= set(changed)
        assert {f"side:{i}" for i in (1, 3, 4)} <= set(changed), changed
    for uid, (b, k, d) in full.items():
        assert incremental[uid][0] == pytest.approx(b, rel=1e-12), uid
        assert incremental[uid][1] == pytest.approx(k, rel=1e-12), uid
        assert incremental[uid][2] == d, uid
    brain.maintain()  # nothing labelled: nothing read, nothing changed
    assert len(full_reads) == 1 and _keys(brain) == full
    store.close()


def test_a_fresh_import_keeps_its_keys_and_the_first_maintain_rescores_incrementally(
    neo4j_uri: str, tmp_path: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import into an empty namespace stores the keys it computed from the file with the
    store's epoch and settings and says so (the watermark): the first maintain reads no
    columns, and the keys are those a full pass gives."""
    from ebb_core.neo4j import keys as neo4j_keys
    from ebb_core.neo4j.columns import read_score_columns as real
    from ebb_core.neo4j.rescore import WATERMARK

    store = Neo4jStore(neo4j_uri, batch_size=7)
    brain = Brain(store, namespace="fresh", clock=clock)
    brain.import_(_graph_file(tmp_path / "g.jsonl", 40))
    assert store.get_meta(WATERMARK + "fresh") is not None
    reads: list[tuple[Any, ...]] = []

    def counted(*a: Any) -> Any:
        reads.append(a)
        return real(*a)

    monkeypatch.setattr(neo4j_keys, "read_score_columns", counted)
    clock.advance(hours=1)
    brain.remember("a new memory", id="new", links=["m3"])
    brain.maintain()
    assert reads == []
    kept = _keys(brain)
    store._run("MATCH (m:Meta {key: $k}) DELETE m", {"k": WATERMARK + "fresh"})
    brain.maintain()
    assert len(reads) == 1
    for i, (b, k, d) in _keys(brain).items():
        assert kept[i][0] == pytest.approx(b, rel=1e-12), i
        assert kept[i][1] == pytest.approx(k, rel=1e-12), i
        assert kept[i][2] == d, i
    store.close()
