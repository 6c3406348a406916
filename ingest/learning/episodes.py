"""Episodes: a check fails, the agent edits files, the same check then passes.

One detector, fed :class:`Event` s in the order they happened, from a transcript (Claude Code
JSONL or the generic JSONL: :mod:`ingest.learning.episode_events`) or from the client's hooks as they
fire (the daemon merges both, an event seen twice is recognised by its tool call id). Its state
per session (:class:`SessionEpisodes`, a pydantic model kept in the store) holds the recent
failures, edits and the assistant's recent words; nothing else of the session is kept.

**An episode** (:class:`Episode`) is a passing check P and the latest failure F before it such
that

- P re-runs F (:func:`ingest.learning.commands.related`: the same check, a narrower one on F's failing
  test, or a broader one, leaving out nothing F ran; a task runner such as ``just check``
  whose output shows it ran pytest re-runs a pytest failure), and P's output agrees
  (:func:`ingest.learning.fix_evidence.proves`: the failing test named as passed when the runner names
  tests; nothing more skipped, deselected or filtered out than in F's run, but for the
  narrowing P's command line asks for);
- P's exit status is its checks' own, or its output holds a runner's summary of success
  (``pytest || true`` that exits 0 is no pass of its own);
- the agent edited files between F and P (an Edit/Write/MultiEdit/NotebookEdit call, or a
  shell edit: ``sed -i``, ``patch``, ``cat > FILE``), one of them a file that can be the fix
  (:func:`ingest.learning.fix_evidence.fix_paths`: one F names, or one that is neither documentation
  nor a lockfile).

The failures of the same check before F are resolved with it (one episode per fix); a pass
with no edit since the failure, or with edits to documentation only, resolves it without an
episode (a flaky test, a fixed environment). Never episodes: a failure that never passes, a pass with no failure before it, a
pass of an unrelated check. The fix is the edits between F and P; the agent's explanation is
what it said right after P (when it names a changed file or a changed identifier), else the
last thing it said between F and P.

**Outcomes.** A failure event may carry the lessons the failure hook injected for it. When the
same check later passes with edits in between, each of them gets a success; when it fails
again with the same error signature after edits (the lesson's fix was tried), a failure. A
client whose hook cannot know a command's exit status (Codex CLI) sends a ``shown`` event
instead: the lessons shown for call ``call``, never a run; they are given to that call's run
when the transcript feeds it (or at once, when it already did).
"""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from pydantic import BaseModel, Field

from ingest.learning.commands import CommandKey, command_key, related
from ingest.learning.fix_evidence import failure_counts, fix_paths, named_files, proves
from ingest.learning.signatures import (
    error_signature,
    error_text,
    failing_tests,
    runner_failed,
    runner_of,
)
from ingest.learning.test_reports import read_report, runner_passed

MAX_FAILURES = 12
MAX_EDITS = 40
MAX_SAYS = 8
MAX_SEEN = 520  # above two messages' keys of Gemini CLI (its say and 256 calls each)
MAX_SHOWN = 32  # calls with lessons shown, waiting for their run in the transcript
STATE_ERROR_CHARS = 6000
SAY_CHARS = 1200
_IDENT = r"[A-Za-z_][\w.:]*\w"
# outputs that are no result of the command (the user stopped it, refused it, or it runs on)
_NO_RESULT = re.compile(r"interrupted by user|doesn't want to proceed with this tool use|"
                        r"^Command running in background", re.I | re.M)  # fmt: skip


class Event(BaseModel):
    """One thing that happened in a session (``kind``): a command ran (``run``: ``command``,
    ``ok``, ``output``), a file was edited (``edit``: ``path``, ``hunk``), the assistant said
    something (``say``: ``text``) or the user prompted (``prompt``); ``shown``: the lessons a
    hook showed for the call ``call`` (``injected``), whose run and status come from the
    transcript."""

    kind: Literal["run", "edit", "say", "prompt", "shown"]
    call: str = ""  # the tool call id (the same in the transcript and in the hook's input)
    at: str | None = None  # ISO 8601
    command: str = ""
    ok: bool = True
    output: str = ""
    injected: list[str] = Field(default_factory=list)  # lessons the failure hook showed
    path: str = ""
    hunk: str = ""
    text: str = ""


