"""Read-only views for the dashboard: paginated memory tables, sessions, workspace files,
projects, store size. Same visibility as the tools: every list reads only the caller's
visible buckets (``Identity.visible_buckets``), and never loads a whole bucket.

Pagination is keyset (the last row's sort key and rowid), one index range scan per visible
bucket merged in order, as the change stream does: a page of a 100k-record bucket costs
the page, not the bucket (indexes ``records_bucket_*`` of schema v7).
"""

from __future__ import annotations

import base64
import heapq
import json
import os
from pathlib import Path

from pydantic import BaseModel, Field

from ingest.workspace.pipeline import IngestReport
from retrieval.records import Kind, Record, Scope
from retrieval.storage.store import ts
from server.service.core.errors import InvalidInput
from server.service.core.identity import Identity
from server.service.core.models import Memory
from server.service.memories.changes import Change, latest_changes
from server.service.memories.memory import MemoryService

# sort name -> (column, index-backed): every one is the third column of a records index
SORTS = {"updated": "updated_at", "created": "created_at", "priority": "priority",
         "category": "category"}  # fmt: skip
MAX_PAGE = 200


class MemoryPage(BaseModel):
    items: list[Memory]
    total: int = Field(description="Visible, unexpired records of this scope and kind.")
    nextCursor: str | None = None
    sort: str
    descending: bool


def _encode(key: list) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")


def _decode(cursor: str) -> list:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = json.loads(raw)
        if not isinstance(key, list) or len(key) != 2 or not isinstance(key[1], int):
            raise ValueError
        return key
    except ValueError:
        raise InvalidInput(f"invalid page cursor {cursor[:40]!r}") from None


def list_records(
    svc: MemoryService,
    who: Identity,
    scope: str = "private",
    *,
    kind: str = "memory",
    sort: str = "updated",
    descending: bool = True,
    cursor: str | None = None,
    limit: int = 50,
) -> MemoryPage:
    """One page of the caller's visible records of ``scope`` and ``kind``, sorted by
    ``sort`` (updated, created, priority, category; ties by insertion order)."""
    try:
        Scope(scope)
        Kind(kind)
    except ValueError:
        raise InvalidInput(f"unknown scope {scope!r} or kind {kind!r}") from None
    if sort not in SORTS:
        raise InvalidInput(f"sort must be one of {', '.join(SORTS)}, got {sort!r}")
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput(f"limit must be between 1 and {MAX_PAGE}")
    col = SORTS[sort]
    op, order = ("<", "DESC") if descending else (">", "ASC")
    after = _decode(cursor) if cursor else None
    now = ts(svc.clock())
    buckets = who.visible_buckets([scope])
    conn = svc.store.reader
    runs = []
    for b in buckets:
        sql = (
            f"SELECT rowid, id, {col} AS k FROM records WHERE bucket=? AND kind=? "
            "AND (expires_at IS NULL OR expires_at > ?)"
        )
        params: list = [b, kind, now]
        if after is not None:
            sql += f" AND ({col}, rowid) {op} (?, ?)"
            params += after
        sql += f" ORDER BY {col} {order}, rowid {order} LIMIT ?"
        runs.append(conn.execute(sql, [*params, limit + 1]).fetchall())
    merged = list(heapq.merge(*runs, key=lambda r: (r["k"], r["rowid"]), reverse=descending))[
        : limit + 1
    ]
    more = len(merged) > limit
    merged = merged[:limit]
    found = svc.store.get([r["id"] for r in merged])
    items = [Memory.from_record(found[r["id"]]) for r in merged if r["id"] in found]
    total = count_live(svc, buckets, kind)
    return MemoryPage(
        items=items,
        total=total,
        nextCursor=_encode([merged[-1]["k"], merged[-1]["rowid"]]) if more else None,
        sort=sort,
        descending=descending,
    )


def count_live(svc: MemoryService, buckets: list[str], kind: str) -> int:
    """Unexpired records of ``kind`` in ``buckets``: every record, counted on the (bucket,
    kind) index alone, minus the expired ones, found through the partial index of expiring
    records (few: cleanup deletes them). A plain count with the expiry test reads every row
    of the bucket (40 ms for a 12k-record bucket on a loaded 2-core box, < 1 ms this way)."""
    conn = svc.store.reader
    now = ts(svc.clock())
    total = 0
    for b in buckets:
        total += conn.execute(
            "SELECT count(*) FROM records WHERE bucket=? AND kind=?", (b, kind)
        ).fetchone()[0]
        total -= conn.execute(
            "SELECT count(*) FROM records INDEXED BY records_expires WHERE expires_at IS NOT NULL "
            "AND expires_at <= ? AND bucket=? AND kind=?",
            (now, b, kind),
        ).fetchone()[0]
    return total


