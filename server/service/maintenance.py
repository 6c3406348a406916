"""``cleanup`` (expire TTL memories, enforce per-category limits) and ``pattern_health``."""

from __future__ import annotations

from retrieval.records import Kind, RecordFilter
from retrieval.store import ts

from . import scopes as rules
from .identity import Identity
from .memory import MemoryService
from .models import CleanupResult, HealthResult

VERSION = "0.1.0"


def cleanup(svc: MemoryService, who: Identity, expire_only: bool = False) -> CleanupResult:
    """Delete the caller's expired memories; unless ``expire_only``, trim recent/tasks to their
    limits (oldest first). Only the caller's own buckets are touched."""
    now = svc.clock()
    own = [who.bucket("private"), who.bucket("personal")]
    with svc._lock:
        rows = svc.store.reader.execute(
            f"SELECT id FROM records WHERE bucket IN ({','.join('?' * len(own))}) "
            "AND expires_at IS NOT NULL AND expires_at <= ?",
            [*own, ts(now)],
        ).fetchall()
        expired = [r[0] for r in rows]
        enforced: dict[str, int] = {}
        trim: list[str] = []
        if not expire_only:
            for category in ("recent", "tasks"):
                limit = rules.MAX_PER_CATEGORY[category]
                f = RecordFilter(buckets=own, kinds=[Kind.memory], categories=[category], now=now)
                recs = svc.store.list(f, order="r.created_at DESC")
                extra = [r.id for r in recs[limit:]]
                if extra:
                    enforced[category] = len(extra)
                    trim.extend(extra)
        if expired or trim:
            svc.engine.apply(delete=[*expired, *trim])
    return CleanupResult(
        expired=len(expired), deleted=len(expired) + len(trim), enforced=enforced, errors=[]
    )


def health(svc: MemoryService, who: Identity, model_error: str | None = None) -> HealthResult:
    eng = svc.engine
    issues: list[str] = []
    ready = eng.embedder is not None and eng.vectors is not None
    if model_error:
        issues.append(f"embedding model failed to load: {model_error}")
    elif not ready:
        issues.append("embedding model is loading: ranking is lexical until it is ready")
    pending = svc.store.reader.execute("SELECT count(*) FROM vector_outbox").fetchone()[0]
    kinds = svc.store.count(RecordFilter(include_expired=True), group_by="kind")
    return HealthResult(
        status="ok" if ready and not model_error else "degraded",
        version=VERSION,
        projectId=who.project_id,
        agentId=who.agent_id,
        subagent=who.is_subagent,
        store=str(eng.home),
        embeddingModel=eng.embedder.model_id if eng.embedder else None,
        embeddingBackend=getattr(eng.embedder, "backend_in_use", None) if ready else None,
        modelReady=ready,
        ranking="hybrid" if ready else "lexical",
        lexicalPostings=eng.lexical.postings.state if eng.lexical.postings else None,
        records={str(k): v for k, v in kinds.items()},
        pendingVectorWrites=pending,
        issues=issues,
    )


def reindex(svc: MemoryService) -> int:
    """Rebuild every vector collection of the current model from SQLite (no re-embedding of
    what has stored vectors); returns the number of records indexed."""
    return svc.engine.reindex()
