"""The session indexer: transcripts become searchable exchanges, incrementally and safely.

Turns (``ingest.sessions.transcripts``) are grouped into *exchanges* (``ingest.sessions.exchanges``): a user's
prompt with what the assistant did and said until the next prompt (tool calls summarised, a
tool's error kept, the answer whole), split into parts of at most 500 words. Each part is a
``kind=turn`` record in the private scope of the caller (the agent, in the project of the
transcript's ``cwd``: the caller's identity is derived the same way as any other,
``server/service/core/identity.py``), category ``turn``, with

- content: the exchange's text (``Prompt: … / Tools: … / Reply: …``);
- context (indexed and embedded in front of every window): the exchange's date, and for a
  continued part the prompt's first words;
- metadata: ``session``, ``role`` (``exchange``), ``turn`` and ``last_turn`` (the positions of
  its first and last turn in the session: every turn stays addressable), ``part`` / ``parts``,
  ``timestamp`` (ISO 8601, of its first turn), ``transcript`` (path), ``parentSession``
  (sidechains), ``gitBranch``, ``cwd``.

The exchange at the end of what was read is *open*: it is stored as it is, and replaced (same
record ids) when the next run finds more of it; its turns are kept in the progress row until
the next prompt closes it. An exchange is keyed by its prompt (``session_records.py``), so the
prompt hook stores the user's part the moment it is sent (:meth:`SessionIndexer.open_prompt`),
before the client writes it, and reading it completes that same record.

Progress per transcript (byte offset, hash and length of the line that ends there, per-session
turn counts, the open exchange, the tool calls still waiting for their results there) is a row
of the store's ``meta`` table written in the same transaction as the records: a crash loses at
most the batch in flight, and the next run resumes at the last commit. A transcript whose line
at the offset changed (rewritten, truncated) is read again from the start; record ids are
derived from the entries, so nothing is stored twice.

A tool call waiting for its result holds nothing up: what comes before and after it is indexed
(the call joins its exchange when its result arrives). A call still waiting ``DANGLING_S`` after
it was made (``PATTERN_SESSION_DANGLING_S``, default 600 s: the longest a client's shell
command runs by default) is given up on and indexed without its result. An unfinished last
line is left for the next run, which looks for its end from where this one stopped.

The write policy (secrets, injection) applies to every turn's text before it joins an exchange
(``block`` leaves the turn out, ``redact`` keeps it redacted) and to every stored part; the
progress row passes its secret policy too (``WritePolicy.screen_state``: a waiting call's
arguments, the first turn's ``cwd``), redacted under ``block`` as under ``redact``. A run is a
write no person asked for (``unattended_warnings.watched``): at least ``redact``, whatever the
store's policy, its warnings and the turns it left out filed for the review inbox.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from ingest.sessions import exchanges
from ingest.sessions.transcript_base import Checkpoint, Turn, clip, waiting_since
from ingest.sessions.transcripts import read_turns, session_cwd, valid_offset
from retrieval.errors import Conflict, InvalidInput, PatternError
from retrieval.records import Record, Scope, utcnow
from server.service.browsing.unattended_warnings import note, watched
from server.service.core.identity import Identity
from server.service.indexing.session_records import (
    FileProgress,
    OpenTurn,
    SessionState,
    early_key,
    first_turn_meta,
    holds_prompt,
    keep_turn,
    part_id,
    read_prompt,
    unit_records,
    without_secret_output,
)
from server.service.memories.memory import MemoryService
from server.service.trust.secret_scan.secret_files import without_encoded, without_encoded_tree

PROGRESS_KEY = "sessions.progress:"  # + the transcript's absolute path
BATCH_BYTES = 256 * 1024  # one transaction per ~this much transcript
WITHHELD = "[a message left out by the write policy]"
DANGLING_S = 600.0  # a tool call without a result this long is indexed without it
# a prompt entry this close to the hook's prompt is that prompt (Cursor stamps prompts to the
# minute; clocks of a client and the daemon may differ by seconds)
SAME_PROMPT_S = 120.0


def dangling_seconds(env: Mapping[str, str] | None = None) -> float:
    """``PATTERN_SESSION_DANGLING_S`` (seconds, > 0), else :data:`DANGLING_S`."""
    raw = (os.environ if env is None else env).get("PATTERN_SESSION_DANGLING_S", "").strip()
    try:
        value = float(raw) if raw else DANGLING_S
    except ValueError:
        return DANGLING_S
    return value if math.isfinite(value) and value > 0 else DANGLING_S


class IndexReport(BaseModel):
    path: str
    added: int = 0
    updated: int = 0
    existing: int = Field(0, description="parts already stored (a re-read after a rewrite)")
    withheld: int = Field(0, description="turns or parts left out by the write policy (block)")
    restarted: bool = Field(False, description="the file was rewritten or truncated")
    offset: int = 0
    size: int = 0
    partial: int = Field(0, description="bytes of an unfinished last line (read when complete)")
    waiting: int = Field(0, description="tool calls waiting for their results")
    retryIn: float | None = Field(
        None, description="seconds until the oldest waiting call is given up (run again then)"
    )
    sessions: list[str] = Field(default_factory=list)

    @property
    def done(self) -> bool:
        """Nothing more to read now (an unfinished last line waits for its end)."""
        return self.offset + self.partial >= self.size


class SessionIndexer:
    """Indexes transcripts into a memory service; one run per transcript at a time."""

    def __init__(self, svc: MemoryService, dangling_s: float | None = None) -> None:
        self.svc = svc
        self.dangling_s = dangling_seconds() if dangling_s is None else dangling_s
        # called after each run with (caller, transcript, whether its last reply is complete):
        # the episode detector reads what was indexed (server/service/learning/episode_feed.py)
        self.after: Callable[[Identity, Path, bool], object] | None = None
        self._guard = threading.Lock()
        self._locks: dict[str, list] = {}  # transcript -> [its lock, runs holding or waiting]

    @contextmanager
    def _lock(self, key: str) -> Iterator[None]:
        """One run per transcript at a time; a transcript's lock lives only while a run holds
        or waits for it (the daemon indexes any number of transcripts over its life)."""
        with self._guard:
            entry = self._locks.setdefault(key, [threading.RLock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._guard:
                entry[1] -= 1
                if not entry[1]:
                    del self._locks[key]

    def screen(self, text: str) -> str | None:
        """A turn's text as it may be stored (redacted under ``redact``), or None when the
        write policy (secrets, injection) refuses it: the turn is left out alone, never its
        whole batch (a refused batch would stop the transcript's indexing at that point for
        good). A refused prompt stays as a placeholder, so its exchange still begins there."""
        text, encoded = without_encoded(text)  # the policy reads text as it is
        if encoded:
            note(f"redacted {encoded} base64-encoded secret(s) from a turn")
        try:
            return self.svc.policy.screen_text(text)[0]
        except InvalidInput as exc:
            note(f"a turn was left out: {exc.message}")
            return None

    # ------------------------------------------------------------------ progress
    def progress(self, path: str) -> FileProgress:
        raw = self.svc.store.meta(PROGRESS_KEY + path)
        return FileProgress.model_validate_json(raw) if raw else FileProgress()

    # ------------------------------------------------------------------ indexing
    def index_file(self, who: Identity, path: str | Path, *, flush: bool = False,
                   final: bool = False, max_batches: int | None = None) -> IndexReport:  # fmt: skip
        """Index what is new in one transcript. ``flush``: its last reply is complete (Stop,
        PreCompact, an idle file); ``final``: the session ended. ``max_batches``: stop after
        that many transactions (the report says how far it got)."""
        p = Path(path).expanduser().resolve()
        if not p.is_file():
            raise InvalidInput(f"no transcript at {p}", path=str(p))
        with watched(self.svc, who, "session exchange", f"transcript {p}") as watch:
            report = self._index(who, p, flush, final, max_batches)
            if report.sessions:
                watch.subject = "session " + ", ".join(report.sessions[:5])
        if self.after is not None:
            self.after(who, p, flush or final)
        return report

    def _index(self, who: Identity, p: Path, flush: bool, final: bool,
               max_batches: int | None) -> IndexReport:  # fmt: skip
        key = str(p)
        report = IndexReport(path=key)
        with self._lock(key):
            prog = self.progress(key)
            if not valid_offset(p, prog.offset, prog.line_hash, prog.line_len):
                early = {s: SessionState(early=st.early) for s, st in prog.sessions.items()
                         if st.early}  # prompts the hook stored are still to come  # fmt: skip
                prog, report.restarted = FileProgress(sessions=early), True
            batches = 0
            while max_batches is None or batches < max_batches:
                res = read_turns(p, prog.offset, prog.format, flush=flush, final=final,
                                 max_bytes=BATCH_BYTES, pending=prog.pending,
                                 dangling_s=self.dangling_s, scanned=prog.partial)  # fmt: skip
                cp = res.checkpoints[-1] if res.checkpoints else None
                same = (prog.offset, 0, prog.pending)
                if cp is None or (cp.offset, cp.turns, cp.pending) == same:
                    if res.partial != prog.partial:  # an unfinished line scanned further
                        prog = self._commit(who, key, prog, [], None, res.format, report,
                                            res.partial)  # fmt: skip
                    break
                start = prog.offset
                prog = self._commit(who, key, prog, res.turns[: cp.turns], cp, res.format, report,
                                    res.partial)  # fmt: skip
                batches += 1
                if cp.offset == start:  # given-up calls only: nothing more was read
                    break
            report.offset, report.partial = prog.offset, prog.partial
            report.size = p.stat().st_size
            report.waiting, report.retryIn = self._waiting(prog, time.time())
        return report

    def open_prompt(self, who: Identity, path: str | Path, session: str, prompt: str,
                    sent_at: float | None = None) -> IndexReport:  # fmt: skip
        """Store the prompt a client just sent (``sent_at``) as the start of its exchange in
        ``session`` of the transcript ``path`` (the prompt hook: the client writes it to the
        transcript later, maybe only after a tool call it starts has its result), so the user's
        part is searchable at once; reading it from the transcript completes the same record
        (``session_records.py``). What the transcript holds is indexed first. A prompt it
        already held, or one the write policy refuses, is not stored here."""
        p = Path(path).expanduser().resolve()
        key = str(p)
        report = IndexReport(path=key, sessions=[session])
        sent_at = time.time() if sent_at is None else sent_at
        text = clip(prompt)
        with watched(self.svc, who, "session exchange", f"session {session}"), self._lock(key):
            if p.is_file():
                self.index_file(who, p, flush=True)  # a new prompt: the last reply is whole
            prog = self.progress(key)
            state = prog.sessions.get(session) or SessionState()
            if holds_prompt(state, text, sent_at, SAME_PROMPT_S):
                return report
            screened = self.screen(text)
            if screened is None:  # the indexer keeps its place when it reads it
                report.withheld += 1
                return report
            after = prog.model_copy(deep=True)
            state = after.sessions.setdefault(session, SessionState())
            units = exchanges.units([exchanges.TurnText("user", screened, state.turns)])
            bucket = who.bucket(Scope.private.value)
            first, ids, gone = early_key(
                state, text, lambda k: [part_id(bucket, session, k, u.part) for u in units]
            )
            meta = {"key": first, "timestamp": datetime.fromtimestamp(sent_at, UTC).isoformat()}
            after.updated_at = utcnow().isoformat()
            self._save(key, after, unit_records(who, key, session, units, meta, ids), gone, report)
        return report

    def _waiting(self, prog: FileProgress, now: float) -> tuple[int, float | None]:
        """(tool calls waiting at the progress point, seconds until the oldest is given up)."""
        calls = (prog.pending or {}).get("calls") or {}
        if not calls:
            return 0, None
        oldest = min(waiting_since(c, now) for c in calls.values())
        return len(calls), max(0.0, round(oldest + self.dangling_s - now, 3))

    def _commit(self, who: Identity, key: str, before: FileProgress, turns: list[Turn],
                cp: Checkpoint | None, fmt: str | None, report: IndexReport,
                partial: int = 0) -> FileProgress:  # fmt: skip
        """One transaction: the exchanges ``turns`` close, open or grow, and the progress up to
        ``cp`` (None: the same point, only ``partial`` changes)."""
        after = before.model_copy(deep=True)
        if cp is not None:
            if cp.line_len or cp.offset != before.offset:  # 0: no line read, the same one
                after.offset, after.line_hash, after.line_len = cp.offset, cp.line_hash, cp.line_len
            after.pending = cp.pending
        after.partial = partial
        after.format = after.format or fmt
        after.updated_at = utcnow().isoformat()
        records: list[Record] = []  # every part of every exchange these turns touched
        gone: list[str] = []  # parts an open exchange no longer has
        probe: list[tuple] | None = [] if report.restarted else None
        by_session: dict[str, list[Turn]] = {}
        for t in turns:
            by_session.setdefault(t.session, []).append(t)
        for session, items in by_session.items():
            state = after.sessions.setdefault(session, SessionState())
            for t in items:
                text = self.screen(without_secret_output(t))
                if text is None:
                    report.withheld += 1
                    text = WITHHELD if t.role == "user" else None
                index = state.turns
                state.turns += 1
                first = None  # the key of the exchange a prompt starts (session_records.py)
                if t.role == "user":
                    if state.open:  # the next prompt closes the exchange
                        records += self._parts(who, key, session, state, gone, probe)
                        state.open, state.open_ids, state.open_calls = [], [], 0
                    first, early = read_prompt(state, t.text)  # stored by the prompt hook?
                    gone += early
                if not state.open:
                    state.open_meta = first_turn_meta(t, first)
                if text is not None:
                    keep_turn(state, OpenTurn(role=t.role, text=text, index=index))
            if state.open:
                records += self._parts(who, key, session, state, gone, probe, keep_ids=True)
            if session not in report.sessions:
                report.sessions.append(session)
        return self._save(key, after, records, gone, report, probe)

    def _save(self, key: str, after: FileProgress, records: list[Record], gone: list[str],
              report: IndexReport, probe: list[tuple] | None = None) -> FileProgress:  # fmt: skip
        """One transaction: ``records`` stored (new, changed or left alone, :meth:`_sort`),
        ``gone`` deleted, the progress row ``after`` written, if the row is still the one read."""
        svc = self.svc
        keep = {r.id for r in records}
        gone = [i for i in dict.fromkeys(gone) if i not in keep]  # an early part, read now
        add, replace = self._sort(records, report, gone)
        gone += self._stale_parts(probe or [])
        raw_before = svc.store.meta(PROGRESS_KEY + key)

        def check(conn) -> None:  # one indexer per transcript: the progress we read still holds
            row = conn.execute("SELECT value FROM meta WHERE key=?", (PROGRESS_KEY + key,))
            found = row.fetchone()
            if (found[0] if found else None) != raw_before:
                raise Conflict(f"{key} was indexed meanwhile; run again", path=key)

        # the row passes the secret policy as the records do (a waiting call's arguments, the
        # first turn's cwd): the calls resume from it with their shown arguments redacted
        kept = without_encoded_tree(after.model_dump())[0]
        after = FileProgress.model_validate(svc.policy.screen_state(kept))

        def extra(conn) -> None:
            svc.store.set_meta(conn, PROGRESS_KEY + key, after.model_dump_json())

        svc.engine.apply(add=add, replace=replace, delete=gone, check=check, extra=extra)
        report.added += len(add)
        report.updated += len(replace)
        return after

    def _sort(self, records: list[Record], report: IndexReport,
              gone: list[str]) -> tuple[list[Record], list[Record]]:  # fmt: skip
        """(new records, changed ones) among ``records``: a part stored with the same text is
        left alone, a part the write policy refuses is left out (and its earlier version, if
        one is stored, goes into ``gone``)."""
        existing = self.svc.store.get([r.id for r in records]) if records else {}
        add, replace = [], []
        for rec in records:
            try:
                rec = self.svc.engine.screen_record(rec)[0]
            except PatternError as exc:
                note(f"a part of an exchange was left out: {exc.message}")
                report.withheld += 1
                if rec.id in existing:
                    gone.append(rec.id)
                continue
            old = existing.get(rec.id)
            if old is None:
                add.append(rec)
            elif (old.content, old.context, old.metadata) != (rec.content, rec.context,
                                                               rec.metadata):  # fmt: skip
                new = old.model_copy(update={"content": rec.content, "context": rec.context,
                                             "metadata": rec.metadata, "updated_at": utcnow()})  # fmt: skip
                new.content_hash = new.current_hash()
                replace.append(new)
            else:
                report.existing += 1
        return add, replace

    def _stale_parts(self, probe: list[tuple]) -> list[str]:
        """Stored parts of the probed exchanges beyond their current count (``probe``: bucket,
        session, first turn's key, first part number that should not exist)."""
        out: list[str] = []
        while probe:
            ids = {part_id(*p): p for p in probe}
            found = self.svc.store.get(list(ids))
            out += [i for i in ids if i in found]
            probe = [(b, s, k, n + 1) for i, (b, s, k, n) in ids.items() if i in found]
        return out

    def _parts(self, who: Identity, path: str, session: str, state: SessionState,
               gone: list[str], probe: list[tuple] | None = None,
               keep_ids: bool = False) -> list[Record]:  # fmt: skip
        """The records of the open exchange of ``state`` (its parts), and the ids of parts it
        had and no longer has into ``gone``. ``keep_ids``: the exchange stays open (its part
        ids are remembered for the next run). ``probe``: collects where its parts end (after a
        rewrite, an exchange stored longer before may have parts beyond these)."""
        turns = [exchanges.TurnText(t.role, t.text, t.index) for t in state.open]
        units = exchanges.units(turns, extra_calls=state.open_calls)
        meta = state.open_meta
        bucket = who.bucket(Scope.private.value)
        ids = [part_id(bucket, session, meta.get("key", ""), u.part) for u in units]
        gone += [i for i in state.open_ids if i not in ids]
        if probe is not None:
            probe.append((bucket, session, meta.get("key", ""), len(units)))
        if keep_ids:
            state.open_ids = ids
        return unit_records(who, path, session, units, meta, ids)


def transcript_cwd(path: str | Path) -> str | None:
    """The working directory a transcript names first: it decides the project (and the agent)
    its turns belong to, as for any identity."""
    return session_cwd(path)
