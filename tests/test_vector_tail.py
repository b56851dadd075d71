"""Kùzu's unindexed vector tail: new vectors are searched exactly until ``maintain`` moves them
into the HNSW index, and no kill loses one (see ``ebb_core.kuzu.vectors``).

Plumbing only: the vectors come from :class:`FakeEmbedder`, a FAKE that hashes words and knows
nothing of meaning (named as one); what is checked is where vectors are and what finds them.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ebb_core import Brain, FixedClock
from ebb_core.embeddings import FakeEmbedder
from ebb_core.errors import EbbError
from ebb_core.kuzu_store import KuzuStore
from ebb_core.model import Tier

DIM = 32


def _brain(path: Path, clock: FixedClock) -> Brain:
    return Brain(KuzuStore(path), namespace="t", clock=clock, embedder=FakeEmbedder(DIM))


def _fill(brain: Brain, n: int) -> None:
    for i in range(n):
        brain.remember(f"note {i} about topic{i % 7} and item{i}", id=f"n:{i}")


def _exact_top(store: KuzuStore, ns: str, query: np.ndarray, n: int, k: int) -> list[str]:
    vecs = store.vectors_of(ns, [f"n:{i}" for i in range(n)])
    ids = sorted(vecs)
    sims = np.stack([vecs[i] for i in ids]) @ query
    order = sorted(range(len(ids)), key=lambda j: (-sims[j], ids[j]))
    return [ids[j] for j in order[:k]]


def test_new_vectors_wait_in_the_tail_and_are_searched_exactly(
    tmp_path: Path, clock: FixedClock
) -> None:
    brain = _brain(tmp_path / "a.kuzu", clock)
    store = brain.store
    assert isinstance(store, KuzuStore)
    _fill(brain, 40)
    assert store.vector_count("t") == 40 and store.vector_tail_count("t") == 40
    fake = FakeEmbedder(DIM)
    for text in ("topic3 item9", "note about topic5", "item33"):
        q = fake.embed_query(text)
        got = [m.id for m, _ in store.vector_matches("t", q, 10, Tier.COLD)]
        assert got == _exact_top(store, "t", q, 40, 10)
    brain.close()


def test_moving_the_tail_into_the_index_keeps_every_vector_and_the_results(
    tmp_path: Path, clock: FixedClock
) -> None:
    brain = _brain(tmp_path / "b.kuzu", clock)
    store = brain.store
    assert isinstance(store, KuzuStore)
    _fill(brain, 30)
    fake = FakeEmbedder(DIM)
    queries = [fake.embed_query(t) for t in ("topic3 item9", "item21", "note topic6")]

    def ranked(q: np.ndarray) -> list[tuple[float, str]]:  # ties in either order
        return sorted((-round(s, 4), m.id) for m, s in store.vector_matches("t", q, 5, Tier.COLD))

    before = [ranked(q) for q in queries]
    vecs_before = store.vectors_of("t", [f"n:{i}" for i in range(30)])
    assert store.index_vectors("t", min_tail=10_000) == 0  # below the threshold: stays
    assert store.index_vectors("t", min_tail=1) == 30
    assert store.vector_tail_count("t") == 0 and store.vector_count("t") == 30
    after = [ranked(q) for q in queries]
    assert after == before  # 30 vectors: the HNSW search is exact
    vecs_after = store.vectors_of("t", [f"n:{i}" for i in range(30)])
    assert all(np.array_equal(vecs_before[i], vecs_after[i]) for i in vecs_before)
    # later vectors go to the tail again and are found beside the indexed ones
    brain.remember("a brand new thought on zeppelins", id="n:new")
    assert store.vector_tail_count("t") == 1
    q = fake.embed_query("zeppelins")
    assert store.vector_matches("t", q, 3, Tier.COLD)[0][0].id == "n:new"
    # a changed text replaces its vector, wherever the old one was
    brain.remember("now about dirigibles", id="n:4")
    assert store.vector_count("t") == 31
    q = fake.embed_query("now about dirigibles")
    assert store.vector_matches("t", q, 3, Tier.COLD)[0][0].id == "n:4"
    # maintain moves a tail that reached the threshold (module default: not yet here)
    brain.maintain()
    assert store.vector_tail_count("t") == 2
    brain.close()


def test_maintain_of_a_grouped_brain_moves_the_tail_into_the_index(
    tmp_path: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ebb mcp`` groups reinforcement (a store wrapper): maintain must still index vectors."""
    from ebb_core.kuzu import vectors as kuzu_vectors

    monkeypatch.setattr(kuzu_vectors, "TAIL_MIN", 10)
    monkeypatch.setattr(kuzu_vectors, "IN_PROCESS_MAX", 10)  # past it: the index is used
    brain = Brain(
        KuzuStore(tmp_path / "g.kuzu"),
        namespace="t",
        clock=clock,
        embedder=FakeEmbedder(DIM),
        reinforcement_delay=60.0,
    )
    _fill(brain, 12)
    brain.recall("topic3", 3)  # something held, to be written before the move
    inner = brain.store.inner  # type: ignore[attr-defined]
    assert isinstance(inner, KuzuStore) and inner.vector_tail_count("t") == 12
    brain.maintain()
    assert inner.vector_tail_count("t") == 0 and inner.vector_count("t") == 12
    brain.close()


