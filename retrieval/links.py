"""Update links: a newer record *updates* an older one (the same subject, a new value).

Both records are kept; the link says which one is current. One row per (older, newer) pair in
``record_links`` (schema v11), written inside the write transaction that makes it:

- ``how``: ``stated`` (the writer named the record it supersedes) or ``detected`` (the write
  found an older record of the same scope stating the same subject; server/service/supersede.py);
- ``similarity``: the two records' cosine, for a detected link;
- ``created_at`` / ``created_by``: when and by whom the link was made;
- ``undone_at`` / ``undone_by``: a person undid a wrong link (the row stays, so the same pair
  is never detected again; stating the link again restores it).

Reads: :func:`updaters` (the newest active updater of each of some records: what ranking and
quoting need) and :func:`chain` (every record linked to one, both ways: what the dashboard
shows). A record's links go with it when it is deleted (:meth:`SQLiteStore.delete`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from .records import UpdatedBy, parse_ts, ts, utcnow

MAX_CHAIN = 50  # records followed from one record, each way


@dataclass(frozen=True)
class Link:
    older: str
    newer: str
    how: str  # stated | detected
    similarity: float | None
    at: datetime
    by: str
    undone_at: datetime | None = None
    undone_by: str | None = None

    @property
    def active(self) -> bool:
        return self.undone_at is None


def _link(row) -> Link:
    return Link(row[0], row[1], row[2], row[3], parse_ts(row[4]), row[5], parse_ts(row[6]),
                row[7])  # fmt: skip


_COLS = "older_id, newer_id, how, similarity, created_at, created_by, undone_at, undone_by"


def write(
    conn: sqlite3.Connection,
    older: str,
    newer: str,
    bucket: str,
    how: str,
    by: str,
    *,
    similarity: float | None = None,
    at: datetime | None = None,
) -> None:
    """Link ``newer`` as updating ``older`` (inside the caller's transaction). A stated link
    replaces any earlier row of the pair (an undone one included); a detected link never
    revives a pair someone undid."""
    verb = "INSERT OR REPLACE" if how == "stated" else "INSERT OR IGNORE"
    conn.execute(
        f"{verb} INTO record_links(older_id, newer_id, bucket, how, similarity, created_at, "
        "created_by, undone_at, undone_by) VALUES (?,?,?,?,?,?,?,NULL,NULL)",
        (older, newer, bucket, how, similarity, ts(at or utcnow()), by),
    )


def undo(conn: sqlite3.Connection, older: str, newer: str, by: str) -> bool:
    """Mark the link undone (kept, so it is not detected again); False when there is no
    active link of that pair."""
    cur = conn.execute(
        "UPDATE record_links SET undone_at=?, undone_by=? "
        "WHERE older_id=? AND newer_id=? AND undone_at IS NULL",
        (ts(utcnow()), by, older, newer),
    )
    return cur.rowcount > 0


def forget(conn: sqlite3.Connection, record_id: str) -> None:
    """A deleted record's links, both ways (the older record it updated is current again)."""
    conn.execute("DELETE FROM record_links WHERE older_id=? OR newer_id=?", (record_id, record_id))


def updaters(reader: sqlite3.Connection, ids: Sequence[str]) -> dict[str, UpdatedBy]:
    """For each of ``ids`` that an active link marks as updated: the newest record updating
    it (by the link's time)."""
    out: dict[str, UpdatedBy] = {}
    ids = list(dict.fromkeys(ids))
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        rows = reader.execute(
            "SELECT older_id, newer_id, created_at, how FROM record_links "
            f"WHERE undone_at IS NULL AND older_id IN ({','.join('?' * len(part))}) "
            "ORDER BY created_at",
            part,
        ).fetchall()
        for older, newer, at, how in rows:
            out[older] = UpdatedBy(id=newer, at=parse_ts(at), how=how)
    return out


def chain(reader: sqlite3.Connection, record_id: str) -> list[Link]:
    """Every link (active or undone) of the records connected to ``record_id`` through links,
    both ways, oldest link first."""
    seen, todo, links = {record_id}, [record_id], {}
    while todo and len(seen) < MAX_CHAIN:
        rid = todo.pop()
        rows = reader.execute(
            f"SELECT {_COLS} FROM record_links WHERE older_id=? OR newer_id=?", (rid, rid)
        ).fetchall()
        for row in rows:
            link = _link(row)
            links[(link.older, link.newer)] = link
            for other in (link.older, link.newer):
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
    return sorted(links.values(), key=lambda lk: lk.at)


def head(reader: sqlite3.Connection, record_id: str) -> str:
    """The current record of ``record_id``'s chain: follow active links to the newest."""
    current, seen = record_id, {record_id}
    for _ in range(MAX_CHAIN):
        nxt = updaters(reader, [current]).get(current)
        if nxt is None or nxt.id in seen:
            return current
        current = nxt.id
        seen.add(current)
    return current


def current_first(
    store, f, ids: list[str], scores: list[float] | None = None
) -> tuple[dict[str, str], list[str]]:
    """The chains among ranked candidates: ({older candidate: the current record of its chain},
    the current records that are not candidates yet but pass the filter ``f``). A ranker then
    puts each current record just above the best of its older ones."""
    ups = updaters(store.reader, ids)
    if not ups:
        return {}, []
    heads = {old: head(store.reader, old) for old in ups}
    heads = {old: h for old, h in heads.items() if h != old}
    known = set(ids)
    missing = [h for h in dict.fromkeys(heads.values()) if h not in known]
    allowed = set(store.filter_ids(f, missing)) if missing else set()
    heads = {old: h for old, h in heads.items() if h in known or h in allowed}
    return heads, [h for h in missing if h in allowed]


__all__ = ["Link", "chain", "current_first", "forget", "head", "undo", "updaters", "write"]
