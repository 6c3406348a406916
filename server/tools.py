"""Pattern's MCP tools and ``recall``: thin adapters over ``server.service``.

Each tool validates its arguments with pydantic (the input schema), runs the service call in a
worker thread, and turns a ``PatternError`` into a tool error whose text starts with its code,
e.g. ``[access_denied] only the agent that created memory … may delete it``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Literal, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from retrieval.errors import PatternError

from .service import bulk, context, maintenance, recall, transfer
from .service.identity import Identity
from .service.models import (
    BulkForgetResult,
    BulkRememberResult,
    CleanupResult,
    CommitInsightResult,
    ExportResult,
    ForgetResult,
    HealthResult,
    ImportResult,
    MemoryInput,
    MemoryMetadata,
    RecallContextInput,
    RecallContextResult,
    RecallInput,
    RecallResult,
    RememberResult,
    ShareLearningResult,
    UpdateMemoryResult,
)
from .service.runtime import Runtime

T = TypeVar("T")
ScopeArg = Literal["private", "personal", "team", "public"]
IdempotencyKey = Annotated[
    str | None,
    Field(
        max_length=200,
        description="Any unique string for this write (e.g. a UUID). A retry with the same key "
        "returns the first call's result and writes nothing again (keys last 24 h).",
    ),
]


def runtime_of(ctx: Context) -> Runtime:
    return ctx.request_context.lifespan_context


def identity_of(ctx: Context) -> Identity:
    """The caller: from the authenticated HTTP connection (daemon), else the process
    environment (stdio). Never from tool arguments."""
    request = ctx.request_context.request
    if request is not None:
        state = request.scope.get("state") or {}
        who = state.get("pattern_identity")
        if who is None:  # the auth middleware always sets it; refuse rather than guess
            raise ToolError("[access_denied] unauthenticated request")
        return who
    return runtime_of(ctx).identity


def session_of(ctx: Context) -> tuple[Runtime, Identity]:
    return runtime_of(ctx), identity_of(ctx)


async def call(fn: Callable[[], T]) -> T:
    """Run a service call off the event loop; PatternError -> ToolError with code and data."""
    try:
        return await anyio.to_thread.run_sync(fn)
    except PatternError as exc:
        detail = f" {json.dumps(exc.data, default=str)}" if exc.data else ""
        raise ToolError(f"[{exc.code}] {exc.message}{detail}") from exc


def register(server: MCPServer) -> None:  # noqa: C901 - one adapter per tool
    @server.tool(name="remember")
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
        idempotencyKey: IdempotencyKey = None,
    ) -> RememberResult:
        """Store a memory with a scope and category. Returns its id, expiry and any warnings
        (e.g. content that looks like a secret). Never store credentials."""
        rt, who = session_of(ctx)
        item = MemoryInput(content=content, scope=scope, category=category, metadata=metadata)
        return await call(lambda: rt.service.remember(who, item, idempotencyKey))

    @server.tool(name="remember-task")
    async def remember_task(
        content: Annotated[
            str, Field(description="The task, e.g. 'Fix the auth bug in login.ts'.")
        ],
        ctx: Context,
        metadata: MemoryMetadata | None = None,
        idempotencyKey: IdempotencyKey = None,
    ) -> RememberResult:
        """Quickly note a task for yourself (private, category tasks, expires in 24 h;
        use commit-insight to keep it)."""
        rt, who = session_of(ctx)
        return await call(lambda: rt.service.remember_task(who, content, metadata, idempotencyKey))

    @server.tool(name="remember-learning")
    async def remember_learning(
        content: Annotated[str, Field(description="What you learned.")],
        ctx: Context,
        metadata: MemoryMetadata | None = None,
        idempotencyKey: IdempotencyKey = None,
    ) -> RememberResult:
        """Quickly note something you learned (private, category recent, expires in 24 h;
        use commit-insight to keep it or share-learning to give it to the team)."""
        rt, who = session_of(ctx)
        return await call(
            lambda: rt.service.remember_learning(who, content, metadata, idempotencyKey)
        )

    @server.tool(name="commit-insight")
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

    @server.tool(name="update-memory")
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
                description="The revision you read: if the memory changed since, nothing is written and a [conflict] error carries current_revision.",
            ),
        ] = None,
        idempotencyKey: IdempotencyKey = None,
    ) -> UpdateMemoryResult:
        """Change the content and/or metadata of one of your memories (only its creator may).
        Returns the new revision; pass expectedRevision to never overwrite someone else's
        change (optimistic concurrency)."""
        rt, who = session_of(ctx)
        return await call(
            lambda: rt.service.update_memory(
                who, memoryId, content, metadata, expectedRevision, idempotencyKey
            )
        )

    @server.tool(name="core-memory")
    async def core_memory(
        content: Annotated[str, Field(description="An identity-defining statement.")],
        ctx: Context,
        metadata: MemoryMetadata | None = None,
        idempotencyKey: IdempotencyKey = None,
    ) -> RememberResult:
        """Store an identity-defining memory (personal scope, category core; follows you into
        every project; max 100; sub-agents never see it)."""
        rt, who = session_of(ctx)
        return await call(lambda: rt.service.core_memory(who, content, metadata, idempotencyKey))

    @server.tool(name="forget")
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

    @server.tool(name="recall-context")
    async def recall_context(
        ctx: Context,
        scopes: list[ScopeArg] | None = None,
        categories: list[str] | None = None,
        limit: Annotated[
            int, Field(ge=1, le=200, description="Max memories (default 50, max 200).")
        ] = 50,
        since: Annotated[
            datetime | None, Field(description="Only memories updated after this (ISO 8601).")
        ] = None,
        tags: Annotated[
            list[str] | None, Field(description="AND: memories must have every tag.")
        ] = None,
        minPriority: Annotated[int | None, Field(ge=1, le=3)] = None,
        maxPriority: Annotated[int | None, Field(ge=1, le=3)] = None,
        createdAfter: datetime | None = None,
        createdBefore: datetime | None = None,
        updatedAfter: datetime | None = None,
        updatedBefore: datetime | None = None,
        search: Annotated[
            str | None,
            Field(
                description="Rank by relevance to this text (meaning and keywords), not substring."
            ),
        ] = None,
    ) -> RecallContextResult:
        """Load your memory at session start: memories grouped by scope (private, personal,
        team, public), a ≤4 KB summary of the most important ones, and counts (including
        expired). All filters are AND-ed. Without `search`, ordered by category (core first),
        priority, then recency."""
        rt, who = session_of(ctx)
        args = RecallContextInput(
            scopes=scopes, categories=categories, limit=limit, since=since, tags=tags,
            minPriority=minPriority, maxPriority=maxPriority, createdAfter=createdAfter,
            createdBefore=createdBefore, updatedAfter=updatedAfter, updatedBefore=updatedBefore,
            search=search,
        )  # fmt: skip
        return await call(lambda: context.recall_context(rt.service, who, args))

    @server.tool(name="share-learning")
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
        from .review_tools import review_policy
        from .service import review

        rt, who = session_of(ctx)
        return await call(
            lambda: review.share_learning(
                rt.service,
                review_policy(rt),
                who,
                memoryId,
                category,
                keepOriginal,
                idempotencyKey,
            )  # fmt: skip
        )

    @server.tool(name="cleanup")
    async def cleanup(
        ctx: Context,
        expireOnly: Annotated[
            bool, Field(description="Only delete expired memories; skip limit enforcement.")
        ] = False,
    ) -> CleanupResult:
        """Maintenance: delete your expired (24 h) memories and trim recent/tasks to their limits."""
        rt, who = session_of(ctx)
        return await call(lambda: maintenance.cleanup(rt.service, who, expireOnly))

    @server.tool(name="export-memories")
    async def export_memories(
        ctx: Context,
        outputPath: Annotated[
            str | None,
            Field(
                description="File to write (inside the allowed directories); default memories-backup-TIMESTAMP.json."
            ),
        ] = None,
        scope: ScopeArg | None = None,
        category: str | None = None,
        since: datetime | None = None,
        includeExpired: bool = False,
    ) -> ExportResult:
        """Export the memories you can see to a JSON file (unencrypted: keep it safe)."""
        rt, who = session_of(ctx)
        return await call(
            lambda: transfer.export_memories(
                rt.service,
                who,
                rt.settings.allowed_dirs,
                outputPath,
                scope,
                category,
                since,
                includeExpired,
            )  # fmt: skip
        )

    @server.tool(name="import-memories")
    async def import_memories(
        inputPath: Annotated[str, Field(description="A file written by export-memories.")],
        ctx: Context,
        overwriteExisting: bool = False,
        skipInvalid: Annotated[
            bool,
            Field(
                description="Skip invalid entries and report them (default); false = stop and import nothing."
            ),
        ] = True,
    ) -> ImportResult:
        """Import memories from an export file; they become yours, in this project."""
        rt, who = session_of(ctx)
        return await call(
            lambda: transfer.import_memories(
                rt.service,
                who,
                rt.settings.allowed_dirs,
                inputPath,
                overwriteExisting,
                skipInvalid,
            )  # fmt: skip
        )

    @server.tool(name="remember-bulk")
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
            lambda: bulk.remember_bulk(
                rt.service, who, memories, stopOnError, validate, idempotencyKey
            )
        )

    @server.tool(name="forget-bulk")
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

    @server.tool(name="pattern_health")
    async def pattern_health(ctx: Context) -> HealthResult:
        """Server health: store, embedding model readiness, ranking mode, your identity."""
        rt, who = session_of(ctx)
        return await call(lambda: maintenance.health(rt.service, who, rt.model_error))

    @server.tool(name="recall")
    async def recall_tool(
        query: Annotated[
            str, Field(min_length=1, description="What you need to know, in plain words.")
        ],
        ctx: Context,
        budget: Annotated[
            int, Field(ge=50, le=200_000, description="Size of the returned context block.")
        ] = 1500,
        unit: Literal["tokens", "chars"] = "tokens",
        kinds: Annotated[
            list[Literal["memory", "observation", "lesson", "chunk"]] | None,
            Field(description="Default: all kinds."),
        ] = None,
        scopes: list[ScopeArg] | None = None,
        categories: list[str] | None = None,
        tags: list[str] | None = None,
        minPriority: Annotated[int | None, Field(ge=1, le=3)] = None,
        maxPriority: Annotated[int | None, Field(ge=1, le=3)] = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
    ) -> RecallResult:
        """Find what you know about a topic: the most relevant memories, knowledge-graph
        observations, lessons and workspace file chunks you can see, ranked by meaning and
        keywords, near-duplicates removed, packed into `budget`. Use `text` as context."""
        rt, who = session_of(ctx)
        args = RecallInput(
            query=query, budget=budget, unit=unit, kinds=kinds, scopes=scopes,
            categories=categories, tags=tags, minPriority=minPriority, maxPriority=maxPriority,
            limit=limit,
        )  # fmt: skip
        return await call(lambda: recall.recall(rt.service, who, args))
