"""The Kùzu store's vector tails keep each vector as one base64 string (``vb``), written and
read back bit for bit on every path, and a store whose tails are of the older ``FLOAT[dim]``
form still opens with the same vectors (converted when opened for writing).

Plumbing only: the vectors come from :class:`FakeEmbedder`, a FAKE that hashes words (named as
one); what is checked is that vectors are stored exactly and found.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from ebb_core import Brain, FixedClock
from ebb_core.embeddings import FakeEmbedder
from ebb_core.errors import EbbError
from ebb_core.kuzu import vector_rows
from ebb_core.kuzu.vectors import OLD_TAIL_PREFIX, TAIL_PREFIX, _names
from ebb_core.kuzu_store import KuzuStore
from ebb_core.model import Tier


def _brain(path: Path, clock: FixedClock, dim: int) -> Brain:
    return Brain(KuzuStore(path), namespace="t", clock=clock, embedder=FakeEmbedder(dim))


def _bits(v: Any) -> list[int]:
    return [int(x) for x in np.asarray(v, dtype=np.float32).view(np.uint32)]


def _columns(store: KuzuStore, table: str) -> dict[str, str]:
    return {str(r[1]): str(r[2]) for r in store._rows(f"CALL table_info('{table}') RETURN *")}


@pytest.mark.parametrize("dim", [30, 32, 384])  # 4 x 32 bytes end in base64 padding
def test_encoding_is_lossless_and_refuses_a_damaged_string(dim: int) -> None:
    rng = np.random.default_rng(dim)
    mat = rng.standard_normal((5000, dim)).astype(np.float32)  # more than one batch
    mat[0, :4] = [-0.0, 1e-45, np.finfo(np.float32).max, np.finfo(np.float32).tiny]
    enc = vector_rows.encode(mat)
    assert len(enc) == 5000 and all(isinstance(s, str) for s in enc)
    back = vector_rows.decode(enc, dim)
    assert back.dtype == np.float32 and np.array_equal(back.view(np.uint32), mat.view(np.uint32))
    assert vector_rows.dim_of(enc[7]) == dim
    assert vector_rows.encode(mat[3]) == [enc[3]]  # one vector: one string
    for bad in (enc[1][:-4], enc[1] + "AAAA", "!" + enc[1][1:]):
        with pytest.raises(EbbError, match="embed --rebuild"):
            vector_rows.decode([enc[0], bad], dim)


@pytest.mark.parametrize("dim", [30, 32])
def test_every_write_path_stores_the_vector_bit_for_bit(
    tmp_path: Path, clock: FixedClock, dim: int
) -> None:
    brain = _brain(tmp_path / "w.kuzu", clock, dim)
    store = brain.store
    assert isinstance(store, KuzuStore)
    fake = FakeEmbedder(dim)
    want: dict[str, Any] = {}
    # remember: the vector in the memory's own statement
    for i in range(3):
        text = f"note {i} about topic{i}"
        brain.remember(text, id=f"n:{i}")
        want[f"n:{i}"] = fake.embed_documents([text])[0]
    # a new text under an existing id: the vector replaced (delete, then a CREATE per row)
    brain.remember("now about airships", id="n:1")
    want["n:1"] = fake.embed_documents(["now about airships"])[0]
    # `embed` of memories without one: more than 32 at once (COPY)
    plain = Brain(store, namespace="t", clock=clock)
    for i in range(40):
        plain.remember(f"plain {i} zebra{i}", id=f"p:{i}")
        want[f"p:{i}"] = fake.embed_documents([f"plain {i} zebra{i}"])[0]
    assert brain.embed()["embedded"] == 40
    # more than 32 replaced at once (LOAD FROM), with values a float list would round
    odd = np.random.default_rng(1).standard_normal((40, dim)).astype(np.float32)
    odd[0, :2] = [-0.0, 1e-45]
    store.put_vectors("t", [f"p:{i}" for i in range(40)], odd)
    want.update({f"p:{i}": odd[i] for i in range(40)})

    _, _, tail = _names("t")
    assert _columns(store, tail) == {"uid": "STRING", "ns": "STRING", "vb": "STRING"}
    got = store.vectors_of("t", list(want))
    assert {i: _bits(v) for i, v in got.items()} == {i: _bits(v) for i, v in want.items()}
    # the in-process copy recall searches holds the same vectors
    q = np.asarray(want["p:7"], dtype=np.float32)
    assert store.vector_matches("t", q, 1, Tier.COLD)[0][0].id == "p:7"
    # moved into the HNSW table (FLOAT[dim]): decoded, still bit for bit
    assert store.index_vectors("t", min_tail=1) == len(want)
    assert store.vector_tail_count("t") == 0
    got = store.vectors_of("t", list(want))
    assert {i: _bits(v) for i, v in got.items()} == {i: _bits(v) for i, v in want.items()}
    brain.close()


def test_a_remember_passes_its_vector_as_one_string(
    tmp_path: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kùzu's Python binding makes one engine value per float of a list parameter (the cost
    of a vector remember, see ``kuzu.vector_rows``): the vector goes as one string."""
    brain = _brain(tmp_path / "s.kuzu", clock, 384)
    store = brain.store
    assert isinstance(store, KuzuStore)
    brain.remember("warm up", id="n:0")
    sent: list[tuple[str, dict[str, Any]]] = []
    real = store._q_locked

    def q(query: str, params: Any, **kw: bool) -> list[list[object]]:
        sent.append((query, dict(params or {})))
        return real(query, params, **kw)

    monkeypatch.setattr(store, "_q_locked", q)
    brain.remember("a thought on zeppelins", id="n:1", links=["n:0"])
    (_query, params), *_ = [s for s in sent if TAIL_PREFIX in s[0]]
    assert not any(isinstance(v, list | tuple | np.ndarray) for v in params.values())
    vec = [v for v in params.values() if isinstance(v, str) and len(v) == 2048]
    assert len(vec) == 1
    assert _bits(vector_rows.decode(vec, 384)[0]) == _bits(
        FakeEmbedder(384).embed_documents(["a thought on zeppelins"])[0]
    )
    brain.close()


