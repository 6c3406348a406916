"""A walk through every dashboard page in a browser, one picture per page.

Shared by ``tests/browse/test_ui_browser.py`` (each step's expectation must hold; the pictures go to
a temp folder) and ``scripts/screenshots.py`` (the pictures in ``docs/screenshots/``, taken on
a store built with the real model). ``page`` is a Playwright page signed in as the store owner
over a store filled by :func:`tests.ui_util.populate_demo`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

PAGES = ("search", "memories", "memory", "graph", "lessons", "workspace", "session", "activity",
         "review", "health")  # fmt: skip


def click_node(page, name: str) -> None:
    """A real mouse click on a node of the cytoscape canvas (at its rendered position)."""
    pos = page.evaluate("(n) => pmGraph.getElementById(n).renderedPosition()", name)
    box = page.locator("#cy").bounding_box()
    page.mouse.click(box["x"] + pos["x"], box["y"] + pos["y"])


def tour(page, shoot: Callable[[str], None]) -> None:
    """Open each page of :data:`PAGES` in turn, wait for what it shows, and ``shoot(name)``."""
    from playwright.sync_api import expect

    page.fill("input[name=q]", "how do we deploy")
    page.keyboard.press("Enter")
    expect(page.locator("li.result").first).to_be_visible()
    page.locator("details.why").first.locator("summary").click()
    shoot("search")
    page.click("#nav-memories")
    page.click("#scope-team")
    expect(page.locator("#memories tbody tr").first).to_be_visible()
    shoot("memories")
    page.click("text=The billing service owns invoices")
    expect(page.locator("#memory-content")).to_contain_text("billing service owns invoices")
    shoot("memory")
    page.click("#nav-graph")
    expect(page.locator("#cy")).to_have_attribute("data-ready", "yes")
    click_node(page, "billing-service")
    expect(page.locator("#entity-name")).to_have_text("billing-service")
    shoot("graph")
    page.click("#nav-lessons")
    page.locator("button.similar").first.click()
    expect(page.locator(".similar-list").first).to_be_visible()
    shoot("lessons")
    page.click("#nav-workspace")
    page.locator("details summary").first.click()
    shoot("workspace")
    page.click("#nav-sessions")
    page.click("text=6f1c2d9e-demo")
    expect(page.locator("li.turn")).to_have_count(2)  # two exchanges
    shoot("session")
    page.click("#nav-activity")
    expect(page.locator("#live")).to_have_text("live")
    shoot("activity")
    page.click("#nav-review")
    expect(page.locator("article.proposal")).to_have_count(1)
    shoot("review")
    page.click("#nav-health")
    expect(page.locator("#health-status")).to_be_visible()
    shoot("health")


def wait_model_ready(home: Path, project: str = "p1", agent: str = "owner", timeout: float = 120):
    """Until the daemon serving ``home`` ranks hybrid (its embedder loads in the background)."""
    import time

    from server.http.auth import envelope_headers
    from server.http.daemon import read_info
    from server.service.core.identity import Identity
    from tests.runtime.test_daemon import call

    info = read_info(home)
    headers = envelope_headers(Identity(project_id=project, agent_id=agent), info["secret"])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = call(info, headers, "pattern_health", {})
        if status == 200 and body["result"]["structuredContent"]["modelReady"]:
            return
        time.sleep(0.1)
    raise AssertionError("the daemon's model did not become ready")
