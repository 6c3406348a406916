"""Lesson tools (the lessons fork's names and arguments): an error, its fix, its verification
steps and how often the fix worked; ``find_similar_errors`` ranks by meaning and stack-trace
shape. Thin adapters over ``graph/lessons.py`` (via ``server.service.graphs.graph_services``)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import Field

from graph.lesson_models import (
    CreateLessonResult,
    ErrorQuery,
    LessonInput,
    LessonSearchResult,
    LessonSuccessResult,
)
from server.service.core.models import Citations

from .graph_tools import GraphScope, IncludeSuspicious, services
from .toolset import ToolSet, call

tools = ToolSet()


@tools("create_lesson")
async def create_lesson(
    lesson: Annotated[
        LessonInput,
        Field(
            description="name, entityType='lesson', observations, errorPattern{type,message,context,stackTrace?}, metadata{severity,environment,frequency,successRate}, verificationSteps[{command,expectedOutput,successIndicators}]."
        ),
    ],
    ctx: Context,
    scope: GraphScope = "team",
    citations: Annotated[
        Citations,
        Field(
            description="The code the fix is about: [{path, startLine?, endLine?}] relative to "
            "your project root. find_similar_errors then says when that code changed since. "
            "Paths in the observations and error context (a/b.py:120) are cited too."
        ),
    ] = None,
) -> CreateLessonResult:
    """Record a lesson after you fixed an error: the error pattern (include the stack trace
    when you have one), what you learned (observations), how to verify the fix, and the code
    it is about (citations). Every required field is validated; createdAt/updatedAt are set
    for you."""
    s, who = services(ctx)
    return await call(lambda: s.lessons.create_lesson(who, lesson, scope, citations=citations))


@tools("find_similar_errors")
async def find_similar_errors(
    errorPattern: Annotated[
        ErrorQuery,
        Field(description="{type, message, context, stackTrace?} of the error you are facing."),
    ],
    ctx: Context,
    limit: Annotated[int, Field(ge=1, le=50, description="Max lessons (default 10).")] = 10,
    scope: GraphScope = "team",
    includeSuspicious: IncludeSuspicious = False,
) -> LessonSearchResult:
    """Before debugging an error, look for lessons about similar ones: fuzzy match on the
    message, exception classes and stack frames; ordered by relevance × (0.7 + 0.3 ×
    successRate), so fixes that worked come first (× 0.9 when the code a lesson cites changed
    since: its citations say which). Each lesson has its resolution notes, verification
    steps and how often its fix worked (`uses`); a lesson learned once and not reviewed comes
    without its diff. Report the outcome with update_lesson_success."""
    s, who = services(ctx)
    return await call(
        lambda: s.lessons.find_similar_errors(
            who, errorPattern, scope, limit, include_suspicious=includeSuspicious
        )
    )


@tools("update_lesson_success")
async def update_lesson_success(
    lessonName: Annotated[str, Field(min_length=1, description="The lesson you applied.")],
    success: Annotated[bool, Field(description="Did its solution work this time?")],
    ctx: Context,
    scope: GraphScope = "team",
) -> LessonSuccessResult:
    """Report whether a lesson's fix worked: updates its success rate (running average),
    frequency and updatedAt, which reorders future results."""
    s, who = services(ctx)
    return await call(lambda: s.lessons.update_lesson_success(who, lessonName, success, scope))


@tools("get_lesson_recommendations")
async def get_lesson_recommendations(
    context: Annotated[
        str, Field(min_length=1, description="What you are doing or facing, in plain words.")
    ],
    ctx: Context,
    limit: Annotated[int, Field(ge=1, le=50, description="Max lessons (default 10).")] = 10,
    scope: GraphScope = "team",
    includeSuspicious: IncludeSuspicious = False,
) -> LessonSearchResult:
    """Lessons relevant to your current situation (error types, messages, contexts and
    notes, by meaning and keywords), with full resolution details and verification steps,
    ordered by relevance and success rate."""
    s, who = services(ctx)
    return await call(
        lambda: s.lessons.get_lesson_recommendations(
            who, context, scope, limit, include_suspicious=includeSuspicious
        )
    )
