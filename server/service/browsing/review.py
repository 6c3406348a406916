"""The review inbox: with team review on, ``share-learning`` proposes a memory for the team
instead of moving it, and a reviewer approves it (it moves to the team scope with its
provenance), edits then approves it, or rejects it (it stays private, with the reason).

- **Where review is on**: ``PATTERN_TEAM_REVIEW`` = ``on`` (every project), ``off`` (default),
  or a comma-separated list of project ids (review only there).
- **Reviewers**: the store owner (the daemon's own agent identity, ``Runtime.identity``) and the
  agents of active tokens made with ``pattern-memory token create --reviewer``. A token reviewer
  does not review its own proposals; the owner may (the review protects the team's store for
  the owner). Sub-agents never review.
- **Durable**: one ``proposals`` row per proposal (schema v7). Every state change also rewrites
  the memory's metadata ``review`` (``{status, proposalId, …}``) in the same transaction, so the
  proposer sees the outcome through its own tools and the change stream carries it as an update
  of that memory; an approval is an insert of the team memory (and a delete of the private one
  unless it was kept).
- **What the reviewer approves**: a pending proposal shows the memory's current text and
  revision; ``expectedRevision`` makes an approval apply to exactly that text (else Conflict
  with the current text), and an edited text replaces it (the secret policy screens it as any
  write). The team memory keeps its proposer as author (only the author deletes a team memory)
  and carries ``review: {status, proposalId, proposer, reviewer, reviewedAt, edited}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from retrieval.records import Record, Scope, new_id
from retrieval.storage.store import parse_ts, ts
from server.service.core import scopes as rules
from server.service.core.errors import AccessDenied, Conflict, InvalidInput, NotFound
from server.service.core.identity import Identity
from server.service.core.models import ShareLearningResult
from server.service.memories import idempotency as idem
from server.service.memories.memory import MemoryService

ProposalStatus = Literal["pending", "approved", "rejected", "withdrawn"]
Decision = Literal["approve", "reject"]
STATUSES = ("pending", "approved", "rejected", "withdrawn")
MAX_REASON_CHARS = 2000
DEFAULT_LIMIT = 20
MAX_LIMIT = 100
_ON = ("on", "all", "1", "true", "yes")
_OFF = ("", "off", "0", "false", "no", "none")


class Proposal(BaseModel):
    id: str
    projectId: str
    memoryId: str
    proposer: str = Field(description="The agent that proposed (and wrote) the memory.")
    category: str = Field(description="The team category it would go to.")
    keepOriginal: bool
    content: str = Field(
        description="While pending: the memory's current text. After review: the text that "
        "was approved (edited or not) or rejected."
    )
    revision: int = Field(
        description="The memory's revision this text is from: pass it as expectedRevision to "
        "approve exactly this text."
    )
    status: ProposalStatus
    reason: str | None = Field(default=None, description="Why it was rejected (or withdrawn).")
    reviewer: str | None = None
    reviewedAt: datetime | None = None
    sharedMemoryId: str | None = Field(default=None, description="The team memory (approved).")
    edited: bool = Field(default=False, description="The reviewer changed the text.")
    createdAt: datetime
    suspicious: str | None = Field(
        default=None, description="The memory's `suspicious` flag, if the write policy set one."
    )


class ProposalPage(BaseModel):
    proposals: list[Proposal]
    nextCursor: str | None = Field(description="Pass as cursor for the next page (null: last).")
    canReview: bool = Field(description="You are a reviewer of this project.")
    reviewEnabled: bool = Field(description="PATTERN_TEAM_REVIEW is on for this project.")


class ReviewResult(BaseModel):
    proposal: Proposal
    memoryId: str | None = Field(
        default=None, description="Approved: the new team memory. Rejected: the private memory."
    )
    warnings: list[str] = Field(default_factory=list)


def parse_setting(value: str | None) -> bool | frozenset[str]:
    """``PATTERN_TEAM_REVIEW``: True (every project), False, or the set of project ids."""
    v = (value or "").strip()
    if v.lower() in _OFF:
        return False
    if v.lower() in _ON:
        return True
    return frozenset(p.strip() for p in v.split(",") if p.strip())


@dataclass(frozen=True)
class ReviewPolicy:
    """Where review is on and who reviews (built per call by :func:`review_policy`: token
    changes apply at once)."""

    setting: str = ""
    owner_agent: str | None = None
    reviewer_agents: Callable[[], Iterable[str]] = field(default=lambda: ())

    def enabled(self, project_id: str) -> bool:
        on = parse_setting(self.setting)
        return on if isinstance(on, bool) else project_id in on

    def is_owner(self, who: Identity) -> bool:
        return not who.is_subagent and who.agent_id == self.owner_agent

    def is_reviewer(self, who: Identity) -> bool:
        if who.is_subagent:
            return False
        return self.is_owner(who) or who.agent_id in set(self.reviewer_agents())

    def check_may_review(self, who: Identity, proposer: str) -> None:
        if not self.is_reviewer(who):
            raise AccessDenied(
                f"agent {who.agent_id} is not a reviewer (reviewers: the store owner and the "
                "holders of tokens made with `pattern-memory token create --reviewer`)",
                agentId=who.agent_id,
            )
        if proposer == who.agent_id and not self.is_owner(who):
            raise AccessDenied(
                "a reviewer does not review its own proposal; another reviewer must",
                agentId=who.agent_id,
            )


def review_policy(rt) -> ReviewPolicy:
    """The review policy of a runtime: where team review is on (``PATTERN_TEAM_REVIEW``) and
    who reviews: the store owner (the runtime's own identity) and the agents of active
    ``--reviewer`` tokens, read when asked from the store's tokens (``tokens.json``, or the
    cluster's table in PostgreSQL mode)."""
    return ReviewPolicy(rt.settings.team_review, rt.identity.agent_id, rt.tokens.reviewer_agents)


# ---------------------------------------------------------------------- rows
_SELECT = (
    "SELECT p.*, r.content AS cur_content, r.revision AS cur_revision, "
    "r.metadata AS cur_metadata FROM proposals p LEFT JOIN records r ON r.id = p.memory_id"
)


def _proposal(row) -> Proposal:
    live = row["status"] == "pending" and row["cur_content"] is not None
    meta = json.loads(row["cur_metadata"]) if row["cur_metadata"] else {}
    flag = meta.get("suspicious")
    return Proposal(
        id=row["id"], projectId=row["project_id"], memoryId=row["memory_id"],
        proposer=row["proposer"], category=row["category"],
        keepOriginal=bool(row["keep_original"]),
        content=row["cur_content"] if live else row["content"],
        revision=row["cur_revision"] if live else row["revision"],
        status=row["status"], reason=row["reason"], reviewer=row["reviewer"],
        reviewedAt=parse_ts(row["reviewed_at"]), sharedMemoryId=row["shared_memory_id"],
        edited=bool(row["edited"]), createdAt=parse_ts(row["created_at"]),
        suspicious=str(flag) if flag else None,
    )  # fmt: skip


def get_proposal(
    svc: MemoryService, policy: ReviewPolicy, who: Identity, proposal_id: str
) -> Proposal:
    """A proposal of the caller's project that the caller may see (reviewers: all of them;
    others: their own). Anything else is NotFound."""
    row = svc.store.reader.execute(f"{_SELECT} WHERE p.id = ?", (proposal_id,)).fetchone()
    if (
        row is None
        or row["project_id"] != who.project_id
        or not (policy.is_reviewer(who) or row["proposer"] == who.agent_id)
    ):
        raise NotFound(f"proposal {proposal_id} not found", proposalId=proposal_id)
    return _proposal(row)


def pending_for_memory(svc: MemoryService, memory_id: str) -> str | None:
    row = svc.store.reader.execute(
        "SELECT id FROM proposals WHERE memory_id=? AND status='pending'", (memory_id,)
    ).fetchone()
    return row[0] if row else None


def proposals_for_memory(svc: MemoryService, who: Identity, memory_id: str) -> list[Proposal]:
    """Every proposal of a memory the caller can see (its history on the memory's page)."""
    svc.get_visible(who, memory_id)
    rows = svc.store.reader.execute(
        f"{_SELECT} WHERE p.memory_id = ? ORDER BY p.created_at DESC", (memory_id,)
    ).fetchall()
    return [_proposal(r) for r in rows]


def count_pending(svc: MemoryService, policy: ReviewPolicy, who: Identity) -> int:
    sql = "SELECT count(*) FROM proposals WHERE project_id=? AND status='pending'"
    params: list = [who.project_id]
    if not policy.is_reviewer(who):
        sql += " AND proposer=?"
        params.append(who.agent_id)
    return svc.store.reader.execute(sql, params).fetchone()[0]


def list_proposals(
    svc: MemoryService,
    policy: ReviewPolicy,
    who: Identity,
    status: str = "pending",
    cursor: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> ProposalPage:
    """Proposals of the caller's project, newest first: every one for a reviewer, the
    caller's own otherwise. ``status``: pending (default), approved, rejected, withdrawn, all."""
    if status != "all" and status not in STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(STATUSES)} or all, got {status!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}, got {limit!r}")
    reviewer = policy.is_reviewer(who)
    conds, params = ["p.project_id = ?"], [who.project_id]
    if status != "all":
        conds.append("p.status = ?")
        params.append(status)
    if not reviewer:
        conds.append("p.proposer = ?")
        params.append(who.agent_id)
    if cursor:
        at, _, pid = cursor.partition("|")
        if not pid:
            raise InvalidInput(f"invalid cursor {cursor!r}: pass the nextCursor of a page")
        conds.append("(p.created_at, p.id) < (?, ?)")
        params += [at, pid]
    rows = svc.store.reader.execute(
        f"{_SELECT} WHERE {' AND '.join(conds)} ORDER BY p.created_at DESC, p.id DESC LIMIT ?",
        [*params, limit + 1],
    ).fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    return ProposalPage(
        proposals=[_proposal(r) for r in rows],
        nextCursor=f"{rows[-1]['created_at']}|{rows[-1]['id']}" if more else None,
        canReview=reviewer,
        reviewEnabled=policy.enabled(who.project_id),
    )


# ---------------------------------------------------------------------- proposing
def share_learning(
    svc: MemoryService,
    policy: ReviewPolicy,
    who: Identity,
    memory_id: str,
    category: str = "learnings",
    keep_original: bool = False,
    idempotency_key: str | None = None,
) -> ShareLearningResult:
    """``share-learning`` under the review policy: moves the memory to the team scope, or,
    where team review is on, proposes it (status ``proposed``)."""
    if not policy.enabled(who.project_id):
        return svc.share_learning(who, memory_id, category, keep_original, idempotency_key)
    request = {"memoryId": memory_id, "category": category, "keepOriginal": keep_original}
    return svc.once(
        who, idempotency_key, "share-learning", request, ShareLearningResult,
        lambda claim: svc.retrying(
            lambda: _propose(svc, who, memory_id, category, keep_original, claim)
        ),
    )  # fmt: skip


def _propose(
    svc: MemoryService,
    who: Identity,
    memory_id: str,
    category: str,
    keep_original: bool,
    claim: idem.Claim | None,
) -> ShareLearningResult:
    rec = svc.shareable(who, memory_id, category)
    pending = pending_for_memory(svc, rec.id)
    if pending is not None:  # proposed before: the same proposal, nothing new
        return ShareLearningResult(
            memoryId=rec.id, originalId=rec.id, originalKept=True, category=category,
            status="proposed", proposalId=pending,
        )  # fmt: skip
    now = svc.clock()
    pid = new_id()
    review = {"status": "pending", "proposalId": pid, "category": category, "proposedAt": ts(now)}
    marked = rec.model_copy(
        update={"metadata": {**rec.metadata, "review": review}, "revision": rec.revision + 1}
    )
    result = ShareLearningResult(
        memoryId=rec.id, originalId=rec.id, originalKept=True, category=category,
        status="proposed", proposalId=pid,
    )  # fmt: skip

    def insert(conn) -> None:
        conn.execute(
            "INSERT INTO proposals(id, project_id, memory_id, proposer, category, keep_original, "
            "content, revision, status, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (pid, rec.project_id, rec.id, who.agent_id, category, int(keep_original),
             rec.content, rec.revision + 1, "pending", ts(now)),
        )  # fmt: skip

    svc.engine.apply(
        replace=[marked],
        check=svc.checks(svc.bind(claim, result), svc.revision_check(rec.id, rec.revision, None)),
        extra=insert,
    )
    return result


