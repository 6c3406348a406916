"""Update links: a newer record *updates* an older one (the same subject, a new value).

Both records are kept; the link says which one is current. One row per (older, newer) pair in
``record_links`` (schema v11), written inside the transaction that makes it. ``how`` says what
the row is:

- ``stated``: an agent or a person said so (``supersedes`` on a write, the ``supersede`` tool,
  the dashboard);
- ``judged``: the client's own model judged the pair when the server asked it (MCP sampling,
  ``PATTERN_UPDATE_JUDGE=sampling``);
- ``detected``: a link an earlier version made by itself, never written now: opening such a
  store turns each into a ``candidate`` row (schema v15), so only a call makes a link;
- ``candidate``: **not a link**: two records shown at a write as possibly stating the same
  thing (``server/service/updating/candidates.py``). Recall marks such a pair while nobody decided it;
  the review inbox lists it. Stating the link replaces the row (the pair is decided);
  dismissing it marks the row undone.

``similarity``: a candidate's score; ``created_at`` / ``created_by``: when and by whom;
``undone_at`` / ``undone_by``: a person undid a link, or dismissed a candidate (the row stays,
so the pair is not offered again; stating the link again restores it).

Reads: :func:`updaters` (the newest active updater of each of some records: what ranking and
quoting need), :func:`chain` (every record linked to one, both ways: what the dashboard
shows), :func:`pairs` / :func:`pending` (undecided candidate pairs). A record's rows go with it
when it is deleted (:meth:`SQLiteStore.delete`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from retrieval.records import UpdatedBy, parse_ts, ts, utcnow

MAX_CHAIN = 50  # records followed from one record, each way
CANDIDATE = "candidate"
_LINK = "how != 'candidate'"  # the rows that are links


@dataclass(frozen=True)
class Link:
    older: str
    newer: str
    how: str  # stated | judged | detected
    similarity: float | None
    at: datetime
    by: str
    undone_at: datetime | None = None
    undone_by: str | None = None

    @property
    def active(self) -> bool:
        return self.undone_at is None


@dataclass(frozen=True)
class Pair:
    """Two records shown at a write as possibly stating the same thing, nobody decided yet."""

    older: str
    newer: str  # the record that was written when the pair was shown
    score: float | None
    at: datetime
    by: str


def _link(row) -> Link:
    return Link(row[0], row[1], row[2], row[3], parse_ts(row[4]), row[5], parse_ts(row[6]),
                row[7])  # fmt: skip


_COLS = "older_id, newer_id, how, similarity, created_at, created_by, undone_at, undone_by"
# no link row between a candidate row's two records, either way (a link of the same direction
# replaced the candidate row: it is the primary key)
_UNDECIDED = (
    f"NOT EXISTS (SELECT 1 FROM record_links l WHERE l.{_LINK} AND "
    "l.older_id = c.newer_id AND l.newer_id = c.older_id)"
)


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
    """Link ``newer`` as updating ``older`` (inside the caller's transaction); a link replaces
    any earlier row of the pair (an undone one, a candidate). ``how`` ``candidate`` records a
    pair shown at a write and never replaces a row (a link, or a dismissal, stays)."""
    verb = "INSERT OR IGNORE" if how == CANDIDATE else "INSERT OR REPLACE"
    conn.execute(
        f"{verb} INTO record_links(older_id, newer_id, bucket, how, similarity, created_at, "
        "created_by, undone_at, undone_by) VALUES (?,?,?,?,?,?,?,NULL,NULL)",
        (older, newer, bucket, how, similarity, ts(at or utcnow()), by),
    )


def undo(conn: sqlite3.Connection, older: str, newer: str, by: str) -> bool:
    """Mark the link undone (kept: the pair is not offered again); False when there is no
    active link of that pair."""
    cur = conn.execute(
        "UPDATE record_links SET undone_at=?, undone_by=? "
        f"WHERE older_id=? AND newer_id=? AND undone_at IS NULL AND {_LINK}",
        (ts(utcnow()), by, older, newer),
    )
    return cur.rowcount > 0


def dismiss(conn: sqlite3.Connection, older: str, newer: str, by: str) -> bool:
    """A person said both records of a candidate pair stay true: the row is marked undone (so
    neither recall nor the inbox offers the pair again); False when there is no such pair."""
    cur = conn.execute(
        "UPDATE record_links SET undone_at=?, undone_by=? "
        "WHERE older_id=? AND newer_id=? AND undone_at IS NULL AND how=?",
        (ts(utcnow()), by, older, newer, CANDIDATE),
    )
    return cur.rowcount > 0


def forget(conn: sqlite3.Connection, record_id: str) -> None:
    """A deleted record's rows, both ways (the older record it updated is current again)."""
    conn.execute("DELETE FROM record_links WHERE older_id=? OR newer_id=?", (record_id, record_id))


def active(reader: sqlite3.Connection, older: str, newer: str) -> datetime | None:
    """When the active link saying ``newer`` updates ``older`` was made (None: no such link)."""
    row = reader.execute(
        f"SELECT created_at FROM record_links WHERE older_id=? AND newer_id=? "
        f"AND undone_at IS NULL AND {_LINK}",
        (older, newer),
    ).fetchone()
    return parse_ts(row[0]) if row else None


def related(reader: sqlite3.Connection, a: str, b: str) -> bool:
    """Any row (a link, undone or not, or a candidate pair, dismissed or not) joins ``a`` and
    ``b``, either way: the pair was offered or decided before."""
    return (
        reader.execute(
            "SELECT 1 FROM record_links WHERE (older_id=? AND newer_id=?) OR "
            "(older_id=? AND newer_id=?) LIMIT 1",
            (a, b, b, a),
        ).fetchone()
        is not None
    )


def reaches(reader: sqlite3.Connection, start: str, target: str) -> bool:
    """``target`` is ``start`` or updates it through active links (``start`` -> newer -> …):
    linking ``target`` as updated by ``start`` would close a cycle. Each record found is
    compared as it is found; past ``MAX_CHAIN * 4`` records followed with more left, the
    answer is yes (a cycle cannot be ruled out)."""
    if start == target:
        return True
    seen, todo, followed = {start}, [start], 0
    while todo:
        if followed == MAX_CHAIN * 4:
            return True
        rid = todo.pop()
        followed += 1
        rows = reader.execute(
            f"SELECT newer_id FROM record_links WHERE older_id=? AND undone_at IS NULL AND {_LINK}",
            (rid,),
        ).fetchall()
        for (nxt,) in rows:
            if nxt == target:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def updaters(reader: sqlite3.Connection, ids: Sequence[str]) -> dict[str, UpdatedBy]:
    """For each of ``ids`` that an active link marks as updated: the newest record updating
    it (by the link's time)."""
    out: dict[str, UpdatedBy] = {}
    ids = list(dict.fromkeys(ids))
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        rows = reader.execute(
            "SELECT older_id, newer_id, created_at, how FROM record_links "
            f"WHERE undone_at IS NULL AND {_LINK} AND older_id IN ({','.join('?' * len(part))}) "
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
            f"SELECT {_COLS} FROM record_links WHERE (older_id=? OR newer_id=?) AND {_LINK}",
            (rid, rid),
        ).fetchall()
        for row in rows:
            link = _link(row)
            links[(link.older, link.newer)] = link
            for other in (link.older, link.newer):
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
    return sorted(links.values(), key=lambda lk: lk.at)


def _pair(row) -> Pair:
    return Pair(row[0], row[1], row[2], parse_ts(row[3]), row[4])


_PAIR_COLS = "c.older_id, c.newer_id, c.similarity, c.created_at, c.created_by"


def pairs(reader: sqlite3.Connection, ids: Sequence[str]) -> list[Pair]:
    """The undecided candidate pairs with both records among ``ids`` (at most a few hundred:
    what a recall returns)."""
    ids = list(dict.fromkeys(ids))[:500]
    if len(ids) < 2:
        return []
    marks = ",".join("?" * len(ids))
    rows = reader.execute(
        f"SELECT {_PAIR_COLS} FROM record_links c WHERE c.how=? AND c.undone_at IS NULL "
        f"AND c.older_id IN ({marks}) AND c.newer_id IN ({marks}) AND {_UNDECIDED}",
        [CANDIDATE, *ids, *ids],
    ).fetchall()
    return [_pair(r) for r in rows]


def pending(reader: sqlite3.Connection, buckets: Sequence[str], limit: int) -> list[Pair]:
    """The newest ``limit`` undecided candidate pairs of ``buckets``."""
    buckets = list(buckets)
    if not buckets or limit <= 0:
        return []
    rows = reader.execute(
        f"SELECT {_PAIR_COLS} FROM record_links c WHERE c.how=? AND c.undone_at IS NULL "
        f"AND c.bucket IN ({','.join('?' * len(buckets))}) AND {_UNDECIDED} "
        "ORDER BY c.created_at DESC LIMIT ?",
        [CANDIDATE, *buckets, limit],
    ).fetchall()
    return [_pair(r) for r in rows]


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
    puts each current record that is a candidate just above the best of its older ones, and
    one that is not just below it."""
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


__all__ = ["CANDIDATE", "Link", "Pair", "active", "chain", "current_first", "dismiss", "forget",
           "head", "pairs", "pending", "reaches", "related", "undo", "updaters", "write"]  # fmt: skip
