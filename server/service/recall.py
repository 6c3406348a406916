"""``recall``: the context-injection entry point.

query -> hybrid search over every visible kind (memories, observations, lessons, chunks)
-> documented boosts -> near-duplicate removal + MMR diversification -> packed into a budget.

Boosts (added to the fused score, which lies in [0, 1]):
- priority: +0.04 for priority 1, -0.04 for priority 3;
- recency: +0.03 * 2^(-age_days / 30) (a memory from today gets +0.03, from last month +0.015);
- lessons: +0.10 * (successRate - 0.5), so a fix that works lifts its lesson.
Diversification: maximal marginal relevance (Carbonell & Goldstein 1998) with lambda 0.75 over
the stored embeddings (word-set Jaccard while the model loads); a candidate whose similarity
to an already chosen item is ≥ 0.95 is a near-duplicate and dropped.
"""

from __future__ import annotations

import re

import numpy as np

from retrieval.records import Hit, Kind, Record

from . import scopes as rules
from .identity import Identity
from .memory import MemoryService
from .models import RecallInput, RecallItem, RecallResult

MMR_LAMBDA = 0.75
DUPLICATE_SIM = 0.95
HEADER = "Relevant memory (pattern-memory recall):"


def boosts(rec: Record, now) -> dict[str, float]:
    out: dict[str, float] = {}
    pr = rec.priority
    if pr != 2:
        out["priority"] = 0.04 * (2 - pr)
    age_days = max(0.0, (now - rec.updated_at).total_seconds() / 86400)
    out["recency"] = round(0.03 * 2 ** (-age_days / 30), 4)
    rate = rec.metadata.get("successRate")
    if rec.kind is Kind.lesson and isinstance(rate, int | float):
        out["success_rate"] = round(0.10 * (float(rate) - 0.5), 4)
    return out


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _similarity_fn(svc: MemoryService, hits: list[Hit]):
    emb = svc.engine.embedder
    if emb is not None:
        vecs = svc.store.embeddings([h.record.id for h in hits], emb.model_id)
        if len(vecs) == len(hits):
            firsts = {rid: m[0] for rid, m in vecs.items()}
            return lambda a, b: float(np.dot(firsts[a.id], firsts[b.id]))
    words = {h.record.id: _words(h.record.content) for h in hits}

    def jaccard(a: Record, b: Record) -> float:
        wa, wb = words[a.id], words[b.id]
        return len(wa & wb) / max(1, len(wa | wb))

    return jaccard


def diversify(
    svc: MemoryService, hits: list[Hit], scores: dict[str, float]
) -> tuple[list[Hit], int]:
    """MMR order; near-duplicates dropped. Returns (ordered hits, number dropped).

    Each candidate's similarity to the chosen set is kept up to date as items are chosen
    (one similarity per pair instead of one per pair and round: 60 candidates cost 1.8k
    similarities, not 108k; the order is the same)."""
    sim = _similarity_fn(svc, hits)
    pool = sorted(hits, key=lambda h: -scores[h.record.id])
    chosen: list[Hit] = []
    near: dict[str, float] = {}  # candidate id -> max similarity to the chosen ones
    dropped = 0
    while pool:
        best, best_val, dup = None, -1e9, []
        if chosen:
            last = chosen[-1].record
            for h in pool:
                s = sim(h.record, last)
                rid = h.record.id
                near[rid] = s if len(chosen) == 1 else max(near[rid], s)
        for h in pool:
            max_sim = near.get(h.record.id, 0.0)
            if max_sim >= DUPLICATE_SIM:
                dup.append(h)
                continue
            val = MMR_LAMBDA * scores[h.record.id] - (1 - MMR_LAMBDA) * max_sim
            if val > best_val:
                best, best_val = h, val
        for h in dup:
            pool.remove(h)
        dropped += len(dup)
        if best is None:
            break
        chosen.append(best)
        pool.remove(best)
    return chosen, dropped


def location(rec: Record) -> str | None:
    if rec.kind is not Kind.chunk:
        return None
    m = rec.metadata
    return f"{m.get('path', '?')}:{m.get('start_line', '?')}-{m.get('end_line', '?')}"


def render(rec: Record) -> str:
    loc = location(rec)
    if loc:
        return f"- [{loc}]\n{rec.content.strip()}"
    label = (
        rec.entity_name
        and f"{rec.kind.value} {rec.entity_name}"
        or f"{rec.scope.value}/{rec.category}"
    )
    return f"- [{label}] {' '.join(rec.content.split())}"


def recall(svc: MemoryService, who: Identity, args: RecallInput) -> RecallResult:
    now = svc.clock()
    f = rules.tool_filter(who, args, now, [Kind(k) for k in args.kinds] if args.kinds else None)
    hits = svc.engine.search(args.query, f, k=max(args.limit * 2, 20))
    mode = hits[0].explanation.mode if hits else ("hybrid" if svc.engine.embedder else "lexical")
    scores: dict[str, float] = {}
    for h in hits:
        b = boosts(h.record, now)
        h.explanation.boosts = b
        scores[h.record.id] = h.score + sum(b.values())
    ordered, dropped = diversify(svc, hits, scores)
    scale = 4 if args.unit == "tokens" else 1
    capacity = args.budget * scale
    parts = [HEADER]
    used = len(HEADER)
    items: list[RecallItem] = []
    for h in ordered[: args.limit]:
        block = render(h.record)
        truncated = False
        room = capacity - used - 1
        if len(block) > room:
            if room < 200:
                break
            block, truncated = block[: room - 1] + "…", True
        parts.append(block)
        used += len(block) + 1
        rec = h.record
        items.append(
            RecallItem(
                id=rec.id,
                kind=rec.kind.value,
                scope=rec.scope.value,
                category=rec.category,
                score=round(scores[rec.id], 4),
                content=rec.content,
                location=location(rec),
                explanation=h.explanation.model_dump(),
                truncated=truncated,
            )  # fmt: skip
        )
    text = "\n".join(parts) if items else ""
    return RecallResult(
        items=items,
        text=text,
        used=-(-len(text) // scale),
        budget=args.budget,
        unit=args.unit,
        mode=mode,
        dropped_duplicates=dropped,
    )
