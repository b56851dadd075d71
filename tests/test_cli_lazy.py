"""`ebb` loads only what a command uses: `--help` neither pydantic nor the storage engine,
`--json` commands not rich, and no command but `ebb mcp` the MCP server module.

Wall-time figures are measured outside the suite (docs/benchmarks.md, "Command line: start-up
and one-shot recall").
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("pydantic", "rich", "kuzu", "pyarrow", "numpy", "ebb_core.engine", "ebb_core.mcp_server")


def loaded_after(*args: str) -> tuple[list[str], str]:
    code = (
        "import sys\n"
        "from ebb_core.cli import main\n"
        "try:\n"
        f"    main({list(args)!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print('LOADED', sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("LOADED "), done.stdout + done.stderr
    loaded: list[str] = json.loads(last.removeprefix("LOADED ").replace("'", '"'))
    return loaded, done.stdout


def test_help_loads_nothing_heavy() -> None:
    loaded, out = loaded_after("--help")
    assert loaded == []
    assert "mcp " in out and "Serve Ebb's memory tools to an MCP client" in out


def test_a_json_command_loads_the_engine_but_not_rich_or_the_mcp_server(tmp_path: Path) -> None:
    db = str(tmp_path / "lazy.kuzu")
    loaded, out = loaded_after("--db", db, "remember", "harbor lantern", "--json")
    assert "ebb_core.engine" in loaded and "kuzu" in loaded
    assert "rich" not in loaded and "ebb_core.mcp_server" not in loaded
    assert '"text": "harbor lantern"' in out
    loaded, out = loaded_after("--db", db, "recall", "lantern")
    assert "rich" in loaded and "ebb_core.mcp_server" not in loaded
    assert "harbor lantern" in out


def test_one_shot_commands_on_a_store_without_vectors_do_not_import_numpy(
    tmp_path: Path,
) -> None:
    """numpy is imported where vectors are made or read (embeddings, kuzu/vectors): a store
    with no embedder needs none, and importing it cost a one-shot command ~0.2 s."""
    db = str(tmp_path / "plain.kuzu")
    for args in (
        ("remember", "harbor lantern", "--json"),
        ("recall", "lantern", "--json"),
        ("recall", "lantern"),
        ("stats", "--json"),
    ):
        loaded, out = loaded_after("--db", db, *args)
        assert "kuzu" in loaded and "numpy" not in loaded, (args, loaded)
        assert "lantern" in out or '"nodes": 1' in out, out


def test_the_package_imports_its_names_on_first_use() -> None:
    code = (
        "import sys, ebb_core\n"
        "assert 'ebb_core.engine' not in sys.modules and 'pydantic' not in sys.modules\n"
        "from ebb_core import Brain, Tier, __version__\n"
        "assert Brain.__module__ == 'ebb_core.engine' and Tier.HOT == 1\n"
        "assert 'Brain' in dir(ebb_core)\n"
        "try:\n"
        "    ebb_core.Nope\n"
        "except AttributeError as exc:\n"
        "    assert 'Nope' in str(exc)\n"
        "else:\n"
        "    raise SystemExit('no AttributeError')\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr


def test_link_decay_row_by_row_equals_the_vectorised_form() -> None:
    """strongest_links decays a few links row by row (no numpy import) and many with numpy:
    both are scoring.decay, and give the same weights, future-dated links included."""
    from ebb_core import scoring
    from ebb_core.kuzu.links import _decayed_weights

    now, h = 10_000_000_000, 3_600_000_000.0
    live = [(0, ("b", "about", True, 0.5 + i / 10, now - i * 900_000_000)) for i in range(-2, 9)]
    rows = _decayed_weights(live, now, h, vectorised=False)
    cols = _decayed_weights(live, now, h, vectorised=True)
    assert rows == pytest.approx(cols, rel=1e-12)
    assert rows[0] == live[0][1][3]  # reinforced after now: no decay, never more than its weight
    assert rows[-1] == pytest.approx(live[-1][1][3] * scoring.decay(8 * 900_000_000, h))
    assert all(isinstance(w, float) for w in rows + cols)