def get_record(svc: MemoryService, who: Identity, record_id: str) -> Record:
    """Any visible record by id (memory, observation, lesson, chunk, turn)."""
    return svc.get_visible(who, record_id)


# ---------------------------------------------------------------------- sessions (kind turn)
_SESSION = "json_extract(metadata, '$.session')"
_TURN = "CAST(json_extract(metadata, '$.turn') AS INTEGER)"
_PART = "COALESCE(CAST(json_extract(metadata, '$.part') AS INTEGER), 0)"
_LAST = f"COALESCE(CAST(json_extract(metadata, '$.last_turn') AS INTEGER), {_TURN})"


class SessionSummary(BaseModel):
    session: str
    turns: int = Field(description="Turns read so far (the last stored turn's position + 1).")
    first: str | None = Field(default=None, description="Earliest turn timestamp (ISO 8601).")
    last: str | None = None
    gitBranch: str | None = None
    cwd: str | None = None
    parentSession: str | None = None
    agentId: str
    scope: str


def list_sessions(
    svc: MemoryService, who: Identity, *, offset: int = 0, limit: int = 50
) -> tuple[list[SessionSummary], bool]:
    """Indexed transcripts the caller can see, one row per session, latest first."""
    if not 1 <= limit <= MAX_PAGE or offset < 0:
        raise InvalidInput("invalid page")
    buckets = who.visible_buckets()
    marks = ",".join("?" * len(buckets))
    rows = svc.store.reader.execute(
        f"SELECT {_SESSION} AS s, max({_LAST}) + 1 AS n, "
        "min(json_extract(metadata, '$.timestamp')) AS first, "
        "max(json_extract(metadata, '$.timestamp')) AS last, "
        "max(json_extract(metadata, '$.gitBranch')) AS branch, "
        "max(json_extract(metadata, '$.cwd')) AS cwd, "
        "max(json_extract(metadata, '$.parentSession')) AS parent, "
        "max(agent_id) AS agent, max(scope) AS scope "
        f"FROM records WHERE kind='turn' AND bucket IN ({marks}) "
        "AND (expires_at IS NULL OR expires_at > ?) "
        f"GROUP BY {_SESSION} ORDER BY last DESC, s LIMIT ? OFFSET ?",
        [*buckets, ts(svc.clock()), limit + 1, offset],
    ).fetchall()
    out = [
        SessionSummary(
            session=str(r["s"]),
            turns=r["n"],
            first=r["first"],
            last=r["last"],
            gitBranch=r["branch"],
            cwd=r["cwd"],
            parentSession=r["parent"],
            agentId=r["agent"],
            scope=r["scope"],
        )  # fmt: skip
        for r in rows[:limit]
        if r["s"] is not None
    ]
    return out, len(rows) > limit


def session_turns(
    svc: MemoryService,
    who: Identity,
    session: str,
    *,
    after: int = -1,
    after_part: int | None = None,
    limit: int = 100,
) -> tuple[list[Record], bool]:
    """The records of one session in order: its exchanges by first turn (``metadata.turn``),
    the parts of a long one in order (``metadata.part``). The page starts after turn
    ``after`` (``after_part``: after that part of the exchange starting there)."""
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput("invalid page")
    buckets = who.visible_buckets()
    marks = ",".join("?" * len(buckets))
    start, args = f"{_TURN} > ?", [after]
    if after_part is not None:
        start, args = f"({_TURN} > ? OR ({_TURN} = ? AND {_PART} > ?))", [after, after, after_part]
    rows = svc.store.reader.execute(
        f"SELECT id FROM records WHERE kind='turn' AND bucket IN ({marks}) "
        f"AND {_SESSION} = ? AND {start} AND (expires_at IS NULL OR expires_at > ?) "
        f"ORDER BY {_TURN}, {_PART} LIMIT ?",
        [*buckets, session, *args, ts(svc.clock()), limit + 1],
    ).fetchall()
    ids = [r[0] for r in rows[:limit]]
    found = svc.store.get(ids)
    return [found[i] for i in ids if i in found], len(rows) > limit


# ---------------------------------------------------------------------- workspace
class IngestRoot(BaseModel):
    root: str
    finishedAt: str
    report: IngestReport


class FileRow(BaseModel):
    path: str
    size: int
    chunks: int
    state: str
    reason: str | None = None


