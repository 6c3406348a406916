"""``recall``: the context-injection entry point.

query -> hybrid search over every visible kind (memories, observations, lessons, chunks)
-> documented boosts -> near-duplicate removal + MMR diversification -> packed into a budget.

Boosts (added to the fused score, which lies in [0, 1]):
- priority: +0.04 for priority 1, -0.04 for priority 3;
- recency: +0.03 * 2^(-age_days / 30) (a memory from today gets +0.03, from last month +0.015;
  one dated more than a day ahead, none);
- lessons: +0.10 * (successRate - 0.5), so a fix that works lifts its lesson.
Citations: an item whose cited code changed or was deleted since it was written has its score
(fused + boosts) multiplied by ``CitationService.stale_factor`` (0.9, measured: docs/benchmarks.md
"Citations"), shown as the ``citations`` boost; its provenance line in ``text`` (:mod:`.framing`) says
"cited code changed since this was written (path:lines)".
Workspace chunks: a chunk of a test file (``retrieval.ranking.grouping.is_test_path``) scores
``grouping.TEST_FACTOR`` (0.8) times its score unless the query is about tests, so the source a
question is about comes before the tests that exercise it; shown as the ``test_file`` boost. A
chunk of a file the query names in code, or one that defines a name the query writes as code
(``grouping.names_match``: ``latex.py`` or ``def latex`` for "``latex(x)`` prints ..."), scores
``1 + grouping.NAME_BOOST`` (1.3) times its score; shown as the ``code_name`` boost.
Every item's explanation carries ``gate``: the prompt gate's relevance (:mod:`.gate`), what the
UserPromptSubmit hook compares with its threshold to decide whether to inject the item; none
while the daemon's background thread still loads the gate's word list (a second or so after it
starts: a recall does not wait for a score that only explains).
Diversification: maximal marginal relevance (Carbonell & Goldstein 1998) with lambda 0.75 over
the stored embeddings (word-set Jaccard while the model loads); a candidate whose similarity
to an already chosen item is ≥ 0.95 is a near-duplicate and dropped.
A feature that fails for one item (its boosts, its citations' check, its gate relevance) is
dropped for that item; one that fails for the whole list (the citations, the diversification)
is dropped for the query, which answers in score order (:mod:`retrieval.ranking.guard`).

The ``text`` block is framed by :mod:`.framing`: one line saying it is reference material, not
instructions, then every item quoted with its provenance. Items the write policy flagged as
suspicious stay in ``items`` (marked) but out of ``text`` unless ``includeSuspicious``; listed
so, they keep none of their stored strings (:mod:`.withheld`). Two items that a write showed
as possibly stating the same thing, undecided, say so in their provenance lines ("may state the
same thing as <id>; the newer is from <date>", :mod:`.conflicts`; ``explanation.may_restate``).
"""

from __future__ import annotations

import math
import re

import numpy as np

from retrieval.ranking import grouping
from retrieval.ranking.guard import guarded
from retrieval.records import Hit, Kind, Record
from server.service.core import scopes as rules
from server.service.core.identity import Identity
from server.service.core.models import RecallInput, RecallItem, RecallResult
from server.service.memories import conflicts
from server.service.memories.memory import MemoryService
from server.service.prompting import gate, vocabulary
from server.service.recalling import withheld
from server.service.trust import framing
from server.service.trust.framing import location

MMR_LAMBDA = 0.75
DUPLICATE_SIM = 0.95


def boosts(rec: Record, now) -> dict[str, float]:
    out: dict[str, float] = {}
    pr = rec.priority
    if pr in (1, 3):  # another value (a foreign store's) counts as the default, 2
        out["priority"] = 0.04 * (2 - pr)
    age_days = (now - rec.updated_at).total_seconds() / 86400
    if age_days >= -1.0:  # a date more than a day ahead (a wrong clock) earns no recency
        out["recency"] = round(0.03 * 2 ** (-max(0.0, age_days) / 30), 4)
    rate = rec.metadata.get("successRate")
    if rec.kind is Kind.lesson and isinstance(rate, int | float) and math.isfinite(rate):
        out["success_rate"] = round(0.10 * (min(1.0, max(0.0, float(rate))) - 0.5), 4)
    return out


def scored(h: Hit, now, prior, names) -> tuple[float, dict[str, float]]:
    """An item's score and its boosts (:func:`boosts`; a workspace chunk's name and test-file
    factors)."""
    b = boosts(h.record, now)
    score = h.score + sum(b.values())
    if h.record.kind is Kind.chunk:
        path = str(h.record.metadata.get("path") or "")
        title = str(h.record.metadata.get("title") or "")
        if grouping.names_match(names, path, grouping.defined_names(title)):
            b["code_name"] = round(score * grouping.NAME_BOOST, 4)
            score *= 1.0 + grouping.NAME_BOOST
        factor = prior(path)
        if factor != 1.0:
            b["test_file"] = round(score * (factor - 1.0), 4)
            score *= factor
    return score, b


