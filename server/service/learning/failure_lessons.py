"""Lessons the hooks show without being asked: for a failed command (PostToolUse /
PostToolUseFailure) and in the session briefing.

- :func:`lessons_for_failure`: the lessons whose absolute relevance to the failure
  (``hook_context.lesson_scores`` of :func:`query_text`: its type, message, failing test and
  innermost frame, as ``find_similar_errors`` reads a failure) clears the lesson threshold, at
  most :data:`CANDIDATES`, most relevant first, not shown before in the session, not flagged
  suspicious, with their fix, success rate and verification steps. One search: the hook asks
  nothing of ``find_similar_errors``' own ranking (its relevance is normalised per query, so
  the only lesson of a project would always look relevant; its trace re-ranking costs as much
  as the search).
- :func:`useful_lessons`: the project's lessons whose fixes worked most, most often.

Each lesson says how often its fix worked as counts ("worked 1 of 1 use"), never as a bare
percentage. A learned lesson whose fix worked once and that no person accepted is shown as
"learned once, not reviewed", without its diff hunks (:mod:`graph.lesson_trust`).
``PATTERN_AUTO_LESSONS=review`` keeps lessons learned from episodes that nobody accepted yet
out of both (``pending=False``).
"""

from __future__ import annotations

import json
import math

from graph import lesson_trust
from graph.lesson_ranking import error_text as pattern_text
from graph.traces import split_trace
from ingest.learning.commands import command_key
from ingest.learning.signatures import error_text, failing_tests
from retrieval.ranking.guard import guarded
from retrieval.records import Kind, RecordFilter, Scope
from server.service.core.identity import Identity
from server.service.memories.memory import MemoryService
from server.service.prompting.hook_context import (
    DEFAULT_LESSON_THRESHOLD,
    HookConfig,
    Picked,
    Selection,
    _pack,
    checked,
    injectable,
    lesson_scores,
    stale_factor,
)
from server.service.prompting.ledger import Ledger

__all__ = ["DEFAULT_LESSON_THRESHOLD", "lessons_for_failure", "useful_lessons"]
CANDIDATES = 5  # lessons a failure gets at most
# frame lines of a failure's query: its type, message, failing test and innermost frame judge a
# lesson better than the output's first lines, and cost one short embedding instead of two of
# 256 tokens (docs/benchmarks.md, "The lesson threshold")
QUERY_FRAMES = 1


def lesson_text(lesson) -> str:
    """A lesson as the hooks show it: the error, the fix, how often it worked (as counts), how
    to verify. A learned lesson says whether a person reviewed it, and shows its diff only once
    earned: "learned once, not reviewed" has none (``graph.lesson_trust``)."""
    ep = lesson.errorPattern
    lines = [f"{lesson.name}: {ep.type}: {ep.message}".strip()]
    if lesson.observations:
        lines.append("fix: " + " ".join(str(o) for o in lesson.observations)[:600])
    for h in lesson_trust.shown_hunks(lesson)[:2]:
        lines.append(f"diff {h.get('path', '')}:\n{str(h.get('diff', ''))[:400]}")
    if note := lesson_trust.note(lesson):
        lines.append(note)
    md = lesson.metadata
    lines.append(lesson_trust.uses(md.successRate, md.frequency))
    for step in lesson.verificationSteps[:3]:
        lines.append(f"verify: {step.command} (expect: {step.expectedOutput})"[:300])
    return "\n".join(lines)


def unreviewed(extra: str) -> bool:
    """Whether a lessons row's ``extra`` says it was learned from an episode and nobody
    accepted it yet (an ``extra`` that cannot be read counts as not reviewed)."""
    return guarded("lesson review state", _unreviewed, extra, default=True)


def _unreviewed(extra: str) -> bool:
    if '"learned"' not in extra:
        return False
    block = json.loads(extra).get("lesson", {}).get("learned") or {}
    return isinstance(block, dict) and block.get("review") == "pending"


def shown(graph_lessons, who: Identity, name: str, record: str) -> str | None:
    """:func:`lesson_text` of the team lesson ``name``; None when it cannot be read or
    written out (the lesson is then left out)."""
    return guarded("lesson text", lambda: lesson_text(graph_lessons.get(who, name,
                   Scope.team.value)), default=None, record=record)  # fmt: skip


def usefulness(row) -> float:
    """success rate × log(1 + frequency) of a lessons row (0 when they are not numbers)."""
    value = guarded("lesson usefulness", lambda: float(row["success_rate"])
                    * math.log1p(max(0, row["frequency"])), default=0.0)  # fmt: skip
    return value if math.isfinite(value) else 0.0


