"""``ebb mcp`` under the official MCP Inspector, in its CLI mode, over stdio and HTTP.

The Inspector is pinned in ``tools/mcp-inspector`` (package.json + package-lock.json); the first
run installs it there (``npm install --no-save`` of the locked versions); later runs reuse it.
Without Node.js the tests skip, except under CI (``CI=true``), where a missing ``npx`` fails them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from ebb_core.mcp_server import TOOL_NAMES
from test_mcp_e2e import NS, cli, ebb_argv, http_server

INSPECTOR_DIR = Path(__file__).resolve().parents[1] / "tools" / "mcp-inspector"
IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")

Inspector = Callable[..., subprocess.CompletedProcess[str]]


def unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: the Inspector tests must run)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def inspector(tmp_path_factory: pytest.TempPathFactory) -> Inspector:
    """Runs ``npx mcp-inspector --cli ARGS`` from the pinned install, with a throwaway home."""
    npx, npm = shutil.which("npx"), shutil.which("npm")
    if npx is None or npm is None:
        unavailable("npx/npm not found: install Node.js to run the MCP Inspector tests")
    assert npx is not None and npm is not None
    lock = INSPECTOR_DIR / "package-lock.json"
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()
    stamp = INSPECTOR_DIR / "node_modules" / ".ebb-lock-sha256"
    installed = (INSPECTOR_DIR / "node_modules" / ".bin" / "mcp-inspector").exists()
    if not installed or not stamp.exists() or stamp.read_text() != digest:
        # Not `npm ci`: it refuses this lock because one of vite's optional dependencies
        # (napi-windows-process-start-time) is not on the registry, so `npm install` leaves it
        # out of the lock. `install --no-save` installs exactly the locked versions (checked).
        done = subprocess.run(
            [npm, "install", "--no-save", "--ignore-scripts", "--no-audit", "--no-fund"],
            cwd=INSPECTOR_DIR,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode != 0:
            unavailable(f"npm install in {INSPECTOR_DIR} failed: {done.stderr[-2000:]}")
        stamp.write_text(digest)
    home = tmp_path_factory.mktemp("inspector-home")
    env = {
        **os.environ,
        "HOME": str(home),
        "MCP_CATALOG_PATH": str(home / "catalog.json"),
        "MCP_CLIENT_CONFIG_PATH": str(home / "client.json"),
        "NO_COLOR": "1",
    }

    def run(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [npx, "--no-install", "mcp-inspector", "--cli", *args],
            cwd=INSPECTOR_DIR,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run


def result_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(done.stdout)
    inner: dict[str, Any] = payload.get("result", payload)
    return inner


def stdio_target(db: Path) -> list[str]:
    return [*ebb_argv(), "mcp", "--db", str(db), "--namespace", NS]


def seed(db: Path) -> None:
    for args in (
        ("remember", "We price by outcome now", "--kind", "decision", "--id", "decision:outcome"),
        (
            "remember",
            "Acme signed on outcome pricing",
            "--id",
            "fact:acme",
            "--link",
            "decision:outcome",
        ),
    ):
        done = cli(db, *args)
        assert done.returncode == 0, done.stderr


def test_inspector_lists_the_tools_and_finds_their_schemas_portable(
    inspector: Inspector, tmp_path: Path
) -> None:
    db = tmp_path / "store.kuzu"
    done = inspector(
        *stdio_target(db), "--method", "tools/list", "--strict", "--format", "json", "-q"
    )
    assert done.returncode == 0, done.stderr
    tools = {t["name"]: t for t in result_of(done)["tools"]}
    assert sorted(tools) == sorted(TOOL_NAMES)
    assert tools["recall"]["inputSchema"]["required"] == ["query"]
    assert tools["recall"]["outputSchema"]["type"] == "object"
    assert all(t["annotations"]["destructiveHint"] is False for t in tools.values())


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_inspector_calls_recall_over_stdio(inspector: Inspector, tmp_path: Path, era: str) -> None:
    db = tmp_path / "store.kuzu"
    seed(db)
    done = inspector(
        *stdio_target(db),
        "--method",
        "tools/call",
        "--tool-name",
        "recall",
        "--tool-arg",
        "query=outcome pricing",
        "k=2",
        "explain=true",
        "--protocol-era",
        era,
        "--format",
        "json",
        "-q",
    )
    assert done.returncode == 0, done.stderr
    result = result_of(done)
    assert result.get("isError") in (None, False)
    hits = result["structuredContent"]["hits"]
    assert sorted(h["id"] for h in hits) == ["decision:outcome", "fact:acme"]
    why = next(h for h in hits if h["id"] == "fact:acme")["why"]
    assert why["matched_terms"] and why["live_links"][0]["id"] == "decision:outcome"
    assert "matched" in why["summary"]


def test_inspector_over_streamable_http(inspector: Inspector, tmp_path: Path) -> None:
    db = tmp_path / "store.kuzu"
    seed(db)
    with http_server(db) as url:
        listed = inspector(
            url, "--transport", "http", "--method", "tools/list", "--format", "json", "-q"
        )
        assert listed.returncode == 0, listed.stderr
        assert sorted(t["name"] for t in result_of(listed)["tools"]) == sorted(TOOL_NAMES)
        called = inspector(
            url,
            "--transport",
            "http",
            "--method",
            "tools/call",
            "--tool-name",
            "recall",
            "--tool-arg",
            "query=Acme",
            "--format",
            "json",
            "-q",
        )
        assert called.returncode == 0, called.stderr
        hits = result_of(called)["structuredContent"]["hits"]
        assert hits[0]["id"] == "fact:acme" and hits[0]["why"]["summary"]
        stats = inspector(
            url,
            "--transport",
            "http",
            "--method",
            "resources/read",
            "--uri",
            "ebb://stats",
            "--format",
            "json",
            "-q",
        )
        assert stats.returncode == 0, stats.stderr
        assert json.loads(result_of(stats)["contents"][0]["text"])["nodes"] == 2


def test_inspector_sees_bad_input_as_a_tool_error(inspector: Inspector, tmp_path: Path) -> None:
    db = tmp_path / "store.kuzu"
    seed(db)
    done = inspector(
        *stdio_target(db),
        "--method",
        "tools/call",
        "--tool-name",
        "connect",
        "--tool-args-json",
        json.dumps({"src": "fact:acme", "dst": "MATCH (n) DELETE n"}),
        "--format",
        "json",
        "-q",
    )
    assert done.returncode != 0  # the Inspector's exit code for a tool that returned isError
    result = result_of(done)
    assert result["isError"] is True
    # looked up as an existing memory (lookups stay lenient): there is none of that id
    assert "no memory 'MATCH (n) DELETE n'" in result["content"][0]["text"]
    after = cli(db, "stats", "--json")
    assert after.returncode == 0 and json.loads(after.stdout)["edges"] == 1
