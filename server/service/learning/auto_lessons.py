"""An episode becomes a lesson; an injected lesson's outcome is counted.

What a learned lesson holds (docs/lessons.md, "What is stored"):

- ``errorPattern``: the failure's type and message as the trace gives them
  (``graph.traces.split_trace``: ``junit.framework.AssertionFailedError`` /
  ``expected:<1> but was:<0>``), else as its signature reads them (``E0412`` / ``cannot find
  type …``); ``context`` the failing test (``pkg.FooTest::testBar``, a pytest node id) or,
  when none is named, the check that failed; ``stackTrace`` the frames (a compiler's or a
  tool's output when there are none);
- ``observations``: the agent's own explanation of the fix, and the files it changed;
- ``verificationSteps``: the command that passed, and that it exited 0 (what it printed is not
  kept: a test's own output can say anything);
- ``metadata``: severity ``medium``, frequency 1, success rate 1.0 (the episode is one
  success of its fix), ``environment`` {repository, branch};
- ``learned`` (``graph/learned.py``): the normalised signature and its digest, session,
  transcript, times, both commands, the fix with short diff hunks of the changed files,
  occurrences and alternatives, and the review state;
- citations of the changed files (the lines the edit wrote when they are still there, else
  the file), so the lesson is marked stale when that code changes later.

Every string passes the write policy on the normal lesson path (``create_lesson``), as a
write no person asked for (``unattended_warnings.watched``): a secret in a command, an output
or the agent's words is redacted (``warn`` and off become ``redact``; ``block`` refuses the
lesson), and the warnings go to the review inbox. A secret-bearing file
(``trust.secret_files``: ``.env*``, ``*.pem``, ``id_rsa``, ``credentials``, …), every file a
hunk holding a secret touched, and every file edited by the same shell command as one of them
keep their names in the lesson (``files``, "Fixed by changing .env") and never their diffs
(``fix.withheld`` names them), whatever the policy; nor are they cited.

Outcomes: a lesson the failure hook injected gets a success when the same check passes after
edits, a failure when the same error comes back after edits (``ingest/learning/episodes.py``), as
``update_lesson_success`` would record them.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from graph.learned import LearnedLessons, LearnResult
from graph.traces import split_trace
from ingest.learning.episodes import Edit, Episode, SessionEpisodes
from retrieval.errors import NotFound, PatternError
from server.service.browsing.unattended_warnings import watched
from server.service.core.identity import Identity
from server.service.graphs.graph_services import GraphServices
from server.service.memories.memory import MemoryService
from server.service.trust.secret_scan import secrets
from server.service.trust.secret_scan.secret_files import (
    secret_bearing,
    secret_text,
    withheld_files,
    without_encoded,
    without_encoded_tree,
)

log = logging.getLogger("pattern_memory.lessons")

MESSAGE_CHARS = 2000
TRACE_CHARS = 6000
EXPLANATION_CHARS = 600
MAX_HUNKS = 4
MAX_CITED = 5
LESSON_SCOPE = "team"


def lesson_name(episode: Episode) -> str:
    """``AssertionFailedError-AbstractCategoryItemRendererTests.test2947660-3fa2c1``: the error,
    where it failed, and the start of its signature's digest. A secret in the test's name (a
    parametrized id) is redacted first: once its brackets become ``_`` the scanner would no
    longer see it."""
    sig = episode.failure.signature
    kind = re.sub(r"\W+", "", sig.type.rsplit(".", 1)[-1]) or "error"
    where = secrets.apply_policy(without_encoded(sig.test)[0], secrets.SecretPolicy.redact)[0]
    if "::" in where:
        cls, _, method = where.partition("::")
        where = f"{cls.rsplit('.', 1)[-1].rsplit('/', 1)[-1]}.{method}"
    where = re.sub(r"[^\w.:-]+", "_", where).strip("_")[:80]
    return f"{kind}-{where}-{sig.digest[:6]}"


def _relative(path: str, root: str | None) -> str:
    if root and path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")) + 1 :]
    return path


def _cited_lines(path: Path, hunk: str) -> tuple[int, int] | None:
    """Where the lines an edit wrote are in the file now (1-based, inclusive)."""
    new = [ln[1:] for ln in hunk.splitlines() if ln.startswith("+") and ln[1:].strip()]
    if not new:
        return None
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for i, line in enumerate(lines):
        if line == new[0]:
            end = i
            for want in new[1:]:
                j = next(
                    (k for k in range(end + 1, min(len(lines), end + 40)) if lines[k] == want), None
                )
                if j is None:
                    break
                end = j
            return i + 1, end + 1
    return None


def fix_hunks(edits: list[Edit], root: str | None) -> tuple[list[dict], list[str]]:
    """(the diff hunks a lesson keeps, the files whose diffs it leaves out: a secret-bearing
    file, one whose diffs hold a secret, ``trust.secret_files.withheld_files``)."""
    hunks = [(e, _relative(e.path, root)) for e in edits if e.hunk]
    bad = withheld_files((e.idx, path, e.hunk) for e, path in hunks)
    kept = [{"path": path, "diff": e.hunk} for e, path in hunks if path not in bad]
    return kept, sorted(bad)


def lesson_from(episode: Episode, state: SessionEpisodes, who: Identity) -> tuple[dict, list]:
    """(the ``create_lesson`` argument, explicit citations) of an episode."""
    f = episode.failure
    sig = f.signature
    typ, msg, frames = split_trace(f.error)
    if not typ:  # no trace header: the signature's reading of the output
        typ, msg = sig.type, sig.message or msg
    msg = (msg or sig.message or f.error.strip().split("\n", 1)[0] or "(no message)")[
        :MESSAGE_CHARS
    ]
    trace = frames or (f.error if f.error.strip() != msg.strip() else "")
    root = who.root or state.cwd
    files = [_relative(p, root) for p in episode.files]
    explanation = " ".join(episode.explanation.split())[:EXPLANATION_CHARS]
    observations = [o for o in (explanation, f"Fixed by changing {', '.join(files)}.") if o]
    hunks, withheld = fix_hunks(episode.edits, root)
    # the exit status only: the output's words are the tested code's (a plugin can print there)
    step = {"command": episode.passed_command.strip()[:2000], "expectedOutput": "exit status 0",
            "successIndicators": ["exit status 0"]}  # fmt: skip
    learned = {
        "source": "episode", "review": "pending",
        "signature": {"type": sig.type, "message": sig.message, "test": sig.test,
                      "normalized": sig.normalized, "digest": sig.digest},
        "session": episode.session, "transcript": state.transcript,
        "repository": {"root": root, "branch": state.branch},
        "failedAt": f.at, "passedAt": episode.passed_at,
        "failedCommand": f.command[:2000], "passedCommand": episode.passed_command[:2000],
        "fix": {"explanation": explanation, "files": files, "hunks": hunks[:MAX_HUNKS],
                **({"withheld": withheld} if withheld else {})},
        "occurrences": 1, "seen": [{"session": episode.session, "at": episode.passed_at}],
        "episodes": [episode.id], "alternatives": [],
    }  # fmt: skip
    lesson = {
        "name": lesson_name(episode), "entityType": "lesson", "observations": observations,
        "errorPattern": {"type": typ[:200], "message": msg, "context": sig.test[:500],
                         **({"stackTrace": trace[:TRACE_CHARS]} if trace.strip() else {})},
        "metadata": {"severity": "medium", "frequency": 1, "successRate": 1.0,
                     "environment": {k: v for k, v in (("repository", root),
                                                       ("branch", state.branch)) if v}},
        "verificationSteps": [step], "learned": learned,
    }  # fmt: skip
    return lesson, citations_for(episode, root, withheld)


def citations_for(episode: Episode, root: str | None, withheld: list[str] = ()) -> list[dict]:
    """The changed files that exist here, each at the lines the edit wrote (else whole); never
    a file whose diff the lesson leaves out (a citation keeps the cited lines)."""
    out: list[dict] = []
    for e in episode.edits:
        if _relative(e.path, root) in withheld or secret_bearing(e.path) or secret_text(e.path):
            continue
        p = Path(e.path if Path(e.path).is_absolute() or not root else Path(root) / e.path)
        if not p.is_file() or any(c["path"] == str(p) for c in out):
            continue
        span = _cited_lines(p, e.hunk)
        out.append({"path": str(p), **({"startLine": span[0], "endLine": span[1]} if span else {})})
        if len(out) >= MAX_CITED:
            break
    return out


class AutoLessons:
    """Learns episodes into lessons and counts outcomes, for one store."""

    def __init__(self, svc: MemoryService, graphs: GraphServices, mode: str = "on") -> None:
        self.svc = svc
        self.graphs = graphs
        self.mode = mode
        self.learned = LearnedLessons(graphs.lessons)

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    def learn(self, who: Identity, episode: Episode, state: SessionEpisodes) -> LearnResult | None:
        """Learn one episode, as a write no person asked for: its warnings (and a refusal) are
        filed for the review inbox under the lesson's name."""
        with watched(self.svc, who, "learned lesson", scope=LESSON_SCOPE) as watch:
            lesson, cites = lesson_from(episode, state, who)
            lesson, encoded = without_encoded_tree(lesson)  # the policy reads text as it is
            if encoded:
                watch.note(f"redacted {encoded} base64-encoded secret(s) from the lesson")
            watch.subject = lesson["name"]
            for path in lesson["learned"]["fix"].get("withheld") or []:
                why = "a file that holds secrets" if secret_bearing(path) else "it holds a secret"
                watch.note(f"the diff of {path} was not kept: {why}")
            valid = self._valid_citations(who, cites)
            try:
                result = self.learned.learn(who, lesson, LESSON_SCOPE, valid)
            except PatternError as exc:  # refused by the write policy, or a name clash
                watch.note(f"episode of session {episode.session} not learned: {exc.message}")
                log.warning("episode %s of session %s not learned: %s", episode.id,
                            episode.session, exc.message)  # fmt: skip
                return None
            watch.subject = result.name
            return result

    def _valid_citations(self, who: Identity, cites: list[dict]) -> list[dict]:
        cit = self.svc.citations
        if cit is None or not who.root:
            return []
        ok = []
        for c in cites:
            try:
                cit.resolve(who, [c])
            except PatternError:
                continue
            ok.append(c)
        return ok

    def outcome(self, who: Identity, lesson: str, success: bool) -> bool:
        try:
            self.graphs.lessons.update_lesson_success(who, lesson, success, LESSON_SCOPE)
        except NotFound:  # deleted (or rejected) since it was injected
            return False
        return True

    def handle(self, who: Identity, state: SessionEpisodes) -> tuple[list, list]:
        """Learn the state's ready episodes and count its verdicts: (results, verdicts done)."""
        results = [self.learn(who, ep, state) for ep in state.ready]
        verdicts = [(name, ok) for name, ok in state.verdicts if self.outcome(who, name, ok)]
        return results, verdicts