def _one(path: str) -> float:
    return 1.0


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 0.0


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
        dropped += len(dup)
        if best is None:
            break
        chosen.append(best)
        # by identity: ``list.remove`` compares the hits' models field by field, pair by pair
        gone = {id(h) for h in dup}
        gone.add(id(best))
        pool = [h for h in pool if id(h) not in gone]
    return chosen, dropped


def cited(svc: MemoryService, who: Identity, hits: list[Hit], scores: dict[str, float]):
    """The citations of the hits, checked now; stale items' scores lowered in place."""
    if svc.citations is None or not hits:
        return {}
    states = guarded("citations' check", svc.citations.states, who,
                     [h.record.id for h in hits], default={})  # fmt: skip
    for h in hits:
        cs = states.get(h.record.id)
        factor = guarded("citations' factor", svc.citations.factor, cs, default=1.0,
                         record=h.record.id) if cs else 1.0  # fmt: skip
        if factor != 1.0:
            rid = h.record.id
            h.explanation.boosts["citations"] = round(scores[rid] * (factor - 1), 4)
            scores[rid] *= factor
    return states


def recall(svc: MemoryService, who: Identity, args: RecallInput) -> RecallResult:
    with svc.engine.readers.reading():  # writes give way to the whole recall, not only search
        return _recall(svc, who, args)


def _recall(svc: MemoryService, who: Identity, args: RecallInput) -> RecallResult:
    now = svc.clock()
    f = rules.tool_filter(who, args, now, [Kind(k) for k in args.kinds] if args.kinds else None)
    hits = svc.engine.search(args.query, f, k=max(args.limit * 2, 20))
    if hits:
        mode = hits[0].explanation.mode
    else:
        fallback = svc.engine.vector_fallback()
        mode = "hybrid" if svc.engine.embedder else "lexical"
        mode = f"{mode} ({fallback})" if fallback else mode
    scores: dict[str, float] = {}
    prior = guarded("test-file factor", grouping.test_prior, args.query, default=_one)
    names = guarded("code names", grouping.code_names, args.query, default=frozenset())
    for h in hits:
        score, b = guarded("recall boosts", scored, h, now, prior, names,
                           default=(h.score, {}), record=h.record.id)  # fmt: skip
        scores[h.record.id] = _finite(score)
        h.explanation.boosts = {**h.explanation.boosts, **b}  # the ranker's (time) kept
    citations = cited(svc, who, hits, scores)
    for rid, score in scores.items():
        scores[rid] = _finite(score)
    in_order = sorted(hits, key=lambda h: -scores[h.record.id])
    ordered, dropped = guarded("diversification", diversify, svc, hits, scores,
                               default=(in_order, 0))  # fmt: skip
    scale = 4 if args.unit == "tokens" else 1
    top = ordered[: args.limit]
    pairs = guarded("pairs that may state the same thing", conflicts.marks, svc,
                    [h.record for h in top], default={})  # fmt: skip
    packed = framing.pack(
        [conflicts.entry(h.record, citations.get(h.record.id), pairs.get(h.record.id))
         for h in top],
        args.budget * scale, include_suspicious=args.includeSuspicious,
    )  # fmt: skip
    # the hooks' relevance, shown beside the ranking's; not while the daemon still loads its
    # background words (the first second after start): a recall does not wait for a score
    # that only explains
    if not vocabulary.warming():
        judge = gate.PromptGate(args.query)
        for h in top:
            h.explanation.gate = round(judge.judge(h.record, h.explanation.vector_similarity)
                                       .relevance, 4)  # fmt: skip
    items: list[RecallItem] = []
    for h, (entry, state) in zip(top, packed.states, strict=False):
        rec = h.record
        if rec.id in pairs:
            h.explanation.may_restate = {"id": pairs[rec.id].other, "newer": pairs[rec.id].newer}
        if state == "withheld":  # listed, none of its text
            items.append(withheld.recall_item(rec, scores[rec.id], h.explanation.model_dump()))
            continue
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
                truncated=state == "truncated",
                provenance=entry.provenance,
                suspicious=framing.suspicious(rec),
                inText=state != "withheld",
                citations=citations.get(rec.id, []),
            )  # fmt: skip
        )
    text = packed.text
    return RecallResult(
        items=items,
        text=text,
        used=-(-len(text) // scale),
        budget=args.budget,
        unit=args.unit,
        mode=mode,
        dropped_duplicates=dropped,
    )
