"""``ebb ui`` in a real browser: headless Chromium driven through Selenium and chromedriver.

A person opens the review queue, is stopped from approving without a name, approves one memory
with a name, restores another, looks at the graph, the decay chart, the audit log and the stats;
afterwards the store and ``ebb log`` hold exactly that. A page from another origin, in the same
browser, posts to the approve endpoint and changes nothing. Screenshots of every view go to
``EBB_UI_SCREENSHOTS`` (a folder) when set, else to the test's temporary folder; the README's
``docs/ui.png`` is one of them.

Needs ``chromium`` and ``chromedriver`` (``scripts/install-browser``, run by ``make test``):
skipped without them, a failure under ``CI=true``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("selenium")
pytest.importorskip("starlette")

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from conftest import in_ci
from test_ui import UiServer, cli_json, seed, tiers

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    browser, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if not browser or not chromedriver:
        message = "no chromium/chromedriver: run scripts/install-browser"
        if in_ci():
            pytest.fail(f"CI=true: the browser tests must run: {message}")
        pytest.skip(message)
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1100,820",
        "--hide-scrollbars",
    ):
        options.add_argument(arg)
    d = webdriver.Chrome(options=options, service=Service(chromedriver))
    d.set_script_timeout(20)
    yield d
    d.quit()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("EBB_UI_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def card(d: Any, memory: str) -> Any:
    return d.find_element(By.CSS_SELECTOR, f'article.card[data-id="{memory}"]')


def status_says(d: Any, text: str, timeout: float = 15) -> None:
    WebDriverWait(d, timeout).until(ec.text_to_be_present_in_element((By.ID, "status"), text))


def open_view(d: Any, view: str) -> None:
    d.find_element(By.CSS_SELECTOR, f'nav button[data-view="{view}"]').click()
    WebDriverWait(d, 15).until(
        lambda d: (
            d.execute_script("return !document.body.dataset.loading")
            and d.execute_script("return document.body.dataset.view") == view
        )
    )


def test_a_person_reviews_in_the_browser(driver: Any, tmp_path: Path, shots: Path) -> None:
    db = tmp_path / "browser.kuzu"
    seed(db)
    server = UiServer(db).wait_ready()
    d = driver
    try:
        # A page from another origin in the same browser posts without the token: refused.
        d.get("data:text/html,<title>elsewhere</title>")
        status = d.execute_async_script(
            """const done = arguments[arguments.length - 1];
            fetch(arguments[0], {method: "POST", headers: {"Content-Type": "application/json"},
              body: JSON.stringify({ids: ["note:draft"], by: "mallory"})})
              .then(r => done(r.status)).catch(e => done(String(e)));""",
            server.base + "/api/approve",
        )
        # The browser either blocks the preflighted request or the server answers 403.
        assert status != 200
        assert tiers(db)["note:draft"] == "frozen"

        d.get(server.base + "/")
        WebDriverWait(d, 15).until(
            lambda d: len(d.find_elements(By.CSS_SELECTOR, "article.card")) == 3
        )
        assert d.find_element(By.CSS_SELECTOR, "#queue .count").text == "3 memories wait."
        assert "superseded by outcome pricing" in card(d, "note:old-pricing").text
        assert card(d, "note:old-pricing").find_elements(By.CSS_SELECTOR, "svg.spark polyline")
        assert "Draft <script>alert(1)</script> & notes" in card(d, "note:draft").text
        d.save_screenshot(str(shots / "queue.png"))

        # Approving without a name is stopped in the page (and would be refused by the server).
        card(d, "note:draft").find_element(By.CSS_SELECTOR, "button.approve").click()
        status_says(d, "Type your name first")
        d.find_element(By.ID, "approver").send_keys("Ada Lovelace")
        card(d, "note:draft").find_element(By.CSS_SELECTOR, "button.approve").click()
        WebDriverWait(d, 10).until(ec.alert_is_present())
        d.switch_to.alert.accept()
        status_says(d, "Deleted note:draft; approved by Ada Lovelace.")
        card(d, "meeting:kickoff").find_element(By.CSS_SELECTOR, "button.restore").click()
        status_says(d, "Restored meeting:kickoff to hot.")
        left = [c.get_attribute("data-id") for c in d.find_elements(By.CSS_SELECTOR, "article")]
        assert left == ["note:old-pricing"]
        d.save_screenshot(str(shots / "queue-after.png"))

        card(d, "note:old-pricing").find_element(By.XPATH, ".//button[.='Neighbourhood']").click()
        WebDriverWait(d, 15).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, '#graph g.node[data-id="client:acme"]')
        )
        # Clicking a memory centres the graph on it.
        d.find_element(By.CSS_SELECTOR, '#graph g.node[data-id="client:acme"]').click()
        WebDriverWait(d, 15).until(
            lambda d: (
                d.find_element(By.ID, "graph-id").get_attribute("value") == "client:acme"
                and len(d.find_elements(By.CSS_SELECTOR, "#graph g.node")) == 4
            )
        )
        drawn = {g.get_attribute("data-id") for g in d.find_elements(By.CSS_SELECTOR, "g.node")}
        assert drawn == {"client:acme", "fact:acme-renewal", "note:old-pricing", "meeting:kickoff"}
        d.save_screenshot(str(shots / "graph.png"))

        open_view(d, "decay")
        assert d.find_elements(By.CSS_SELECTOR, "#decay polyline.series")
        d.save_screenshot(str(shots / "decay.png"))

        open_view(d, "log")
        d.find_element(By.ID, "log-by").send_keys("Ada")
        d.find_element(By.CSS_SELECTOR, "#log-form button").click()
        WebDriverWait(d, 15).until(
            lambda d: len(d.find_elements(By.CSS_SELECTOR, "#log tbody tr")) == 2
        )
        rows = [r.text for r in d.find_elements(By.CSS_SELECTOR, "#log tbody tr")]
        assert "restore meeting:kickoff" in rows[0] and "Ada Lovelace" in rows[0]
        assert "delete note:draft" in rows[1] and "Ada Lovelace" in rows[1]
        d.save_screenshot(str(shots / "log.png"))

        open_view(d, "stats")
        row = d.find_element(By.CSS_SELECTOR, "#stats tbody tr.current").text
        assert row.split() == ["uitest", "4", "3", "0", "0", "1", "3", "0", "1", "5"]
        d.save_screenshot(str(shots / "stats.png"))
    finally:
        server.stop()

    after = tiers(db)
    assert "note:draft" not in after
    assert after == {
        "fact:acme-renewal": "hot",
        "client:acme": "hot",
        "note:old-pricing": "frozen",
        "meeting:kickoff": "hot",
    }
    log = cli_json(db, "log")
    assert isinstance(log, list)
    assert [(e["action"], e["node_id"], e["actor"]) for e in log[-2:]] == [
        ("delete", "note:draft", "Ada Lovelace"),
        ("restore", "meeting:kickoff", "Ada Lovelace"),
    ]
    assert log[-2]["payload"]["node"]["text"] == "Draft <script>alert(1)</script> & notes"
    for name in ("queue", "queue-after", "graph", "decay", "log", "stats"):
        assert (shots / f"{name}.png").stat().st_size > 10_000
