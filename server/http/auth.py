"""Who is calling the daemon: the local bridge's trusted envelope, or a remote bearer token.

- The daemon writes a random *local secret* into ``<home>/daemon.json`` (mode 0600). A bridge
  that can read it runs as the same user on the same machine, so it may pass the identity of
  its MCP client in headers (``X-Pattern-Project``, ``X-Pattern-Agent``,
  ``X-Pattern-Subagent-Type``, ``X-Pattern-Parent-Agent``, ``X-Pattern-Root``: the client's
  project folder, percent-encoded): the trusted envelope.
- Remote agents present a token made by ``pattern-memory token create --agent ID``. Tokens are
  stored hashed (:class:`server.service.core.bearer_tokens.TokenStore`: ``<home>/tokens.json``, or the
  cluster's table in PostgreSQL mode); each maps to one agent id (a header can
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

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote, unquote

from server.service.core.bearer_tokens import TokenStore, write_private
from server.service.core.identity import Identity

HEADER_PREFIX = "x-pattern-"
LEGACY_BINDING = "the daemon's default project (legacy token, created before project binding)"


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


__all__ = [
    "Refusal",
    "TokenStore",
    "binding",
    "bound_project",
    "envelope_headers",
    "make_authenticator",
    "write_private",
]
