"""The bearer tokens remote agents present to a daemon, stored hashed (sha256): in
``<home>/tokens.json``, or, when PostgreSQL is the store, in its ``pm_tokens`` table shared by
every daemon (``retrieval/pg/token_table.py``).

Made by ``pattern-memory token create --agent ID``. A token entry: ``agent``, ``project`` (the
bound project, null for legacy and any-project entries), ``any_project`` (bool), ``label``,
``created``, ``revoked`` (time or null), ``prefix`` (the token's first 10 characters, shown by
``token list``), ``reviewer`` (true: its agent reviews team proposals, see :mod:`.review`).
How a request is authenticated with them is the daemon's business (``server/http/auth.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from retrieval.storage import private
from server.service.core.errors import InvalidInput, NotFound

PG_TOKENS_TTL_S = 1.0
PREFIX_LEN = 10


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def write_private(path: Path, data: dict) -> None:
    """Write JSON readable only by this user, atomically."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=2)
    os.replace(tmp, path)


def load_tokens(store_url: str) -> dict[str, dict]:
    from retrieval.pg.token_table import load_tokens as load

    return load(store_url)


def save_tokens(store_url: str, data: dict[str, dict]) -> None:
    from retrieval.pg.token_table import save_tokens as save

    save(store_url, data)


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
        now = time.monotonic()
        if self._cache and now - self._cache[0] < PG_TOKENS_TTL_S:
            return self._cache[1]
        data = load_tokens(self.store_url)
        self._cache = (now, data)
        return data

    def _save(self, data: dict) -> None:
        if self.store_url:
            save_tokens(self.store_url, data)
            return
        private.folder(self.path.parent)
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
        server/service/browsing/review.py)."""
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


__all__ = ["PREFIX_LEN", "TokenStore", "load_tokens", "save_tokens", "write_private"]
