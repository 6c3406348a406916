"""Who is calling the daemon: the local bridge's trusted envelope, or a remote bearer token.

- The daemon writes a random *local secret* into ``<home>/daemon.json`` (mode 0600). A bridge
  that can read it runs as the same user on the same machine, so it may pass the identity of
  its MCP client in headers (``X-Pattern-Project``, ``X-Pattern-Agent``,
  ``X-Pattern-Subagent-Type``, ``X-Pattern-Parent-Agent``, ``X-Pattern-Root``: the client's
  project folder, percent-encoded): the trusted envelope.
- Remote agents present a token made by ``pattern-memory token create --agent ID``. Tokens are
  stored hashed (sha256) in ``<home>/tokens.json``; each maps to one agent id (a header can
  never change the agent) and to **one project**: the one given with ``--project``, else the
  CLI's current project. A header naming another project gets 403. Only a token created with
  ``--any-project`` picks its project with ``X-Pattern-Project``.
- Entries written before tokens were bound (``project`` null, no ``any_project`` key) are bound
  to the daemon's default project (its ``PATTERN_PROJECT_ID``, else its working directory's);
  ``token list`` says so. Re-create such a token with ``--project`` to pin it.
- Anything else gets 401 and nothing more.

A token entry: ``agent``, ``project`` (the bound project, null for legacy and any-project
entries), ``any_project`` (bool), ``label``, ``created``, ``revoked`` (time or null),
``prefix`` (the token's first 10 characters, shown by ``token list``).
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
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal
from urllib.parse import quote, unquote

from .service.errors import InvalidInput, NotFound
from .service.identity import Identity
from .service.review import ReviewPolicy

HEADER_PREFIX = "x-pattern-"
PG_TOKENS_TTL_S = 1.0
PREFIX_LEN = 10
LEGACY_BINDING = "the daemon's default project (legacy token, created before project binding)"


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def write_private(path: Path, data: dict) -> None:
    """Write JSON readable only by this user, atomically."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=2)
    os.replace(tmp, path)


def is_legacy(entry: dict) -> bool:
    """Written before tokens were bound to a project: no project and no ``any_project``."""
    return not entry.get("project") and "any_project" not in entry


def bound_project(entry: dict, default_project: str) -> str | None:
    """The one project a token may reach, or None when it may reach any (``--any-project``).
    A legacy entry is bound to ``default_project`` (the daemon's)."""
    if entry.get("any_project"):
        return None
    return entry.get("project") or default_project


def binding(entry: dict) -> str:
    """What ``token list`` shows as the token's project."""
    if entry.get("any_project"):
        return "any project (--any-project)"
    return entry.get("project") or LEGACY_BINDING


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

    def create(
        self,
        agent_id: str,
        project_id: str | None = None,
        label: str = "",
        *,
        any_project: bool = False,
        reviewer: bool = False,
    ) -> str:
        """A new token for ``agent_id``, bound to ``project_id`` (or to every project with
        ``any_project``; exactly one of the two). Returns the token; only its hash is kept.
        ``reviewer``: its agent reviews team proposals (``reviewer: true`` in tokens.json; see
        server/service/review.py)."""
        if not agent_id.strip():
            raise InvalidInput("an agent id is required (token create --agent ID)")
        if any_project and project_id:
            raise InvalidInput("give a project or --any-project, not both")
        if not any_project and not (project_id or "").strip():
            raise InvalidInput("a token is bound to one project: give a project or --any-project")
        token = "pm_" + secrets.token_urlsafe(32)
        with self._lock:
            data = dict(self._load())
            data[_sha(token)] = {
                "agent": agent_id,
                "project": None if any_project else project_id,
                "any_project": any_project,
                "label": label,
                "created": datetime.now(UTC).isoformat(),
                "revoked": None,
                "prefix": token[:PREFIX_LEN],
            }
            if reviewer:
                data[_sha(token)]["reviewer"] = True
            self._save(data)
            self._cache = None
        return token

    def revoke(self, target: str, by: Literal["any", "agent", "prefix"] = "any") -> list[dict]:
        """Revoke every active token of an agent (``by="agent"``), the token with this prefix as
        ``token list`` shows it, or this whole token (``by="prefix"``); ``"any"`` tries all.
        Returns the revoked entries; nothing matching is a ``NotFound``."""
        target = target.strip().rstrip("….").strip()
        if not target:
            raise InvalidInput("name an agent id or a token prefix to revoke")
        with self._lock:
            data = dict(self._load())
            done = []
            for key, entry in data.items():
                if entry["revoked"] is not None:
                    continue
                by_agent = by in ("any", "agent") and entry["agent"] == target
                by_prefix = by in ("any", "prefix") and (
                    entry["prefix"] == target or key == _sha(target)
                )
                if by_agent or by_prefix:
                    entry["revoked"] = datetime.now(UTC).isoformat()
                    done.append(dict(entry))
            if not done:
                what = {"agent": "agent", "prefix": "token prefix"}.get(by, "agent or prefix")
                raise NotFound(f"no active token matches {what} {target!r}", target=target)
            self._save(data)
            self._cache = None
        return done

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


@dataclass(frozen=True)
class Refusal:
    """Why a request is not served: 401 (no valid credential) or 403 (a valid token asking for
    a project it is not bound to)."""

    status: int
    error: str
    message: str


UNAUTHORIZED = Refusal(401, "unauthorized", "a valid bearer token is required")


def make_authenticator(
    local_secret: str, tokens: TokenStore, default_project: str = "default"
) -> Callable[[dict[str, str]], Identity | Refusal]:
    """headers (lower-case names) -> the caller's Identity, or a Refusal (401/403)."""

    def authenticate(headers: dict[str, str]) -> Identity | Refusal:
        auth = headers.get("authorization", "")
        if not auth.lower().startswith("bearer "):
            return UNAUTHORIZED
        token = auth[7:].strip()
        env = {
            k[len(HEADER_PREFIX) :]: v for k, v in headers.items() if k.startswith(HEADER_PREFIX)
        }
        requested = (env.get("project") or "").strip() or None
        if local_secret and hmac.compare_digest(token, local_secret):
            agent = env.get("agent")
            if not agent:
                return UNAUTHORIZED
            return Identity(
                project_id=requested or default_project,
                agent_id=agent,
                subagent_type=env.get("subagent-type") or None,
                parent_agent_id=env.get("parent-agent") or None,
                root=unquote(env["root"]) if env.get("root") else None,
            )
        entry = tokens.lookup(token)
        if entry is None:
            return UNAUTHORIZED
        bound = bound_project(entry, default_project)
        if bound is not None and requested is not None and requested != bound:
            return Refusal(403, "forbidden", f"this token is not valid for project {requested!r}")
        return Identity(project_id=bound or requested or default_project, agent_id=entry["agent"])

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
