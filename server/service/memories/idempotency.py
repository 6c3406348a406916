"""Idempotency keys: a retried write returns its first result and never writes twice.

A write tool called with ``idempotencyKey`` claims the key *inside its own write transaction*:
the row ``(agent, key) -> tool, request hash, result JSON`` commits together with the records,
or not at all. So:

- a retry after a success (the answer was lost, the client timed out, the bridge reconnected)
  finds the row and gets the stored result, nothing is written again;
- two concurrent calls with the same key: the second one's claim runs after the first commit
  (writes are serialized), finds the row, rolls back its own transaction and returns the
  first call's result;
- a call that failed (limit, access, conflict) stored nothing, key included: a retry runs again;
- the same key with a different tool or different arguments is refused (``conflict``), never
  silently answered with the result of another request.

Keys are per agent (two agents may use the same key) and expire after :data:`TTL` (24 h);
expired rows of the agent are purged whenever it claims a new key, and ``compact-changes``
purges everyone's.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from retrieval.storage.store import ts
from server.service.core.errors import Conflict, InvalidInput

TTL = timedelta(hours=24)
MAX_KEY_CHARS = 200


class Replay(Exception):  # noqa: N818 - control flow, not an error
    """Raised inside the write transaction when the key was committed meanwhile: the caller's
    transaction rolls back and :attr:`result` (the first call's answer) is returned instead."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__("idempotency key already used")
        self.result = result


def request_hash(tool: str, request: Any) -> str:
    doc = json.dumps({"tool": tool, "request": request}, sort_keys=True, default=str)
    return hashlib.sha256(doc.encode("utf-8")).hexdigest()


@dataclass
class Claim:
    """One write's claim on a key; :meth:`check` is a ``check(conn)`` for ``Engine.apply``."""

    agent_id: str
    key: str
    tool: str
    request_hash: str
    now: datetime
    result: dict[str, Any] | None = None  # set (JSON-able) before the write transaction

    @classmethod
    def new(cls, agent_id: str, key: str, tool: str, request: Any, now: datetime) -> Claim:
        if not isinstance(key, str) or not key.strip():
            raise InvalidInput("idempotencyKey must be a non-empty string")
        if len(key) > MAX_KEY_CHARS:
            raise InvalidInput(f"idempotencyKey is at most {MAX_KEY_CHARS} characters")
        return cls(agent_id, key, tool, request_hash(tool, request), now)

    def _row(self, conn: sqlite3.Connection) -> sqlite3.Row | None:
        return conn.execute(
            "SELECT tool, request_hash, result FROM idempotency_keys "
            "WHERE agent_id=? AND key=? AND expires_at > ?",
            (self.agent_id, self.key, ts(self.now)),
        ).fetchone()

    def _stored(self, row) -> dict[str, Any]:
        if row[0] != self.tool or row[1] != self.request_hash:
            raise Conflict(
                f"idempotencyKey {self.key!r} was already used for a different request "
                f"({row[0]}); use a new key for a new request",
                idempotencyKey=self.key,
                tool=row[0],
            )
        return json.loads(row[2])

    def lookup(self, conn: sqlite3.Connection) -> dict[str, Any] | None:
        """The stored result of this key (any connection), or None."""
        row = self._row(conn)
        return None if row is None else self._stored(row)

    def check(self, conn: sqlite3.Connection) -> None:
        """Inside the write transaction: replay if the key is taken, else take it."""
        row = self._row(conn)
        if row is not None:
            raise Replay(self._stored(row))
        if self.result is None:  # pragma: no cover - a programming error
            raise RuntimeError("Claim.result must be set before the write")
        now = ts(self.now)
        conn.execute(
            "DELETE FROM idempotency_keys WHERE agent_id=? AND expires_at <= ?",
            (self.agent_id, now),
        )
        conn.execute(
            "INSERT OR REPLACE INTO idempotency_keys"
            "(agent_id, key, tool, request_hash, result, created_at, expires_at) "
            "VALUES (?,?,?,?,?,?,?)",
            (
                self.agent_id, self.key, self.tool, self.request_hash,
                json.dumps(self.result, ensure_ascii=False), now, ts(self.now + TTL),
            ),
        )  # fmt: skip


def purge_expired(conn: sqlite3.Connection, now: datetime) -> int:
    """Delete every expired key (all agents); returns how many."""
    return conn.execute("DELETE FROM idempotency_keys WHERE expires_at <= ?", (ts(now),)).rowcount
