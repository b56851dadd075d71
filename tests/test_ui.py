"""``ebb ui`` over real HTTP: a real ``ebb ui`` process on a real store, spoken to with httpx.

What is checked: the page and its views answer; a change is refused without the page's token, from
a foreign origin, with a foreign Host header or as a form post; approvals need a name and only
reach the review queue; ``--host`` needs ``--token``; user text reaches the SVG escaped; the decay
chart agrees with ``Brain.activation`` at "now"; and the page works while ``ebb mcp`` holds the
same store.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

import httpx

from ebb_core import Brain
from test_mcp_e2e import ebb_argv

NS = "uitest"
TOKEN_RE = re.compile(r'<meta name="ebb-token" content="([^"]+)">')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def seed(db: Path) -> None:
    """Five memories, three of them in the review queue, one with markup in its text."""
    with Brain.open(db, backend="kuzu", namespace=NS) as b:
        seed_brain(b)


def seed_brain(b: Brain) -> None:
    now = datetime.now(timezone.utc)
    past = now - timedelta(days=20)
    b.remember("Acme renews monthly from March", id="fact:acme-renewal", at=past)
    b.remember("Client Acme, 40 seats", id="client:acme", links=["fact:acme-renewal"], at=past)
    b.remember(
        "Old seat pricing analysis",
        id="note:old-pricing",
        links=["client:acme"],
        at=now - timedelta(days=75),
    )
    markup = "Draft <script>alert(1)</script> & notes"
    b.remember(markup, id="note:draft", links=["client:acme"], at=now - timedelta(days=50))
    b.remember(
        "Kickoff meeting notes",
        id="meeting:kickoff",
        links=["client:acme"],
        at=now - timedelta(days=30),
    )
    b.forget("note:old-pricing", "superseded by outcome pricing", actor="agent")
    b.forget("note:draft", "a draft nobody needs", actor="agent")
    b.forget("meeting:kickoff", "duplicate of the CRM entry", actor="agent")


def cli_json(db: Path, *args: str) -> Any:
    env = {**os.environ, "EBB_DB_PATH": str(db), "EBB_NAMESPACE": NS, "EBB_BACKEND": "kuzu"}
    done = subprocess.run(
        ebb_argv(*args, "--json"), env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


class UiServer:
    """A running ``ebb ui`` process and what the page told it."""

    def __init__(
        self, db: Path, *extra: str, host: str = "127.0.0.1", env: dict[str, str] | None = None
    ) -> None:
        self.db = db
        self.port = free_port()
        self.base = f"http://{host}:{self.port}"
        if host != "127.0.0.1":
            extra = ("--host", host, *extra)
        env = {
            **os.environ,
            "EBB_DB_PATH": str(db),
            "EBB_NAMESPACE": NS,
            "EBB_BACKEND": "kuzu",
            **(env or {}),
        }
        self.proc = subprocess.Popen(
            ebb_argv("ui", "--port", str(self.port), *extra),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.token = ""

    def wait_ready(self, timeout: float = 30) -> UiServer:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"ebb ui exited: {self.proc.stderr.read()}")  # type: ignore[union-attr]
            try:
                r = httpx.get(self.base + "/", timeout=2)
            except httpx.TransportError:
                time.sleep(0.1)
                continue
            if r.status_code == 200:
                match = TOKEN_RE.search(r.text)
                assert match, "the page carries its token"
                self.token = match.group(1)
            return self
        raise AssertionError("ebb ui did not answer")

    def post(self, path: str, body: object, **headers: str) -> httpx.Response:
        return httpx.post(self.base + path, json=body, headers=headers, timeout=30)

    def stop(self) -> str:
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err


@pytest.fixture
def store(tmp_path: Path) -> Path:
    db = tmp_path / "ui.kuzu"
    seed(db)
    return db


@pytest.fixture
def ui(store: Path) -> Iterator[UiServer]:
    server = UiServer(store).wait_ready()
    yield server
    server.stop()


def tiers(db: Path) -> dict[str, str]:
    with Brain.open(db, backend="kuzu", namespace=NS, wait=15) as b:
        return {n.id: n.tier.label for batch in b.store.scan_nodes(NS) for n in batch}


def test_the_views_answer_with_the_store_s_contents(ui: UiServer) -> None:
    queue = httpx.get(ui.base + "/api/queue").json()
    assert queue["total"] == 3
    queued = [i["id"] for i in queue["items"]]
    assert queued == ["note:old-pricing", "note:draft", "meeting:kickoff"]
    page = httpx.get(ui.base + "/api/queue", params={"limit": 2}).json()
    assert page["total"] == 3 and len(page["items"]) == 2
    first = queue["items"][0]
    assert first["reason"] == "forgotten: superseded by outcome pricing"
    assert first["spark"].startswith("<svg") and "<polyline points=" in first["spark"]
    assert first["links"][0]["id"] == "client:acme"
    assert [(e["action"], e["by"]) for e in first["history"]][-1] == ("forget", "agent")
    stats = httpx.get(ui.base + "/api/stats").json()
    [mine] = [s for s in stats["namespaces"] if s["namespace"] == NS]
    assert mine["by_tier"]["frozen"] == 3 and mine["nodes"] == 5
    log = httpx.get(ui.base + "/api/log", params={"action": "forget"}).json()["entries"]
    assert {e["id"] for e in log} == {"note:old-pricing", "note:draft", "meeting:kickoff"}
    assert httpx.get(ui.base + "/api/log", params={"by": "nobody"}).json()["entries"] == []
    [newest] = httpx.get(ui.base + "/api/log", params={"by": "AGE", "limit": 1}).json()["entries"]
    assert (newest["action"], newest["id"], newest["by"]) == ("forget", "meeting:kickoff", "agent")
    graph = httpx.get(ui.base + "/api/graph", params={"id": "client:acme"}).json()
    assert "client:acme" in {n["id"] for n in graph["nodes"]}
    assert len(graph["links"]) == 4 and graph["svg"].startswith("<svg")
    missing = httpx.get(ui.base + "/api/graph", params={"id": "note:nope"})
    assert missing.status_code == 404 and "note:nope" in missing.json()["error"]
    bad = httpx.get(ui.base + "/api/log", params={"limit": "many"})
    assert bad.status_code == 400 and "limit" in bad.json()["error"]


def test_user_text_reaches_the_svg_escaped(ui: UiServer) -> None:
    svg = httpx.get(ui.base + "/api/graph", params={"id": "note:draft"}).json()["svg"]
    assert "<script>" not in svg
    assert "Draft &lt;script&gt;alert(1)&lt;/script&gt; &amp; notes" in svg
    page = httpx.get(ui.base + "/")
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"


def test_the_decay_chart_agrees_with_the_engine_now(store: Path) -> None:
    with Brain.open(store, backend="kuzu", namespace=NS) as b:
        b.maintain()  # exact keys, so the engine's activation includes its neighbours' share
    server = UiServer(store).wait_ready()
    try:
        ids = "client:acme,fact:acme-renewal"
        r = httpx.get(server.base + "/api/decay", params={"ids": ids, "past": 30, "future": 0})
        data = r.json()
        assert r.status_code == 200, data
        assert "hot ≥ 0.25×ref" in data["svg"] and "cold ≥ 0.02×ref" in data["svg"]
    finally:
        server.stop()
    with Brain.open(store, backend="kuzu", namespace=NS) as b:
        for i in ids.split(","):
            # The last point of the chart is "now" (a moment before this open).
            assert data["now"][i] == pytest.approx(b.activation(i), rel=1e-3)


def test_a_change_without_the_page_s_token_is_refused(ui: UiServer) -> None:
    before = tiers(ui.db)
    approve = {"ids": ["note:draft"], "by": "mallory"}
    no_token = ui.post("/api/approve", approve, Origin="https://evil.example")
    assert no_token.status_code == 403 and "cross-origin" in no_token.json()["error"]
    same_origin_no_token = ui.post("/api/approve", approve)
    assert same_origin_no_token.status_code == 403
    assert "X-Ebb-Token" in same_origin_no_token.json()["error"]
    wrong = ui.post("/api/restore", {"id": "note:draft"}, **{"X-Ebb-Token": "guess"})
    assert wrong.status_code == 403
    foreign = ui.post(
        "/api/approve", approve, Origin="https://evil.example", **{"X-Ebb-Token": ui.token}
    )
    assert foreign.status_code == 403
    # What a cross-site HTML form can send (no custom header, a form body) is refused too.
    form = httpx.post(ui.base + "/api/approve", data={"ids": "note:draft", "by": "mallory"})
    assert form.status_code == 403
    form_with_token = httpx.post(
        ui.base + "/api/approve",
        data={"ids": "note:draft", "by": "mallory"},
        headers={"X-Ebb-Token": ui.token},
    )
    assert form_with_token.status_code == 415
    # DNS rebinding: a page served from another name that resolves to 127.0.0.1.
    rebound = httpx.get(ui.base + "/api/queue", headers={"Host": f"evil.example:{ui.port}"})
    assert rebound.status_code == 403
    assert httpx.get(ui.base + "/api/approve").status_code == 405
    ui.stop()
    assert tiers(ui.db) == before
    log = cli_json(ui.db, "log", "--action", "delete")
    assert log == []


def test_approve_needs_a_name_and_reaches_only_the_review_queue(ui: UiServer) -> None:
    h = {"X-Ebb-Token": ui.token}
    nameless = ui.post("/api/approve", {"ids": ["note:draft"], "by": "  "}, **h)
    assert nameless.status_code == 400 and "by is required" in nameless.json()["error"]
    live = ui.post("/api/approve", {"ids": ["client:acme"], "by": "Ada"}, **h)
    assert live.status_code == 400 and "not in the review queue" in live.json()["error"]
    restore_live = ui.post("/api/restore", {"id": "client:acme"}, **h)
    assert restore_live.status_code == 400
    not_json = httpx.post(
        ui.base + "/api/approve",
        content=b"{not json",
        headers={**h, "Content-Type": "application/json"},
    )
    assert not_json.status_code == 400 and "not JSON" in not_json.json()["error"]
    ok = ui.post("/api/approve", {"ids": ["note:draft"], "by": "Ada Lovelace", "note": "dup"}, **h)
    assert ok.status_code == 200 and ok.json() == {"deleted": ["note:draft"]}
    back = ui.post("/api/restore", {"id": "meeting:kickoff", "by": "Ada Lovelace"}, **h)
    assert back.json() == {"restored": "meeting:kickoff", "tier": "hot"}
    ui.stop()
    after = tiers(ui.db)
    assert "note:draft" not in after and after["meeting:kickoff"] == "hot"
    assert after["note:old-pricing"] == "frozen" and after["client:acme"] == "hot"
    [deleted] = cli_json(ui.db, "log", "--action", "delete")
    assert deleted["node_id"] == "note:draft" and deleted["actor"] == "Ada Lovelace"
    [restored] = cli_json(ui.db, "log", "--action", "restore")
    assert restored["actor"] == "Ada Lovelace"


def test_another_interface_needs_a_token(store: Path, tmp_path: Path) -> None:
    env = {**os.environ, "EBB_DB_PATH": str(store), "EBB_NAMESPACE": NS}
    env.pop("EBB_UI_TOKEN", None)
    done = subprocess.run(
        ebb_argv("ui", "--host", "0.0.0.0", "--port", str(free_port())),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "--token" in done.stderr and "Traceback" not in done.stderr


def test_with_a_token_every_request_carries_it(store: Path) -> None:
    secret = "correct-horse-battery-staple"
    # 127.0.0.2 stands in for another interface: anything but the loopback name needs a token.
    server = UiServer(store, "--token", secret, host="127.0.0.2").wait_ready()
    try:
        assert server.token == ""  # the page itself needs the token
        assert httpx.get(server.base + "/").status_code == 401
        assert httpx.get(server.base + "/api/queue").status_code == 401
        assert httpx.get(server.base + "/", params={"token": "wrong"}).status_code == 401
        with httpx.Client(base_url=server.base, follow_redirects=True) as c:
            first = c.get("/", params={"token": secret})
            assert first.status_code == 200 and TOKEN_RE.search(first.text)
            assert "httponly" in first.history[0].headers["set-cookie"].lower()
            assert len(c.get("/api/queue").json()["items"]) == 3
            match = TOKEN_RE.search(first.text)
            assert match
            h = {"X-Ebb-Token": match.group(1), "Origin": server.base}
            back = c.post("/api/restore", json={"id": "note:draft", "by": "Ada"}, headers=h)
            assert back.status_code == 200, back.text
            h["Origin"] = "http://evil.example"
            refused = c.post("/api/restore", json={"id": "meeting:kickoff"}, headers=h)
            assert refused.status_code == 403
    finally:
        server.stop()
    assert tiers(store)["meeting:kickoff"] == "frozen" and tiers(store)["note:draft"] == "hot"


def test_the_page_works_while_ebb_mcp_holds_the_store(store: Path) -> None:
    pytest.importorskip("mcp")
    env = {**os.environ, "EBB_DB_PATH": str(store), "EBB_NAMESPACE": NS, "EBB_BACKEND": "kuzu"}
    port = free_port()
    mcp = subprocess.Popen(
        ebb_argv("mcp", "--transport", "http", "--port", str(port), "--idle-release", "600"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    server = None
    try:
        deadline = time.monotonic() + 30
        while "serving" not in (line := mcp.stderr.readline()):  # type: ignore[union-attr]
            assert line and time.monotonic() < deadline, "ebb mcp did not start"
        # ebb mcp now holds the embedded store (idle release 600 s); the page asks for it.
        server = UiServer(store, "--wait", "20").wait_ready()
        items = httpx.get(server.base + "/api/queue", timeout=30).json()["items"]
        assert len(items) == 3
        h = {"X-Ebb-Token": server.token}
        ok = server.post("/api/approve", {"ids": ["note:old-pricing"], "by": "Grace"}, **h)
        assert ok.status_code == 200, ok.text
    finally:
        if server is not None:
            server.stop()
        mcp.terminate()
        mcp.communicate(timeout=15)
    assert "note:old-pricing" not in tiers(store)


def test_without_the_extra_ebb_ui_names_it(store: Path) -> None:
    # Starlette and uvicorn made unimportable, as in an install without the `ui` extra.
    script = (
        "import sys; sys.modules['starlette'] = None; sys.modules['uvicorn'] = None\n"
        "from ebb_core.cli import main\n"
        f"main(['--db', {str(store)!r}, 'ui', '--port', '{free_port()}'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "pip install 'ebb-memory[ui]'" in done.stderr and "Traceback" not in done.stderr


def test_a_port_in_use_is_a_clear_error(ui: UiServer) -> None:
    env = {**os.environ, "EBB_DB_PATH": str(ui.db), "EBB_NAMESPACE": NS}
    done = subprocess.run(
        ebb_argv("ui", "--port", str(ui.port)), env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert f"port {ui.port}" in done.stderr and "--port" in done.stderr
    assert "Traceback" not in done.stderr
    # The running page kept its store and still answers.
    assert len(httpx.get(ui.base + "/api/queue").json()["items"]) == 3


@pytest.mark.parametrize("ci", ["true", ""])
def test_install_browser_fails_only_under_ci_when_chromium_cannot_be_had(
    tmp_path: Path, ci: str
) -> None:
    # A PATH with neither chromium, chromedriver nor apt-get: the browser cannot be had.
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("id", "sudo"):
        found = shutil.which(tool)
        if found:
            (bare / tool).symlink_to(found)
    script = Path(__file__).resolve().parents[1] / "scripts" / "install-browser"
    bash = shutil.which("bash")
    assert bash
    done = subprocess.run(
        [bash, str(script)],
        env={"PATH": str(bare), "CI": ci},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "no chromium/chromedriver and no apt-get" in done.stderr
    if ci:
        assert done.returncode == 1 and "CI=true" in done.stderr
    else:
        assert done.returncode == 0 and "will be skipped" in done.stderr


@pytest.mark.neo4j
def test_approve_and_restore_on_neo4j(neo4j_uri: str, tmp_path: Path) -> None:
    from ebb_core.neo4j import Neo4jStore

    with Brain(Neo4jStore(neo4j_uri), namespace=NS) as b:
        seed_brain(b)
    env = {"EBB_BACKEND": "neo4j", "NEO4J_URI": neo4j_uri}
    server = UiServer(tmp_path / "unused.kuzu", env=env).wait_ready()
    try:
        assert len(httpx.get(server.base + "/api/queue").json()["items"]) == 3
        assert (
            httpx.get(server.base + "/api/graph", params={"id": "client:acme"}).status_code == 200
        )
        assert httpx.get(server.base + "/api/decay").status_code == 200
        h = {"X-Ebb-Token": server.token}
        ok = server.post("/api/approve", {"ids": ["note:draft"], "by": "Ada Lovelace"}, **h)
        assert ok.json() == {"deleted": ["note:draft"]}
        back = server.post("/api/restore", {"id": "meeting:kickoff", "by": "Ada Lovelace"}, **h)
        assert back.json() == {"restored": "meeting:kickoff", "tier": "hot"}
        refused = server.post("/api/approve", {"ids": ["note:old-pricing"], "by": "x"})
        assert refused.status_code == 403
    finally:
        server.stop()
    with Brain(Neo4jStore(neo4j_uri), namespace=NS) as b:
        deleted = b.audit_log(10, action="delete")
        assert [(e.node_id, e.actor) for e in deleted] == [("note:draft", "Ada Lovelace")]
        assert b.get("meeting:kickoff").tier.label == "hot"
        assert b.get("note:old-pricing").tier.label == "frozen"
