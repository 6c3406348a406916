"""The episode detector's inputs, merged: transcripts as the session indexer reads them, and
the client's hook events as they fire (docs/lessons.md, "How lessons are learned").

- :meth:`EpisodeFeed.catch_up` reads what is new in a transcript (its own offset per file, a
  ``meta`` row ``episodes.file:<path>``; a rewritten or truncated file is read again from the
  start, the events already fed are recognised by their tool call ids) and feeds each
  session's detector. The session indexer calls it after each run (``SessionIndexer.after``),
  so ``index-sessions`` and the Stop / PreCompact / SessionEnd hooks learn what they index.
- :meth:`EpisodeFeed.live` feeds one hook event (a command's result, an edit), after catching
  up with the session's transcript (so the edits the client made since are read first: its
  hooks fire for shell commands only).

Each session's detector state is a ``meta`` row (``episodes.session:<session id>``), written
in one transaction with the file's progress. Both rows are written without a person's call:
they pass the secret policy at least as ``redact`` (``trust.policy.unattended`` and
``WritePolicy.screen_state``: a command's or a waiting call's secret is not kept in the
clear), and what they keep of a secret-bearing file (``trust.secret_files``) is its name: a
waiting edit of it keeps no content, a recorded edit of it (or one holding a secret) no diff.
A call waiting for its result is given up on after ``PATTERN_SESSION_DANGLING_S``, as the
session indexer does (``ingest.learning.episode_events.give_up``). Episodes
and outcomes found are kept in the state (``ready``, ``verdicts``) until they were handled
(:class:`~.auto_lessons.AutoLessons`), so a crash between the two loses nothing. States idle
for ``STATE_DAYS`` are dropped at a session start, with the hooks' ledgers.

The work runs where it is called: on the daemon's hook worker (never in a hook's request), or
in an ``index-sessions`` request.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from ingest.learning.episode_events import FeedProgress, read_events
from ingest.learning.episodes import Event, SessionEpisodes, feed, finish
from ingest.learning.tool_events import EDIT_TOOLS, edit_path
from ingest.sessions.transcripts import valid_offset
from retrieval.records import utcnow
from server.service.core.identity import Identity
from server.service.indexing.sessions import dangling_seconds
from server.service.learning.auto_lessons import AutoLessons
from server.service.prompting.ledger import prune_meta
from server.service.trust.policy import unattended
from server.service.trust.secret_scan.secret_files import (
    secret_bearing,
    secret_text,
    withheld_files,
    without_encoded_tree,
)

log = logging.getLogger("pattern_memory.lessons")

STATE_KEY = "episodes.session:"  # + session id
FILE_KEY = "episodes.file:"  # + transcript path
STATE_DAYS = 14


class FeedReport(BaseModel):
    events: int = 0
    episodes: list[str] = Field(default_factory=list)  # episode ids found
    lessons: list[dict] = Field(default_factory=list)  # {name, action}
    outcomes: list[tuple[str, bool]] = Field(default_factory=list)


class EpisodeFeed:
    """Feeds the detector of every session of one store (one at a time: a lock)."""

    def __init__(self, learner: AutoLessons, dangling_s: float | None = None) -> None:
        self.learner = learner
        self.svc = learner.svc
        self.dangling_s = dangling_seconds() if dangling_s is None else dangling_s
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ state rows
    def _load(self, session: str) -> SessionEpisodes:
        raw = self.svc.store.meta(STATE_KEY + session)
        if raw:
            try:
                return SessionEpisodes.model_validate_json(raw)
            except ValidationError:  # a row of an older layout: start afresh
                log.warning("episode state of session %s unreadable; started afresh", session)
        return SessionEpisodes(session=session)

    def _save(self, states: list[SessionEpisodes], file: tuple[str, FeedProgress] | None = None):
        """Write the states and the file's progress (module docstring: screened, at least as
        ``redact``, secret-bearing files kept by name)."""
        now = utcnow().isoformat()
        policy = self.svc.policy
        rows = []
        with unattended("episode progress"):
            for st in states:
                st.updated = now
                kept = policy.screen_state(without_secret_diffs(st.model_dump()))
                rows.append((STATE_KEY + st.session, json.dumps(kept)))
            if file is not None:
                kept = policy.screen_state(without_secret_files(file[1].model_dump()))
                rows.append((FILE_KEY + file[0], json.dumps(kept)))
        with self.svc.store.transaction() as conn:
            for key, value in rows:
                self.svc.store.set_meta(conn, key, value)

    # ------------------------------------------------------------------ feeding
    def catch_up(self, who: Identity, path: str | Path, *, final: bool = False) -> FeedReport:
        """Feed what is new in the transcript ``path``; ``final``: the agent has said all it
        will about the last fix (its turn or session ended), episodes waiting for its words
        are learned as they are."""
        report = FeedReport()
        if not self.learner.enabled:
            return report
        p = Path(path).expanduser().resolve()
        key = str(p)
        with self._lock:
            while True:
                raw = self.svc.store.meta(FILE_KEY + key)
                prog = FeedProgress.model_validate_json(raw) if raw else FeedProgress()
                if not valid_offset(p, prog.offset, prog.line_hash, prog.line_len):
                    prog = FeedProgress()  # rewritten: again from the start (ids dedupe)
                start = prog.offset
                try:
                    events, places = read_events(p, prog, final=final,
                                                 dangling_s=self.dangling_s)  # fmt: skip
                except OSError as exc:
                    log.warning("transcript %s not read for episodes: %s", p, exc)
                    return report
                states: dict[str, SessionEpisodes] = {}
                for session, ev in events:
                    st = states.get(session) or states.setdefault(session, self._load(session))
                    st.cwd = st.cwd or places.get(session, {}).get("cwd")
                    st.branch = st.branch or places.get(session, {}).get("branch")
                    st.transcript = st.transcript or key
                    feed(st, ev)
                report.events += len(events)
                more = prog.offset > start and p.stat().st_size > prog.offset
                if final and not more:
                    for session in dict.fromkeys([*prog.sessions, *states]):
                        st = states.get(session) or self._load(session)
                        if st.open:
                            finish(st)
                            states[session] = st
                self._save(list(states.values()), (key, prog))
                self._handle(who, list(states.values()), report)
                if not more:
                    return report

    def live(self, who: Identity, session: str, event: Event, *, transcript: str | None = None,
             cwd: str | None = None) -> FeedReport:  # fmt: skip
        """Feed one hook event of ``session`` (its transcript read up to now first)."""
        report = FeedReport()
        if not self.learner.enabled or not session:
            return report
        with self._lock:
            if transcript and Path(transcript).is_file():
                report = self.catch_up(who, transcript)
            st = self._load(session)
            st.cwd = st.cwd or cwd
            st.transcript = st.transcript or (
                str(Path(transcript).resolve()) if transcript else None
            )
            feed(st, event)
            report.events += 1
            self._save([st])
            self._handle(who, [st], report)
        return report

    def _handle(self, who: Identity, states: list[SessionEpisodes], report: FeedReport) -> None:
        """Learn the ready episodes and count the verdicts, then drop them from the states."""
        busy = [st for st in states if st.ready or st.verdicts]
        for st in busy:
            results, _ = self.learner.handle(who, st)
            report.episodes += [ep.id for ep in st.ready]
            report.lessons += [{"name": r.name, "action": r.action} for r in results if r]
            report.outcomes += list(st.verdicts)
            st.ready, st.verdicts = [], []
        if busy:
            self._save(busy)


def without_secret_diffs(state: dict) -> dict:
    """A detector state (its JSON form) whose recorded edits keep no diff of a file a lesson
    would leave out (``trust.secret_files.withheld_files``), and no base64-encoded secret."""
    edits = [e for key in ("edits", "open", "ready") for e in _edits_in(state.get(key))]
    bad = withheld_files((e.get("idx"), str(e.get("path") or ""), str(e.get("hunk") or ""))
                         for e in edits)  # fmt: skip
    for e in edits:
        if e.get("path") in bad:
            e["hunk"] = ""
    return without_encoded_tree(state)[0]


def _edits_in(value) -> list[dict]:
    """The edit dicts of a state's ``edits`` list, or of its episodes' ``edits``."""
    out = []
    for item in value or []:
        if isinstance(item, dict) and "path" in item and "hunk" in item:
            out.append(item)
        elif isinstance(item, dict):
            out += [e for e in item.get("edits") or [] if isinstance(e, dict)]
    return out


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def without_secret_files(progress: dict) -> dict:
    """A file's progress (its JSON form) whose waiting edits of a secret-bearing file (or
    writing a secret) keep the file's name and nothing they would write, and which holds no
    base64-encoded secret."""
    for call in (progress.get("pending") or {}).values():
        args = call.get("args") if isinstance(call, dict) else None
        if call.get("name") in EDIT_TOOLS and isinstance(args, dict):
            path = edit_path(args)
            if secret_bearing(path) or any(secret_text(v) for v in _strings(args)):
                call["args"] = {k: v for k, v in args.items()
                                if k in ("file_path", "notebook_path", "path")}  # fmt: skip
    return without_encoded_tree(progress)[0]


def prune_states(svc, days: int = STATE_DAYS) -> int:
    """Drop the detector states of sessions idle for ``days``."""
    return prune_meta(svc, STATE_KEY, "updated", days)
