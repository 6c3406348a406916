"""The dashboard in a real browser: Debian's Chromium driven by pytest-playwright, against a
real daemon subprocess (temp store, hash embedder) holding a realistic store.

Flows: search; open a memory, edit it, meet a conflict, delete it; propose then approve in the
review inbox; click through the graph; the live activity stream; the XSS case (content that
is ``<script>`` and an ``onerror=`` image is shown as text and never runs); a wrong or missing
login that sees nothing. ``test_screenshots_of_every_page`` walks every page
(``tests/ui_tour.py``, the same walk ``scripts/screenshots.py`` photographs for the docs).

Chromium: ``apt-get install -y chromium`` (``.ci/run`` does it when it is missing); Playwright's
own browser download is never used.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from server.http.daemon import read_info
from server.service.core.runtime import Runtime
from server.ui.logins import login_url
from tests.runtime.test_daemon import start_daemon, stop
from tests.ui_tour import PAGES, click_node, tour, wait_model_ready
from tests.ui_util import OWNER_ENV, XSS, populate_demo

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip

playwright = pytest.importorskip("playwright.sync_api")
MISSING = not Path(CHROMIUM).exists() and os.environ.get("PATTERN_REQUIRE_BROWSER") != "1"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        MISSING,
        reason=f"{CHROMIUM} is missing (apt-get install -y chromium; "
        ".ci/run installs it and sets PATTERN_REQUIRE_BROWSER=1)",
    ),  # fmt: skip
]
expect = playwright.expect


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": FLAGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": {"width": 1180, "height": 760},
            "device_scale_factor": 1}  # fmt: skip


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A populated store served by a real daemon; yields (home, ids, alice's token)."""
    base = tmp_path_factory.mktemp("ui-browser")
    home = base / "store"
    env = {**OWNER_ENV, "PATTERN_HOME": str(home), "PATTERN_ALLOWED_DIRS": str(base),
           "PATTERN_TEAM_REVIEW": "on"}  # fmt: skip
    rt = Runtime.start(env, base, background=False)
    ids = populate_demo(rt, base / "shop")
    rt.close()
    from server.http.auth import TokenStore

    token = TokenStore(home).create("alice", "p1", label="alice's laptop")
    proc = start_daemon(home, env=env)
    try:
        wait_model_ready(home)
        yield home, ids, token
    finally:
        stop(proc)


@pytest.fixture
def owner(site, page):
    """``page``, signed in as the store owner through a fresh one-time link."""
    home = site[0]
    page.goto(login_url(read_info(home)))
    expect(page).to_have_url(re.compile(r"/ui/$"))  # the link left the address bar
    return page


def base(site) -> str:
    info = read_info(site[0])
    return f"http://{info['host']}:{info['port']}"


def no_script_ran(page) -> None:
    assert page.evaluate("typeof window.pwned") == "undefined"


def test_screenshots_of_every_page(owner, tmp_path):
    """Every page opens and shows what it should; each gets a picture (``scripts/screenshots.py``
    takes the same pictures for ``docs/screenshots/`` on a store built with the real model)."""
    page = owner

    def shoot(name: str) -> None:
        page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=False)
        assert (tmp_path / f"{name}.png").stat().st_size > 5000

    tour(page, shoot)
    assert sorted(p.stem for p in tmp_path.glob("*.png")) == sorted(PAGES)
    no_script_ran(page)


def test_search(site, owner):
    page = owner
    page.fill("input[name=q]", "which database version runs on staging")
    page.keyboard.press("Enter")
    first = page.locator("li.result", has_text="Postgres 16 everywhere").first
    expect(first).to_be_visible()
    expect(page).to_have_url(re.compile(r"q=which(\+|%20)database"))  # the search is linkable
    assert re.match(r"\d\.\d{3}", first.locator(".score").inner_text())
    first.locator("details.why summary").click()
    expect(first.locator("table.kv")).to_contain_text("fused")
    page.select_option("select[name=scope]", "private")
    page.fill("input[name=q]", "invoice numbering")
    page.keyboard.press("Enter")
    expect(page.locator("li.result").first).to_contain_text("Ask Ada")
    assert "team/" not in page.locator("#results").inner_text()