# ---------------------------------------------------------------------- reviewing
def review_proposal(
    svc: MemoryService,
    policy: ReviewPolicy,
    who: Identity,
    proposal_id: str,
    decision: str,
    *,
    reason: str | None = None,
    content: str | None = None,
    category: str | None = None,
    expected_revision: int | None = None,
    idempotency_key: str | None = None,
) -> ReviewResult:
    """Approve (optionally with an edited ``content`` / another ``category``) or reject (with
    a ``reason``) a pending proposal. ``expected_revision``: the memory revision the reviewer
    read; if the memory changed since, nothing is written (Conflict with the current text)."""
    if decision not in ("approve", "reject"):
        raise InvalidInput(f"decision must be approve or reject, got {decision!r}")
    request = {"proposalId": proposal_id, "decision": decision, "reason": reason,
               "content": content, "category": category, "expectedRevision": expected_revision}  # fmt: skip
    return svc.once(
        who, idempotency_key, "review-proposal", request, ReviewResult,
        lambda claim: svc.retrying(
            lambda: _review(svc, policy, who, proposal_id, decision, reason, content, category,
                            expected_revision, claim)
        ),
    )  # fmt: skip


def _close(pid: str, status: str, **cols) -> Callable:
    """A transaction step, run first: the proposal goes from pending to ``status`` (Conflict
    if another reviewer decided first; the whole write rolls back with any later failure)."""

    def step(conn) -> None:
        sets = ", ".join(f"{c}=?" for c in cols)
        cur = conn.execute(
            f"UPDATE proposals SET status=?{', ' if cols else ''}{sets} "
            "WHERE id=? AND status='pending'",
            (status, *cols.values(), pid),
        )
        if cur.rowcount != 1:
            row = conn.execute("SELECT status FROM proposals WHERE id=?", (pid,)).fetchone()
            raise Conflict(
                f"proposal {pid} is already {row[0] if row else 'gone'}",
                proposalId=pid,
                status=row[0] if row else None,
            )

    return step


