"""Client lifecycle events -> what to inject, and what to index (the daemon side of hooks).

``pattern-memory hook EVENT`` (``server/hooks/hookclient.py``) posts the client's hook JSON here
through the daemon (``server/hooks/routes.py``). The input fields are Claude Code's, as its hooks
reference documents them (https://code.claude.com/docs/en/hooks): every event has
``session_id``, ``transcript_path``, ``cwd`` and ``hook_event_name``; SessionStart adds
``source`` (startup | resume | clear | compact), UserPromptSubmit ``prompt``, PostToolUse
``tool_name``, ``tool_input``, ``tool_response``, PostToolUseFailure ``tool_name``,
``tool_input``, ``error`` and ``is_interrupt``, PreCompact ``trigger``, SessionEnd ``reason``.
A field a client leaves out is treated as absent, never guessed. The answer, when there is
something to inject, is the client's output JSON:
``{"hookSpecificOutput": {"hookEventName": EVENT, "additionalContext": TEXT}}``.

Indexing (PreCompact, Stop, SessionEnd) runs on one background worker, so the hook returns at
once; the transcript's sub-agent sidechains (``<session>/subagents/*.jsonl``) are indexed with it.
UserPromptSubmit queues the prompt too: it is stored at once as the start of its exchange
(``SessionIndexer.open_prompt``), which the indexer completes in place when the transcript
holds the prompt and its answer, so a report is searchable even while its first tool call
waits, or if the session dies there.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ingest.episode_events import EDIT_TOOLS, tool_event
from ingest.episodes import Event
from ingest.transcripts import error_excerpt, key_args, last_turn, result_text, tool_result_text
from retrieval.errors import InvalidInput

from . import failure_lessons as fl
from . import hook_context as ar
from . import vocabulary
from .auto_lessons import AutoLessons
from .codex_results import UNKNOWN_STATUS_TOOL
from .envsettings import AUTO_LESSONS_DEFAULT
from .episode_feed import EpisodeFeed, prune_states
from .graph_services import GraphServices
from .identity import Identity
from .ledger import Ledger, prune_ledgers
from .memory import MemoryService
from .sessions import SessionIndexer

log = logging.getLogger("pattern_memory.hooks")

# a new session drops the ledgers and detector states of sessions idle for days at most this often
PRUNE_EVERY = timedelta(hours=1)
EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "PostToolUseFailure",
          "PreCompact", "Stop", "SessionEnd")  # fmt: skip


class HookInput(BaseModel):
    """The client's hook JSON (unknown fields are kept and ignored)."""

    model_config = ConfigDict(extra="allow")

    session_id: str | None = None
    transcript_path: str | None = None
    cwd: str | None = None
    hook_event_name: str | None = None
    source: str | None = None
    prompt: str | None = None
    tool_name: str | None = None
    tool_input: Any = None
    tool_response: Any = None
    tool_use_id: str | None = None
    error: str | None = None
    is_interrupt: bool | None = None
    trigger: str | None = None
    reason: str | None = None


class HookRequest(BaseModel):
    event: str
    input: HookInput = Field(default_factory=HookInput)
    config: ar.HookConfig = Field(default_factory=ar.HookConfig)


class HookAnswer(BaseModel):
    output: dict | None = None
    note: str = ""
    injected: list[str] = Field(default_factory=list)


def output(event: str, text: str) -> dict | None:
    if not text:
        return None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def response_failure(response: Any) -> tuple[str, bool]:
    """(output text, failed?) of a PostToolUse ``tool_response``. Its shape is the tool's own
    (a string, or an object such as Bash's); an exit status is used when the object has one."""
    if isinstance(response, dict):
        status = next((response[k] for k in ("exit_code", "exitCode", "returncode", "status")
                       if isinstance(response.get(k), int) and not isinstance(response.get(k), bool)),
                      0)  # fmt: skip
        parts = [result_text(response.get(k)) for k in ("stderr", "stdout", "output", "error",
                                                        "result", "content") if response.get(k)]  # fmt: skip
        flagged = bool(response.get("is_error") or response.get("isError"))
        return "\n".join(parts), status != 0 or flagged or response.get("success") is False
    return result_text(response), False


