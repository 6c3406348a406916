"""Pattern's memory tools: remember (and its task/learning/core shortcuts), update, commit,
forget, share, and the bulk variants. Thin adapters over :class:`MemoryService`."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from server.service.browsing import review
from server.service.core.models import (
    CITATIONS_HELP,
    SUPERSEDES_HELP,
    BulkForgetResult,
    BulkRememberResult,
    Citations,
    CommitInsightResult,
    ForgetResult,
    MemoryInput,
    MemoryMetadata,
    RememberResult,
    ShareLearningResult,
    UpdateMemoryResult,
)
from server.service.memories import bulk

from .toolset import IdempotencyKey, ScopeArg, ToolSet, call, session_of
from .update_tools import with_judgement

tools = ToolSet()


@tools("remember")
async def remember(
    content: Annotated[str, Field(description="The text to remember (≤ 32 KB).")],
    ctx: Context,
    scope: Annotated[
        ScopeArg,
        Field(
            description="private (you, this project), personal (you, all projects), team (all agents of this project), public (everyone)."
        ),
    ] = "private",
    category: Annotated[
        str | None,
        Field(
            description="private: recent|tasks|longterm; personal: core|longterm|recent|tasks; team/public: decisions|architecture|learnings. recent and tasks expire after 24 h."
        ),
    ] = None,
    metadata: Annotated[
        MemoryMetadata | None,
        Field(description="tags (≤10 × 50 chars), priority 1-3 (1 = high), source, relatedTo."),
    ] = None,
    citations: Annotated[Citations, Field(description=CITATIONS_HELP)] = None,
    supersedes: Annotated[list[str] | None, Field(description=SUPERSEDES_HELP)] = None,
    idempotencyKey: IdempotencyKey = None,
) -> RememberResult:
    """Store a memory with a scope and category. Returns its id, expiry, what it cites and
    any warnings (e.g. content that looks like a secret). Never store credentials. When the
    memory is about code, cite it (citations, or paths like a/b.py:120 in the text): recall
    then warns when that code changed. When it replaces what an older memory said (a changed
    decision or value), name that one in supersedes. If the result lists `candidates` (older
    memories that may state the same thing), call supersede for one this memory replaces; if
    both stay true, do nothing."""
    rt, who = session_of(ctx)
    item = MemoryInput(
        content=content, scope=scope, category=category, metadata=metadata, citations=citations,
        supersedes=supersedes,
    )  # fmt: skip
    result = await call(lambda: rt.service.remember(who, item, idempotencyKey))
    return await with_judgement(ctx, rt, who, result)


@tools("remember-task")
async def remember_task(
    content: Annotated[str, Field(description="The task, e.g. 'Fix the auth bug in login.ts'.")],
    ctx: Context,
    metadata: MemoryMetadata | None = None,
    idempotencyKey: IdempotencyKey = None,
) -> RememberResult:
    """Quickly note a task for yourself (private, category tasks, expires in 24 h;
    use commit-insight to keep it)."""
    rt, who = session_of(ctx)
    result = await call(lambda: rt.service.remember_task(who, content, metadata, idempotencyKey))
    return await with_judgement(ctx, rt, who, result)


@tools("remember-learning")
async def remember_learning(
    content: Annotated[str, Field(description="What you learned.")],
    ctx: Context,
    metadata: MemoryMetadata | None = None,
    idempotencyKey: IdempotencyKey = None,
) -> RememberResult:
    """Quickly note something you learned (private, category recent, expires in 24 h;
    use commit-insight to keep it or share-learning to give it to the team)."""
    rt, who = session_of(ctx)
    result = await call(
        lambda: rt.service.remember_learning(who, content, metadata, idempotencyKey)
    )
    return await with_judgement(ctx, rt, who, result)


@tools("commit-insight")
async def commit_insight(
    memoryId: Annotated[str, Field(description="Id of a recent or tasks memory of yours.")],
    ctx: Context,
    newContent: Annotated[str | None, Field(description="Optional improved text.")] = None,
    expectedRevision: Annotated[
        int | None,
        Field(
            ge=1,
            description="Only if the memory is still at this revision (else a [conflict] error with current_revision).",
        ),
    ] = None,
    idempotencyKey: IdempotencyKey = None,
) -> CommitInsightResult:
    """Promote a temporary memory (recent/tasks) to permanent longterm storage, optionally
    rewriting it."""
    rt, who = session_of(ctx)
    return await call(
        lambda: rt.service.commit_insight(
            who, memoryId, newContent, expectedRevision, idempotencyKey
        )
    )


@tools("update-memory")
async def update_memory(
    memoryId: Annotated[str, Field(description="Id of a memory you created.")],
    ctx: Context,
    content: Annotated[
        str | None, Field(description="New text (≤ 32 KB); omit to keep it.")
    ] = None,
    metadata: Annotated[
        MemoryMetadata | None,
        Field(
            description="Metadata fields to change (given keys replace the stored ones, null removes one; others are kept)."
        ),
    ] = None,
    expectedRevision: Annotated[
        int | None,
        Field(
            ge=1,
            description="The revision you read: if the memory changed since, your edit is merged with those changes (merged: true, parents); if both changed the same words, nothing is written and a [conflict] error carries current_revision and the merge attempt with markers.",
        ),
    ] = None,
    citations: Annotated[
        Citations,
        Field(
            description="Replace what the memory cites (anchored to the code as it is now): "
            "[{path, startLine?, endLine?}]; omit to keep its citations."
        ),
    ] = None,
    supersedes: Annotated[list[str] | None, Field(description=SUPERSEDES_HELP)] = None,
    idempotencyKey: IdempotencyKey = None,
) -> UpdateMemoryResult:
    """Change the content, metadata and/or citations of one of your memories (only its
    creator may). Returns the new revision; pass expectedRevision to never overwrite someone
    else's change: an edit made from an older revision is merged three-way with what changed
    since (text by words, tags as a set, other metadata per key); only edits to the same words
    conflict. A new text may list `candidates` (older memories that may state the same
    thing): call supersede for one this memory replaces; if both stay true, do nothing."""
    rt, who = session_of(ctx)
    result = await call(
        lambda: rt.service.update_memory(
            who,
            memoryId,
            content,
            metadata,
            expectedRevision,
            idempotencyKey,
            citations,
            supersedes,
        )
    )
    return await with_judgement(ctx, rt, who, result)


@tools("core-memory")
async def core_memory(
    content: Annotated[str, Field(description="An identity-defining statement.")],
    ctx: Context,
    metadata: MemoryMetadata | None = None,
    idempotencyKey: IdempotencyKey = None,
) -> RememberResult:
    """Store an identity-defining memory (personal scope, category core; follows you into
    every project; max 100; sub-agents never see it)."""
    rt, who = session_of(ctx)
    result = await call(lambda: rt.service.core_memory(who, content, metadata, idempotencyKey))
    return await with_judgement(ctx, rt, who, result)


@tools("forget")
async def forget(
    memoryId: Annotated[str, Field(description="Id of the memory to delete.")],
    ctx: Context,
    force: Annotated[bool, Field(description="Required to delete a core memory.")] = False,
    idempotencyKey: IdempotencyKey = None,
) -> ForgetResult:
    """Delete a memory by id. Only its creator may delete a team/public memory; core
    memories need force=true."""
    rt, who = session_of(ctx)
    return await call(lambda: rt.service.forget(who, memoryId, force, idempotencyKey))


@tools("share-learning")
async def share_learning(
    memoryId: Annotated[str, Field(description="Id of your private or personal memory.")],
    ctx: Context,
    category: Annotated[
        Literal["decisions", "architecture", "learnings"], Field(description="Team category.")
    ] = "learnings",
    keepOriginal: Annotated[
        bool, Field(description="Keep the private copy (default: move it).")
    ] = False,
    idempotencyKey: IdempotencyKey = None,
) -> ShareLearningResult:
    """Share one of your memories with every agent of this project (team scope). Review it
    for sensitive content first: it cannot be unshared, only deleted. Where team review is
    on, it is proposed instead (status "proposed"): a reviewer approves or rejects it."""
    rt, who = session_of(ctx)
    policy = review.review_policy(rt)
    return await call(
        lambda: review.share_learning(
            rt.service, policy, who, memoryId, category, keepOriginal, idempotencyKey
        )
    )


@tools("remember-bulk")
async def remember_bulk(
    memories: Annotated[
        list[MemoryInput],
        Field(description="Up to 1000 memories, each like `remember`'s arguments."),
    ],
    ctx: Context,
    stopOnError: bool = False,
    validate: Annotated[
        bool,
        Field(description="Validate all first and store nothing if any is invalid (default)."),
    ] = True,
    idempotencyKey: IdempotencyKey = None,
) -> BulkRememberResult:
    """Store many memories at once; errors are reported with their index."""
    rt, who = session_of(ctx)
    return await call(
        lambda: bulk.remember_bulk(rt.service, who, memories, stopOnError, validate, idempotencyKey)
    )


@tools("forget-bulk")
async def forget_bulk(
    memoryIds: Annotated[list[str], Field(description="Ids to delete (up to 1000).")],
    ctx: Context,
    stopOnError: bool = False,
    force: Annotated[bool, Field(description="Allow deleting core memories.")] = False,
    idempotencyKey: IdempotencyKey = None,
) -> BulkForgetResult:
    """Delete many memories by id; the rules of `forget` apply to each."""
    rt, who = session_of(ctx)
    return await call(
        lambda: bulk.forget_bulk(rt.service, who, memoryIds, stopOnError, force, idempotencyKey)
    )