class Signature(BaseModel):
    type: str
    message: str
    test: str
    normalized: str
    digest: str


class Edit(BaseModel):
    idx: int
    path: str
    hunk: str = ""
    at: str | None = None


class Failure(BaseModel):
    idx: int
    call: str = ""
    at: str | None = None
    command: str
    error: str
    tests: list[str] = Field(default_factory=list)
    signature: Signature
    counts: dict[str, int] = Field(default_factory=dict)  # tests run and left out, as it said
    runner: str = ""  # the test runner whose output it is
    named: list[str] = Field(default_factory=list)  # the file names it writes


class Said(BaseModel):
    idx: int
    text: str


class Outcome(BaseModel):
    """A lesson injected for a failure, waiting for the check's next run."""

    lesson: str
    idx: int
    command: str
    digest: str
    tests: list[str] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)
    runner: str = ""
    named: list[str] = Field(default_factory=list)


class Episode(BaseModel):
    id: str
    session: str
    failure: Failure
    passed_command: str
    passed_at: str | None = None
    passed_output: str = ""
    edits: list[Edit]
    before: str = ""  # what the assistant said between the failure and the pass (last)
    after: str = ""  # what it said right after the pass
    injected: list[str] = Field(default_factory=list)

    @property
    def files(self) -> list[str]:
        return list(dict.fromkeys(e.path for e in self.edits))

    @property
    def explanation(self) -> str:
        """The agent's own words for the fix (module docstring)."""
        if self.after and _names_the_fix(self.after, self.edits):
            return self.after
        return self.before or self.after


class SessionEpisodes(BaseModel):
    """The detector's state for one session (kept in the store between events)."""

    session: str
    cwd: str | None = None
    branch: str | None = None
    transcript: str | None = None
    updated: str = ""  # ISO 8601 of the last change (idle states are dropped)
    seq: int = 0
    seen: list[str] = Field(default_factory=list)
    failures: list[Failure] = Field(default_factory=list)
    edits: list[Edit] = Field(default_factory=list)
    says: list[Said] = Field(default_factory=list)
    open: list[Episode] = Field(default_factory=list)  # waiting for the agent's words
    outcomes: list[Outcome] = Field(default_factory=list)
    # found, not yet handled (written as lessons / counted): crash-safe hand-over
    ready: list[Episode] = Field(default_factory=list)
    verdicts: list[tuple[str, bool]] = Field(default_factory=list)
    # failures a pass resolved (call id -> edits before the pass?): the hook's word on what it
    # injected for one may come after the transcript already showed the pass
    resolved: dict[str, bool] = Field(default_factory=dict)
    # call id -> lessons a hook showed for a run the transcript has not given yet (``shown``)
    shown: dict[str, list[str]] = Field(default_factory=dict)


def _names_the_fix(text: str, edits: list[Edit]) -> bool:
    """Whether ``text`` names what changed: a changed file (its name without the extension),
    or an identifier of the changed lines (one it quotes in backticks, or one that only code
    has: ``snake_case``, ``camelCase``, ``a.b``, ``a::b``)."""
    quoted = {w for q in re.findall(r"`([^`]{2,80})`", text) for w in re.findall(_IDENT, q)}
    coded = {w for w in re.findall(_IDENT, text) if re.search(r"_|[a-z][A-Z]|\.\w|::", w)}
    for e in edits:
        stem = e.path.replace("\\", "/").rsplit("/", 1)[-1].rsplit(".", 1)[0]
        if len(stem) > 2 and stem in text:
            return True
        changed = " ".join(ln for ln in e.hunk.splitlines()
                           if ln[:1] in "+-" and not ln.startswith(("+++", "---")))  # fmt: skip
        if any(w in changed for w in quoted | coded):
            return True
    return False


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:20]


def _close(state: SessionEpisodes) -> None:
    state.ready += state.open
    state.open = []


