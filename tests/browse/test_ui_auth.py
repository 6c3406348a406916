"""Dashboard sign-in: one-time links, token logins, cookie sessions, CSRF, and that nobody
without a valid login sees anything of the store."""

from __future__ import annotations

import time

import pytest

from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from server.ui.logins import COOKIE, sign_login
from tests.ui_util import SECRET, UiHarness, csrf_of, hidden_csrf

SECRET_TEXT = "the launch code is 4242-walrus"


@pytest.fixture
def ui(tmp_path):
    h = UiHarness(tmp_path / "store")
    owner = h.rt.identity
    h.svc.remember(owner, MemoryInput(content=SECRET_TEXT, scope="team"))
    yield h
    h.close()


def test_without_login_every_page_redirects_and_shows_nothing(ui):
    c = ui.client()
    for path in ("/ui/", "/ui/memories?scope=team", "/ui/graph", "/ui/lessons", "/ui/health",
                 "/ui/workspace", "/ui/sessions", "/ui/activity", "/ui/review", "/ui/projects"):  # fmt: skip
        r = c.get(path)
        assert r.status_code == 303 and r.headers["location"] == "/ui/login", path
    for path in ("/ui/graph/data", "/ui/activity/stream", f"/ui/?q={SECRET_TEXT}"):
        r = c.get(path, headers={"HX-Request": "true"})
        assert r.status_code == 401 and SECRET_TEXT not in r.text
    login = c.get("/ui/login")
    assert login.status_code == 200 and "walrus" not in login.text and "owner" not in login.text
    assert c.post("/ui/memory/x/delete", data={"csrf": "x"}).status_code == 401


def test_one_time_link_signs_in_the_owner_once_and_leaves_no_secret_in_the_url(ui):
    c = ui.client()
    link = sign_login(SECRET)
    r = c.get(f"/ui/login?t={link}")
    assert r.status_code == 303
    assert r.headers["location"] == "/ui/"  # redirected: the link is gone from the address
    cookie = r.headers["set-cookie"]
    assert f"{COOKIE}=" in cookie and "HttpOnly" in cookie
    assert "SameSite=strict" in cookie and "Path=/ui" in cookie
    page = c.get("/ui/memories?scope=team")
    assert page.status_code == 200 and SECRET_TEXT in page.text
    assert "owner · owner" in page.text  # shown as the store owner's agent identity
    again = ui.client().get(f"/ui/login?t={link}")
    assert again.status_code == 403 and f"{COOKIE}=" not in again.headers.get("set-cookie", "")
    assert "already used" in again.text


def test_forged_expired_and_garbled_links_are_refused(ui):
    forged = sign_login("another-secret")
    expired = sign_login(SECRET, now=time.time() - 3600)
    body, _, mac = sign_login(SECRET).partition(".")
    for t in (forged, expired, f"{body}x.{mac}", "", "garbage", f"{body}."):
        c = ui.client()
        r = c.get(f"/ui/login?t={t}")
        assert r.status_code == 403, t
        assert c.get("/ui/memories?scope=team").status_code == 303


def test_token_login_becomes_a_cookie_session_of_the_token_agent(ui):
    token = ui.tokens.create("alice", "p1")
    c = ui.token_client(token)
    page = c.get("/ui/health")
    assert page.status_code == 200 and "token · alice" in page.text
    assert token not in page.text
    assert SECRET_TEXT in c.get("/ui/memories?scope=team").text  # team of p1: visible
    ui.tokens.revoke("alice")
    assert c.get("/ui/health").status_code == 303  # a revoked token ends its sessions


def test_wrong_tokens_and_the_local_secret_do_not_sign_in(ui):
    ui.tokens.create("bob", "p1")
    for bad in ("pm_not-a-token", SECRET, ""):
        c = ui.client()
        page = c.get("/ui/login")
        r = c.post("/ui/login", data={"token": bad, "csrf": hidden_csrf(page.text)})
        assert r.status_code in (401, 422) and f"{COOKIE}=" not in r.headers.get("set-cookie", "")
        assert c.get("/ui/").status_code == 303


def test_token_bound_to_a_project_cannot_sign_in_elsewhere(ui):
    token = ui.tokens.create("alice", "p1")
    c = ui.client()
    page = c.get("/ui/login")
    r = c.post("/ui/login", data={"token": token, "project": "p2", "csrf": hidden_csrf(page.text)})
    assert r.status_code == 401