def test_tail_vectors_survive_reopening(tmp_path: Path, clock: FixedClock) -> None:
    path = tmp_path / "c.kuzu"
    brain = _brain(path, clock)
    _fill(brain, 12)
    brain.close()
    brain = _brain(path, clock)
    store = brain.store
    assert isinstance(store, KuzuStore)
    assert store.vector_tail_count("t") == 12 and store.vector_count("t") == 12
    q = FakeEmbedder(DIM).embed_query("note 7 about topic0 and item7")
    top, sim = store.vector_matches("t", q, 3, Tier.COLD)[0]
    assert top.id == "n:7" and sim > 0.999
    hits = brain.recall("note 7 about topic0 and item7", k=3, reinforce=False)
    assert hits[0].id == "n:7" and "vector" in hits[0].why.found_by
    brain.close()


def test_a_rolled_back_vector_is_not_found(tmp_path: Path, clock: FixedClock) -> None:
    brain = _brain(tmp_path / "d.kuzu", clock)
    store = brain.store
    assert isinstance(store, KuzuStore)
    _fill(brain, 5)
    fake = FakeEmbedder(DIM)
    q = fake.embed_query("quasar")
    store.vector_matches("t", q, 5, Tier.COLD)  # the tail is now held in process
    with pytest.raises(RuntimeError, match="abandoned"), store.transaction():
        store.put_vectors("t", ["n:0"], fake.embed_documents(["quasar"]))
        raise RuntimeError("abandoned")
    top = store.vector_matches("t", q, 1, Tier.COLD)[0]
    assert top[1] < 0.99  # n:0 kept its old vector
    old = fake.embed_documents(["note 0 about topic0 and item0"])[0]
    assert np.allclose(store.vectors_of("t", ["n:0"])["n:0"], old)
    brain.close()


