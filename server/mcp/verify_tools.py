"""``verify-memories``: your memories whose cited code changed, with diffs, and what to do about
each (confirm, update, forget). A thin adapter over ``server.service.recalling.verify``."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from server.service.recalling import verify as service
from server.service.recalling import withheld
from server.service.recalling.verify import VerifyResult

from .toolset import IdempotencyKey, ToolSet, call, session_of

tools = ToolSet()


@tools("verify-memories")
async def verify_memories(
    ctx: Context,
    action: Annotated[
        Literal["list", "confirm", "update", "forget"],
        Field(
            description="list (default): your memories whose cited code changed or was "
            "deleted, each with a diff of the cited lines; confirm: the memory is still right, "
            "re-anchor its citations to the current lines; update: replace its content (and "
            "re-anchor); forget: delete it."
        ),
    ] = "list",
    memoryId: Annotated[
        str | None, Field(description="The memory to confirm, update or forget.")
    ] = None,
    content: Annotated[
        str | None, Field(description="update: the corrected text (≤ 32 KB).")
    ] = None,
    expectedRevision: Annotated[
        int | None,
        Field(ge=1, description="update: only if the memory is still at this revision."),
    ] = None,
    includeMoved: Annotated[
        bool,
        Field(description="list: also memories whose cited lines only moved (same code)."),
    ] = False,
    limit: Annotated[int, Field(ge=1, le=500, description="list: most memories.")] = 50,
    force: Annotated[bool, Field(description="forget: required for a core memory.")] = False,
    idempotencyKey: IdempotencyKey = None,
    includeSuspicious: Annotated[
        bool,
        Field(
            description="Show the text of memories flagged as possible instructions to the "
            "model (marked `suspicious` either way; listed without it otherwise)."
        ),
    ] = False,
) -> VerifyResult:
    """Keep your memories true to the code they cite. Call with no arguments to list your
    stale memories (the code they cite changed or was deleted since they were written), each
    with a unified diff of the cited lines then and now. Read the diff, then for each: confirm
    (still right: re-anchor to the current lines), update (give the corrected content) or
    forget (delete it)."""
    rt, who = session_of(ctx)
    return await call(
        lambda: withheld.stale_memories(rt.service, service.verify(
            rt.service, who, action, memoryId, content=content,
            expected_revision=expectedRevision, include_moved=includeMoved, limit=limit,
            force=force, idempotency_key=idempotencyKey,
        ), includeSuspicious)
    )  # fmt: skip
