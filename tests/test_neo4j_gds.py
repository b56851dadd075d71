"""``maintain(spreading="pagerank")`` on Neo4j with Graph Data Science (the test server loads
OpenGDS): PageRank mass in key space, as documented in ``Neo4jStore.recompute_keys``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ebb_core import Brain, FixedClock, scoring
from ebb_core.neo4j import PAGERANK_DAMPING, Neo4jStore

pytestmark = pytest.mark.neo4j


@pytest.fixture
def gds_store(neo4j_uri: str) -> Iterator[Neo4jStore]:
    store = Neo4jStore(neo4j_uri, batch_size=4)
    if not store.has_gds():
        store.close()
        pytest.skip(f"the Neo4j test server at {neo4j_uri} has no Graph Data Science plugin")
    yield store
    store.close()


def _graph(brain: Brain, clock: FixedClock) -> None:
    brain.remember("the hub", id="note:hub")
    for i in range(8):
        brain.remember(f"spoke {i}", id=f"note:s{i}", links=["note:hub"], weight=1.0 + i)
        clock.advance(days=3)
    brain.connect("note:s1", "note:s2", kind="mentions", weight=4.0)
    brain.connect("note:s2", "note:s1", kind="wrote")  # parallel edge, other kind
    brain.remember("a chain start", id="note:c0")
    brain.remember("a chain middle", id="note:c1", links=["note:c0"])
    brain.remember("a chain end", id="note:c2", links=["note:c1"])
    brain.remember("an island", id="note:island")
    clock.advance(days=20)
    brain.reinforce("note:s7")


def _pagerank(edges: list[tuple[str, str, float]], nodes: list[str]) -> dict[str, float]:
    """Weighted PageRank as GDS computes it (undirected, teleport 1 − d to every node, no
    redistribution from dangling nodes), scaled to sum to 1."""
    out: dict[str, list[tuple[str, float]]] = {n: [] for n in nodes}
    for a, b, w in edges:
        out[a].append((b, w))
        out[b].append((a, w))
    d = PAGERANK_DAMPING
    score = dict.fromkeys(nodes, 1 - d)
    for _ in range(500):
        nxt = dict.fromkeys(nodes, 1 - d)
        for n, links in out.items():
            total = sum(w for _, w in links)
            for m, w in links:
                nxt[m] += d * score[n] * w / total
        done = max(abs(nxt[n] - score[n]) for n in nodes) < 1e-13
        score = nxt
        if done:
            break
    s = sum(score.values())
    return {n: v / s for n, v in score.items()}


def test_pagerank_spreading_puts_pagerank_mass_in_key_space(
    gds_store: Neo4jStore, clock: FixedClock
) -> None:
    brain = Brain(gds_store, namespace="pr", clock=clock)
    _graph(brain, clock)
    brain.maintain()
    default = {n.id: n for b in gds_store.scan_nodes("pr") for n in b}

    report = brain.maintain(spreading="pagerank")
    assert report.spreading == "pagerank" and report.scanned == len(default)
    nodes = {n.id: n for b in gds_store.scan_nodes("pr") for n in b}
    epoch, cfg = int(gds_store.get_meta("epoch_us") or 0), brain.config
    weights = [
        (e.src, e.dst, scoring.term_key(e.weight, int(e.reinforced_at.timestamp() * 1e6),
                                        epoch, cfg.half_life_us))
        for b in gds_store.scan_edges("pr")
        for e in b
    ]  # fmt: skip
    rank = _pagerank(weights, sorted(nodes))
    total = sum(n.base_key for n in nodes.values())
    for i, n in nodes.items():
        assert n.base_key == pytest.approx(default[i].base_key, rel=1e-12), i
        assert n.degree == default[i].degree, i
        assert n.key == pytest.approx(n.base_key + cfg.spread * total * rank[i], rel=1e-6), i
    assert sum(n.key - n.base_key for n in nodes.values()) == pytest.approx(cfg.spread * total)
    assert [n.id for n in brain.top(1)] == ["note:hub"]
    assert nodes["note:island"].key == pytest.approx(
        nodes["note:island"].base_key + cfg.spread * total * rank["note:island"]
    )

    # In key space: activation decays with time like any key, tiers and ranking still work.
    before = brain.activation("note:hub")
    clock.advance(days=30)
    assert brain.activation("note:hub") == pytest.approx(before / 2)
    assert sum(brain.stats().by_tier.values()) == len(nodes)

    # Projections are dropped; the default pass gives the default keys back.
    import neo4j

    with neo4j.GraphDatabase.driver(gds_store.uri) as d:
        assert (
            d.execute_query("CALL gds.graph.list() YIELD graphName RETURN graphName").records == []
        )
    clock.advance(days=-30)
    brain.maintain()
    for n in (n for b in gds_store.scan_nodes("pr") for n in b):
        assert n.key == pytest.approx(default[n.id].key, rel=1e-12), n.id


def test_pagerank_inside_a_transaction_gives_the_same_keys(
    gds_store: Neo4jStore, clock: FixedClock
) -> None:
    brain = Brain(gds_store, namespace="tx", clock=clock)
    _graph(brain, clock)
    brain.maintain(spreading="pagerank")
    batched = {n.id: n.key for b in gds_store.scan_nodes("tx") for n in b}
    cfg, epoch = brain.config, int(gds_store.get_meta("epoch_us") or 0)
    with gds_store.transaction():
        gds_store.recompute_keys(
            "tx", epoch, cfg.half_life_us, cfg.read_bonus, cfg.spread, spreading="pagerank"
        )
    for n in (n for b in gds_store.scan_nodes("tx") for n in b):
        assert n.key == pytest.approx(batched[n.id], rel=1e-6), n.id
