"""Review inbox tools: ``list-proposals`` and ``review-proposal``, thin adapters over
``server.service.browsing.review`` (``share-learning``, in ``memories``, proposes through it too)."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from server.service.browsing.review import ProposalPage, ReviewResult, list_proposals, review_policy
from server.service.browsing.review import review_proposal as review
from server.service.recalling import withheld

from .toolset import IdempotencyKey, ToolSet, call, session_of

tools = ToolSet()


@tools("list-proposals")
async def list_proposals_tool(
    ctx: Context,
    status: Annotated[
        Literal["pending", "approved", "rejected", "withdrawn", "all"],
        Field(description="Which proposals (default pending)."),
    ] = "pending",
    cursor: Annotated[
        str | None, Field(description="nextCursor of the previous page; omit at first.")
    ] = None,
    limit: Annotated[int, Field(ge=1, le=100, description="Per page (default 20).")] = 20,
    includeSuspicious: Annotated[
        bool,
        Field(
            description="Show the text of proposals flagged as possible instructions to the "
            "model (marked `suspicious` either way; listed without it otherwise)."
        ),
    ] = False,
) -> ProposalPage:
    """The review inbox of this project, newest first. Reviewers see every proposal;
    other agents see their own (e.g. to read why one was rejected). With team review on
    (PATTERN_TEAM_REVIEW), share-learning proposes a memory here instead of moving it."""
    rt, who = session_of(ctx)
    return await call(
        lambda: withheld.proposals(
            list_proposals(rt.service, review_policy(rt), who, status, cursor, limit),
            includeSuspicious,
        )
    )


@tools("review-proposal")
async def review_proposal(
    proposalId: Annotated[str, Field(description="The proposal (from list-proposals).")],
    decision: Annotated[
        Literal["approve", "reject"],
        Field(
            description="approve: the memory moves to the team scope; reject: it stays "
            "private, with your reason."
        ),
    ],  # fmt: skip
    ctx: Context,
    reason: Annotated[
        str | None, Field(max_length=2000, description="Why (required to reject).")
    ] = None,
    content: Annotated[
        str | None,
        Field(description="Approve an edited text instead (edit, then approve)."),
    ] = None,
    category: Annotated[
        Literal["decisions", "architecture", "learnings"] | None,
        Field(description="Team category (default: the proposed one)."),
    ] = None,
    expectedRevision: Annotated[
        int | None,
        Field(
            ge=1,
            description="The revision you read in list-proposals: if the memory changed "
            "since, nothing is written and a [conflict] error carries the current text.",
        ),
    ] = None,
    idempotencyKey: IdempotencyKey = None,
) -> ReviewResult:
    """Review a proposed team memory (reviewers only: the store owner and agents whose
    token was made with --reviewer; not your own proposal). The approved memory keeps its
    author and records its provenance (proposer, reviewer, time) in metadata.review."""
    rt, who = session_of(ctx)
    return await call(
        lambda: withheld.reviewed(
            review(
                rt.service,
                review_policy(rt),
                who,
                proposalId,
                decision,
                reason=reason,
                content=content,
                category=category,
                expected_revision=expectedRevision,
                idempotency_key=idempotencyKey,
            )
        )  # fmt: skip
    )
