"""Who is calling the daemon: the local bridge's trusted envelope, or a remote bearer token.

- The daemon writes a random *local secret* into ``<home>/daemon.json`` (mode 0600). A bridge
  that can read it runs as the same user on the same machine, so it may pass the identity of
  its MCP client in headers (``X-Pattern-Project``, ``X-Pattern-Agent``,
  ``X-Pattern-Subagent-Type``, ``X-Pattern-Parent-Agent``, ``X-Pattern-Root``: the client's
  project folder, percent-encoded): the trusted envelope.
- Remote agents present a token made by ``pattern-memory token create --agent ID``. Tokens are
  stored hashed (sha256) in ``<home>/tokens.json``; each maps to one agent id, so a remote
  agent can choose its project (header) but never its agent.
- Anything else gets 401 and nothing more.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote, unquote

from .service.errors import InvalidInput, NotFound
from .service.identity import Identity
from .service.review import ReviewPolicy

HEADER_PREFIX = "x-pattern-"


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def write_private(path: Path, data: dict) -> None:
    """Write JSON readable only by this user, atomically."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=2)
    os.replace(tmp, path)


class TokenStore:
    """Hashed bearer tokens in ``<home>/tokens.json`` (re-read when the file changes)."""

    def __init__(self, home: Path) -> None:
        self.path = Path(home) / "tokens.json"
        self._lock = threading.Lock()
        self._cache: tuple[float, dict] | None = None

    def _load(self) -> dict:
        try:
            mtime = self.path.stat().st_mtime
        except FileNotFoundError:
            return {}
        if self._cache and self._cache[0] == mtime:
            return self._cache[1]
        data = json.loads(self.path.read_text())
        self._cache = (mtime, data)
        return data

    def create(
        self,
        agent_id: str,
        project_id: str | None = None,
        label: str = "",
        *,
        reviewer: bool = False,
    ) -> str:
        """A new token for ``agent_id``; ``reviewer``: its agent reviews team proposals
        (``reviewer: true`` in tokens.json; see server/service/review.py)."""
        if not agent_id.strip():
            raise InvalidInput("--agent is required")
        token = "pm_" + secrets.token_urlsafe(32)
        with self._lock:
            data = dict(self._load())
            data[_sha(token)] = {
                "agent": agent_id,
                "project": project_id,
                "label": label,
                "created": datetime.now(UTC).isoformat(),
                "revoked": None,
                "prefix": token[:10],
            }
            if reviewer:
                data[_sha(token)]["reviewer"] = True
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_private(self.path, data)
            self._cache = None
        return token

    def revoke(self, prefix_or_agent: str) -> int:
        with self._lock:
            data = dict(self._load())
            n = 0
            for entry in data.values():
                if entry["revoked"] is None and prefix_or_agent in (
                    entry["prefix"],
                    entry["agent"],
                ):
                    entry["revoked"] = datetime.now(UTC).isoformat()
                    n += 1
            if not n:
                raise NotFound(f"no active token matches {prefix_or_agent!r}")
            write_private(self.path, data)
            self._cache = None
        return n

    def list(self) -> list[dict]:
        return [dict(v) for v in self._load().values()]

    def reviewer_agents(self) -> set[str]:
        """The agents holding an active token made with ``--reviewer``."""
        return {
            e["agent"]
            for e in self._load().values()
            if e.get("reviewer") is True and not e.get("revoked")
        }

    def lookup(self, token: str) -> dict | None:
        entry = self._load().get(_sha(token))
        if entry is None or entry.get("revoked"):
            return None
        return entry


def make_authenticator(
    local_secret: str, tokens: TokenStore, default_project: str = "default"
) -> Callable[[dict[str, str]], Identity | None]:
    """headers (lower-case names) -> Identity, or None for 401."""

    def authenticate(headers: dict[str, str]) -> Identity | None:
        auth = headers.get("authorization", "")
        if not auth.lower().startswith("bearer "):
            return None
        token = auth[7:].strip()
        env = {
            k[len(HEADER_PREFIX) :]: v for k, v in headers.items() if k.startswith(HEADER_PREFIX)
        }
        project = env.get("project") or default_project
        if local_secret and hmac.compare_digest(token, local_secret):
            agent = env.get("agent")
            if not agent:
                return None
            return Identity(
                project_id=project,
                agent_id=agent,
                subagent_type=env.get("subagent-type") or None,
                parent_agent_id=env.get("parent-agent") or None,
                root=unquote(env["root"]) if env.get("root") else None,
            )
        entry = tokens.lookup(token)
        if entry is None:
            return None
        return Identity(project_id=entry.get("project") or project, agent_id=entry["agent"])

    return authenticate


def envelope_headers(who: Identity, secret: str) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {secret}",
        "X-Pattern-Project": who.project_id,
        "X-Pattern-Agent": who.agent_id,
    }
    if who.subagent_type:
        headers["X-Pattern-Subagent-Type"] = who.subagent_type
    if who.parent_agent_id:
        headers["X-Pattern-Parent-Agent"] = who.parent_agent_id
    if who.root:  # percent-encoded: header values are latin-1, paths may be anything
        headers["X-Pattern-Root"] = quote(who.root)
    return headers


def review_policy(rt) -> ReviewPolicy:
    """Where team review is on (``PATTERN_TEAM_REVIEW``) and who reviews: the store owner (the
    runtime's own identity) and the agents of active ``--reviewer`` tokens (read when asked)."""
    tokens = TokenStore(rt.settings.home)
    return ReviewPolicy(rt.settings.team_review, rt.identity.agent_id, tokens.reviewer_agents)