def _edits_between(state: SessionEpisodes, lo: int, hi: int) -> list[Edit]:
    return [e for e in state.edits if lo < e.idx < hi]


def _fix_between(state: SessionEpisodes, named: list[str], lo: int, hi: int) -> list[Edit]:
    """The edits between ``lo`` and ``hi`` that make a fix of a failure naming ``named``."""
    edits = _edits_between(state, lo, hi)
    keep = set(fix_paths(named, [e.path for e in edits], state.cwd))
    return [e for e in edits if e.path in keep]


def feed(state: SessionEpisodes, event: Event) -> None:
    """Advance the detector by one event; episodes and outcomes found go to ``state.ready``
    and ``state.verdicts`` (an episode once the agent's words after the pass are known)."""
    if event.kind == "shown":  # never a run: its status is the transcript's to give
        if event.call and event.injected:
            if event.call in state.seen:
                _outcomes_for(state, event.call, event.injected)
            else:
                state.shown = dict(list({**state.shown, event.call: event.injected[:20]}.items())
                                   [-MAX_SHOWN:])  # fmt: skip
        return
    if event.call and event.call in state.seen:
        if event.kind == "run" and event.injected:  # the hook's view of a call already read
            _outcomes_for(state, event.call, event.injected)
        return
    if event.call in state.shown:
        shown = state.shown.pop(event.call)
        if event.kind == "run":
            event = event.model_copy(update={"injected": [*event.injected, *shown]})
    if event.call:
        state.seen = [*state.seen, event.call][-MAX_SEEN:]
    state.seq += 1
    idx = state.seq
    if event.kind == "prompt":
        _close(state)
    elif event.kind == "say":
        text = event.text.strip()[:SAY_CHARS]
        if text:
            for ep in state.open:
                ep.after = ep.after or text
            _close(state)
            state.says = [*state.says, Said(idx=idx, text=text)][-MAX_SAYS:]
    elif event.kind == "edit":
        state.edits = [*state.edits, Edit(idx=idx, path=event.path, hunk=event.hunk,
                                          at=event.at)][-MAX_EDITS:]  # fmt: skip
    elif event.kind == "run":
        _close(state)
        _run(state, event, idx)


def _run(state: SessionEpisodes, event: Event, idx: int) -> None:
    if _NO_RESULT.search(event.output[:300]):
        return
    key = command_key(event.command, state.cwd)
    for path in key.edits:
        state.edits = [*state.edits, Edit(idx=idx, path=path, hunk=f"$ {event.command}"[:400],
                                          at=event.at)][-MAX_EDITS:]  # fmt: skip
    if not key.checks:
        return
    if runner_failed(event.output):  # exit 0 behind a pipe: the runner's summary
        _failed(state, event, key, idx)
    elif key.sure or runner_passed(event.output):  # else its status may be another command's
        (_passed if event.ok else _failed)(state, event, key, idx)


def _failed(state: SessionEpisodes, event: Event, key: CommandKey, idx: int) -> None:
    tests = failing_tests(event.output) or tuple(t for c in key.checks for t in c.targets
                                                 if c.is_test and "::" in t)  # fmt: skip
    sig = error_signature(event.output, key.text, tests)
    failure = Failure(
        idx=idx, call=event.call, at=event.at, command=event.command,
        error=error_text(event.output)[:STATE_ERROR_CHARS], tests=list(tests),
        signature=Signature(type=sig.type, message=sig.message, test=sig.test,
                            normalized=sig.normalized, digest=sig.digest),
        counts=failure_counts(read_report(event.output)), runner=runner_of(event.output) or "",
        named=named_files(event.output, event.command, *tests),
    )  # fmt: skip
    for o in list(state.outcomes):  # a repeat of the error a lesson was shown for
        if _reruns(o.command, o.tests, key, state.cwd) and _edits_between(state, o.idx, idx):
            if o.digest == sig.digest:
                state.verdicts.append((o.lesson, False))
                state.outcomes.remove(o)
    state.failures = [*state.failures, failure][-MAX_FAILURES:]
    if event.injected:
        _outcomes_for(state, event.call, event.injected)