def _make_old_form(path: Path, half_converted: bool = False) -> None:
    """Rewrite the store's tail as the Ebb before the base64 form made it: a
    ``MemoryVectorTail_<h>(uid, ns, vec FLOAT[dim])`` table, rows inserted as float lists
    (``half_converted``: a conversion killed midway, the base64 tail partly filled)."""
    import kuzu

    _, _, tail = _names("t")
    old = OLD_TAIL_PREFIX + tail[len(TAIL_PREFIX) :]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        db = kuzu.Database(str(path))
        conn = kuzu.Connection(db)
        conn.execute("LOAD EXTENSION vector")
        result = conn.execute(f"MATCH (v:{tail}) RETURN v.uid, v.ns, v.vb")
        assert not isinstance(result, list)  # one statement, one result
        rows = cast(list[list[Any]], result.get_all())  # rows as lists (no dict option set)
        dim = vector_rows.dim_of(rows[0][2])
        conn.execute(
            f"CREATE NODE TABLE {old}(uid STRING PRIMARY KEY, ns STRING, vec FLOAT[{dim}])"
        )
        for u, ns, enc in rows:
            vec = vector_rows.decode([enc], dim)[0].tolist()
            conn.execute(
                f"CREATE (:{old} {{uid: $u, ns: $ns, vec: $v}})", {"u": u, "ns": ns, "v": vec}
            )
        if half_converted:
            for u, _, _ in rows[3:]:
                conn.execute(f"MATCH (v:{tail} {{uid: $u}}) DELETE v", {"u": u})
            conn.execute(f"MATCH (v:{tail}) SET v.vb = 'rubbish'")
        else:
            conn.execute(f"DROP TABLE {tail}")
        conn.close()
        db.close()


@pytest.mark.parametrize("half_converted", [False, True])
def test_a_store_with_tails_of_the_old_form_opens_with_the_same_vectors(
    tmp_path: Path, clock: FixedClock, half_converted: bool
) -> None:
    path = tmp_path / "old.kuzu"
    brain = _brain(path, clock, 32)
    ids = [f"n:{i}" for i in range(12)]
    for i in ids:
        brain.remember(f"note {i} about topic{i[-1]}", id=i)
    want = {i: _bits(v) for i, v in brain.store.vectors_of("t", ids).items()}
    brain.close()
    _make_old_form(path, half_converted)
    _, _, tail = _names("t")
    q = FakeEmbedder(32).embed_query("note n:7 about topic7")

    old = OLD_TAIL_PREFIX + tail[len(TAIL_PREFIX) :]
    # read-only (no conversion): the old table is read
    ro = KuzuStore(path, read_only=True)
    assert "vec" in _columns(ro, old)
    assert {i: _bits(v) for i, v in ro.vectors_of("t", ids).items()} == want
    assert ro.vector_matches("t", q, 1, Tier.COLD)[0][0].id == "n:7"
    ro.close()

    # for writing: converted on open, the same vectors, and new ones go in the new form
    brain = _brain(path, clock, 32)
    store = brain.store
    assert isinstance(store, KuzuStore)
    assert _columns(store, tail) == {"uid": "STRING", "ns": "STRING", "vb": "STRING"}
    assert old not in {str(r[0]) for r in store._rows("CALL show_tables() RETURN name")}
    assert {i: _bits(v) for i, v in store.vectors_of("t", ids).items()} == want
    hits = brain.recall("note n:7 about topic7", k=1, reinforce=False)
    assert hits[0].id == "n:7" and "vector" in hits[0].why.found_by
    brain.remember("a new one on zeppelins", id="z:1")
    assert store.vector_count("t") == 13 and store.without_vectors("t") == []
    brain.close()
