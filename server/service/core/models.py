"""Pydantic models of the service: tool inputs and outputs, export documents.

Field names follow the Pattern seed (camelCase), so existing clients keep working.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from retrieval.cite import CitationInput, CitationState
from retrieval.records import Kind, Record, Scope

ScopeName = Literal["private", "personal", "team", "public"]
Citations = list[CitationInput] | None
CITATIONS_HELP = (
    "Code this text relies on: [{path, startLine?, endLine?}], paths relative to your project "
    "root (omit the lines to cite a whole file). Recall then tells whether that code changed "
    "since. Paths mentioned in the text (a/b.py, b.py:120, b.py#L10-L20) are cited too."
)


SUPERSEDES_HELP = (
    "Ids of older memories (same scope) that this one replaces, e.g. a changed decision or "
    'value: both are kept, recall puts this one first and marks the old one "updated by".'
)


class MemoryMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    tags: list[str] = Field(default_factory=list, description="Up to 10 tags of ≤50 chars.")
    priority: int | None = Field(
        default=None, description="1 = high, 2 = medium (default), 3 = low."
    )
    source: str | None = None
    relatedTo: list[str] | None = None


class Memory(BaseModel):
    """A memory as tools return it and as export files hold it."""

    id: str
    agentId: str
    projectId: str
    scope: ScopeName
    category: str
    content: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    createdAt: datetime
    updatedAt: datetime
    expiresAt: datetime | None = None
    kind: str = "memory"
    context: str = ""
    revision: int = 1

    @classmethod
    def from_record(cls, r: Record) -> Memory:
        return cls(
            id=r.id, agentId=r.agent_id, projectId=r.project_id, scope=r.scope.value,
            category=r.category, content=r.content, metadata=r.metadata, createdAt=r.created_at,
            updatedAt=r.updated_at, expiresAt=r.expires_at, kind=r.kind.value, context=r.context,
            revision=r.revision,
        )  # fmt: skip

    def to_record(self, project_id: str, agent_id: str) -> Record:
        return Record(
            id=self.id, kind=Kind(self.kind), project_id=project_id, agent_id=agent_id,
            scope=Scope(self.scope), category=self.category, content=self.content,
            context=self.context, metadata=self.metadata, created_at=self.createdAt,
            updated_at=self.updatedAt, expires_at=self.expiresAt, revision=self.revision,
        )  # fmt: skip


class MemoryInput(BaseModel):
    """One memory to store (the arguments of ``remember``; items of ``remember-bulk``)."""

    content: str = Field(description="The text to remember (≤ 32 KB).")
    scope: ScopeName = Field(default="private", description="Who can see it.")
    category: str | None = Field(
        default=None,
        description="private: recent|tasks|longterm; personal: core|longterm|recent|tasks; "
        "team/public: decisions|architecture|learnings. Default: longterm (private/personal), "
        "learnings (team/public).",
    )
    metadata: MemoryMetadata | None = None
    citations: Citations = Field(default=None, description=CITATIONS_HELP)
    supersedes: list[str] | None = Field(default=None, description=SUPERSEDES_HELP)


class Superseded(BaseModel):
    """An older memory the new one updates (both are kept; recall puts the new one first)."""

    memoryId: str
    how: Literal["stated", "judged", "detected"] = Field(
        description="stated: you named it; judged: your client's model said this one replaces "
        "it (detected: made by itself in earlier versions, read from stored results)."
    )


CANDIDATES_HELP = (
    "Older records of the same scope that may state the same thing as this one, at most 3, "
    "each `id · date · excerpt` (omitted when there are none)."
)


def is_empty(value) -> bool:
    """Left out of a result when empty (``exclude_if``): most writes show no candidates."""
    return not value


# a write's candidates (remember, update-memory, add_observations): left out when there are none
Candidates = Annotated[
    list[str], Field(default_factory=list, exclude_if=is_empty, description=CANDIDATES_HELP)
]
CandidatesNote = Annotated[
    str | None,
    Field(default=None, exclude_if=is_empty, description="What to do with the candidates."),
]


class RememberResult(BaseModel):
    memoryId: str
    scope: ScopeName
    category: str
    expiresAt: datetime | None = None
    warnings: list[str] = Field(default_factory=list)
    citations: list[CitationState] = Field(
        default_factory=list, description="What the memory cites (explicit and detected)."
    )
    supersedes: list[Superseded] = Field(
        default_factory=list,
        description="Older memories this one updates (named in supersedes; a person can undo "
        "a link in the dashboard).",
    )
    candidates: Candidates
    candidatesNote: CandidatesNote


class CommitInsightResult(BaseModel):
    memoryId: str
    previousCategory: str
    category: str
    scope: ScopeName
    revision: int | None = Field(default=None, description="The memory's new revision.")
    warnings: list[str] = Field(default_factory=list)


class UpdateMemoryResult(BaseModel):
    memoryId: str
    revision: int = Field(description="The new revision (pass it as expectedRevision next time).")
    previousRevision: int
    scope: ScopeName
    category: str
    warnings: list[str] = Field(default_factory=list)
    citations: list[CitationState] = Field(
        default_factory=list, description="What the memory cites now."
    )
    merged: bool = Field(
        default=False,
        description="expectedRevision was stale and your edit was merged with the changes made "
        "since (text three-way, tags as a set, other metadata per key).",
    )
    parents: list[int] | None = Field(
        default=None,
        description="A merge's parents: [the revision it was written over, your expectedRevision].",
    )
    overridden: list[str] = Field(
        default_factory=list,
        description="A merge's metadata keys that both sides changed: your value was kept.",
    )
    supersedes: list[Superseded] = Field(
        default_factory=list, description="Older memories this one now updates (supersedes)."
    )
    candidates: Candidates
    candidatesNote: CandidatesNote


class ForgetResult(BaseModel):
    deleted: bool
    memoryId: str


class ShareLearningResult(BaseModel):
    memoryId: str = Field(
        description="Id of the new team memory (status proposed: still your own memory's id)."
    )
    originalId: str
    originalKept: bool
    category: str
    warnings: list[str] = Field(default_factory=list)
    status: Literal["shared", "proposed"] = Field(
        default="shared",
        description="proposed: team review is on for this project; a reviewer approves (the "
        "memory then moves to the team) or rejects it (it stays yours, with the reason).",
    )
    proposalId: str | None = Field(default=None, description="The review proposal (proposed).")


class Counts(BaseModel):
    private: int = 0
    personal: int = 0
    team: int = 0
    public: int = 0
    expired: int = 0


class CitedMemory(Memory):
    """A memory with the status of the code it cites (recall-context)."""

    citations: list[CitationState] = Field(
        default_factory=list,
        description="Cited code and its status now: fresh, moved, changed or deleted.",
    )
    withheld: bool = Field(
        default=False,
        exclude_if=lambda v: not v,
        description="Flagged as possible instructions to the model (metadata.suspicious): "
        "listed without its text; recall-context with includeSuspicious shows it.",
    )


class RecallContextResult(BaseModel):
    private: list[CitedMemory] = Field(default_factory=list)
    personal: list[CitedMemory] = Field(default_factory=list)
    team: list[CitedMemory] = Field(default_factory=list)
    public: list[CitedMemory] = Field(default_factory=list)
    chunks: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Workspace file chunks matching `search` (path:start-end).",
    )
    summary: str = Field(description="≤ 4 KB of key points, highest-priority memories first.")
    counts: Counts
    ranking: str = Field(description="How the lists are ordered (relevance or category/recency).")


class CleanupResult(BaseModel):
    expired: int
    deleted: int
    enforced: dict[str, int] = Field(default_factory=dict)
    errors: list[str] = Field(default_factory=list)


class ExportResult(BaseModel):
    exported: int
    filepath: str
    bytes: int
    suspicious: int = Field(
        default=0,
        description="Exported memories flagged as possible instructions to the model: in the "
        "file with their metadata.suspicious (import-memories screens them again).",
    )
    backups: list[str] = Field(
        default_factory=list, description="With force: 'file -> its backup' when one was replaced."
    )


class ImportResult(BaseModel):
    imported: int
    skipped: int
    errors: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class BulkRememberResult(BaseModel):
    stored: int
    failed: int
    errors: list[str] = Field(default_factory=list)
    memoryIds: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class BulkForgetResult(BaseModel):
    deleted: int
    failed: int
    errors: list[str] = Field(default_factory=list)


class HealthResult(BaseModel):
    status: Literal["ok", "degraded"]
    version: str
    projectId: str
    agentId: str
    subagent: bool
    view: Literal["caller", "store"] = Field(
        default="caller",
        description="caller: records and pending vector writes you may see; store: the whole "
        "store (the local `pattern-memory stats` only).",
    )
    store: str
    embeddingModel: str | None
    embeddingBackend: str | None = None  # "onnx" or "torch" (None for the test embedders)
    modelReady: bool
    ranking: str
    lexicalPostings: str | None = None  # in-memory bm25 postings: empty/building/ready/failed
    vectorSearch: str | None = Field(
        default=None,
        description="How search by meaning runs: `index` (the vector index), `exact` (a small "
        "store: every stored vector scored, no index yet) or `building` (the index is being "
        "built; the newest records' vectors are scored meanwhile). None without a model.",
    )
    vectorAcross: str | None = Field(
        default=None,
        description="The collection across every bucket that a search over all of them asks "
        "(a store of many buckets): `built`, `copying` (its records are being copied in; such "
        "searches ask bucket by bucket meanwhile) or None (not kept).",
    )
    records: dict[str, int]
    pendingVectorWrites: int
    orphanVectors: int | None = Field(
        default=None,
        description="Vectors whose record is gone or moved (store-wide; `pattern-memory stats` "
        "only; `pattern-memory reindex` removes them).",
    )
    issues: list[str] = Field(default_factory=list)
    # PATTERN_STORE_URL: PostgreSQL canonical; this daemon's replica state (url without password,
    # node, cluster, applied_seq, head, lag, rebuilds, follower_error); None with SQLite alone
    replica: dict | None = None
    writeStages: dict | None = Field(
        default=None,
        description="Where this server's writes spent their time since it started: the mean "
        "milliseconds per write of each stage (policy, embedding, scan, links, commit, waiting, "
        "other), wall and processor time.",
    )


class RecallItem(BaseModel):
    id: str
    kind: str
    scope: ScopeName
    category: str
    score: float
    content: str
    location: str | None = Field(default=None, description="path:start-end for workspace chunks.")
    explanation: dict[str, Any]
    truncated: bool = False
    provenance: str = Field(default="", description="Source, scope, author agent and date.")
    suspicious: str | None = Field(
        default=None,
        description="Why the write policy flagged this item as possible instructions to the "
        "model (None: not flagged). Flagged items are left out of `text` unless "
        "includeSuspicious.",
    )
    inText: bool = Field(default=True, description="Whether the item is quoted in `text`.")
    citations: list[CitationState] = Field(
        default_factory=list,
        description="Cited code and its status now: fresh, moved (same lines elsewhere), "
        "changed or deleted (verify before trusting the item; it ranks lower).",
    )


class RecallResult(BaseModel):
    items: list[RecallItem]
    text: str = Field(
        description="Ready-to-inject context block: reference material quoted with its "
        "provenance, not instructions."
    )
    used: int = Field(description="Size of `text` in the budget's unit.")
    budget: int
    unit: Literal["chars", "tokens"]
    mode: str = Field(description="hybrid, or lexical while the embedding model loads.")
    dropped_duplicates: int = 0


class RecallContextInput(BaseModel):
    """Filters of ``recall-context`` (all AND-ed; empty filters are ignored); flagged memories
    and chunks are listed without their text unless ``includeSuspicious``."""

    includeSuspicious: bool = False

    scopes: list[ScopeName] | None = None
    categories: list[str] | None = None
    limit: int = Field(default=50, ge=1, le=200)
    since: datetime | None = Field(default=None, description="Only memories updated after this.")
    tags: list[str] | None = Field(default=None, description="AND: every tag must be present.")
    minPriority: int | None = Field(default=None, ge=1, le=3)
    maxPriority: int | None = Field(default=None, ge=1, le=3)
    createdAfter: datetime | None = None
    createdBefore: datetime | None = None
    updatedAfter: datetime | None = None
    updatedBefore: datetime | None = None
    search: str | None = Field(
        default=None,
        description="Ranks by hybrid (meaning + keyword) relevance instead of substring.",
    )


class RecallInput(BaseModel):
    """Arguments of ``recall``: a query and optional filters; results packed into a budget."""

    query: str = Field(min_length=1, description="What you need to know, in plain words.")
    budget: int = Field(
        default=1500, ge=50, le=200_000, description="Size of the context block (see unit)."
    )
    unit: Literal["tokens", "chars"] = Field(
        default="tokens", description="Budget unit; tokens are estimated as characters / 4."
    )
    kinds: list[Literal["memory", "observation", "lesson", "chunk", "turn"]] | None = Field(
        default=None, description="Record kinds to include (default: all)."
    )
    scopes: list[ScopeName] | None = None
    categories: list[str] | None = None
    tags: list[str] | None = None
    minPriority: int | None = Field(default=None, ge=1, le=3)
    maxPriority: int | None = Field(default=None, ge=1, le=3)
    createdAfter: datetime | None = None
    createdBefore: datetime | None = None
    updatedAfter: datetime | None = None
    updatedBefore: datetime | None = None
    limit: int = Field(default=20, ge=1, le=100, description="Most items to return.")
    includeSuspicious: bool = Field(
        default=False,
        description="Also quote items flagged as possible instructions to the model in `text` "
        "(they are always listed in `items`, marked).",
    )
