"""Reviewing lessons learned from sessions (the dashboard's review inbox, docs/lessons.md).

A lesson the episode detector learned is marked ``learned.review = "pending"`` until a person
decides. The inbox lists the project's pending learned lessons (team graph, newest first) with
their error, the fix in the agent's words, the diff hunks, where and when it was learned, its
occurrences and alternatives; the actions (``graph/learned.py``, one transaction each):

- **accept**: marked reviewed (``PATTERN_AUTO_LESSONS=review`` injects it from then on);
- **edit**: its observations (the fix as the team should read it) replaced, then accepted;
- **merge**: moved into another lesson of the graph (its fix an alternative there, its
  occurrences and counts added, its signatures pointing there), then gone;
- **reject**: deleted, with a reason kept beside its signature, so the same error is not
  learned again.

Who may decide: any agent of the project, as with the knowledge-graph tools that edit and
delete the team's lessons; the decision records who made it (``learned.reviewedBy``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from graph.learned import LearnedLessons, learned_of
from server.service.core.errors import InvalidInput
from server.service.core.identity import Identity
from server.service.graphs.graph_services import GraphServices

Action = Literal["accept", "edit", "merge", "reject"]
MAX_REASON_CHARS = 2000
SCOPE = "team"


class LearnedView(BaseModel):
    """One learned lesson as the inbox shows it."""

    name: str
    type: str
    message: str
    context: str
    observations: list[str]
    verification: list[str]
    explanation: str = ""
    files: list[str] = Field(default_factory=list)
    hunks: list[dict] = Field(default_factory=list)
    withheld: list[str] = Field(default_factory=list)  # files whose diffs were not kept
    session: str | None = None
    passedAt: str | None = None
    branch: str | None = None
    occurrences: int = 1
    alternatives: list[dict] = Field(default_factory=list)
    frequency: int = 1
    successRate: float = 1.0


def pending(gs: GraphServices, who: Identity, limit: int = 50) -> list[LearnedView]:
    """The project's learned lessons nobody reviewed yet, newest first."""
    out = []
    for lesson in LearnedLessons(gs.lessons).pending(who, SCOPE, limit):
        block = learned_of(lesson) or {}
        fix = block.get("fix") or {}
        ep = lesson.errorPattern
        out.append(
            LearnedView(
                name=lesson.name,
                type=ep.type,
                message=ep.message,
                context=ep.context,
                observations=lesson.observations,
                verification=[s.command for s in lesson.verificationSteps],
                explanation=fix.get("explanation") or "",
                files=fix.get("files") or [],
                hunks=fix.get("hunks") or [],
                withheld=fix.get("withheld") or [],
                session=block.get("session"),
                passedAt=block.get("passedAt"),
                branch=(block.get("repository") or {}).get("branch"),
                occurrences=int(block.get("occurrences") or 1),
                alternatives=block.get("alternatives") or [],
                frequency=lesson.metadata.frequency,
                successRate=lesson.metadata.successRate,
            )  # fmt: skip
        )
    return out


def decide(gs: GraphServices, who: Identity, name: str, action: str, *, reason: str | None = None,
           observations: list[str] | None = None, target: str | None = None) -> str:  # fmt: skip
    """Apply a reviewer's decision to the learned lesson ``name`` (module docstring); returns
    what was done."""
    learned = LearnedLessons(gs.lessons)
    if action == "accept":
        return learned.review(who, name, "accept", scope=SCOPE)
    if action == "edit":
        kept = [o.strip() for o in observations or [] if o.strip()]
        if not kept:
            raise InvalidInput("an edited lesson needs its fix in at least one line")
        return learned.review(who, name, "accept", observations=kept, scope=SCOPE)
    if action == "merge":
        if not target or not target.strip():
            raise InvalidInput("merge needs the lesson to merge into")
        return learned.merge(who, name, target.strip(), scope=SCOPE)
    if action == "reject":
        text = (reason or "").strip()
        if not text:
            raise InvalidInput("a rejection needs a reason")
        if len(text) > MAX_REASON_CHARS:
            raise InvalidInput(f"the reason is at most {MAX_REASON_CHARS} characters")
        return learned.review(who, name, "reject", reason=text, scope=SCOPE)
    raise InvalidInput(f"unknown action {action!r}: accept, edit, merge or reject")


def count_pending(gs: GraphServices, who: Identity) -> int:
    """How many learned lessons of the project wait for a review (the inbox badge)."""
    return gs.graph.reader.execute(
        "SELECT count(*) FROM lessons WHERE bucket=? AND extra LIKE ?",
        (who.bucket(SCOPE), '%"review": "pending"%'),
    ).fetchone()[0]


def lesson_names(gs: GraphServices, who: Identity, limit: int = 500) -> list[str]:
    """The names of the project's lessons (what a learned lesson may be merged into)."""
    rows = gs.graph.reader.execute(
        "SELECT name FROM lessons WHERE bucket=? ORDER BY name LIMIT ?", (who.bucket(SCOPE), limit)
    ).fetchall()
    return [r[0] for r in rows]
