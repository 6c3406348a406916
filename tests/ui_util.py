"""Helpers for the dashboard tests: a real runtime (SQLite + Chroma in a temp folder, the
hash embedder) with its dashboard mounted in front of a stand-in for the MCP app, driven by
Starlette's TestClient; signing in with a one-time link or a token; reading CSRF tokens."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.responses import PlainTextResponse
from starlette.testclient import TestClient

from server.auth import TokenStore, make_authenticator
from server.service.runtime import Runtime
from server.ui import Dashboard
from server.ui.logins import sign_login

SECRET = "local-secret-for-tests"
OWNER_ENV = {"PATTERN_EMBEDDER": "hash", "PATTERN_PROJECT_ID": "p1", "PATTERN_AGENT_ID": "owner"}


async def not_mcp(scope, receive, send):
    """Stands in for the bearer-authenticated MCP app behind the dashboard."""
    await PlainTextResponse("mcp", status_code=401)(scope, receive, send)


class UiHarness:
    def __init__(self, home: Path, env: dict | None = None, cwd: Path | None = None) -> None:
        self.home = home
        full = {**OWNER_ENV, "PATTERN_HOME": str(home), **(env or {})}
        self.rt = Runtime.start(full, cwd or home, background=False)
        self.tokens = TokenStore(home)
        auth = make_authenticator(SECRET, self.tokens, self.rt.identity.project_id)
        self.dashboard = Dashboard(self.rt, secret=SECRET, authenticate=auth)
        self.app = self.dashboard.mount(not_mcp)
        self.clients: list[TestClient] = []

    @property
    def svc(self):
        return self.rt.service

    def client(self) -> TestClient:
        c = TestClient(self.app, follow_redirects=False)
        self.clients.append(c)
        return c

    def owner(self) -> TestClient:
        """A client signed in as the store owner through a one-time link."""
        c = self.client()
        r = c.get(f"/ui/login?t={sign_login(SECRET)}")
        assert r.status_code == 303, r.text
        return c

    def token_client(self, token: str, project: str | None = None) -> TestClient:
        c = self.client()
        page = c.get("/ui/login")
        r = c.post(
            "/ui/login",
            data={"token": token, "project": project or "", "csrf": hidden_csrf(page.text)},
        )
        assert r.status_code == 303, r.text
        return c

    def close(self) -> None:
        for c in self.clients:
            c.close()
        self.dashboard.close()
        self.rt.close()


def hidden_csrf(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m, "no CSRF field on the page"
    return m.group(1)


def csrf_of(client: TestClient) -> str:
    """The session's CSRF token, as the pages embed it."""
    return hidden_csrf(client.get("/ui/health").text)
