"""The change stream: every committed mutation, in commit order, filtered by visibility.

Every write transaction appends rows to ``changes`` (``seq`` AUTOINCREMENT, record id, op,
kind, the record's bucket, revision, time) together with the records themselves
(``SQLiteStore._log``). Writers are serialized (one ``BEGIN IMMEDIATE`` writer), so sequence
numbers commit in increasing order and a reader's snapshot always holds a gap-free prefix:
a consumer that pages with ``cursor = next_cursor`` sees every change exactly once, in order.

- **Ops**: ``insert``, ``update``, ``delete`` (the record itself) and ``citations``: the status
  of the code a record cites changed (fresh / moved / changed / deleted, or moved lines were
  found at another place), found by a recall, a verify or the ingest hook; the record's own row
  and revision are unchanged, and the change carries the record's citations as they are now.
- **Visibility**: a caller sees a change iff its bucket is one of
  ``Identity.visible_buckets()`` (for a delete, the bucket the record had), so agent B never
  learns of A's private or personal changes, and a page costs one indexed range scan per
  visible bucket (``changes(bucket, seq)``), not a scan of everyone's history.
- **Cursors**: ``cursor`` = the last sequence number the consumer has processed (0 = from the
  beginning). ``next_cursor`` is where to continue; it moves past changes the caller may not
  see, so a consumer never re-scans them.
- **Durable consumer cursors**: ``(agent, consumer_id, scope key) -> cursor`` in
  ``consumer_cursors``. ``changes(consumer_id=…)`` without a cursor resumes from the stored one;
  it is stored by :func:`ack` (after the consumer has handled a page: at-least-once, exactly
  once with the revision check) or by ``commit=True`` on the read itself (at-most-once).
- **Compaction**: :func:`compact_changes` deletes old rows and records the horizon (the highest
  deleted ``seq``) in ``meta``. A consumer whose cursor is below the horizon gets
  ``reset_required`` and no changes — never a silent gap. It then rebuilds its state from a
  snapshot (``recall-context``, ``export-memories``) and continues from ``next_cursor`` (the
  head when the reset was reported; changes after it are delivered, some may already be in the
  snapshot and are safe to re-apply by revision).
"""

from __future__ import annotations

import heapq
import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field

from retrieval.cite import CitationState
from retrieval.records import utcnow
from retrieval.storage.buckets import SCOPE_NAMES as ALL_SCOPES
from retrieval.storage.store import SQLiteStore, parse_ts, ts
from server.service.core.errors import InvalidInput
from server.service.core.identity import Identity
from server.service.core.models import Memory, ScopeName
from server.service.memories import idempotency as idem
from server.service.memories.memory import MemoryService

HORIZON_KEY = "changes_horizon"
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_CONSUMER_CHARS = 200


class Change(BaseModel):
    seq: int = Field(description="Sequence number (commit order); resume after it.")
    op: Literal["insert", "update", "delete", "citations"] = Field(
        description="insert/update/delete of the record, or citations: the status of the code "
        "it cites changed (see `citations`)."
    )
    record_id: str
    kind: str
    scope: ScopeName
    revision: int = Field(
        description="The record's revision this change produced (deletes: the last one)."
    )
    at: datetime
    record: Memory | None = Field(
        default=None,
        description="The record as it is now (inserts/updates, when still present and "
        "includeRecords); its revision may be newer than this change's.",
    )
    citations: list[CitationState] | None = Field(
        default=None,
        description="citations changes: the record's citations with their status now.",
    )
    merged: bool = Field(
        default=False,
        description="An update that merged a stale edit with the changes made since "
        "(update-memory with an older expectedRevision).",
    )
    parents: list[int] | None = Field(
        default=None,
        description="A merged revision's parents: [the revision it was written over, the "
        "revision the merged edit was made from].",
    )


class ChangesResult(BaseModel):
    changes: list[Change] = Field(default_factory=list)
    cursor: int = Field(description="The cursor this page was read after.")
    next_cursor: int = Field(description="Pass it as `cursor` (or ack it) to continue.")
    has_more: bool = Field(description="More changes are waiting after next_cursor.")
    reset_required: bool = Field(
        default=False,
        description="The cursor is behind the compaction horizon (or ahead of this store): no "
        "changes are returned. Rebuild from a snapshot, then continue from next_cursor.",
    )
    reason: str | None = None
    horizon: int = Field(description="Changes up to this seq have been compacted away.")
    head: int = Field(description="The latest committed seq in the store.")
    consumer_id: str | None = None
    committed: bool = Field(default=False, description="next_cursor was stored for the consumer.")


