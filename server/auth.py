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
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote, unquote

from .service.errors import InvalidInput, NotFound
from .service.identity import Identity

HEADER_PREFIX = "x-pattern-"
PG_TOKENS_TTL_S = 1.0


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
    """Hashed bearer tokens in ``<home>/tokens.json`` (re-read when the file changes); with a
    PostgreSQL store URL, in its ``pm_tokens`` table, shared by every daemon of the cluster
    (re-read at most every :data:`PG_TOKENS_TTL_S`, so a revocation reaches every node
    within that)."""

    def __init__(self, home: Path, store_url: str | None = None) -> None:
        self.path = Path(home) / "tokens.json"
        self.store_url = store_url
        self._lock = threading.Lock()
        self._cache: tuple[float, dict] | None = None

    def _load(self) -> dict:
        if self.store_url:
            return self._load_pg()
        try:
            mtime = self.path.stat().st_mtime
        except FileNotFoundError:
            return {}
        if self._cache and self._cache[0] == mtime:
            return self._cache[1]
        data = json.loads(self.path.read_text())
        self._cache = (mtime, data)
        return data

    def _load_pg(self) -> dict:
        from .service.tokens import load_tokens

        now = time.monotonic()
        if self._cache and now - self._cache[0] < PG_TOKENS_TTL_S:
            return self._cache[1]
        data = load_tokens(self.store_url)
        self._cache = (now, data)
        return data

    def _save(self, data: dict) -> None:
        if self.store_url:
            from .service.tokens import save_tokens

            save_tokens(self.store_url, data)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_private(self.path, data)

    def create(self, agent_id: str, project_id: str | None = None, label: str = "") -> str:
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
            self._save(data)
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
            self._save(data)
            self._cache = None
        return n

    def list(self) -> list[dict]:
        return [dict(v) for v in self._load().values()]

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
