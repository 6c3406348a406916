"""The per-session ledger of client hooks: what was injected, and how far the session was
compacted. One row of the store's ``meta`` table per session (``hooks.ledger:<session id>``), so
it survives a daemon restart; every change re-reads the row inside its write transaction, so
concurrent hooks of one session (a prompt, a background indexing run) never lose an update.
Ledgers of sessions idle for ``LEDGER_DAYS`` are dropped when a session starts (at most once
an hour: ``hook_events.PRUNE_EVERY``).
"""

from __future__ import annotations

import json
from datetime import timedelta

from retrieval.records import utcnow
from server.service.memories.memory import MemoryService

LEDGER_KEY = "hooks.ledger:"  # + session id
LEDGER_MAX_IDS = 2000
LEDGER_DAYS = 14


class Ledger:
    """What was injected in one session (and up to which turn its own turns were compacted).
    Every change re-reads the row inside its write transaction, so concurrent hooks of one
    session (a prompt and a background indexing run) never lose each other's update."""

    def __init__(self, svc: MemoryService, session: str | None) -> None:
        self.svc = svc
        self.session = session
        data = self._read(svc.store.reader)
        self.ids: list[str] = list(data.get("ids", []))
        self.compacted: int = int(data.get("compacted", 0))
        self.seen = set(self.ids)

    def _read(self, conn) -> dict:
        if not self.session:
            return {}
        row = conn.execute("SELECT value FROM meta WHERE key=?", (LEDGER_KEY + self.session,))
        found = row.fetchone()
        return json.loads(found[0]) if found else {}

    def _update(self, change) -> None:
        if not self.session:
            return
        with self.svc.store.transaction() as conn:
            data = self._read(conn)
            change(data)
            data["ids"] = list(dict.fromkeys(data.get("ids", [])))[-LEDGER_MAX_IDS:]
            data["at"] = utcnow().isoformat()
            self.svc.store.set_meta(conn, LEDGER_KEY + self.session, json.dumps(data))
        self.ids, self.compacted = data["ids"], int(data.get("compacted", 0))
        self.seen = set(self.ids)

    def add(self, ids: list[str]) -> None:
        if any(i not in self.seen for i in ids):
            self._update(lambda d: d.__setitem__("ids", [*d.get("ids", []), *ids]))

    def reset(self) -> None:
        """The client's context was cleared or compacted: what it held is gone."""
        self._update(lambda d: d.__setitem__("ids", []))

    def set_compacted(self, turns: int) -> None:
        """The session's first ``turns`` turns left the client's context (compaction)."""
        self._update(lambda d: d.__setitem__("compacted", max(turns, int(d.get("compacted", 0)))))


def prune_meta(svc: MemoryService, prefix: str, stamp: str, days: int) -> int:
    """Drop the ``meta`` rows whose key starts with ``prefix`` and whose JSON value's ``stamp``
    (an ISO time) is older than ``days``; how many."""
    cutoff = (utcnow() - timedelta(days=days)).isoformat()
    hi = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    rows = svc.store.reader.execute(
        "SELECT key, value FROM meta WHERE key >= ? AND key < ?", (prefix, hi)
    ).fetchall()
    old = [k for k, v in rows if (json.loads(v).get(stamp) or "") < cutoff]
    if old:
        with svc.store.transaction() as conn:
            conn.executemany("DELETE FROM meta WHERE key=?", [(k,) for k in old])
    return len(old)


def prune_ledgers(svc: MemoryService, days: int = LEDGER_DAYS) -> int:
    return prune_meta(svc, LEDGER_KEY, "at", days)