class AckResult(BaseModel):
    consumer_id: str
    scope_key: str
    cursor: int
    previous: int | None = Field(description="The cursor stored before (None: a new consumer).")


class CompactResult(BaseModel):
    deleted: int
    horizon: int
    head: int
    expired_idempotency_keys: int = 0
    # PostgreSQL mode: the replication log's horizon after compacting it by the same age (a
    # daemon whose replica is behind it rebuilds from a snapshot)
    log_horizon: int | None = None


# ---------------------------------------------------------------------- store-level helpers
def head(conn: sqlite3.Connection) -> int:
    """The highest committed sequence number ever assigned (survives compaction)."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name='changes'").fetchone()
    return int(row[0]) if row else 0


def horizon(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key=?", (HORIZON_KEY,)).fetchone()
    return int(row[0]) if row else 0


@contextmanager
def snapshot(store: SQLiteStore) -> Iterator[sqlite3.Connection]:
    """One read transaction on this thread's reader: every query sees the same commit."""
    conn = store.reader
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


def compact_changes(
    store: SQLiteStore, before_seq: int, now: datetime | None = None
) -> CompactResult:
    """Delete change rows with ``seq < before_seq`` (never past the head) and raise the horizon
    to the highest deleted seq; expired idempotency keys go too. Consumers behind the horizon
    get ``reset_required``: compaction does not wait for them."""
    with store.transaction() as conn:
        top = head(conn)
        old = horizon(conn)
        upto = min(int(before_seq) - 1, top)
        deleted = 0
        if upto > old:
            deleted = conn.execute("DELETE FROM changes WHERE seq <= ?", (upto,)).rowcount
            store.set_meta(conn, HORIZON_KEY, str(upto))
        keys = idem.purge_expired(conn, now or utcnow())
    return CompactResult(
        deleted=deleted, horizon=max(old, upto), head=top, expired_idempotency_keys=keys
    )


def compact_older_than(
    store: SQLiteStore, age: timedelta, now: datetime | None = None
) -> CompactResult:
    """Compact every change committed more than ``age`` ago."""
    now = now or utcnow()
    row = store.reader.execute(
        "SELECT min(seq) FROM changes WHERE at >= ?", (ts(now - age),)
    ).fetchone()
    before = row[0] if row and row[0] is not None else head(store.reader) + 1
    return compact_changes(store, before, now)


def _head_for(svc: MemoryService, cursor) -> int:
    """This store's head; with PostgreSQL, a cursor beyond it came from a node further ahead:
    the replica catches up first instead of calling a valid cursor 'ahead of this store'."""
    top = head(svc.store.reader)
    if isinstance(cursor, int) and cursor > top and svc.store.cluster is not None:
        svc.store.catch_up()
        top = head(svc.store.reader)
    return top


# ---------------------------------------------------------------------- consumers
def scope_key(who: Identity, scopes: Sequence[str] | None) -> str:
    """What a consumer follows: the project (its private/team buckets depend on it) and the
    scopes, so one consumer id can keep separate cursors per project and per scope set."""
    chosen = sorted(set(scopes)) if scopes else list(ALL_SCOPES)
    return f"{who.project_id}|{','.join(chosen)}"


def _check_scopes(scopes: Sequence[str] | None) -> list[str] | None:
    if not scopes:
        return None
    bad = [s for s in scopes if s not in ALL_SCOPES]
    if bad:
        raise InvalidInput(f"unknown scope {bad[0]!r}: use private, personal, team, public")
    return list(dict.fromkeys(scopes))


def _check_consumer(svc: MemoryService, consumer_id: str) -> str:
    """The consumer id as it is stored: it passes the write policy like any stored text."""
    if not isinstance(consumer_id, str) or not consumer_id.strip():
        raise InvalidInput("consumerId must be a non-empty string")
    if len(consumer_id) > MAX_CONSUMER_CHARS:
        raise InvalidInput(f"consumerId is at most {MAX_CONSUMER_CHARS} characters")
    return svc.policy.screen_text(consumer_id)[0]


