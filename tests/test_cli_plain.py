"""A one-shot `ebb recall` / `ebb stats` builds its results as the plain classes of
ebb_core.model_plain, not pydantic models: the same fields, defaults and output, without
importing pydantic (~0.15 s of CPU; docs/benchmarks.md, "Command line: start-up and one-shot
recall"). Library use, tests' CliRunner and the servers keep the pydantic models."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from ebb_core import Brain, FixedClock, model, model_plain
from ebb_core.model import Tier

NAMES = (
    "Node",
    "Edge",
    "LiveLink",
    "Why",
    "RecallHit",
    "Version",
    "Neighbor",
    "ReviewItem",
    "AuditEntry",
    "Stats",
    "MaintainReport",
)
T0 = datetime(2026, 3, 2, 9, 30, tzinfo=timezone.utc)
NOW = "2026-06-01T12:00:00.250000+00:00"  # the children's clock


@pytest.mark.parametrize("name", NAMES)
def test_the_plain_classes_have_the_pydantic_fields_in_order_with_their_defaults(
    name: str,
) -> None:
    real, plain = getattr(model, name), getattr(model_plain, name)
    fields = real.model_fields
    assert [f[0] for f in plain._fields] == list(fields)
    for fname, _, default, factory in plain._fields:
        info = fields[fname]
        if info.is_required():
            assert default is model_plain._REQUIRED and factory is None, fname
        elif info.default_factory is not None:
            assert factory is not None and factory() == info.default_factory(), fname
        else:
            assert default == info.default, fname
    assert list(plain._computed) == list(real.model_computed_fields)


def _both(name: str, **values: Any) -> tuple[Any, Any]:
    return getattr(model, name)(**values), getattr(model_plain, name)(**values)


def _node(**over: Any) -> dict[str, Any]:
    return {
        "id": "n:1",
        "namespace": "p",
        "kind": "decision",
        "text": "harbor [[lantern]] café",
        "props": {"source": "crm", "n": 2, "nested": {"a": [1, 2.5, None]}},
        "created_at": T0,
        "updated_at": T0.replace(microsecond=400000),
        "tier": 2,  # converted to Tier by both
        "base_key": 1,  # an int given to a float field: a float in both
        **over,
    }


def test_the_plain_classes_dump_and_copy_as_pydantic_does() -> None:
    offset = timezone(timedelta(hours=2))
    real, plain = _both("Node", **_node(last_read_at=T0.astimezone(offset), degree=3))
    assert plain.model_dump(mode="json") == real.model_dump(mode="json")
    assert plain.model_dump() == real.model_dump()
    assert plain.model_dump(exclude={"key", "props"}) == real.model_dump(exclude={"key", "props"})
    assert type(plain.base_key) is float and plain.tier is Tier.WARM
    assert json.dumps(plain.model_dump(mode="json")) == json.dumps(real.model_dump(mode="json"))
    moved = {"tier": Tier.COLD, "text": "moved"}
    assert plain.model_copy(update=moved).model_dump() == real.model_copy(update=moved).model_dump()
    assert plain.model_copy().model_dump() == plain.model_dump() and plain.text == real.text

    link = {"id": "n:2", "kind": "about", "direction": "out", "weight": 1, "reinforced_at": T0}
    links = [_both("LiveLink", **link, decayed_weight=0.5 + i) for i in range(2)]
    why: dict[str, Any] = {
        "matched_terms": ("harbor",),  # a tuple: a list in both
        "text_score": 2,
        "text_norm": 1.0,
        "activation": 0.25,
        "activation_norm": 0.5,
        "edges_part": 0.2,
        "read_part": 0.05,
        "spread_part": 0.0,
        "last_reinforced_at": None,
        "tier": 1,
        "summary": "matched 'harbor'",
        "similarity": 1,
    }
    real_why = model.Why(**why, live_links=[r for r, _ in links])
    plain_why = model_plain.Why(**why, live_links=[p for _, p in links])
    real_hit = model.RecallHit(node=real, score=1, why=real_why)
    plain_hit = model_plain.RecallHit(node=plain, score=1, why=plain_why)
    assert plain_hit.model_dump(mode="json") == real_hit.model_dump(mode="json")
    assert list(plain_hit.model_dump(mode="json")) == [
        "node",
        "score",
        "why",
        *["id", "text", "kind", "tier"],
    ]
    assert (plain_hit.id, plain_hit.text, plain_hit.kind, plain_hit.tier) == (
        real_hit.id,
        real_hit.text,
        real_hit.kind,
        real_hit.tier,
    )
    stats = {
        "namespace": "p",
        "backend": "kuzu",
        "location": "x",
        "nodes": 3,
        "edges": 1,
        "by_tier": {"hot": 3},
        "pinned": 0,
        "review_queue": 0,
        "audit_entries": 2,
        "half_life_days": 30,
        "reference_activation": 0.5,
    }
    real_stats, plain_stats = _both("Stats", **stats)
    assert plain_stats.model_dump(mode="json") == real_stats.model_dump(mode="json")
    audit = {"seq": 1, "namespace": "p", "at": T0, "action": "freeze", "node_id": "n:1"}
    real_audit, plain_audit = _both("AuditEntry", **audit, from_tier=3, to_tier=4, payload=None)
    assert plain_audit.model_dump(mode="json") == real_audit.model_dump(mode="json")


def test_the_plain_classes_are_frozen_and_refuse_unknown_or_missing_fields() -> None:
    node = model_plain.Node(**_node())
    with pytest.raises(TypeError, match="frozen"):
        node.text = "changed"
    with pytest.raises(TypeError, match="unexpected colour"):
        model_plain.Node(**_node(colour="red"))
    with pytest.raises(TypeError, match="text is required"):
        model_plain.Node(**{k: v for k, v in _node().items() if k != "text"})
    assert node == model_plain.Node(**_node()) and node != model_plain.Node(**_node(text="x"))


def _store(path: Path) -> None:
    """A small store with what a hit can carry: props, links, a pinned, a replaced and a
    read memory, and warm and cold ones after a maintain pass."""
    clock = FixedClock(T0)
    with Brain.open(path, namespace="p", clock=clock) as b:
        for i in range(6):
            b.remember(
                f"harbor lantern note {i} about the quay",
                kind="note" if i % 2 else "decision",
                id=f"n:{i}",
                props={"source": "crm", "i": i} if i % 3 == 0 else None,
                links=[f"n:{j}" for j in range(i)][-2:],
                at=T0 - timedelta(days=200 * (i % 3)),
            )
        b.remember("the harbor lantern was replaced", id="n:new", supersedes=["n:0"])
        b.pin("n:1")
        b.read(["n:2"])
        clock.advance(days=30)
        b.maintain()


def _child(db: Path, args: list[str], *, pydantic_first: bool) -> subprocess.CompletedProcess[str]:
    """``ebb ARGS`` run as the console script runs it, with the clock stopped at NOW; says on
    stderr whether pydantic was imported. ``pydantic_first``: the models are imported before
    the command, so it builds pydantic models (what every release before this one did)."""
    code = (
        "import sys, datetime\n"
        "class Watch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'pydantic':\n"
        "            sys.stderr.write('IMPORTS pydantic\\n')\n"
        "sys.meta_path.insert(0, Watch())\n"
        "import ebb_core.clock\n"
        f"ebb_core.clock.SystemClock.now = lambda self: datetime.datetime.fromisoformat({NOW!r})\n"
        + ("import ebb_core.model\n" if pydantic_first else "")
        + f"sys.argv = ['ebb', '--db', {str(db)!r}, '-n', 'p', *{args!r}]\n"
        "from ebb_core.cli import main\n"
        "main()\n"
    )
    env = {"COLUMNS": "160", "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )


@pytest.mark.parametrize(
    "args",
    [
        ["recall", "harbor lantern", "-k", "10", "--archived", "--json"],
        ["recall", "quay", "--depth", "3", "--why"],
        ["recall", "lantern", "--kind", "note", "--no-reinforce", "--json"],
        ["recall", "nothing-matches-this", "--json"],
        ["stats", "--json"],
        ["stats"],
    ],
)
def test_a_one_shot_command_prints_what_the_pydantic_models_print(
    tmp_path: Path, args: list[str]
) -> None:
    _store(tmp_path / "made.kuzu")
    db = tmp_path / "s.kuzu"  # one path for both (`stats` prints it): a fresh copy each
    runs, looks = [], []
    look = ["recall", "harbor", "-k", "10", "--archived", "--no-reinforce", "--json"]
    for pydantic_first in (False, True):
        shutil.copy(tmp_path / "made.kuzu", db)
        runs.append(_child(db, args, pydantic_first=pydantic_first))
        # what a reinforcing recall wrote: the next look (pydantic both times) agrees too
        looks.append(_child(db, look, pydantic_first=True))
    plain, real = runs
    assert plain.returncode == 0 and real.returncode == 0, plain.stderr + real.stderr
    assert "IMPORTS pydantic" not in plain.stderr
    assert "IMPORTS pydantic" in real.stderr
    assert plain.stdout == real.stdout
    if "--json" in args and args[0] == "recall" and "nothing" not in args[1]:
        hits = json.loads(plain.stdout)
        assert hits and {"node", "why", "id", "tier"} <= set(hits[0])
    assert looks[0].returncode == 0 and looks[0].stdout == looks[1].stdout


def test_tests_and_libraries_keep_the_pydantic_models(tmp_path: Path) -> None:
    """`main([...])` (CliRunner, another program) is not a one-shot process: the models stay
    pydantic, whatever ran before."""
    from click.testing import CliRunner
    from pydantic import BaseModel

    from ebb_core.cli import main

    _store(tmp_path / "s.kuzu")
    done = CliRunner().invoke(main, ["--db", str(tmp_path / "s.kuzu"), "-n", "p", "stats"])
    assert done.exit_code == 0, done.output
    assert issubclass(model.Node, BaseModel) and issubclass(model.RecallHit, BaseModel)
    import ebb_core

    assert ebb_core._plain_models is False