def _review(
    svc: MemoryService,
    policy: ReviewPolicy,
    who: Identity,
    pid: str,
    decision: str,
    reason: str | None,
    content: str | None,
    category: str | None,
    expected: int | None,
    claim: idem.Claim | None,
) -> ReviewResult:
    p = get_proposal(svc, policy, who, pid)
    policy.check_may_review(who, p.proposer)
    if p.status != "pending":
        raise Conflict(f"proposal {pid} is already {p.status}", proposalId=pid, status=p.status)
    now = svc.clock()
    rec = svc.store.get([p.memoryId]).get(p.memoryId)
    if rec is None or (rec.expires_at is not None and rec.expires_at <= now):
        svc.engine.apply(
            check=_close(pid, "withdrawn", reason="the memory was deleted or expired",
                         reviewer=who.agent_id, reviewed_at=ts(now)),
        )  # fmt: skip
        raise NotFound(
            f"memory {p.memoryId} was deleted (or expired) after it was proposed; "
            f"proposal {pid} is closed as withdrawn",
            proposalId=pid,
            memoryId=p.memoryId,
        )
    if expected is not None and rec.revision != expected:
        raise Conflict(
            f"memory {rec.id} is at revision {rec.revision}, not {expected}: it changed since "
            "you read the proposal; read the current text and review again",
            proposalId=pid,
            memoryId=rec.id,
            current_revision=rec.revision,
            expected_revision=expected,
            current_content=rec.content,
        )
    stamp = {"proposalId": pid, "reviewer": who.agent_id, "reviewedAt": ts(now)}
    if decision == "reject":
        return _reject(svc, p, rec, stamp, reason, claim)
    return _approve(svc, p, rec, stamp, content, category, now, claim)