def stored_cursor(
    conn: sqlite3.Connection, who: Identity, consumer_id: str, key: str
) -> int | None:
    row = conn.execute(
        "SELECT cursor FROM consumer_cursors WHERE agent_id=? AND consumer_id=? AND scope_key=?",
        (who.agent_id, consumer_id, key),
    ).fetchone()
    return None if row is None else int(row[0])


def _store_cursor(
    svc: MemoryService, who: Identity, consumer_id: str, key: str, cursor: int
) -> int | None:
    with svc.store.transaction() as conn:
        previous = stored_cursor(conn, who, consumer_id, key)
        conn.execute(
            "INSERT OR REPLACE INTO consumer_cursors"
            "(agent_id, consumer_id, scope_key, cursor, updated_at) VALUES (?,?,?,?,?)",
            (who.agent_id, consumer_id, key, cursor, ts(utcnow())),
        )
    return previous


def ack(
    svc: MemoryService,
    who: Identity,
    consumer_id: str,
    cursor: int,
    scopes: Sequence[str] | None = None,
) -> AckResult:
    """Store ``cursor`` as the consumer's position (after it has handled everything up to it).
    The last ack wins (a consumer may move back to replay); a cursor beyond the head is refused."""
    consumer_id = _check_consumer(svc, consumer_id)
    scopes = _check_scopes(scopes)
    top = _head_for(svc, cursor)
    if not isinstance(cursor, int) or cursor < 0 or cursor > top:
        raise InvalidInput(
            f"cursor must be between 0 and the head ({top}), got {cursor!r}", head=top
        )
    key = scope_key(who, scopes)
    previous = _store_cursor(svc, who, consumer_id, key, cursor)
    return AckResult(consumer_id=consumer_id, scope_key=key, cursor=cursor, previous=previous)


# ---------------------------------------------------------------------- reading
_COLS = "seq, record_id, op, kind, bucket, revision, at"


def _page(conn: sqlite3.Connection, buckets: list[str], after: int, n: int) -> list[sqlite3.Row]:
    """The first ``n`` changes after ``after`` in any of ``buckets``, by seq (one index range
    scan per bucket, merged)."""
    runs = [
        conn.execute(
            f"SELECT {_COLS} FROM changes WHERE bucket=? AND seq>? ORDER BY seq LIMIT ?",
            (b, after, n),
        ).fetchall()
        for b in buckets
    ]
    return list(heapq.merge(*runs, key=lambda r: r["seq"]))[:n]


def _last(conn: sqlite3.Connection, buckets: list[str], n: int) -> list[sqlite3.Row]:
    runs = [
        conn.execute(
            f"SELECT {_COLS} FROM changes WHERE bucket=? ORDER BY seq DESC LIMIT ?", (b, n)
        ).fetchall()
        for b in buckets
    ]
    newest = heapq.merge(*runs, key=lambda r: -r["seq"])
    return sorted(list(newest)[:n], key=lambda r: r["seq"])


def _changes(
    svc: MemoryService, rows: list[sqlite3.Row], buckets: list[str], records: bool
) -> list[Change]:
    present = {}
    if records:
        wanted = [r["record_id"] for r in rows if r["op"] != "delete"]
        present = {k: v for k, v in svc.store.get(wanted).items() if v.bucket in buckets}
    cited = [r["record_id"] for r in rows if r["op"] == "citations"]
    states = svc.citations.stored(cited) if cited and svc.citations is not None else {}
    parents = merged_parents(svc.store.reader, [r for r in rows if r["op"] == "update"])
    out = []
    for r in rows:
        rec = present.get(r["record_id"]) if r["op"] != "delete" else None
        merge = parents.get((r["record_id"], r["revision"]))
        out.append(
            Change(
                seq=r["seq"],
                op=r["op"],
                record_id=r["record_id"],
                kind=r["kind"],
                scope=r["bucket"].split("/", 1)[0],
                revision=r["revision"],
                at=parse_ts(r["at"]),
                record=Memory.from_record(rec) if rec else None,
                citations=states.get(r["record_id"], []) if r["op"] == "citations" else None,
                merged=merge is not None,
                parents=merge,
            )
        )
    return out