def ingest_roots(svc: MemoryService, who: Identity) -> list[IngestRoot]:
    """Folders ingested into the caller's project (team scope), with their last report."""
    rows = svc.store.reader.execute(
        "SELECT root, finished_at, report FROM ingest_runs WHERE bucket=? ORDER BY root",
        (who.bucket("team"),),
    ).fetchall()
    return [
        IngestRoot(root=r[0], finishedAt=r[1], report=IngestReport.model_validate_json(r[2]))
        for r in rows
    ]


def list_files(
    svc: MemoryService,
    who: Identity,
    *,
    root: str | None = None,
    state: str | None = None,
    after: str | None = None,
    limit: int = 50,
) -> tuple[list[FileRow], str | None]:
    """Files of the project's ingested folders (under ``root`` if given), by path; ``state``:
    indexed or skipped. Returns the page and the cursor of the next one."""
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput("invalid page")
    conds, params = ["bucket = ?"], [who.bucket("team")]
    if root:
        base = root.rstrip("/") + "/"
        conds.append("path >= ? AND path < ?")
        params += [base, base[:-1] + chr(ord("/") + 1)]
    if state:
        conds.append("state = ?")
        params.append(state)
    if after:
        conds.append("path > ?")
        params.append(after)
    rows = svc.store.reader.execute(
        f"SELECT path, size, chunks, state, reason FROM files WHERE {' AND '.join(conds)} "
        "ORDER BY path LIMIT ?",
        [*params, limit + 1],
    ).fetchall()
    page = [FileRow(path=r[0], size=r[1], chunks=r[2], state=r[3], reason=r[4]) for r in rows]
    more = len(page) > limit
    page = page[:limit]
    return page, (page[-1].path if more else None)


# ---------------------------------------------------------------------- store
def projects(svc: MemoryService) -> list[str]:
    """Every project with records in the store (the owner may switch between them)."""
    found: set[str] = set()
    for b in svc.store.all_buckets():
        parts = b.split("/")
        if parts[0] in ("private", "team") and len(parts) > 1:
            found.add(parts[1])
    return sorted(found)


def store_size(svc: MemoryService) -> dict[str, int]:
    """Bytes on disk: the SQLite database (+ WAL) and the vector index folder."""
    home = Path(svc.engine.home)
    db = sum(p.stat().st_size for p in home.glob("pattern.sqlite3*") if p.is_file())
    vectors = 0
    for dirpath, _dirs, files in os.walk(home / "chroma"):
        for f in files:
            try:
                vectors += os.stat(os.path.join(dirpath, f)).st_size
            except FileNotFoundError:
                continue
    return {"sqlite_bytes": db, "vector_bytes": vectors}


# ---------------------------------------------------------------------- activity
def recent_changes(
    svc: MemoryService,
    who: Identity,
    limit: int = 50,
    *,
    kind: str | None = None,
    agent: str | None = None,
    window: int = 300,
) -> tuple[list[Change], int]:
    """The newest ``limit`` changes the caller can see (as the ``changes`` tool), newest last,
    filtered by kind and author; a filter looks back over the last ``window`` changes. Records
    are loaded only for the changes kept. Returns the changes and the head (to follow on)."""
    res = latest_changes(svc, who, limit=window if kind or agent else limit, include_records=False)
    rows = [c for c in res.changes if kind is None or c.kind == kind]
    buckets = set(who.visible_buckets())
    if agent is not None:  # authors first (two columns), whole records for the kept rows only
        authors = _authors(svc, [c.record_id for c in rows if c.op != "delete"], buckets)
        rows = [
            c
            for c in rows
            if (authors.get(c.record_id) if c.op != "delete" else author_of(c, who)) == agent
        ]
    rows = rows[-limit:]
    wanted = [c.record_id for c in rows if c.op != "delete"]
    found = {k: v for k, v in svc.store.get(wanted).items() if v.bucket in buckets}
    out = []
    for c in rows:
        rec = found.get(c.record_id) if c.op != "delete" else None
        out.append(c.model_copy(update={"record": Memory.from_record(rec) if rec else None}))
    return out, res.next_cursor


def _authors(svc: MemoryService, ids: list[str], buckets: set[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        rows = svc.store.reader.execute(
            f"SELECT id, agent_id, bucket FROM records WHERE id IN ({','.join('?' * len(part))})",
            part,
        ).fetchall()
        out.update((r[0], r[1]) for r in rows if r[2] in buckets)
    return out


def author_of(c: Change, who: Identity) -> str | None:
    """Who made a change: the record's author; for a delete (the record is gone) only a
    private/personal bucket names it, and those the caller sees are its own (or, for a
    sub-agent's private scope, possibly its parent's: unknown)."""
    if c.record is not None:
        return c.record.agentId
    if c.scope == "personal" or (c.scope == "private" and not who.is_subagent):
        return who.agent_id
    return None