def _reject(svc, p: Proposal, rec: Record, stamp: dict, reason, claim) -> ReviewResult:
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("a rejection needs a reason (the proposer reads it)")
    if len(reason) > MAX_REASON_CHARS:
        raise InvalidInput(f"the reason is at most {MAX_REASON_CHARS} characters")
    reason, _found = svc.policy.screen_text(reason)  # stored in the proposal: the write policy
    review = {"status": "rejected", "reason": reason, **stamp}
    kept = rec.model_copy(
        update={"metadata": {**rec.metadata, "review": review}, "revision": rec.revision + 1}
    )
    done = p.model_copy(
        update={"status": "rejected", "reason": reason, "reviewer": stamp["reviewer"],
                "reviewedAt": parse_ts(stamp["reviewedAt"]), "content": rec.content,
                "revision": rec.revision})  # fmt: skip
    result = ReviewResult(proposal=done, memoryId=rec.id)
    close = _close(p.id, "rejected", reason=reason, reviewer=stamp["reviewer"],
                   reviewed_at=stamp["reviewedAt"], content=rec.content, revision=rec.revision)  # fmt: skip
    svc.engine.apply(
        replace=[kept],
        check=svc.checks(
            close, svc.bind(claim, result), svc.revision_check(rec.id, rec.revision, None)
        ),
    )
    return result