def _killed_during_move(db: Path, at: str) -> None:
    """Fill a store in a child process and kill it (os._exit) when it sends the statement
    containing ``at`` while moving the tail into the index."""
    code = textwrap.dedent(
        f"""
        import os
        from ebb_core import Brain, FixedClock
        from ebb_core.embeddings import FakeEmbedder
        from ebb_core.kuzu_store import KuzuStore
        from datetime import datetime, timezone
        store = KuzuStore({str(db)!r})
        b = Brain(store, namespace="t", embedder=FakeEmbedder({DIM}),
                  clock=FixedClock(datetime(2025, 1, 1, tzinfo=timezone.utc)))
        for i in range(20):
            b.remember(f"note {{i}} about topic{{i % 7}} and item{{i}}", id=f"n:{{i}}")
        real_q, real_exec = store._q, store._exec
        def q(query, params=None):
            if {at!r} in query:
                os._exit(9)
            return real_q(query, params)
        def ex(query):
            if {at!r} in query:
                os._exit(9)
            return real_exec(query)
        store._q, store._exec = q, ex
        store.index_vectors("t", min_tail=1)
        os._exit(0)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 9, done.stderr


@pytest.mark.parametrize("at", ["DELETE v", "CREATE_VECTOR_INDEX"])
def test_a_kill_while_moving_the_tail_loses_no_vector(
    tmp_path: Path, clock: FixedClock, at: str
) -> None:
    # "DELETE v": inside the move's transaction (nothing moved); "CREATE_VECTOR_INDEX": after
    # the move committed, before the index was built (the rows wait in an unindexed table)
    db = tmp_path / "k.kuzu"
    _killed_during_move(db, at)
    brain = _brain(db, clock)
    store = brain.store
    assert isinstance(store, KuzuStore)
    assert store.vector_count("t") == 20 and store.vector_tail_count("t") == 20
    fake = FakeEmbedder(DIM)
    q = fake.embed_query("note 13 about topic6 and item13")
    assert store.vector_matches("t", q, 1, Tier.COLD)[0][0].id == "n:13"
    assert store.index_vectors("t", min_tail=1) == (20 if at == "DELETE v" else 0)
    assert store.vector_tail_count("t") == 0 and store.vector_count("t") == 20
    assert store.vector_matches("t", q, 1, Tier.COLD)[0][0].id == "n:13"
    brain.close()


def test_an_import_builds_the_index_once_and_round_trips_vectors(
    tmp_path: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from ebb_core.kuzu import vectors as kuzu_vectors

    monkeypatch.setattr(kuzu_vectors, "TAIL_MIN", 10)
    monkeypatch.setattr(kuzu_vectors, "IN_PROCESS_MAX", 10)  # past it: the index is used
    src = _brain(tmp_path / "src.kuzu", clock)
    _fill(src, 25)
    dump = io.StringIO()
    src.export(dump)
    vecs = src.store.vectors_of("t", [f"n:{i}" for i in range(25)])
    src.close()
    dst = _brain(tmp_path / "dst.kuzu", clock)
    store = dst.store
    assert isinstance(store, KuzuStore)
    dst.import_(io.StringIO(dump.getvalue()))
    # the whole import went into a freshly built index, not the tail
    assert store.vector_count("t") == 25 and store.vector_tail_count("t") == 0
    back = store.vectors_of("t", [f"n:{i}" for i in range(25)])
    assert all(np.array_equal(vecs[i], back[i]) for i in vecs)
    q = FakeEmbedder(DIM).embed_query("note 13 about topic6 and item13")
    assert store.vector_matches("t", q, 1, Tier.COLD)[0][0].id == "n:13"
    # the next vectors wait in the tail until maintain finds it long enough
    for i in range(12):
        dst.remember(f"extra {i} zebra{i}", id=f"x:{i}")
    assert store.vector_tail_count("t") == 12
    dst.maintain()
    assert store.vector_tail_count("t") == 0 and store.vector_count("t") == 37
    dst.close()


def test_salvage_keeps_every_vector_indexed_or_not(tmp_path: Path, clock: FixedClock) -> None:
    from ebb_core.salvage import salvage

    path = tmp_path / "s.kuzu"
    brain = _brain(path, clock)
    _fill(brain, 15)
    assert isinstance(brain.store, KuzuStore)
    assert brain.store.index_vectors("t", min_tail=1) == 15
    for i in range(15, 20):
        brain.remember(f"later note {i} on item{i}", id=f"n:{i}")
    other = brain.scoped("o")
    other.remember("a memory of another namespace", id="o:1")
    ids = [f"n:{i}" for i in range(20)]
    before = brain.store.vectors_of("t", ids)
    brain.close()
    rep = salvage(path, tmp_path / "copy.kuzu")
    assert rep.counts["salvaged vectors"] == 21 and "21 vectors" in rep.actions[-1]
    copy = _brain(tmp_path / "copy.kuzu", clock)
    store = copy.store
    assert isinstance(store, KuzuStore)
    after = store.vectors_of("t", ids)
    assert set(after) == set(before) and all(np.array_equal(before[i], after[i]) for i in ids)
    assert store.vector_count("o") == 1 and store.vector_tail_count("t") == 20
    q = FakeEmbedder(DIM).embed_query("later note 17 on item17")
    assert store.vector_matches("t", q, 1, Tier.COLD)[0][0].id == "n:17"
    copy.close()


def test_a_namespace_below_the_cap_is_never_indexed_and_the_cap_fits_the_budget(
    tmp_path: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ebb_core.kuzu import vectors as kuzu_vectors

    monkeypatch.setattr(kuzu_vectors, "TAIL_MIN", 10)
    brain = _brain(tmp_path / "cap.kuzu", clock)
    store = brain.store
    assert isinstance(store, KuzuStore)
    _fill(brain, 30)
    brain.maintain()  # 30 > TAIL_MIN, but far below the cap: all stay in process
    assert store.vector_tail_count("t") == 30 and store.index_vectors("t") == 0
    # an eighth of the budget, ~1.7 KB a 384-dimensional vector
    assert store.in_process_cap(384) == min(200_000, (store._budget // 8) // (1536 + 48 + 160))
    small = KuzuStore(tmp_path / "small.kuzu", memory_budget=128 << 20)
    assert small.in_process_cap(384) == (16 << 20) // 1744
    small.close()
    monkeypatch.setattr(kuzu_vectors, "IN_PROCESS_MAX", 20)
    assert store.index_vectors("t") == 30  # past the cap: the whole tail builds the index
    assert store.vector_tail_count("t") == 0
    brain.close()


def _clustered(seed: int, n: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` unit vectors around ``n // 100`` random centres, and the centres."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n // 100, dim)).astype(np.float32)
    mat = centres[np.arange(n) % len(centres)] + rng.standard_normal((n, dim)).astype(np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    return mat, centres


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_sign_bit_shortlist_returns_the_exact_top_k(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ebb_core.kuzu import tail as kuzu_tail

    mat, centres = _clustered(seed, 8000, 384)
    tail = kuzu_tail._Tail(384)
    tail.add([f"u{i}" for i in range(len(mat))], mat)
    tail.remove([f"u{i}" for i in range(0, 400, 7)])  # deleted rows are never returned
    rng = np.random.default_rng(seed + 100)
    monkeypatch.setattr(kuzu_tail, "EXACT_MAX", 1000)  # 8,000 rows: the shortlist path
    for c in centres[:20]:
        q = c + 0.8 * rng.standard_normal(384).astype(np.float32)
        q /= np.linalg.norm(q)
        got = sorted(tail.search(q, 10), key=lambda r: -r[1])
        sims = mat @ q
        live = [i for i in np.argsort(-sims) if i >= 400 or i % 7][:10]
        assert [u for u, _ in got] == [f"u{i}" for i in live]
        assert np.allclose([s for _, s in got], sims[live], atol=1e-5)


def test_the_exact_search_over_several_blocks_returns_the_exact_top_k() -> None:
    from ebb_core.kuzu import tail as kuzu_tail

    n = 3 * kuzu_tail.DOT_BLOCK + 77  # several blocks and a short last one
    mat, centres = _clustered(7, n, 384)
    tail = kuzu_tail._Tail(384)
    tail.add([f"u{i}" for i in range(n)], mat)
    assert n <= kuzu_tail.EXACT_MAX  # the exact path
    for c in centres[:10]:
        q = c / np.linalg.norm(c)
        got = sorted(tail.search(q, 10), key=lambda r: -r[1])
        sims = mat @ q
        assert [u for u, _ in got] == [f"u{i}" for i in np.argsort(-sims)[:10]]
        assert np.allclose([s for _, s in got], np.sort(sims)[::-1][:10], atol=1e-5)
    assert np.allclose(kuzu_tail._similarities(mat, centres[0]), mat @ centres[0], atol=1e-5)


def test_recall_through_the_shortlist_finds_a_memory_by_its_own_text(
    tmp_path: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ebb_core.kuzu import tail as kuzu_tail

    monkeypatch.setattr(kuzu_tail, "EXACT_MAX", 50)
    monkeypatch.setattr(kuzu_tail, "SHORTLIST_MIN", 20)
    brain = _brain(tmp_path / "sl.kuzu", clock)
    store = brain.store
    assert isinstance(store, KuzuStore)
    _fill(brain, 300)
    fake = FakeEmbedder(DIM)
    for i in (5, 123, 299):
        q = fake.embed_query(f"note {i} about topic{i % 7} and item{i}")
        top, sim = store.vector_matches("t", q, 5, Tier.COLD)[0]
        assert top.id == f"n:{i}" and sim > 0.999
    brain.close()


def _deletes_a_vector(statement: str) -> bool:
    """Whether ``statement`` deletes a vector row: DELETE of a variable bound to a vector table
    (a remember's statement may delete other rows, e.g. a replaced LinkList row)."""
    bound = re.findall(r"\((\w+):MemoryVector", statement)
    return any(re.search(rf"\bDELETE\s+{v}\b", statement) for v in bound)


def test_remembering_a_new_memory_writes_it_and_its_vector_in_one_statement(
    tmp_path: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    brain = _brain(tmp_path / "new.kuzu", clock)
    store = brain.store
    assert isinstance(store, KuzuStore)
    _fill(brain, 3)
    sent: list[str] = []
    solo: list[str] = []
    real_q, real_exec = store._q_locked, store._exec

    def q(query: str, params: object, **kw: bool) -> list[list[object]]:
        sent.append(query)
        if kw.get("solo"):
            solo.append(query)
        return real_q(query, params, **kw)  # type: ignore[arg-type]

    def exec_(query: str) -> None:
        sent.append(query)
        real_exec(query)

    monkeypatch.setattr(store, "_q_locked", q)
    monkeypatch.setattr(store, "_exec", exec_)
    brain.remember("a first thought on zeppelins", id="n:new")
    brain.remember("a second thought on dirigibles", links=["n:1"])  # a generated id
    vector_deletes = [s for s in sent if _deletes_a_vector(s)]
    assert vector_deletes == []
    # each memory, its links and its vector: one statement; with nothing else to write in its
    # transaction, auto-committed (no BEGIN, no COMMIT), as a text-only remember's
    writes = [s for s in sent if "MemoryVectorTail64_" in s]
    assert len(writes) == 2 and all(":Memory {" in s for s in writes)
    assert "(x0)" in writes[1]  # the link, in the same statement
    assert writes[0] in solo and "BEGIN TRANSACTION" not in sent[: sent.index(writes[0])]
    assert store.vector_count("t") == 5
    top = store.vector_matches("t", FakeEmbedder(DIM).embed_query("zeppelins"), 1, Tier.COLD)
    assert top[0][0].id == "n:new"
    # an existing memory's changed text replaces its vector (delete, then insert)
    brain.remember("now about airships", id="n:new")
    assert [s for s in sent if _deletes_a_vector(s)]
    assert store.vector_count("t") == 5
    top = store.vector_matches("t", FakeEmbedder(DIM).embed_query("airships"), 1, Tier.COLD)
    assert top[0][0].id == "n:new" and top[0][1] > 0.5
    brain.close()


def test_vectors_dropped_between_prepare_and_the_write_refuse_the_memory(
    tmp_path: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``embed --rebuild`` dropping the vector tables after ``remember`` made them ready and
    before its transaction: a clear error, and neither the memory nor a vector is stored."""
    brain = _brain(tmp_path / "race.kuzu", clock)
    store = brain.store
    assert isinstance(store, KuzuStore)
    _fill(brain, 3)
    real_prepare = store.prepare_vectors

    def prepare_then_drop(namespace: str, dim: int) -> None:
        real_prepare(namespace, dim)
        store.drop_vectors()

    monkeypatch.setattr(store, "prepare_vectors", prepare_then_drop)
    with pytest.raises(EbbError, match="write it again"):
        brain.remember("lost in the race", id="n:race", links=["n:1"])
    assert not store.existing_ids("t", ["n:race"])
    assert store.vector_count("t") == 0
    monkeypatch.undo()
    brain.remember("written again", id="n:race", links=["n:1"])
    assert store.vector_count("t") == 1
    brain.close()
