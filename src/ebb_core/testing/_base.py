"""What the contract's tests share: the start time, the graphs they build, and the fixtures."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

import pytest

from ..clock import FixedClock
from ..engine import Brain
from ..model import Tier
from ..scoring import Config
from ..store import GraphStore

#: The time every contract test starts at.
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

WORDS = [
    "harbor",
    "lantern",
    "pricing",
    "outcome",
    "coffee",
    "roast",
    "invoice",
    "ledger",
    "meeting",
    "budget",
]


def scores(brain: Brain) -> dict[str, tuple[float, float, int]]:
    """Every memory's stored ``(base_key, key, degree)`` in the brain's namespace."""
    return {
        n.id: (n.base_key, n.key, n.degree)
        for batch in brain.store.scan_nodes(brain.namespace)
        for n in batch
    }


def small_graph(brain: Brain, clock: FixedClock) -> None:
    """Four memories over fifteen days: a client, a person, a decision linking both, a note."""
    brain.remember("Acme Corp is our largest client", kind="client", id="client:acme")
    brain.remember("Maya runs product", kind="person", id="person:maya")
    clock.advance(days=10)
    brain.remember(
        "We bill Acme per resolved ticket",
        kind="decision",
        id="decision:outcome",
        links=["client:acme", "person:maya"],
    )
    clock.advance(days=5)
    brain.remember("Old seat pricing notes", kind="note", id="note:seats", links=["client:acme"])


def hub_graph(brain: Brain, clock: FixedClock) -> None:
    """150 memories each linked to one very heavy hub, then twenty days pass."""
    brain.remember("the hub everyone links to", id="note:hub")
    for i in range(150):
        brain.remember(f"ordinary memory {i}", id=f"note:m{i}")
        brain.connect(f"note:m{i}", "note:hub", weight=50.0)  # one very heavy hub
    clock.advance(days=20)


def populate(brain: Brain) -> None:
    """The same small graph in any namespace: links, a replacement, archived memories."""
    with brain.batch():
        for i in range(40):
            text = " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7)) + f" item{i}"
            brain.remember(text, kind="fact" if i % 3 else "note", id=f"fact:{i}")
        for i in range(0, 40, 4):
            brain.connect(f"fact:{i}", f"fact:{(i + 5) % 40}", kind="related")
        brain.remember("pricing outcome decided anew", kind="decision", id="decision:new")
        brain.supersede("fact:1", "decision:new")
    brain.clock.advance(days=90)  # type: ignore[attr-defined]
    for i in range(0, 40, 9):
        brain.reinforce(f"fact:{i}")
    brain.maintain()  # the others sink to warm or cold: use promotes them again


def ranking(brain: Brain, query: str, **kw: object) -> list[tuple[str, float]]:
    """``(id, score)`` of a recall's hits."""
    return [(h.id, h.score) for h in brain.recall(query, k=6, **kw)]  # type: ignore[arg-type]


def same(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> None:
    assert [i for i, _ in a] == [i for i, _ in b]
    assert [s for _, s in a] == pytest.approx([s for _, s in b], rel=1e-9, abs=1e-12)


def state(brain: Brain) -> dict[str, tuple[float, float, object, int]]:
    return {
        n.id: (n.key, n.base_key, n.last_read_at, int(n.tier))
        for batch in brain.store.scan_nodes(brain.namespace)
        for n in batch
    }


def flat_keys(brain: Brain) -> dict[tuple[str, int], float]:
    """:func:`scores` flattened: ``(id, part) -> value``, for ``pytest.approx``."""
    return {(i, k): float(v) for i, parts in scores(brain).items() for k, v in enumerate(parts)}


def live_links(brain: Brain, query: str) -> dict[str, list[str]]:
    """For each hit of a deep recall, the ids its explanation lists as live links."""
    hits = brain.recall(query, k=10, depth=3, reinforce=False)
    return {h.id: sorted(x.id for x in h.why.live_links) for h in hits}


def neighbour_export(namespace: str, n: int, at: str) -> str:
    """An export of ``n`` memories in ``namespace`` that share every word of the small one's."""
    lines = [json.dumps({"type": "ebb-export", "version": 1, "namespaces": [namespace]})]
    for i in range(n):
        lines.append(
            json.dumps(
                {
                    "type": "node",
                    "id": f"note:n{i}",
                    "namespace": namespace,
                    "kind": "note" if i % 3 else "decision",
                    "text": f"harbor lantern ledger tide {i % 7} harbor",
                    "props": {},
                    "created_at": at,
                    "updated_at": at,
                    "last_read_at": at,
                    "pinned": False,
                    "tier": 1 + i % 3,
                    "review_reason": None,
                    "queued_at": None,
                }
            )
        )
    return "\n".join(lines) + "\n"


def small_namespace(brain: Brain, clock: FixedClock) -> None:
    """Seven memories sharing words, one archived (cold) and one frozen."""
    for i in range(5):
        brain.remember(f"harbor lantern number {i}", kind="note", id=f"note:lantern-{i}")
        clock.advance(hours=1)
    brain.remember("the harbor ledger is audited monthly", kind="decision", id="decision:ledger")
    brain.remember("tide tables for the harbor", kind="fact", id="fact:tides")
    brain.remember("a lantern by the ledger", kind="note", id="note:old", links=["note:lantern-0"])
    brain.store.update_nodes(brain.namespace, {"note:old": {"tier": Tier.COLD}})
    brain.forget("note:lantern-4", "gone")  # frozen: never recalled, in any namespace


#: Recalls the large-neighbour test repeats: (query, keyword arguments).
NEIGHBOUR_QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("harbor lantern", {"k": 5}),
    ("harbor lantern", {"k": 10, "depth": 3}),
    ("harbor", {"k": 3}),
    ("ledger tide", {"k": 10, "depth": 3}),
    ("lantern", {"k": 10, "kinds": ["note"], "include_archived": True}),
]


def recalls(brain: Brain) -> list[list[str]]:
    """The ids each of :data:`NEIGHBOUR_QUERIES` recalls, without reinforcing."""
    return [[h.id for h in brain.recall(q, reinforce=False, **kw)] for q, kw in NEIGHBOUR_QUERIES]


class _StoreFixtures:
    """The fixtures every part of the contract uses; ``open_store`` is the backend's."""

    @pytest.fixture
    def open_store(self) -> Callable[[], GraphStore]:
        """A function opening the backend's store: the first call on an empty store, each
        later one on the same data (a reopen). Every subclass defines it."""
        raise NotImplementedError("a StoreContractTests subclass defines the open_store fixture")

    @pytest.fixture
    def store(self, open_store: Callable[[], GraphStore]) -> Iterator[GraphStore]:
        s = open_store()
        yield s
        s.close()

    @pytest.fixture
    def clock(self) -> FixedClock:
        return FixedClock(T0)

    @pytest.fixture
    def brain(self, store: GraphStore, clock: FixedClock) -> Brain:
        return Brain(store, namespace="test", clock=clock)

    @pytest.fixture
    def eager(self, store: GraphStore, clock: FixedClock) -> Brain:
        return Brain(store, namespace="test", clock=clock, config=Config(eager_spreading=True))