def _approve(svc, p: Proposal, rec: Record, stamp, content, category, now, claim) -> ReviewResult:
    text = rec.content
    edited = content is not None and content != rec.content
    if edited:
        rules.check_content(content)
        text = content
    target = category or p.category
    rules.check_scope_category(Scope.team, target)
    provenance = {"status": "approved", "proposer": rec.agent_id, "edited": edited, **stamp}
    base = {k: v for k, v in rec.metadata.items() if k != "review"}
    shared = Record(
        kind=rec.kind, project_id=rec.project_id, agent_id=rec.agent_id, scope=Scope.team,
        category=target, content=text, context=rec.context,
        metadata={**base, "sharedFrom": rec.id, "review": provenance},
        created_at=now, updated_at=now,
    )  # fmt: skip
    shared, warnings = svc.engine.screen_record(shared)  # the write policy, as for every write
    text = shared.content
    replace, delete = [], [rec.id]
    if p.keepOriginal:
        review = {**provenance, "sharedMemoryId": shared.id}
        replace = [
            rec.model_copy(
                update={
                    "metadata": {**rec.metadata, "review": review},
                    "revision": rec.revision + 1,
                }
            )
        ]
        delete = []
    done = p.model_copy(
        update={"status": "approved", "reviewer": stamp["reviewer"], "category": target,
                "reviewedAt": parse_ts(stamp["reviewedAt"]), "sharedMemoryId": shared.id,
                "content": text, "revision": rec.revision, "edited": edited})  # fmt: skip
    result = ReviewResult(proposal=done, memoryId=shared.id, warnings=warnings)
    proposer = Identity(project_id=rec.project_id, agent_id=rec.agent_id)
    close = _close(p.id, "approved", reviewer=stamp["reviewer"], category=target,
                   reviewed_at=stamp["reviewedAt"], shared_memory_id=shared.id, content=text,
                   revision=rec.revision, edited=int(edited))  # fmt: skip
    # the memory's citations go with it (copied in the checks, before the delete takes them)
    copy = svc.citations.copier(rec.id, shared.id) if svc.citations else None
    result.warnings += svc.engine.apply(
        add=[shared],
        replace=replace,
        delete=delete,
        check=svc.checks(
            close,  # first: a proposal another reviewer decided meanwhile is a Conflict
            svc.bind(claim, result),
            svc.revision_check(rec.id, rec.revision, None),
            svc.limits_check(proposer, [shared]),
            copy,
        ),
    ).warnings
    return result
