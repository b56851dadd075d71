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

HEAVY = (
    "pydantic",
    "rich",
    "kuzu",
    "pyarrow",
    "numpy",
    "asyncio",
    "ebb_core.engine",
    "ebb_core.mcp_server",
)


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


def _loaded_by_ebb(db: str, *args: str, watch: tuple[str, ...]) -> tuple[list[str], str]:
    """Which of ``watch`` a command run as ``ebb`` (``main()`` reading ``sys.argv``, ended
    with ``os._exit``) had imported when it ended, and its output."""
    code = (
        "import os, sys\n"
        "end = os._exit\n"
        "def _exit(code):\n"
        f"    print('LOADED', sorted(m for m in {watch!r} if m in sys.modules), flush=True)\n"
        "    end(code)\n"
        "os._exit = _exit\n"
        f"sys.argv = ['ebb', '--db', {db!r}, *{list(args)!r}]\n"
        "from ebb_core.cli import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("LOADED ") and done.returncode == 0, done.stdout + done.stderr
    return json.loads(last.removeprefix("LOADED ").replace("'", '"')), done.stdout


def test_one_shot_commands_do_not_import_what_they_do_not_use(tmp_path: Path) -> None:
    """`import kuzu` imports asyncio for its AsyncConnection (~25-30 ms of a one-shot
    command): Ebb gives Kùzu's import a stand-in that imports it on first use. zipfile and
    hashlib (embedders, vector tables, an id's fourth clash), tempfile and glob (bulk loads
    and their leftovers) are imported where they are used; a one-shot recall or stats
    imports no pydantic (tests/test_cli_plain.py), which would import most of them."""
    db = str(tmp_path / "plain.kuzu")
    unused = ("asyncio", "zipfile", "tempfile", "hashlib", "glob", "pydantic")
    loaded, out = _loaded_by_ebb(db, "remember", "harbor lantern", "--json", watch=unused)
    assert "asyncio" not in loaded and "pydantic" in loaded, loaded
    for args in (("recall", "lantern", "--json"), ("recall", "lantern"), ("stats", "--json")):
        loaded, out = _loaded_by_ebb(db, *args, watch=(*unused, "kuzu"))
        assert loaded == ["kuzu"], (args, loaded)
        assert "harbor lantern" in out or '"nodes": 1' in out


def test_kuzu_async_connection_still_works_after_ebb_imported_kuzu(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from ebb_core import Brain\n"
        f"with Brain.open({str(tmp_path / 'a.kuzu')!r}) as b:\n"
        "    b.remember('harbor lantern')\n"
        "assert 'asyncio' not in sys.modules\n"
        "import asyncio, kuzu\n"
        "assert asyncio is sys.modules['asyncio'] and asyncio.__spec__ is not None\n"
        "async def go():\n"
        "    conn = kuzu.AsyncConnection(kuzu.Database(':memory:'))\n"
        "    result = await conn.execute('RETURN 40 + 2 AS x')\n"
        "    return result.get_next()\n"
        "print('ASYNC', asyncio.run(go()))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ASYNC [42]", done.stderr


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


def _ebb_process(db: Path, *args: str, before: str = "") -> subprocess.CompletedProcess[str]:
    """``ebb ARGS`` as its console script runs it (``main()`` reading ``sys.argv``), in a
    process that registered an exit handler printing TEARDOWN (``before``: code run first)."""
    code = (
        "import atexit, sys\n"
        "atexit.register(print, 'TEARDOWN')\n"
        f"{before}\n"
        f"sys.argv = ['ebb', '--db', {str(db)!r}, '-n', 'exit', *{list(args)!r}]\n"
        "from ebb_core.cli import main\n"
        "main()\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_a_finished_command_ends_without_the_teardown_and_keeps_everything(
    tmp_path: Path,
) -> None:
    """A one-shot command skips the interpreter's teardown (50-90 ms of CPU) once its store is
    closed and its output flushed: what it wrote is stored and checkpointed, its output is
    whole, its exit code kept."""
    db = tmp_path / "exit.kuzu"
    done = _ebb_process(db, "remember", "harbor lantern", "--id", "n:1", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["id"] == "n:1"  # the whole JSON, no TEARDOWN after it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exit.kuzu"]  # no WAL left
    many = _ebb_process(db, "recall", "lantern", "--json")
    assert many.returncode == 0 and json.loads(many.stdout)[0]["id"] == "n:1"
    missing = _ebb_process(db, "get", "n:404")
    assert missing.returncode == 2 and "no memory 'n:404'" in missing.stderr
    assert "TEARDOWN" not in missing.stdout
    none = _ebb_process(tmp_path / "none.kuzu", "stats")
    assert none.returncode == 6 and not (tmp_path / "none.kuzu").exists()


def test_a_store_left_open_ends_the_process_the_ordinary_way(tmp_path: Path) -> None:
    """A store the command did not close (here one the process opened itself) is closed by
    the ordinary exit, which checkpoints it: the fast exit is not taken."""
    db = tmp_path / "open.kuzu"
    leak = (
        "from ebb_core import Brain\n"
        f"held = Brain.open({str(tmp_path / 'other.kuzu')!r}, namespace='exit')\n"
        "held.remember('kept open')\n"
    )
    done = _ebb_process(db, "remember", "harbor lantern", "--json", before=leak)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("TEARDOWN")
    help_done = _ebb_process(db, "--help")
    assert help_done.returncode == 0 and "TEARDOWN" not in help_done.stdout
