"""Who uses the dashboard: one-time login links, token logins, cookie sessions, CSRF.

- **Local**: ``pattern-memory ui`` signs a one-time link with the daemon's local secret (from
  ``daemon.json``, readable only by the store's user): ``/ui/login?t=<payload>.<hmac>``, valid
  for :data:`LINK_TTL` seconds and once. The daemon checks it, opens a session for the store
  owner's identity (``Runtime.identity``) and redirects to ``/ui/``: no secret stays in a URL.
- **Remote**: a bearer token (``pattern-memory token create``) posted to ``/ui/login`` (form
  field or ``Authorization`` header) is checked by the daemon's own authenticator and exchanged
  for a session of that token's agent; the token is re-checked on every request, so revoking
  it ends its sessions.
- **Sessions** live in the daemon's memory (a restart logs everyone out): an HttpOnly,
  SameSite=Strict cookie holds a random id; each session has its own CSRF token, required on
  every state-changing request (header ``X-CSRF-Token`` or form field ``csrf``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from server.service.core.identity import Identity

LINK_TTL = 120  # seconds a one-time login link is valid
SESSION_IDLE = 8 * 3600
SESSION_MAX = 24 * 3600
COOKIE = "pm_ui"
LOGIN_COOKIE = "pm_ui_login"  # the login form's CSRF token (before any session exists)
_PURPOSE = b"pattern-memory ui login\x00"

Authenticate = Callable[[dict[str, str]], object]  # Identity, else a refusal


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: str, body: str) -> str:
    return _b64(hmac.new(secret.encode(), _PURPOSE + body.encode(), hashlib.sha256).digest())


def sign_login(secret: str, now: float | None = None, ttl: int = LINK_TTL) -> str:
    """A one-time login token: a random nonce and an expiry, MACed with the local secret."""
    now = time.time() if now is None else now
    body = _b64(json.dumps({"n": secrets.token_urlsafe(16), "exp": int(now + ttl)}).encode())
    return f"{body}.{_mac(secret, body)}"


def base_url(info: dict) -> str:
    """http://host:port of a daemon (its ``daemon.json``), a wildcard bind made loopback."""
    host = str(info["host"])
    host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{info['port']}"


def login_url(info: dict) -> str:
    """The one-time dashboard link for the daemon described by ``info`` (needs its secret)."""
    return f"{base_url(info)}/ui/login?t={sign_login(info['secret'])}"


@dataclass
class UiSession:
    id: str
    identity: Identity
    kind: str  # "owner" (one-time link) or "token"
    label: str  # how the header shows who is signed in
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    created: float = field(default_factory=time.time)
    seen: float = field(default_factory=time.time)
    bearer: str | None = None  # a token session's token (daemon memory only), re-checked

    @property
    def is_owner(self) -> bool:
        return self.kind == "owner"


class Logins:
    """The daemon's dashboard sessions (instance state; nothing module-level)."""

    def __init__(
        self,
        secret: str,
        authenticate: Authenticate,
        owner: Identity,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.secret = secret
        self.authenticate = authenticate
        self.owner = owner
        self.clock = clock
        self._lock = threading.Lock()
        self._sessions: dict[str, UiSession] = {}
        self._used: dict[str, float] = {}  # nonce -> expiry of redeemed links

    # ------------------------------------------------------------------ logging in
    def redeem_link(self, token: str) -> UiSession | None:
        """A session for the owner if ``token`` is a valid, unexpired, unused link."""
        body, _, mac = (token or "").partition(".")
        if not body or not mac or not hmac.compare_digest(mac, _mac(self.secret, body)):
            return None
        try:
            payload = json.loads(_unb64(body))
            nonce, exp = str(payload["n"]), float(payload["exp"])
        except (ValueError, KeyError, TypeError):
            return None
        now = self.clock()
        with self._lock:
            self._used = {n: e for n, e in self._used.items() if e >= now}
            if exp < now or nonce in self._used:
                return None
            self._used[nonce] = exp
        who = self.owner
        return self._open(who, "owner", f"owner · {who.agent_id}")

    def login_with_token(self, bearer: str, project: str | None = None) -> UiSession | None:
        """A session for the agent of a bearer token (None if the daemon refuses it)."""
        bearer = (bearer or "").strip()
        if not bearer:
            return None
        who = self._check(bearer, project)
        if who is None:
            return None
        return self._open(who, "token", f"token · {who.agent_id}", bearer)

    def _check(self, bearer: str, project: str | None) -> Identity | None:
        headers = {"authorization": f"Bearer {bearer}"}
        if project:
            headers["x-pattern-project"] = project
        who = self.authenticate(headers)  # an Identity, or a refusal (None or auth.Refusal)
        if not isinstance(who, Identity) or (project and who.project_id != project):
            return None
        if hmac.compare_digest(bearer, self.secret):  # the local secret is no login token
            return None
        return who

    def _open(self, who: Identity, kind: str, label: str, bearer: str | None = None) -> UiSession:
        s = UiSession(id=secrets.token_urlsafe(32), identity=who, kind=kind, label=label,
                      bearer=bearer, created=self.clock(), seen=self.clock())  # fmt: skip
        with self._lock:
            self._sessions[s.id] = s
        return s

    # ------------------------------------------------------------------ using a session
    def get(self, sid: str | None) -> UiSession | None:
        if not sid:
            return None
        now = self.clock()
        with self._lock:
            s = self._sessions.get(sid)
            if s is None:
                return None
            if now - s.seen > SESSION_IDLE or now - s.created > SESSION_MAX:
                del self._sessions[sid]
                return None
        if s.bearer is not None and self._check(s.bearer, s.identity.project_id) is None:
            self.logout(sid)  # the token was revoked (or no longer reaches this project)
            return None
        s.seen = now
        return s

    def switch_project(self, s: UiSession, project: str) -> bool:
        """Act in another project: the owner may; a token only where the daemon lets it."""
        if s.is_owner:  # the owner's project folder belongs to its own project only
            root = self.owner.root if project == self.owner.project_id else None
            s.identity = s.identity.model_copy(update={"project_id": project, "root": root})
            return True
        who = self._check(s.bearer or "", project)
        if who is None:
            return False
        s.identity = who
        return True

    def logout(self, sid: str) -> None:
        with self._lock:
            self._sessions.pop(sid, None)

    @staticmethod
    def csrf_ok(s: UiSession, presented: str | None) -> bool:
        return bool(presented) and hmac.compare_digest(str(presented), s.csrf)
