"""The session indexer: transcripts become ``kind=turn`` records, incrementally and safely.

Each turn (``ingest.transcripts``) is stored in the private scope of the caller (the agent, in
the project of the transcript's ``cwd``: the caller's identity is derived the same way as any
other, ``server/service/identity.py``), category ``turn``, with

- content: what was said (a tool call abbreviated: tool, key arguments, first error lines);
- context (indexed and embedded, ``ingest/turns.py``): the turn's date, the speaker, the two
  turns before it and the one after (the last turn of a run gets its next one when it comes);
- metadata: ``session``, ``role``, ``turn`` (index in its session), ``timestamp`` (ISO 8601),
  ``transcript`` (path), ``parentSession`` (sidechains), ``gitBranch``, ``cwd``.

Progress per transcript (byte offset, hash and length of the line that ends there, per-session
turn counts and the last turns for the next run's context) is a row of the store's ``meta``
table written in the same transaction as the turns: a crash loses at most the batch in flight,
and the next run resumes at the last commit. A transcript whose line at the offset changed
(rewritten, truncated) is read again from the start; turn ids are derived from the entries, so
turns already stored are skipped and nothing is stored twice.

The secret policy applies to every turn's text before it is stored or used as a neighbour's
context (``block`` leaves the turn out, ``redact`` stores it redacted).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from ingest.transcripts import Turn, read_turns, session_cwd, valid_offset
from ingest.turns import turn_context
from retrieval.errors import Conflict, InvalidInput
from retrieval.records import Kind, Record, Scope, utcnow

from .identity import Identity
from .memory import MemoryService
from .secrets import apply_policy

PROGRESS_KEY = "sessions.progress:"  # + the transcript's absolute path
CONTEXT_SPEC = "date,speaker,prev2,next1"
TAIL = 3  # turns kept for the next run: the last one's context and the next ones' prev2
BATCH_BYTES = 256 * 1024  # one transaction per ~this much transcript
CATEGORY = "turn"


class SessionState(BaseModel):
    turns: int = 0
    tail: list[dict] = Field(default_factory=list)  # {speaker, text, date} of the last turns
    last_id: str | None = None  # stored before its next turn was known


class FileProgress(BaseModel):
    offset: int = 0
    line_hash: str = ""
    line_len: int = 0
    format: str | None = None
    sessions: dict[str, SessionState] = Field(default_factory=dict)
    updated_at: str | None = None


class IndexReport(BaseModel):
    path: str
    added: int = 0
    updated: int = 0
    existing: int = Field(0, description="turns already stored (a re-read after a rewrite)")
    withheld: int = Field(0, description="turns left out by the secret policy (block)")
    restarted: bool = Field(False, description="the file was rewritten or truncated")
    offset: int = 0
    size: int = 0
    sessions: list[str] = Field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.offset >= self.size


def turn_date(ts: str | None) -> tuple[datetime | None, str]:
    """ISO 8601 -> (UTC datetime, '8 May 2023 13:56'); (None, '') when absent or unreadable."""
    if not ts:
        return None, ""
    try:
        dt = datetime.fromisoformat(str(ts).replace("Z", "+00:00"))
    except ValueError:
        return None, ""
    dt = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    return dt, f"{dt.day} {dt:%B %Y %H:%M}"


class SessionIndexer:
    """Indexes transcripts into a memory service; one run per transcript at a time."""

    def __init__(self, svc: MemoryService) -> None:
        self.svc = svc
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def screen(self, text: str) -> str | None:
        """A turn's text as it may be stored (redacted under ``redact``), or None when the
        write policy refuses it: the turn is left out alone, never its whole batch (a refused
        batch would stop the transcript's indexing at that point for good). The one per-turn
        policy decision of the indexer."""
        try:
            return apply_policy(text, self.svc.secret_policy)[0]
        except InvalidInput:
            return None

    # ------------------------------------------------------------------ progress
    def progress(self, path: str) -> FileProgress:
        raw = self.svc.store.meta(PROGRESS_KEY + path)
        return FileProgress.model_validate_json(raw) if raw else FileProgress()

    def all_progress(self) -> dict[str, FileProgress]:
        rows = self.svc.store.reader.execute(
            "SELECT key, value FROM meta WHERE key >= ? AND key < ?",
            (PROGRESS_KEY, PROGRESS_KEY[:-1] + chr(ord(PROGRESS_KEY[-1]) + 1)),
        ).fetchall()
        return {k[len(PROGRESS_KEY) :]: FileProgress.model_validate_json(v) for k, v in rows}

    # ------------------------------------------------------------------ indexing
    def index_file(self, who: Identity, path: str | Path, *, flush: bool = False,
                   final: bool = False, max_batches: int | None = None) -> IndexReport:  # fmt: skip
        """Index what is new in one transcript. ``flush``: its last reply is complete (Stop,
        PreCompact, an idle file); ``final``: the session ended. ``max_batches``: stop after
        that many transactions (the report says how far it got)."""
        p = Path(path).expanduser().resolve()
        if not p.is_file():
            raise InvalidInput(f"no transcript at {p}", path=str(p))
        key = str(p)
        report = IndexReport(path=key)
        with self._lock(key):
            prog = self.progress(key)
            if not valid_offset(p, prog.offset, prog.line_hash, prog.line_len):
                prog, report.restarted = FileProgress(), True
            batches = 0
            while max_batches is None or batches < max_batches:
                res = read_turns(p, prog.offset, prog.format, flush=flush, final=final,
                                 max_bytes=BATCH_BYTES)  # fmt: skip
                if not res.checkpoints or res.checkpoints[-1].offset <= prog.offset:
                    break
                cp = res.checkpoints[-1]
                prog = self._commit(who, key, prog, res.turns[: cp.turns], cp, res.format, report)
                batches += 1
            report.offset = prog.offset
            report.size = p.stat().st_size
        return report

    def _commit(self, who, key, before: FileProgress, turns: list[Turn], cp, fmt, report):
        svc = self.svc
        after = before.model_copy(deep=True)
        after.offset, after.line_hash, after.line_len = cp.offset, cp.line_hash, cp.line_len
        after.format = after.format or fmt
        after.updated_at = utcnow().isoformat()
        ids = [t.record_id() for t in turns]
        existing = set(svc.store.get(ids)) if ids else set()
        add: list[Record] = []
        replace: list[Record] = []
        by_session: dict[str, list[Turn]] = {}
        for t in turns:
            by_session.setdefault(t.session, []).append(t)
        for session, items in by_session.items():
            state = after.sessions.setdefault(session, SessionState())
            window = list(state.tail)
            fresh: list[tuple[int, Turn, str]] = []  # (window position, turn, record id)
            for t in items:
                text = self.screen(t.text)
                if text is None:
                    report.withheld += 1
                    continue
                _, date = turn_date(t.timestamp)
                window.append({"speaker": t.role, "text": text, "date": date})
                fresh.append((len(window) - 1, t, t.record_id()))
            if not fresh:
                continue
            if state.last_id and state.tail:
                old = svc.store.get([state.last_id]).get(state.last_id)
                j = len(state.tail) - 1
                if old is not None:
                    ctx = turn_context(window, j, window[j].get("date", ""), CONTEXT_SPEC)
                    if ctx != old.context:
                        new = old.model_copy(update={"context": ctx, "updated_at": utcnow()})
                        new.content_hash = new.current_hash()
                        replace.append(new)
            for j, t, rid in fresh:
                n = state.turns
                state.turns += 1
                if rid in existing:
                    report.existing += 1
                    continue
                add.append(self._record(who, key, t, window, j, n, rid))
            state.tail = window[-TAIL:]
            state.last_id = fresh[-1][2]
            if session not in report.sessions:
                report.sessions.append(session)
        raw_before = svc.store.meta(PROGRESS_KEY + key)

        def check(conn) -> None:  # one indexer per transcript: the progress we read still holds
            row = conn.execute("SELECT value FROM meta WHERE key=?", (PROGRESS_KEY + key,))
            found = row.fetchone()
            if (found[0] if found else None) != raw_before:
                raise Conflict(f"{key} was indexed meanwhile; run again", path=key)

        def extra(conn) -> None:
            svc.store.set_meta(conn, PROGRESS_KEY + key, after.model_dump_json())

        svc.engine.apply(add=add, replace=replace, check=check, extra=extra)
        report.added += len(add)
        report.updated += len(replace)
        return after

    def _record(self, who: Identity, path: str, t: Turn, window, j, n, rid) -> Record:
        when, date = turn_date(t.timestamp)
        meta = {"session": t.session, "role": t.role, "turn": n, "transcript": path,
                "source": "transcript"}  # fmt: skip
        if t.timestamp:
            meta["timestamp"] = when.isoformat() if when else str(t.timestamp)
        for name, value in (("parentSession", t.parent_session), ("gitBranch", t.git_branch),
                            ("cwd", t.cwd)):  # fmt: skip
            if value:
                meta[name] = value
        stamp = {"created_at": when, "updated_at": when} if when else {}
        return Record(
            id=rid, kind=Kind.turn, project_id=who.project_id, agent_id=who.agent_id,
            scope=Scope.private, category=CATEGORY, content=window[j]["text"],
            context=turn_context(window, j, date, CONTEXT_SPEC), metadata=meta, **stamp,
        )  # fmt: skip


def transcript_cwd(path: str | Path) -> str | None:
    """The working directory a transcript names first: it decides the project (and the agent)
    its turns belong to, as for any identity."""
    return session_cwd(path)