def merged_parents(conn: sqlite3.Connection, rows: list) -> dict[tuple[str, int], list[int]]:
    """{(record id, revision): parents} of the merged revisions among update ``rows``."""
    ids = list(dict.fromkeys(r["record_id"] for r in rows))
    out: dict[tuple[str, int], list[int]] = {}
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        for rid, rev, parents in conn.execute(
            "SELECT record_id, revision, parents FROM record_revisions WHERE parents IS NOT NULL "
            f"AND record_id IN ({','.join('?' * len(part))})",
            part,
        ):
            out[(rid, int(rev))] = json.loads(parents)
    return out


def read_changes(
    svc: MemoryService,
    who: Identity,
    cursor: int | None = None,
    limit: int = DEFAULT_LIMIT,
    consumer_id: str | None = None,
    commit: bool = False,
    scopes: Sequence[str] | None = None,
    include_records: bool = True,
) -> ChangesResult:
    """Changes visible to ``who`` after ``cursor``, at most ``limit``, in sequence order.

    ``cursor=None`` resumes from the consumer's stored cursor (``consumer_id``), else 0.
    ``commit=True`` stores ``next_cursor`` for the consumer in the same call."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}, got {limit!r}")
    if cursor is not None and (
        isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0
    ):
        raise InvalidInput(f"cursor must be a non-negative integer, got {cursor!r}")
    if consumer_id is not None:
        consumer_id = _check_consumer(svc, consumer_id)
    elif commit:
        raise InvalidInput("commit needs a consumerId to store the cursor for")
    scopes = _check_scopes(scopes)
    buckets = who.visible_buckets(scopes)
    key = scope_key(who, scopes)
    if cursor is not None:
        _head_for(svc, cursor)
    with snapshot(svc.store) as conn:
        if cursor is None:
            cursor = (stored_cursor(conn, who, consumer_id, key) if consumer_id else None) or 0
        top, low = head(conn), horizon(conn)
        base = dict(cursor=cursor, horizon=low, head=top, consumer_id=consumer_id)
        if cursor < low or cursor > top:
            reason = (
                f"changes up to {low} were compacted; cursor {cursor} is behind them"
                if cursor < low
                else f"cursor {cursor} is ahead of this store's head {top} (another or a restored store)"
            )
            return ChangesResult(
                next_cursor=top, has_more=False, reset_required=True, reason=reason, **base
            )
        rows = _page(conn, buckets, cursor, limit + 1)
        has_more = len(rows) > limit
        rows = rows[:limit]
        # a full page ends at its last change; otherwise everything up to the head was seen
        next_cursor = rows[-1]["seq"] if has_more else top
        changes = _changes(svc, rows, buckets, include_records)
    committed = False
    if commit and consumer_id:
        _store_cursor(svc, who, consumer_id, key, next_cursor)
        committed = True
    return ChangesResult(
        changes=changes, next_cursor=next_cursor, has_more=has_more, committed=committed, **base
    )


def latest_changes(
    svc: MemoryService, who: Identity, limit: int = DEFAULT_LIMIT, include_records: bool = True
) -> ChangesResult:
    """The newest ``limit`` visible changes (the ``pattern://changes`` resource), oldest first;
    ``next_cursor`` is the head, to follow the stream from here with ``changes``."""
    limit = max(1, min(int(limit), MAX_LIMIT))
    buckets = who.visible_buckets()
    with snapshot(svc.store) as conn:
        top, low = head(conn), horizon(conn)
        rows = _last(conn, buckets, limit)
        changes = _changes(svc, rows, buckets, include_records)
    start = rows[0]["seq"] - 1 if rows else top
    return ChangesResult(
        changes=changes, cursor=start, next_cursor=top, has_more=False, horizon=low, head=top
    )


def compact(
    svc: MemoryService, *, before_seq: int | None = None, older_than: timedelta | None = None
) -> CompactResult:
    """``pattern-memory compact-changes``: compact before a sequence number, or every change
    older than an age (exactly one of the two; with PostgreSQL the age also compacts the
    replication log)."""
    if (before_seq is None) == (older_than is None):
        raise InvalidInput("give either before_seq or older_than")
    if before_seq is not None:
        return compact_changes(svc.store, before_seq)
    res = compact_older_than(svc.store, older_than)
    if svc.store.cluster is not None:
        res.log_horizon = svc.store.cluster.compact_log(older_than=older_than)
    return res