def test_login_form_needs_its_own_csrf_token_but_a_bearer_header_does_not(ui):
    token = ui.tokens.create("alice", "p1")
    c = ui.client()
    r = c.post("/ui/login", data={"token": token})  # no login-form cookie/field: refused
    assert r.status_code == 403 and f"{COOKIE}=" not in r.headers.get("set-cookie", "")
    r = c.post("/ui/login", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 303 and f"{COOKIE}=" in r.headers["set-cookie"]


def test_state_changing_requests_need_the_session_csrf_token(ui):
    c = ui.owner()
    mine = ui.svc.remember(ui.rt.identity, MemoryInput(content="delete me later"))
    url = f"/ui/memory/{mine.memoryId}/delete"
    assert c.post(url).status_code == 403
    assert c.post(url, data={"csrf": "wrong"}).status_code == 403
    token = csrf_of(c)
    assert (
        c.post(url, data={"csrf": token}, headers={"Origin": "http://evil.example"}).status_code
        == 403
    )
    assert ui.svc.store.get([mine.memoryId])  # nothing was deleted so far
    r = c.post(url, headers={"X-CSRF-Token": token, "Origin": "http://testserver"})
    assert r.status_code == 303 and not ui.svc.store.get([mine.memoryId])


def test_logout_ends_the_session(ui):
    c = ui.owner()
    token = csrf_of(c)
    r = c.post("/ui/logout", data={"csrf": token})
    assert r.status_code == 303 and r.headers["location"] == "/ui/login"
    assert c.get("/ui/").status_code == 303


def test_security_headers_on_every_page(ui):
    c = ui.owner()
    r = c.get("/ui/")
    csp = r.headers["content-security-policy"]
    assert (
        "script-src 'self'" in csp
        and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    )
    assert r.headers["x-frame-options"] == "DENY" and r.headers["cache-control"] == "no-store"
    assert r.headers["server-timing"].startswith("app;dur=")


def test_owner_switches_project_and_sees_that_projects_team(ui):
    other = Identity(project_id="p2", agent_id="carol")
    ui.svc.remember(other, MemoryInput(content="p2 deploys on fridays", scope="team"))
    c = ui.owner()
    assert "p2 deploys" not in c.get("/ui/memories?scope=team").text
    assert "p2" in c.get("/ui/projects").text
    folder = ui.home / "p1-folder"
    folder.mkdir()
    (folder / "notes.md").write_text("# p1 notes\n")
    ok = c.post("/ui/workspace/ingest", data={"csrf": csrf_of(c), "root": str(folder)})
    assert ok.status_code == 200  # the owner's own project folder
    r = c.post("/ui/projects", data={"project": "p2", "csrf": csrf_of(c)})
    assert r.status_code == 303
    assert "p2 deploys" in c.get("/ui/memories?scope=team").text
    # in p2 the owner's p1 folder is not an allowed directory (it would land in p2's team)
    refused = c.post("/ui/workspace/ingest", data={"csrf": csrf_of(c), "root": str(folder)})
    assert refused.status_code == 403 and "outside the allowed directories" in refused.text
    # a token bound to p1 cannot switch
    t = ui.token_client(ui.tokens.create("alice", "p1"))
    r = t.post("/ui/projects", data={"project": "p2", "csrf": csrf_of(t)})
    assert r.status_code == 400 and "p2 deploys" not in t.get("/ui/memories?scope=team").text


def test_daemon_refuses_a_foreign_host_on_ui(tmp_path):
    """DNS rebinding: a page on evil.example that resolves to 127.0.0.1 must not reach /ui."""
    import http.client

    from tests.runtime.test_daemon import start_daemon, stop

    proc = start_daemon(tmp_path)
    try:
        from server.http.daemon import read_info

        info = read_info(tmp_path)
        for path in ("/ui/login", f"/ui/login?t={sign_login(info['secret'])}"):
            conn = http.client.HTTPConnection(info["host"], info["port"], timeout=30)
            conn.request("GET", path, headers={"Host": f"evil.example:{info['port']}"})
            resp = conn.getresponse()
            resp.read()
            conn.close()
            assert resp.status in (400, 403, 421), (path, resp.status)
            assert f"{COOKIE}=" not in (resp.getheader("set-cookie") or "")
    finally:
        stop(proc)
