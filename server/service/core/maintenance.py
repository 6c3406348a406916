"""``cleanup`` (expire TTL memories, enforce per-category limits), ``pattern_health``, and
the vector index's upkeep for the local CLI (orphan vectors, reindex)."""

from __future__ import annotations

from retrieval.errors import low_disk
from retrieval.ranking.hybrid import EXACT_SCAN_LIMIT
from retrieval.records import Kind, RecordFilter
from retrieval.storage import private
from retrieval.storage.store import parse_ts, ts
from retrieval.timings import timings
from server.service.core import scopes as rules
from server.service.core.identity import Identity
from server.service.core.models import CleanupResult, HealthResult
from server.service.memories.memory import MemoryService

VERSION = "0.1.0"
CLOCK_SLACK_S = 60.0  # a clock this far behind the latest change is not reported (skew)
CLOCK_SEEN = 1000  # the latest change among this many is what the clock is held against


def cleanup(svc: MemoryService, who: Identity, expire_only: bool = False) -> CleanupResult:
    """Delete the caller's expired memories; unless ``expire_only``, trim recent/tasks to their
    limits (oldest first). Only the caller's own buckets are touched."""
    now = svc.clock()
    own = [who.bucket("private"), who.bucket("personal")]

    def attempt() -> tuple[list[str], list[str], dict[str, int]]:
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
        if expired or trim:  # a concurrent cleanup deleted some meanwhile: count again
            svc.engine.apply(delete=[*expired, *trim], check=svc.present_check([*expired, *trim]))
        return expired, trim, enforced

    expired, trim, enforced = svc.retrying(attempt)
    return CleanupResult(
        expired=len(expired), deleted=len(expired) + len(trim), enforced=enforced, errors=[]
    )


def orphan_vectors(svc: MemoryService) -> int | None:
    """Vectors in Chroma whose record is gone or lives in another bucket, store-wide (None
    while no model is loaded). Lists every vector id: for ``pattern-memory stats``."""
    if svc.engine.embedder is None or svc.engine.vectors is None:
        return None
    return sum(map(len, svc.engine.orphan_vectors().values()))


def reindex(svc: MemoryService, orphans_only: bool = False) -> tuple[int, int]:
    """(records indexed, orphan vectors removed): rebuild the vector index from SQLite, or
    with ``orphans_only`` just delete the orphan vectors."""
    if orphans_only:
        return 0, svc.engine.remove_orphan_vectors()
    return svc.engine.reindex()


def clock_behind(svc: MemoryService) -> str | None:
    """A warning when the clock reads earlier than the latest of the store's last
    ``CLOCK_SEEN`` changes (it was set back, and writes since carry the earlier time): records
    written now sort before older ones by time, and TTLs count from it."""
    row = svc.store.reader.execute(
        "SELECT max(at) FROM (SELECT at FROM changes ORDER BY seq DESC LIMIT ?)", (CLOCK_SEEN,)
    ).fetchone()
    newest = parse_ts(row[0]) if row else None
    if newest is None:
        return None
    behind = (newest - svc.clock()).total_seconds()
    if behind <= CLOCK_SLACK_S:
        return None
    return (
        f"the clock is {behind:,.0f} s behind the store's latest change (was it set back?): "
        "records written now sort before older ones by time, and their TTLs count from it"
    )


def health(
    svc: MemoryService, who: Identity, model_error: str | None = None, *, store_wide: bool = False
) -> HealthResult:
    """Store and model status. Counts cover what ``who`` may see: records by kind in its
    visible buckets and the vector writes pending for them. ``store_wide`` counts the whole
    store instead: only for the local ``pattern-memory stats`` (the machine's own user), never
    for an MCP caller."""
    eng = svc.engine
    issues: list[str] = []
    ready = eng.embedder is not None and eng.vectors is not None
    if model_error:
        issues.append(f"embedding model failed to load: {model_error}")
    elif not ready:
        issues.append(
            "embedding model is loading: ranking is lexical and the injection scan uses its "
            "rules alone until it is ready"
        )
    index_error = eng.vector_index_error()
    if index_error:
        issues.append(
            f"vector index unavailable ({index_error}): search by meaning scores the stored "
            f"vectors of the newest {EXACT_SCAN_LIMIT:,} records directly, and new vectors "
            "wait in the outbox until it is back"
        )
    failing = svc.store.write_failure
    if failing:
        issues.append(f"writes are failing: {failing}")
    issues += [i for i in (low_disk(eng.home), clock_behind(svc)) if i]
    postings = eng.lexical.postings
    if postings is not None and postings.file_problem:
        state = " (FTS5 ranks until it is ready)" if postings.state == "building" else ""
        issues.append(f"in-memory postings: {postings.file_problem}{state}")
    if store_wide:
        pending = svc.store.reader.execute("SELECT count(*) FROM vector_outbox").fetchone()[0]
        kinds = svc.store.count(RecordFilter(include_expired=True), group_by="kind")
    else:
        buckets = who.visible_buckets()
        pending = svc.store.reader.execute(
            f"SELECT count(*) FROM vector_outbox WHERE bucket IN ({','.join('?' * len(buckets))})",
            buckets,
        ).fetchone()[0]
        f = RecordFilter(buckets=buckets, include_expired=True)
        kinds = svc.store.count(f, group_by="kind")
    scan = svc.policy.injection_scan
    if scan.startswith("rules only") and (ready or model_error or eng.embedder is not None):
        # (while the model loads, the issue above says so)
        issues.append(f"injection scan: {scan}")
    if exposed := private.exposure_issue(eng.home):
        issues.append(exposed)
    replica = eng.cluster.status() if eng.cluster is not None else None
    if replica and not store_wide:
        replica.pop("url", None)  # where the database is: the local stats' business
    if replica and replica.get("follower_error"):
        issues.append(
            f"this daemon's replica is not following PostgreSQL ({replica['follower_error']}): "
            "reads come from it and may be stale (database unreachable: writes fail until it "
            "is back; a newer schema: upgrade this daemon)"
        )
    healthy = ready and not model_error and not index_error and not failing
    return HealthResult(
        status="ok" if healthy else "degraded",
        version=VERSION,
        projectId=who.project_id,
        agentId=who.agent_id,
        subagent=who.is_subagent,
        view="store" if store_wide else "caller",
        store=str(eng.home),
        embeddingModel=eng.embedder.model_id if eng.embedder else None,
        embeddingBackend=getattr(eng.embedder, "backend_in_use", None) if ready else None,
        modelReady=ready,
        ranking="hybrid" if ready else "lexical",
        lexicalPostings=eng.lexical.postings.state if eng.lexical.postings else None,
        vectorSearch=eng.vector_search_way() if ready else None,
        vectorAcross=eng.vector_across() if ready else None,
        records={str(k): v for k, v in kinds.items()},
        pendingVectorWrites=pending,
        issues=issues,
        replica=replica,
        writeStages=timings.snapshot() if timings.writes else None,
    )
