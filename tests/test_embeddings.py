"""Meaning-based recall: the embedder seam, vectors in both stores, fusion, embed, export/import.

Retrieval-quality tests use the real default model (all-MiniLM-L6-v2 run by numpy, installed by
``make test``); the plumbing tests use :class:`FakeEmbedder`, a FAKE that hashes words and knows
nothing of meaning (named as one).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conftest import BACKENDS, make_store
from ebb_core import Brain, Config, FixedClock
from ebb_core.embeddings import (
    MINILM_NAME,
    ONE_THREAD_MAX,
    EmbedderError,
    FakeEmbedder,
    MiniLM,
    as_embedder,
    resolve,
)
from ebb_core.errors import InvalidInput
from ebb_core.kuzu_store import KuzuStore
from ebb_core.store import GraphStore


@pytest.fixture(scope="module")
def minilm() -> MiniLM:
    return MiniLM()


@pytest.fixture(params=BACKENDS)
def vstore(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GraphStore]:
    s = make_store(request.param, tmp_path, request)
    yield s
    s.close()


# -- the default model ---------------------------------------------------------------------------
def test_minilm_vectors_are_unit_and_follow_meaning(minilm: MiniLM) -> None:
    texts = [
        "A man is playing a guitar.",
        "Someone plays a musical instrument.",
        "The quarterly tax filing is due in April.",
    ]
    v = minilm.embed_documents(texts)
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    para, unrelated = float(v[0] @ v[1]), float(v[0] @ v[2])
    assert para > 0.5 > 0.15 > unrelated


def test_minilm_matches_sentence_transformers(minilm: MiniLM) -> None:
    # reference vectors made once by sentence-transformers (torch) from the same weights
    ref = json.loads((Path(__file__).parent / "minilm_reference.json").read_text("utf-8"))
    ours = minilm.embed_documents(ref["texts"])
    assert np.abs(ours - np.asarray(ref["vectors"], dtype=np.float32)).max() < 1e-5


def test_minilm_batches_agree_with_single_texts(minilm: MiniLM) -> None:
    texts = ["short", "a somewhat longer sentence about databases and storage", "mid length one"]
    together = minilm.embed_documents(texts)
    alone = np.stack([minilm.embed_query(t) for t in texts])
    assert np.allclose(together, alone, atol=1e-5)  # padding never leaks into the pooling


def test_minilm_holds_the_blas_to_one_thread_for_a_query_not_for_a_batch(
    minilm: MiniLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query's small products run on one BLAS thread (threads that wait and spin on a busy
    machine cost more than they give); a large batch keeps the BLAS's threads; the limit is
    lifted after each call."""
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads() -> set[int]:
        return {int(i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"}

    seen: list[set[int]] = []
    forward = minilm._forward

    def watched(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        seen.append(blas_threads())
        return forward(ids, mask)

    monkeypatch.setattr(minilm, "_forward", watched)
    with threadpool_limits(limits=2, user_api="blas"):
        assert blas_threads() == {2}
        minilm.embed_query("which database did we pick?")
        assert seen == [{1}] and blas_threads() == {2}
        minilm.embed_documents([f"memory number {i}" for i in range(ONE_THREAD_MAX + 1)])
        assert seen[1:] == [{2}] and blas_threads() == {2}


def test_minilm_truncates_long_texts(minilm: MiniLM) -> None:
    v = minilm.embed_documents(["word " * 2000])
    assert v.shape == (1, 384) and np.isfinite(v).all()


# -- wrapping embedders ---------------------------------------------------------------------------
def test_callable_langchain_and_llamaindex_embedders_are_wrapped() -> None:
    fake = FakeEmbedder(16)

    def fn(texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = fake.embed_documents(texts).tolist()
        return out

    wrapped = as_embedder(fn)
    assert wrapped is not None
    assert np.allclose(wrapped.embed_documents(["a b"]), fake.embed_documents(["a b"]))

    from langchain_core.embeddings import DeterministicFakeEmbedding

    lc = as_embedder(DeterministicFakeEmbedding(size=8))
    assert lc is not None and lc.embed_documents(["x", "y"]).shape == (2, 8)
    assert lc.embed_query("x").shape == (8,)

    from llama_index.core.embeddings import MockEmbedding

    li = as_embedder(MockEmbedding(embed_dim=8))
    assert li is not None and li.embed_documents(["x"]).shape == (1, 8)


def test_bad_embedder_output_is_a_clear_error() -> None:
    wrong_count = as_embedder(lambda texts: [[1.0, 0.0]])
    with pytest.raises(EmbedderError, match="one non-empty vector per text"):
        wrong_count.embed_documents(["a", "b"])  # type: ignore[union-attr]
    nan = as_embedder(lambda texts: [[float("nan"), 1.0] for _ in texts])
    with pytest.raises(EmbedderError, match="NaN"):
        nan.embed_documents(["a"])  # type: ignore[union-attr]
    with pytest.raises(InvalidInput, match="unknown embedder"):
        resolve("no-such-model")
    with pytest.raises(EmbedderError, match="cannot load"):
        resolve("no_such_module_xyz:thing")
    assert resolve("none") is None and resolve("") is None
    assert resolve("minilm") is not None and resolve("minilm").name == MINILM_NAME  # type: ignore[union-attr]


# -- plumbing on both stores (FAKE embedder) -------------------------------------------------------
def test_remember_embeds_and_recall_finds_by_vector_alone(
    vstore: GraphStore, clock: FixedClock
) -> None:
    fake = FakeEmbedder(32)
    brain = Brain(vstore, namespace="v", clock=clock, embedder=fake)
    brain.remember("alpha beta gamma", id="m:1")
    brain.remember("delta epsilon", id="m:2")
    assert vstore.vector_count("v") == 2
    assert vstore.get_meta("embed_model") == fake.name and vstore.get_meta("embed_dim") == "32"
    # "gammas" shares no indexed word with m:1 but its 4-letter prefix bucket
    hits = brain.recall("gammas", k=2, reinforce=False)
    assert hits and hits[0].id == "m:1"
    why = hits[0].why
    assert why.similarity is not None and why.similarity > 0
    assert "vector" in why.found_by and "similarity" in why.summary


def test_spread_to_what_matched_neither_words_nor_meaning_is_discounted(
    vstore: GraphStore, clock: FixedClock
) -> None:
    """With vectors fused, a memory reached only by a link keeps vector_unmatched_spread of
    what spreads to it; without an embedder it keeps all of it."""

    def linked(ns: str, embedder: object, cfg: Config) -> tuple[float, float]:
        b = Brain(vstore, namespace=ns, clock=clock, config=cfg, embedder=embedder)
        b.remember("alpha beta gamma", id="m:src")
        b.remember("zeta eta theta", id="m:linked", links=["m:src"])
        hits = {h.id: h for h in b.recall("alpha beta gamma", k=5, reinforce=False)}
        assert hits["m:linked"].why.match == 0 and hits["m:linked"].why.text_score == 0
        return hits["m:linked"].why.spread_text, hits["m:src"].why.match

    fake = FakeEmbedder(32)  # FAKE: plumbing only (its hash buckets share nothing here)
    full, src = linked("a", fake, Config(vector_unmatched_spread=1.0))
    half, _ = linked("b", fake, Config())  # the default, 0.5
    assert full == pytest.approx(Config().spread_share * src) and full > 0
    assert half == pytest.approx(0.5 * full)
    text_only, src_text = linked("c", False, Config())
    assert text_only == pytest.approx(Config().spread_share * src_text)
    with pytest.raises(InvalidInput, match="vector_unmatched_spread"):
        Config(vector_unmatched_spread=1.5)


def test_other_namespace_vectors_never_crowd_out(vstore: GraphStore, clock: FixedClock) -> None:
    fake = FakeEmbedder(32)
    big = Brain(vstore, namespace="big", clock=clock, embedder=fake)
    for i in range(60):
        big.remember(f"zebra stripes {i}", id=f"z:{i}")
    small = big.scoped("small")
    small.remember("zebra crossing", id="s:1")
    hits = small.recall("zebras", k=3, reinforce=False)
    assert [h.id for h in hits] == ["s:1"]


def test_another_model_on_open_is_refused_with_both_names(
    vstore: GraphStore, clock: FixedClock
) -> None:
    first = Brain(vstore, namespace="v", clock=clock, embedder=FakeEmbedder(16))
    first.remember("apple pie", id="a")
    with pytest.raises(EmbedderError) as err:
        Brain(vstore, namespace="v", clock=clock, embedder=FakeEmbedder(16, name="other"))
    msg = str(err.value)
    assert "fake-hash-16" in msg and "other" in msg and "ebb embed --rebuild" in msg
    # text alone still works, and the store's own model is known by name only if Ebb has it
    b = Brain(vstore, namespace="v", clock=clock, embedder=False)
    assert [h.id for h in b.recall("apple", reinforce=False)] == ["a"]


def test_embed_fills_missing_then_rebuild_moves_model(
    vstore: GraphStore, clock: FixedClock
) -> None:
    plain = Brain(vstore, namespace="v", clock=clock)
    for i in range(10):
        plain.remember(f"memory number {i} about topic{i}", id=f"m:{i:02d}")
    assert vstore.vector_count("v") == 0
    fake = FakeEmbedder(16)
    b = Brain(vstore, namespace="v", clock=clock, embedder=fake)
    seen: list[tuple[int, int]] = []
    report = b.embed(batch=4, progress=lambda d, t: seen.append((d, t)))
    assert report == {"embedded": 10, "missing_before": 10}
    assert seen[-1] == (10, 10) and fake.calls == 3  # 4 + 4 + 2
    assert b.embed() == {"embedded": 0, "missing_before": 0}  # nothing left: resumable
    other = FakeEmbedder(24, name="other")
    moved = Brain(vstore, namespace="v", clock=clock, embedder=False)
    assert moved.embed(rebuild=True, embedder=other)["embedded"] == 10
    assert vstore.get_meta("embed_model") == "other" and vstore.get_meta("embed_dim") == "24"
    Brain(vstore, namespace="v", clock=clock, embedder=other)  # opens now


def test_embed_resumes_after_a_failed_batch(vstore: GraphStore, clock: FixedClock) -> None:
    plain = Brain(vstore, namespace="v", clock=clock)
    for i in range(9):
        plain.remember(f"note {i}", id=f"n:{i}")
    fake = FakeEmbedder(8)
    calls = {"n": 0}

    def flaky(texts: list[str]) -> list[list[float]]:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("killed mid-run")
        out: list[list[float]] = fake.embed_documents(texts).tolist()
        return out

    flaky.name = fake.name  # type: ignore[attr-defined]
    b = Brain(vstore, namespace="v", clock=clock, embedder=flaky)
    with pytest.raises(EmbedderError, match="killed mid-run"):
        b.embed(batch=4)
    assert vstore.vector_count("v") == 4  # the first batch stands
    assert b.embed(batch=4)["embedded"] == 5
    assert vstore.vector_count("v") == 9


def test_text_change_reembeds_or_drops_stale_vector(vstore: GraphStore, clock: FixedClock) -> None:
    fake = FakeEmbedder(16)
    b = Brain(vstore, namespace="v", clock=clock, embedder=fake)
    b.remember("apples", id="a")
    first = vstore.vectors_of("v", ["a"])["a"]
    b.remember("oranges", id="a")
    second = vstore.vectors_of("v", ["a"])["a"]
    assert not np.allclose(first, second)
    assert np.allclose(second, fake.embed_query("oranges"))
    plain = Brain(vstore, namespace="v", clock=clock, embedder=False)
    plain.remember("bananas", id="a")
    assert vstore.vectors_of("v", ["a"]) == {}  # stale: gone, `ebb embed` fills it in


def test_export_import_round_trips_vectors_exactly(
    vstore: GraphStore, clock: FixedClock, tmp_path: Path
) -> None:
    fake = FakeEmbedder(16)
    b = Brain(vstore, namespace="v", clock=clock, embedder=fake)
    b.remember("first memory", id="a")
    b.remember("second memory", id="b", links=["a"])
    before = vstore.vectors_of("v", ["a", "b"])
    buf = io.StringIO()
    b.export(buf)
    assert sum(1 for line in buf.getvalue().splitlines() if '"type": "vector"' in line) == 2
    target = KuzuStore(tmp_path / "copy.kuzu")
    try:
        copy = Brain(target, namespace="v", clock=clock, embedder=False)
        counts = copy.import_(io.StringIO(buf.getvalue()))
        assert counts["vectors"] == 2 and counts["nodes"] == 2
        after = target.vectors_of("v", ["a", "b"])
        for k in ("a", "b"):
            assert np.array_equal(before[k], after[k])
        assert target.get_meta("embed_model") == fake.name
    finally:
        target.close()


def test_import_embeds_when_the_file_has_no_vectors(vstore: GraphStore, clock: FixedClock) -> None:
    record = {"type": "node", "id": "x", "namespace": "v", "kind": "note", "text": "plain"}
    text = json.dumps({"type": "ebb-export", "version": 1}) + "\n" + json.dumps(record) + "\n"
    b = Brain(vstore, namespace="v", clock=clock, embedder=FakeEmbedder(8))
    assert b.import_(io.StringIO(text))["vectors"] == 1
    assert vstore.vector_count("v") == 1


def test_malformed_vector_record_imports_nothing(vstore: GraphStore, clock: FixedClock) -> None:
    bad = '{"type": "vector", "namespace": "v", "id": "x", "model": "m", "vector": ["a"]}\n'
    b = Brain(vstore, namespace="v", clock=clock)
    with pytest.raises(InvalidInput, match="malformed vector record"):
        b.import_(io.StringIO(json.dumps({"type": "ebb-export", "version": 1}) + "\n" + bad))
    assert b.stats().nodes == 0


# -- retrieval quality with the real model, on both stores ---------------------------------
def test_meaning_finds_what_words_miss(
    vstore: GraphStore, clock: FixedClock, minilm: MiniLM
) -> None:
    b = Brain(vstore, namespace="q", clock=clock, embedder=minilm)
    b.remember("We chose SQLite for offline storage", id="d:db")
    b.remember("The team lunch is on Friday at noon", id="d:lunch")
    b.remember("Alice drinks dark roast every morning", id="d:alice")
    b.remember("The quarterly report goes out in April", id="d:report")
    text_only = Brain(vstore, namespace="q", clock=clock, embedder=False)
    assert text_only.recall("which database did we pick?", reinforce=False) == []
    assert b.recall("which database did we pick?", k=1, reinforce=False)[0].id == "d:db"
    assert b.recall("coffee", k=1, reinforce=False)[0].id == "d:alice"


def test_supersession_still_decides_between_similar_versions(
    vstore: GraphStore, clock: FixedClock, minilm: MiniLM
) -> None:
    b = Brain(vstore, namespace="q", clock=clock, embedder=minilm)
    b.remember("Bob lives in Berlin", id="f:old")
    b.remember("Bob moved to Lisbon and lives there now", id="f:new", supersedes=["f:old"])
    for depth in (1, 2, 3):
        ids = [h.id for h in b.recall("where does Bob live?", k=2, depth=depth, reinforce=False)]
        assert ids.index("f:new") < ids.index("f:old") if "f:old" in ids else ids[0] == "f:new"


# -- the adapters pass a framework's embedder through ------------------------------------------
def test_readme_langgraph_snippet_finds_alice_by_meaning(kuzu_brain: Brain, minilm: MiniLM) -> None:
    from ebb_langchain import EbbStore

    store = EbbStore(kuzu_brain, embedder="minilm")
    store.put(("memories", "alice"), "coffee", {"content": "Alice drinks dark roast"})
    store.put(("memories", "alice"), "pets", {"content": "Alice has two cats"})
    found = store.search(("memories", "alice"), query="coffee")
    assert found and found[0].key == "coffee"
    assert found[0].value == {"content": "Alice drinks dark roast"}


def test_langgraph_index_config_takes_a_langchain_embeddings(kuzu_brain: Brain) -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from ebb_langchain import EbbStore

    lc = DeterministicFakeEmbedding(size=12)
    store = EbbStore(kuzu_brain, index={"embed": lc, "dims": 12})
    assert kuzu_brain.embedder is not None
    store.put(("m",), "k", {"content": "some text"})
    assert kuzu_brain.store.get_meta("embed_dim") == "12"
    assert kuzu_brain.scoped("m").store.vector_count("m") == 1


def test_langchain_retriever_and_tools_use_the_given_embeddings(kuzu_brain: Brain) -> None:
    from ebb_langchain import EbbRetriever, create_ebb_tools

    fake = FakeEmbedder(32)  # FAKE: plumbing only
    retriever = EbbRetriever(brain=kuzu_brain, embedder=fake, k=2, reinforce=False)
    kuzu_brain.remember("zebra crossing near the school", id="z:1")
    docs = retriever.invoke("zebras")  # no shared indexed word: found by vector
    assert [d.id for d in docs] == ["z:1"]
    assert docs[0].metadata["why"].startswith("no text match") or "similarity" in str(
        docs[0].metadata
    )
    tools = {t.name: t for t in create_ebb_tools(kuzu_brain, embedder=fake)}
    assert "z:1" in str(tools["recall"].invoke({"query": "zebras"}))


def test_llamaindex_retriever_memory_block_and_tools_take_an_embed_model(
    kuzu_brain: Brain,
) -> None:
    from llama_index.core.embeddings import MockEmbedding

    from ebb_llamaindex import EbbMemoryBlock, EbbRetriever, EbbToolSpec

    mock = MockEmbedding(embed_dim=8)
    EbbRetriever(kuzu_brain, embed_model=mock)
    assert kuzu_brain.embedder is not None and kuzu_brain.embedder.name == mock.model_name
    fake = FakeEmbedder(32)  # FAKE: plumbing only
    kuzu_brain.set_embedder(False)
    EbbToolSpec(kuzu_brain, embed_model=fake)
    kuzu_brain.remember("zebra crossing near the school", id="z:1")
    retriever = EbbRetriever(kuzu_brain, reinforce=False)
    assert [n.node.node_id for n in retriever.retrieve("zebras")] == ["z:1"]
    block = EbbMemoryBlock(brain=kuzu_brain, embed_model=fake)
    assert block.brain.embedder is fake


def test_env_embedder_reaches_brain_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EBB_EMBEDDER", "fake:16")
    with Brain.open(tmp_path / "e.kuzu") as b:
        assert b.embedder is not None and b.embedder.name == "fake-hash-16"
        b.remember("zebra crossing", id="z")
        assert [h.id for h in b.recall("zebras", reinforce=False)] == ["z"]
    monkeypatch.setenv("EBB_EMBEDDER", "none")
    with Brain.open(tmp_path / "e.kuzu") as b:
        assert b.embedder is None  # a fake model is not loaded by name from the store


async def test_mcp_recall_uses_the_env_embedder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp import Client

    from ebb_core.mcp_access import StoreAccess
    from ebb_core.mcp_server import build_server

    monkeypatch.setenv("EBB_EMBEDDER", "minilm")
    db = tmp_path / "mcp.kuzu"
    server = build_server(StoreAccess(db, namespace="m", idle_release=0))
    async with Client(server) as client:
        for text, mid in (
            ("We chose SQLite for offline storage", "d:db"),
            ("The team lunch is on Friday", "d:lunch"),
        ):
            done = await client.call_tool("remember", {"text": text, "id": mid})
            assert not done.is_error
        result = await client.call_tool(
            "recall", {"query": "which database did we pick?", "explain": True}
        )
        assert not result.is_error and result.structured_content is not None
        hits = result.structured_content["hits"]
        assert hits[0]["id"] == "d:db"
        assert hits[0]["why"]["similarity"] > 0.3 and "vector" in hits[0]["why"]["found_by"]
        assert "similarity 0." in hits[0]["why"]["summary"]


def test_cli_embed_fills_a_text_only_store(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ebb_core.cli import main

    db = str(tmp_path / "c.kuzu")
    runner = CliRunner()
    for text in ("We chose SQLite for offline storage", "Lunch is on Friday"):
        assert runner.invoke(main, ["--db", db, "remember", text]).exit_code == 0
    none = runner.invoke(main, ["--db", db, "embed"], env={"EBB_EMBEDDER": ""})
    assert none.exit_code != 0 and "EBB_EMBEDDER" in none.output
    done = runner.invoke(main, ["--db", db, "embed", "--json"], env={"EBB_EMBEDDER": "minilm"})
    assert done.exit_code == 0, done.output
    assert json.loads(done.output) == {"embedded": 2, "missing_before": 2}
    # the store now names its model: recall by meaning without setting EBB_EMBEDDER again
    found = runner.invoke(
        main, ["--db", db, "recall", "which database did we pick?", "--json"], env={}
    )
    assert found.exit_code == 0 and "SQLite" in found.output
    other = runner.invoke(main, ["--db", db, "embed"], env={"EBB_EMBEDDER": "fake"})
    assert other.exit_code != 0 and "all-MiniLM-L6-v2" in other.output
    assert "--rebuild" in other.output


def test_a_missing_model_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match=r"model\.safetensors and tokenizer\.json"):
        MiniLM(model_dir=tmp_path).embed_documents(["x"])


def test_cli_names_a_bad_embedder(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ebb_core.cli import main

    db = str(tmp_path / "b.kuzu")
    res = CliRunner().invoke(main, ["--db", db, "remember", "x"], env={"EBB_EMBEDDER": "nonsense"})
    assert res.exit_code != 0 and "unknown embedder 'nonsense'" in res.output
    assert "Traceback" not in res.output


def test_vectors_survive_a_killed_writer(tmp_path: Path) -> None:
    import subprocess
    import sys
    import textwrap

    db = tmp_path / "k.kuzu"
    code = textwrap.dedent(
        f"""
        import os
        from ebb_core import Brain
        from ebb_core.embeddings import FakeEmbedder
        b = Brain.open({str(db)!r}, embedder=FakeEmbedder(32))
        for i in range(5):
            b.remember(f"zebra number {{i}}", id=f"z:{{i}}")
        os._exit(0)  # killed: no close, no checkpoint; the WAL is replayed on the next open
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with Brain.open(db, embedder=FakeEmbedder(32)) as b:
        assert b.store.vector_count("default") == 5
        hits = b.recall("zebras", k=5, reinforce=False)
        assert {h.id for h in hits} == {f"z:{i}" for i in range(5)}
        assert all("vector" in h.why.found_by for h in hits)


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_kill_while_remembering_leaves_no_memory_without_its_vector(
    tmp_path: Path, when: str
) -> None:
    """A memory and its vector are one statement (in its transaction): a writer killed just
    before it leaves neither, just after it both or neither (not a memory that recall by
    meaning silently misses). The vector tables are made before the transaction."""
    import subprocess
    import sys
    import textwrap

    db = tmp_path / "k.kuzu"
    code = textwrap.dedent(
        f"""
        import os
        from ebb_core import Brain
        from ebb_core.embeddings import FakeEmbedder
        from ebb_core.kuzu.writes import KuzuWrites
        b = Brain.open({str(db)!r}, embedder=FakeEmbedder(32))
        b.remember("zebra number zero", id="z:0")
        send = KuzuWrites._send_event
        def send_then_die(self, query, *args, **kwargs):
            assert "MemoryVectorTail64_" in query  # the vector goes with the memory
            if {when!r} == "after":
                send(self, query, *args, **kwargs)
            os._exit(0)  # killed: no close, no checkpoint
        KuzuWrites._send_event = send_then_die
        b.remember("zebra number one", id="z:1", links=["z:0"])
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with Brain.open(db, embedder=FakeEmbedder(32)) as b:
        # after it: committed with it when it was the transaction's only statement, else
        # rolled back with the transaction; either way both or neither
        stored = len(b.store.get_nodes("default", ["z:0", "z:1"]))
        assert b.get("z:0") is not None and b.store.vector_count("default") == stored
        assert stored == 1 or when == "after"
        assert b.store.without_vectors("default") == []