def _outcomes_for(state: SessionEpisodes, call: str, lessons: list[str]) -> None:
    """The lessons the failure hook injected for the failed call ``call``: each waits for
    the check's next run, or, when the transcript already showed it (the hook's word came
    late), gets its outcome now."""
    names = list(dict.fromkeys(lessons))
    if call in state.resolved:  # passed already: after edits, each lesson's fix worked
        if state.resolved[call]:
            state.verdicts += [(name, True) for name in names]
        return
    f = next((f for f in state.failures if f.call == call), None)
    if f is None:
        return
    again = [g for g in state.failures if g.idx > f.idx and g.signature.digest == f.signature.digest
             and _fix_between(state, f.named, f.idx, g.idx)
             and _reruns(f.command, f.tests, command_key(g.command, state.cwd), state.cwd)]  # fmt: skip
    if again:  # it failed the same way after edits already
        state.verdicts += [(name, False) for name in names]
        return
    have = {(o.lesson, o.idx) for o in state.outcomes}
    state.outcomes += [Outcome(lesson=name, idx=f.idx, command=f.command, tests=f.tests,
                               digest=f.signature.digest, counts=f.counts, runner=f.runner,
                               named=f.named)
                       for name in names if (name, f.idx) not in have]  # fmt: skip


def _reruns(failed_command: str, tests: list[str], passed: CommandKey, cwd: str | None,
            ran: str | None = None) -> bool:  # fmt: skip
    return related(command_key(failed_command, cwd), passed, tuple(tests), ran)


def _proven(f: Failure | Outcome, key: CommandKey, cwd: str | None, ran: str | None,
            output: str) -> bool:  # fmt: skip
    """Whether the pass ``key`` re-ran ``f``: by its command line, then by its output. A
    narrower run must select the test the failure's signature names (its first failing
    test): a run of another of its failing tests proves nothing of that error."""
    failed = command_key(f.command, cwd)
    tests = tuple(f.tests[:1])
    if not related(failed, key, tests, ran):
        return False
    kinds = [c.rerun_kind(g, tests) for c in key.checks for g in failed.checks]
    return proves(f.tests, f.counts, f.runner, kinds, key.checks, read_report(output))


def _passed(state: SessionEpisodes, event: Event, key: CommandKey, idx: int) -> None:
    ran = runner_of(event.output) if any(c.wrapper for c in key.checks) else None
    mine = [f for f in state.failures if _proven(f, key, state.cwd, ran, event.output)]
    for o in list(state.outcomes):
        if _proven(o, key, state.cwd, ran, event.output):
            if _fix_between(state, o.named, o.idx, idx):
                state.verdicts.append((o.lesson, True))
            state.outcomes.remove(o)
    if not mine:
        return
    last = mine[-1]
    state.failures = [f for f in state.failures if f not in mine]
    for f in mine:
        if f.call:
            state.resolved[f.call] = bool(_fix_between(state, f.named, f.idx, idx))
    while len(state.resolved) > MAX_FAILURES * 2:
        del state.resolved[next(iter(state.resolved))]
    edits = _fix_between(state, last.named, last.idx, idx)
    if not edits:
        return  # passed without a change that can be the fix: flaky, or the environment
    before = next((s.text for s in reversed(state.says) if last.idx < s.idx < idx), "")
    rows = [r for r in event.output.strip().splitlines() if r.strip()]
    shown = "\n".join(rows[:3] + (["…"] + rows[-3:] if len(rows) > 6 else rows[3:6]))
    state.open.append(
        Episode(
            id=_digest(state.session, last.call or str(last.idx), event.call or str(idx)),
            session=state.session,
            failure=last,
            passed_command=event.command,
            passed_at=event.at,
            passed_output=shown[:800],
            edits=edits,
            before=before,
        )  # fmt: skip
    )


def finish(state: SessionEpisodes) -> None:
    """The reading stopped where the agent may say no more (the session ended): the episodes
    waiting for its words are ready as they are."""
    _close(state)