def test_open_edit_conflict_delete(site, owner, context):
    page = owner
    page.goto(f"{base(site)}/ui/memories?scope=private")
    page.click("text=Prefer uv for local installs")
    url = page.url
    expect(page.locator("#revision")).to_have_text("1")
    page.fill(
        "#edit-form textarea", "Prefer uv for local installs: CI is 3x faster with its cache."
    )
    page.click("#edit-form button[type=submit]")
    expect(page.locator(".flash")).to_have_text("Saved.")
    expect(page.locator("#memory-content")).to_contain_text("3x faster with its cache")
    expect(page.locator("#revision")).to_have_text("2")
    # a second tab edits it; the first tab, still at revision 2, then meets a conflict
    other = context.new_page()
    other.goto(url)
    other.fill("#edit-form textarea", "Prefer uv everywhere (decided in the tooling sync).")
    other.click("#edit-form button[type=submit]")
    expect(other.locator(".flash")).to_have_text("Saved.")
    page.fill("#edit-form textarea", "my edit from the stale tab")
    page.click("#edit-form button[type=submit]")
    expect(page.locator("#conflict")).to_contain_text("is at revision 3, not 2")
    expect(page.locator("#current-text")).to_have_text(
        "Prefer uv everywhere (decided in the tooling sync)."
    )
    expect(page.locator("#edit-form textarea")).to_have_value("my edit from the stale tab")
    page.once("dialog", lambda d: d.accept())
    page.click("#delete-form button[type=submit]")
    expect(page.locator(".flash")).to_have_text("Deleted.")
    assert "Prefer uv" not in page.locator("#memories").inner_text()
    assert page.goto(url).status == 404


def test_propose_then_approve_in_the_review_inbox(site, browser, owner):
    home, ids, token = site
    alice_ctx = browser.new_context()
    alice = alice_ctx.new_page()
    try:
        alice.goto(f"{base(site)}/ui/login")
        alice.fill("input[name=token]", token)
        alice.click("button[type=submit]")
        expect(alice.locator(".identity")).to_have_text("token · alice")
        alice.goto(f"{base(site)}/ui/memory/{ids['alice_private']}")
        alice.select_option("#share-form select[name=category]", "decisions")
        alice.click("#share-form button[type=submit]")
        expect(alice.locator(".flash")).to_contain_text("Proposed for the team")
        alice.goto(f"{base(site)}/ui/review")
        expect(alice.locator("article.proposal")).to_have_count(2)  # hers, both pending
        expect(alice.locator("button.approve")).to_have_count(0)  # she is no reviewer

        page = owner
        page.reload()
        expect(page.locator("#nav-review .badge")).to_have_text("2")
        page.click("#nav-review")
        card = page.locator("article.proposal", has_text="Feature flags are cleaned up")
        card.locator("button.approve").first.click()
        expect(page.locator(".flash")).to_contain_text("Approved")
        expect(page.locator("#nav-review .badge")).to_have_text("1")
        page.click("#status-approved")
        done = page.locator("article.proposal", has_text="Feature flags are cleaned up")
        expect(done).to_contain_text("by owner")
        done.locator("text=team memory").click()
        expect(page.locator("h1")).to_contain_text("team/decisions")
        expect(page.locator("h1 .tag.review-approved")).to_be_visible()
        expect(page.locator("table.kv")).to_contain_text("proposed by alice")
    finally:
        alice_ctx.close()


def test_click_through_the_graph(site, owner):
    page = owner
    page.click("#nav-graph")
    expect(page.locator("#cy")).to_have_attribute("data-ready", "yes")
    click_node(page, "orders-service")
    panel = page.locator("#entity")
    expect(page.locator("#entity-name")).to_have_text("orders-service")
    expect(panel).to_contain_text("publishes order.created")
    panel.locator("a.entity-link", has_text="kafka").click()
    expect(page.locator("#entity-name")).to_have_text("kafka")
    expect(panel).to_contain_text("billing-service")  # kafka's incoming relations
    assert page.evaluate("pmGraph.$(':selected').map(n => n.id())") == ["kafka"]
    page.fill("input[name=q]", "who approves invoice numbering")
    page.keyboard.press("Enter")
    expect(page.locator("#cy")).to_have_attribute("data-ready", "yes")
    expect(page.locator("a.entity-link.focus").first).to_have_text("Ada")