def useful_lessons(svc: MemoryService, who: Identity, graph_lessons, limit: int = 3,
                   *, pending: bool = True):  # fmt: skip
    """The project's lessons whose fixes worked most, most often (success rate × log(1 +
    frequency)): (record, text) pairs. Only the ranking columns of every lesson are read."""
    bucket = who.bucket(Scope.team.value)
    rows = svc.store.reader.execute(
        "SELECT name, record_id, success_rate, frequency, extra FROM lessons WHERE bucket=?",
        (bucket,),
    ).fetchall()
    rows = [r for r in rows if pending or not unreviewed(r["extra"])]
    rows.sort(key=lambda r: (-usefulness(r), str(r["name"])))
    recs = svc.store.get([r["record_id"] for r in rows[:limit]])
    out = []
    for r in rows[:limit]:
        rec = recs.get(r["record_id"])
        text = None if rec is None else shown(graph_lessons, who, r["name"], rec.id)
        if text is not None:
            out.append((rec, text))
    return out


def failure_query(output: str, command: str = "", cwd: str | None = None) -> tuple[str, str]:
    """(the error text, its context) of a failed command: the error from its first line on,
    and the failing test the output or the command names (``pkg.FooTest::testBar``, a pytest
    node id), else the command."""
    tests = failing_tests(output)
    if not tests and command:
        key = command_key(command, cwd)
        tests = tuple(t for c in key.checks for t in c.targets if c.is_test and "::" in t)
    return error_text(output), (tests[0] if tests else command.strip()[:300])


def pattern_of(error: str, context: str, frames_kept: int = QUERY_FRAMES) -> dict:
    """The ``find_similar_errors`` query of a failure: its type, message, context and its first
    ``frames_kept`` frame lines."""
    typ, msg, frames = split_trace(error)
    frames = "\n".join(frames.strip("\n").splitlines()[:frames_kept]) if frames else ""
    return {"type": typ or "", "message": msg or error.strip()[:500], "context": context,
            "stackTrace": frames or None}  # fmt: skip


def query_text(pattern: dict) -> str:
    """The text a failure is judged by (``hook_context.lesson_scores``): its pattern as
    ``find_similar_errors`` reads it, so the hook judges a failure as an agent asking that
    tool would describe it (17 words at the median on Defects4J)."""
    return pattern_text(pattern["type"], pattern["message"], pattern["context"],
                        pattern["stackTrace"])  # fmt: skip


def lessons_for_failure(
    svc: MemoryService, who: Identity, graph_lessons, error: str, context: str = "",
    *, config: HookConfig | None = None, ledger: Ledger | None = None, pending: bool = True,
) -> Selection:  # fmt: skip
    """The lessons a failed command gets (module docstring), most relevant first. ``error``:
    the failure's error text; ``context``: its failing test, or the command."""
    config = config or HookConfig()
    sel = Selection(query=error)
    bucket = who.bucket(Scope.team.value)
    f = RecordFilter(buckets=[bucket], kinds=[Kind.lesson], now=svc.clock())
    absolute = lesson_scores(svc, f, query_text(pattern_of(error, context)))
    ranked = sorted((r for r, v in absolute.items() if v >= config.lesson_threshold),
                    key=lambda r: -absolute[r])[:CANDIDATES]  # fmt: skip
    sel.candidates = len(ranked)
    if not ranked:
        return sel
    rows = svc.store.reader.execute(
        "SELECT name, record_id, extra FROM lessons "
        f"WHERE bucket=? AND record_id IN ({','.join('?' * len(ranked))})", [bucket, *ranked],
    ).fetchall()  # fmt: skip
    names = {r["record_id"]: r["name"] for r in rows if pending or not unreviewed(r["extra"])}
    seen = ledger.seen if ledger else set()
    recs = svc.store.get(list(names))
    cites = checked(svc, who, list(recs.values()))
    found = []
    for rid in ranked:
        rec = recs.get(rid)
        if rec is None or rec.id in seen or not injectable(rec):
            continue
        rel = absolute[rid] * stale_factor(svc, cites.get(rid))
        if rel >= config.lesson_threshold:
            found.append((rel, rec))
    found.sort(key=lambda x: -x[0])  # a stale citation's factor may reorder them
    texts = [shown(graph_lessons, who, names[rec.id], rec.id) for _, rec in found]
    kept = [(rel, rec, text) for (rel, rec), text in zip(found, texts, strict=True) if text]
    found = [(rel, rec) for rel, rec, _ in kept]
    blocks = [(rec, text) for _, rec, text in kept]
    n, text = _pack(blocks, config.prompt_tokens, "Lessons recorded for similar errors (fix, "
                    "how often it worked, verification):", cites)  # fmt: skip
    sel.picked = [Picked(rec, rel) for rel, rec in found][:n]
    sel.text = text if n else ""
    return sel