def transcript_file(raw: str | None) -> Path | None:
    """A transcript path from the client, if it names an existing ``.jsonl`` file."""
    p = transcript_target(raw)
    return p if p is not None and p.is_file() else None


def transcript_target(raw: str | None) -> Path | None:
    """A transcript path from the client, if it names a ``.jsonl`` file (which the client may
    not have written yet: a session's first prompt comes before its transcript)."""
    if not raw:
        return None
    p = Path(raw).expanduser()
    return p.resolve() if p.suffix == ".jsonl" else None


class HookService:
    """One per daemon: the session indexer, the episode detector, their background worker, the
    event handlers. ``auto_lessons``: ``PATTERN_AUTO_LESSONS`` (off | review | on)."""

    def __init__(self, svc: MemoryService, graphs: GraphServices,
                 auto_lessons: str = AUTO_LESSONS_DEFAULT) -> None:  # fmt: skip
        self.svc = svc
        self.lessons = graphs.lessons  # the runtime's one pair (its lock serialises graph writes)
        self.indexer = SessionIndexer(svc)
        self.learner = AutoLessons(svc, graphs, auto_lessons)
        self.feed = EpisodeFeed(self.learner)
        self._jobs: queue.Queue = queue.Queue()
        self._worker: threading.Thread | None = None
        self._worker_lock = threading.Lock()
        self._pending: set[tuple] = set()
        self._seq = itertools.count()
        self._pruned_at: datetime | None = None  # see _prune
        vocabulary.warm()  # the prompt gate's background words, loaded before the first prompt
        if self.learner.enabled:  # what is indexed is read for episodes, on the worker
            self.indexer.after = self.schedule_episodes

    # ------------------------------------------------------------------ episodes (background)
    def schedule_episodes(self, who: Identity, path: Path, flush: bool) -> bool:
        """Queue reading a transcript for episodes (after the indexer read it)."""
        return self._queue(("episodes", who.agent_id, str(path), flush),
                           lambda: self.feed.catch_up(who, path, final=flush))  # fmt: skip

    def schedule_event(self, who: Identity, inp: HookInput, event: Event) -> bool:
        """Queue one hook event for the episode detector (never run in the hook's path)."""
        if not self.learner.enabled or not inp.session_id:
            return False
        key = ("episode-event", inp.session_id, event.call or next(self._seq))
        return self._queue(key, lambda: self.feed.live(who, inp.session_id or "", event,
                                                       transcript=inp.transcript_path,
                                                       cwd=inp.cwd))  # fmt: skip

    # ------------------------------------------------------------------ background indexing
    def _run_jobs(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            key, run = job
            # a transcript read runs from its checkpoint: the same read asked for while this one
            # runs is queued again (the file may have grown since this one read it); one hook
            # event is the detector's once
            once = key[0] == "episode-event"
            if not once:
                with self._worker_lock:
                    self._pending.discard(key)
            try:
                run()
            except Exception:  # one line in the daemon log; the next run retries
                log.exception("indexing %s failed", key[1])
            finally:
                if once:
                    with self._worker_lock:
                        self._pending.discard(key)
                self._jobs.task_done()

    def _queue(self, key: tuple, run: Callable[[], Any]) -> bool:
        """Queue ``run`` on the worker unless the job ``key`` is queued already."""
        with self._worker_lock:
            if key in self._pending:
                return False  # the same run is already queued
            self._pending.add(key)
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._run_jobs, name="session-indexer",
                                                daemon=True)  # fmt: skip
                self._worker.start()
        self._jobs.put((key, run))
        return True

    def schedule(self, who: Identity, path: Path, *, flush: bool, final: bool,
                 compacting: str | None = None) -> bool:  # fmt: skip
        """Queue an indexing run; ``compacting``: the session the client is about to compact."""

        def run() -> None:
            self.index_transcript(who, path, flush=flush, final=final)
            if compacting:  # the session's turns indexed so far may now be recalled in it
                state = self.indexer.progress(str(path)).sessions.get(compacting)
                Ledger(self.svc, compacting).set_compacted(state.turns if state else 0)

        return self._queue((who.agent_id, str(path), flush, final), run)

    def schedule_prompt(self, who: Identity, path: Path, session: str, prompt: str) -> bool:
        """Queue storing a prompt just sent as the start of its exchange (the worker runs the
        transcript's indexing runs in order, so it is read after what came before it)."""
        sent_at = time.time()

        def run() -> None:
            self.indexer.open_prompt(who, path, session, prompt, sent_at)

        return self._queue((who.agent_id, str(path), "prompt", session, prompt), run)

    def drain(self, timeout: float | None = None) -> None:
        """Wait for queued indexing (tests, shutdown)."""
        done = threading.Event()
        threading.Thread(target=lambda: (self._jobs.join(), done.set()), daemon=True).start()
        done.wait(timeout)

    def index_transcript(self, who: Identity, path: Path, *, flush: bool, final: bool):
        reports = [self.indexer.index_file(who, path, flush=flush, final=final)]
        side = path.with_suffix("") / "subagents"
        if side.is_dir():
            for sub in sorted(side.glob("*.jsonl")):
                reports.append(self.indexer.index_file(who, sub, flush=True, final=final))
        return reports

    # ------------------------------------------------------------------ events
    def handle(self, who: Identity, req: HookRequest) -> HookAnswer:
        if req.event not in EVENTS:
            raise InvalidInput(f"unknown hook event {req.event!r}; one of {', '.join(EVENTS)}")
        return getattr(self, "on_" + req.event)(who, req.input, req.config)

    def _answer(self, event: str, sel: ar.Selection, ledger: Ledger, note: str) -> HookAnswer:
        if sel.picked:
            ledger.add(sel.ids)
        return HookAnswer(output=output(event, sel.text), injected=sel.ids,
                          note=f"{note}: {len(sel.picked)} of {sel.candidates} candidates")  # fmt: skip

    def on_SessionStart(self, who, inp: HookInput, config) -> HookAnswer:  # noqa: N802
        ledger = Ledger(self.svc, inp.session_id)
        if inp.source in ("clear", "compact"):
            ledger.reset()
        if inp.source in (None, "startup"):
            self._prune()
        lessons = fl.useful_lessons(self.svc, who, self.lessons,
                                    pending=self.learner.mode != "review")  # fmt: skip
        sel = ar.briefing(self.svc, who, config=config, ledger=ledger, lessons=lessons)
        return self._answer("SessionStart", sel, ledger, "briefing")

    def _prune(self) -> None:
        """Drop the ledgers and detector states of sessions idle for days, at most once per
        :data:`PRUNE_EVERY`: each run reads every session's row (thousands in a store a few
        weeks old), which a session start need not wait for every time."""
        now = self.svc.clock()
        if self._pruned_at is not None and now - self._pruned_at < PRUNE_EVERY:
            return
        self._pruned_at = now
        prune_ledgers(self.svc)
        prune_states(self.svc)

    def on_UserPromptSubmit(self, who, inp: HookInput, config) -> HookAnswer:  # noqa: N802
        prompt = (inp.prompt or "").strip()
        if not prompt or (prompt.startswith("/") and " " not in prompt):
            return HookAnswer(note="no prompt to recall for")
        ledger = Ledger(self.svc, inp.session_id)
        path = transcript_file(inp.transcript_path)
        last = last_turn(path) if path is not None and ar.refers_back(prompt) else None
        sel = ar.select_for_prompt(self.svc, who, prompt, config=config, ledger=ledger,
                                   session=inp.session_id, last_turn=last,
                                   pending=self.learner.mode != "review")  # fmt: skip
        target = transcript_target(inp.transcript_path)
        if target is not None and inp.session_id and not prompt.startswith("/"):
            self.schedule_prompt(who, target, inp.session_id, prompt)  # searchable at once
        return self._answer("UserPromptSubmit", sel, ledger, "prompt recall")

    def _failure(self, event: str, who, inp: HookInput, text: str, failed: bool, config):
        excerpt = error_excerpt(text, failed)
        if excerpt is None or inp.is_interrupt:
            if not inp.is_interrupt:
                self._ran(who, inp, text, ok=not failed)
            return HookAnswer(note="no failure")
        ledger = Ledger(self.svc, inp.session_id)
        command = (
            (inp.tool_input or {}).get("command") if isinstance(inp.tool_input, dict) else None
        )
        if isinstance(command, str) and command.strip():
            error, context = fl.failure_query(text, command, inp.cwd)
        else:
            error = excerpt
            context = f"{inp.tool_name or 'tool'}({key_args(inp.tool_name or '', inp.tool_input)})"
        sel = fl.lessons_for_failure(self.svc, who, self.lessons, error or excerpt, context,
                                     config=config, ledger=ledger,
                                     pending=self.learner.mode != "review")  # fmt: skip
        injected = [p.record.entity_name for p in sel.picked if p.record.entity_name]
        self._ran(who, inp, text, ok=not failed, injected=injected)
        return self._answer(event, sel, ledger, "lessons for the failure")

    def _ran(self, who, inp: HookInput, output: str, *, ok: bool, injected=()) -> None:
        """Queue a command's result for the episode detector (the shell tool only)."""
        if inp.tool_name == UNKNOWN_STATUS_TOOL:  # Codex: no exit status in the hook
            if injected and inp.tool_use_id:  # the rollout gives the run; these wait for it
                self.schedule_event(who, inp, Event(kind="shown", call=inp.tool_use_id,
                                                    injected=list(injected)))  # fmt: skip
            return
        ev = tool_event(inp.tool_name or "", inp.tool_input, output, ok, inp.tool_use_id or "")
        if ev is not None and ev.kind == "run":
            ev.injected = list(injected)
            self.schedule_event(who, inp, ev)

    def on_PostToolUse(self, who, inp: HookInput, config) -> HookAnswer:  # noqa: N802
        text, failed = response_failure(inp.tool_response)
        if inp.tool_name in EDIT_TOOLS:  # a client that sends its edits: the detector sees them
            ev = tool_event(inp.tool_name or "", inp.tool_input, text, not failed,
                            inp.tool_use_id or "")  # fmt: skip
            if ev is not None:
                self.schedule_event(who, inp, ev)
            return HookAnswer(note="an edit")
        return self._failure("PostToolUse", who, inp, text, failed, config)

    def on_PostToolUseFailure(self, who, inp: HookInput, config) -> HookAnswer:  # noqa: N802
        text = inp.error or ""
        path = transcript_file(inp.transcript_path)
        if path is not None and inp.tool_use_id:  # the output itself, when already written
            found = tool_result_text(path, inp.tool_use_id)
            if found and found.strip() not in text:
                text = f"{text}\n{found}".strip()
        return self._failure("PostToolUseFailure", who, inp, text, True, config)

    def _index(self, who, inp: HookInput, *, flush: bool, final: bool, note: str,
               compacting: bool = False) -> HookAnswer:  # fmt: skip
        path = transcript_file(inp.transcript_path)
        if path is None:
            return HookAnswer(note="no transcript to index")
        queued = self.schedule(who, path, flush=flush, final=final,
                               compacting=inp.session_id if compacting else None)  # fmt: skip
        return HookAnswer(note=f"{note}: {'queued' if queued else 'already queued'} {path}")

    def on_PreCompact(self, who, inp: HookInput, config) -> HookAnswer:  # noqa: N802
        # what the client held is about to be summarised: once indexed, the session's own turns
        # may be recalled in it (SessionStart with source "compact" then clears the ledger)
        return self._index(who, inp, flush=True, final=False, note="index before compaction",
                           compacting=True)  # fmt: skip

    def on_Stop(self, who, inp: HookInput, config) -> HookAnswer:  # noqa: N802
        return self._index(who, inp, flush=True, final=False, note="index the turn")

    def on_SessionEnd(self, who, inp: HookInput, config) -> HookAnswer:  # noqa: N802
        return self._index(who, inp, flush=True, final=True, note="index the session")

    def close(self, timeout: float = 30.0) -> None:
        """Finish the queued indexing runs (up to ``timeout``), then stop the worker and wait
        for the run it is in: the store closes (and a PostgreSQL node leaves its cluster)
        only after this returns."""
        worker = self._worker
        if worker is not None and worker.is_alive():
            self.drain(timeout)
            self._jobs.put(None)
            worker.join(timeout)