def test_activity_updates_live(site, owner, context):
    page = owner
    page.click("#nav-activity")
    expect(page.locator("#live")).to_have_text("live")
    writer = context.new_page()
    writer.goto(f"{base(site)}/ui/memories?scope=private")
    writer.click("text=Flaky test test_invoice_rounding")
    writer.fill("#edit-form textarea", "Flaky test test_invoice_rounding: fixed by passing tz.")
    writer.click("#edit-form button[type=submit]")
    expect(writer.locator(".flash")).to_have_text("Saved.")
    row = page.locator("#activity tbody tr").first
    expect(row).to_contain_text("fixed by passing tz", timeout=15_000)
    expect(row).to_contain_text("update")


def test_xss_content_is_shown_as_text_and_never_runs(site, owner, context):
    home, ids, _ = site
    page = owner
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{base(site)}/ui/memory/{ids['xss']}")
    expect(page.locator("#memory-content")).to_have_text(XSS)
    assert page.locator("main script").count() == 0 and page.locator("main img").count() == 0
    page.goto(f"{base(site)}/ui/memories?scope=team")
    expect(page.locator("#memories")).to_contain_text("<script>window.pwned=1</script>")
    page.goto(f"{base(site)}/ui/?q=script+onerror+pwned")
    expect(page.locator("#results")).to_contain_text("<img src=x onerror=")
    page.click("#nav-graph")
    expect(page.locator("#cy")).to_have_attribute("data-ready", "yes")
    click_node(page, "payments-sandbox")
    expect(page.locator(".observations")).to_contain_text("<script>window.pwned=1</script>")
    page.click("#nav-activity")  # a live row with markup in it: built as text
    expect(page.locator("#live")).to_have_text("live")
    writer = context.new_page()
    writer.goto(f"{base(site)}/ui/memories?scope=private")
    writer.click("text=Rotate the staging API key")
    writer.fill("#edit-form textarea", XSS)
    writer.click("#edit-form button[type=submit]")
    expect(page.locator("#activity tbody tr").first).to_contain_text(
        "<script>window.pwned=1", timeout=15_000
    )
    page.wait_for_timeout(300)  # an onerror would fire on insertion
    no_script_ran(page)
    no_script_ran(writer)
    assert dialogs == []


def test_wrong_or_missing_login_sees_nothing(site, browser):
    home = site[0]
    ctx = browser.new_context()
    page = ctx.new_page()
    try:
        page.goto(f"{base(site)}/ui/memories?scope=team")
        expect(page).to_have_url(re.compile(r"/ui/login$"))
        text = page.locator("body").inner_text()
        assert "billing" not in text and "owner" not in text
        page.fill("input[name=token]", "pm_this-is-not-a-token")
        page.click("button[type=submit]")
        expect(page.locator(".error")).to_contain_text("not valid")
        link = login_url(read_info(home))
        page.goto(link)
        expect(page).to_have_url(re.compile(r"/ui/$"))
        ctx.clear_cookies()
        page.goto(link)  # the same link again: used
        expect(page.locator(".error")).to_contain_text("already used")
        page.goto(f"{base(site)}/ui/graph/data")
        expect(page).to_have_url(re.compile(r"/ui/login$"))
        assert not [c for c in ctx.cookies() if c["name"] == "pm_ui"]
        assert "postgres" not in page.content()
    finally:
        ctx.close()


def test_a_warning_of_an_automatic_write_is_shown_and_dismissed(site, owner, tmp_path):
    """A transcript quoting a token, indexed by ``index-sessions`` through the daemon: its
    exchange is stored redacted and the inbox says so, naming the kind, never the value."""
    import subprocess
    import sys

    from tests.transcript_util import TranscriptWriter

    home = site[0]
    token = "ghp_" + "Xq7Lm2Vt9RkP4sWz8NbC3dF6gH1jK5yTnQ0a"
    w = TranscriptWriter(tmp_path / "leak.jsonl", session="leak-1", cwd=str(tmp_path))
    w.user("deploy the site")
    w.assistant(f"Deploying with the token {token} from the vault.")
    env = {**os.environ, **OWNER_ENV, "PATTERN_HOME": str(home)}
    done = subprocess.run([sys.executable, "-m", "server.cli", "index-sessions", str(w.path)],
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = owner
    page.click("#nav-review")
    card = page.locator("article.write-warning", has_text="session leak-1")
    expect(card).to_contain_text("session exchange")
    expect(card).to_contain_text("github_token")
    assert token not in page.content() and token[4:12] not in page.content()
    card.locator("button.dismiss").click()
    expect(page.locator(".flash")).to_have_text("Dismissed.")
    expect(page.locator("article.write-warning", has_text="session leak-1")).to_have_count(0)
