"""``recall-context``: the session-start view of memory, grouped by scope, with a 4 KB summary.

Without ``search`` the order is Pattern's: category priority (core, decisions, architecture,
learnings, longterm, tasks, recent), then metadata priority, then recency. With ``search`` the
lists are ranked by hybrid relevance (the seed's substring match would miss paraphrases).
Every listed memory carries its citations with their status now (checked like ``recall``'s); with
``search``, one whose cited code changed ranks lower (the same factor as ``recall``), and the
summary marks it.

The summary is framed like ``recall``'s text (:mod:`.framing`): one line saying it is reference
material, not instructions, then one quoted line per memory with its provenance; memories the
write policy flagged as suspicious are left out of it, and listed without their text
(:mod:`.withheld`), unless ``includeSuspicious``: then they are quoted, marked.
"""

from __future__ import annotations

from retrieval.records import Kind, Record, RecordFilter, Scope
from server.service.core import scopes as rules
from server.service.core.identity import Identity
from server.service.core.models import CitedMemory, Counts, RecallContextInput, RecallContextResult
from server.service.memories.memory import MemoryService
from server.service.recalling import withheld
from server.service.trust import framing
from server.service.trust.framing import location

SUMMARY_BYTES = 4096
CHUNK_LIMIT = 10  # workspace chunks listed with `search`
_ORDER_SQL = (
    "CASE r.category "
    + " ".join(f"WHEN '{c}' THEN {i}" for c, i in rules.CATEGORY_ORDER.items())
    + " ELSE 99 END, r.priority ASC, r.updated_at DESC"
)


def context_filter(who: Identity, args: RecallContextInput, now) -> RecordFilter:
    updated_after = args.updatedAfter
    if args.since and (updated_after is None or args.since > updated_after):
        updated_after = args.since
    return rules.tool_filter(who, args, now, [Kind.memory], updated_after)


def build_summary(
    records: list[Record], limit: int = SUMMARY_BYTES, citations: dict | None = None,
    include_suspicious: bool = False,
) -> str:  # fmt: skip
    """Key points, most important first (core, then priority 1, then category order), ≤ limit
    bytes, framed as reference material; suspicious memories are left out unless
    ``include_suspicious`` (then marked); a memory whose cited code changed says so
    (``citations``: record id -> its citations)."""
    ranked = sorted(
        records,
        key=lambda r: (
            r.category != "core",
            r.priority,
            rules.CATEGORY_ORDER.get(r.category, 99),
        ),
    )
    kept = [r for r in ranked if include_suspicious or not framing.suspicious(r)]
    tail = framing.withheld_line(len(ranked) - len(kept)) if len(kept) < len(ranked) else ""
    lines: list[str] = []
    size = len(framing.HEADER.encode("utf-8")) + 1 + (len(tail.encode("utf-8")) + 1 if tail else 0)
    for r in kept:
        line = framing.summary_line(r, 300, (citations or {}).get(r.id))
        cost = len(line.encode("utf-8")) + 1
        if size + cost > limit:
            break
        lines.append(line)
        size += cost
    if not lines and not tail:
        return ""
    return "\n".join([framing.HEADER, *lines, *([tail] if tail else [])])


def search_chunks(svc: MemoryService, who: Identity, args: RecallContextInput, now) -> list[dict]:
    """Workspace chunks relevant to ``search`` (kind=chunk, visible buckets), best first, each
    as ``path:start-end`` with its text. None when categories or tags exclude chunks."""
    if args.tags or (args.categories and "chunk" not in args.categories):
        return []
    f = RecordFilter(
        buckets=who.visible_buckets(list(args.scopes) if args.scopes else None),
        kinds=[Kind.chunk],
        now=now,
    )
    out = []
    for h in svc.engine.search(args.search, f, k=min(args.limit, CHUNK_LIMIT)):
        m = h.record.metadata
        out.append(
            {"location": location(h.record), "path": m.get("path"),
             "start_line": m.get("start_line"), "end_line": m.get("end_line"),
             "score": round(h.score, 4), "content": h.record.content, "id": h.record.id}
        )  # fmt: skip
        out[-1] = withheld.chunk_item(out[-1], h.record, args.includeSuspicious)
    return out


def recall_context(
    svc: MemoryService, who: Identity, args: RecallContextInput
) -> RecallContextResult:
    now = svc.clock()
    f = context_filter(who, args, now)
    cites = svc.citations
    if args.search and args.search.strip():
        hits = svc.engine.search(args.search, f, k=args.limit)
        states = cites.states(who, [h.record.id for h in hits]) if cites else {}
        factor = cites.factor if cites else (lambda _states: 1.0)
        score = {h.record.id: h.score * factor(states.get(h.record.id, [])) for h in hits}
        records = [h.record for h in sorted(hits, key=lambda h: -score[h.record.id])]
        ranking = hits[0].explanation.mode if hits else "hybrid"
        ranking = f"relevance ({ranking})"
    else:
        records = svc.store.list(f, order=_ORDER_SQL, limit=args.limit)
        states = cites.states(who, [r.id for r in records]) if cites else {}
        ranking = "category priority, then priority, then recency"
    groups: dict[str, list[CitedMemory]] = {s.value: [] for s in Scope}
    for rec in records:
        m = CitedMemory.from_record(rec)
        m.citations = states.get(rec.id, [])
        groups[rec.scope.value].append(withheld.memory(m, args.includeSuspicious))
    # counts: everything matching the filters (before the limit), per scope, plus expired ones
    by_bucket = svc.store.count(f, group_by="bucket")
    counts = Counts()
    for bucket, n in by_bucket.items():
        scope = bucket.split("/", 1)[0]
        setattr(counts, scope, getattr(counts, scope) + n)
    expired_f = f.model_copy(update={"include_expired": True})
    counts.expired = svc.store.count(expired_f) - sum(by_bucket.values())
    summary = build_summary(records, citations=states, include_suspicious=args.includeSuspicious)
    chunks = search_chunks(svc, who, args, now) if args.search and args.search.strip() else []
    return RecallContextResult(
        **groups, chunks=chunks, summary=summary, counts=counts, ranking=ranking
    )
