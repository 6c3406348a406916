"""``search_nodes``: entities ranked by hybrid relevance over names, types and observations.

The official server keeps an entity when the whole query is a substring of its name, type or
an observation, so "who works on the billing service" finds nothing. Here:

1. the query runs through the engine's hybrid ranker (FTS5 bm25 + vector cosine, fused to
   [0, 1]) over the graph's ``observation`` and ``lesson`` records — each observation record
   carries its entity's name and type as indexed context, so a hit on any of the three counts;
2. the hits are aggregated per entity with decaying weights (the best observation counts
   fully, the next ones less, so an entity is not outranked by a chatty neighbour that
   repeats a weak match)::

       obs(e)  = s1 + 0.3 * s2 + 0.1 * s3          (s1 ≥ s2 ≥ s3: its best observation scores)

3. a lexical match on the entity's name and type (FTS5 over ``entities_fts``, which also finds
   entities without any observation) adds ``0.5 * bm25(e) / max bm25``::

       score(e) = obs(e) + 0.5 * name(e)

4. an entity whose name and type together contain *every* word of the query ("kubernetes
   cluster" -> ``Kubernetes_Cluster``; "organization" -> every organization) is a direct hit
   and ranks before the others (fused scores are relative, so a fuzzy observation match must
   not outrank the entity the query names); within each tier, by score.

The top ``limit`` entities are returned with all their observations, the best-matching ones
listed in ``matched``, and the relations among the returned entities. What the write policy
flagged is left out (counted) or, with ``include_suspicious``, marked (:mod:`graph.withheld`):
an entity left out gives its place to the next one.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict

from retrieval.errors import InvalidInput
from retrieval.fulltext.analyzer import fts_or_query, query_terms
from retrieval.records import Kind, RecordFilter

from .common import Caller, parse_scope
from .entities import GraphService
from .models import MarkedScoredEntity, MarkedSearchNodesResult, ScoredEntity
from .withheld import Flag, GraphFlags

OBS_WEIGHTS = (1.0, 0.3, 0.1)
NAME_WEIGHT = 0.5
MAX_LIMIT = 100


def _name_match(svc: GraphService, bucket: str, expr: str, depth: int) -> list[tuple[str, float]]:
    try:
        return svc.reader.execute(
            "SELECT e.name, bm25(entities_fts, 1.0, 0.5, 0.8) AS s FROM entities_fts "
            "JOIN entities e ON e.id = entities_fts.rowid "
            "WHERE entities_fts MATCH ? AND e.bucket = ? ORDER BY s LIMIT ?",
            (expr, bucket, depth),
        ).fetchall()
    except sqlite3.OperationalError:
        return []


def name_scores(
    svc: GraphService, bucket: str, query: str, depth: int
) -> tuple[dict[str, float], set[str]]:
    """(bm25 of entity names/types against the query scaled so the best match is 1, the
    entities whose name and type contain every query word)."""
    terms = query_terms(query, 64)
    if not terms:
        return {}, set()
    raw = {name: -float(s) for name, s in _name_match(svc, bucket, fts_or_query(terms), depth)}
    full = {
        name
        for name, _ in _name_match(svc, bucket, fts_or_query(terms).replace(" OR ", " AND "), depth)
    }
    top = max(raw.values(), default=0.0)
    return ({n: s / top for n, s in raw.items()} if top > 0 else {}), full


def search_nodes(
    svc: GraphService, who: Caller, query: str, scope: str | None = None, limit: int = 10,
    *, flag: Flag | None = None, include_suspicious: bool = False,
) -> MarkedSearchNodesResult:  # fmt: skip
    """``flag``: the check of stored names and types (``graph.withheld.Flag``)."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("query must be a non-empty string")
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    bucket = who.bucket(parse_scope(scope).value)
    depth = max(50, 5 * limit)
    f = RecordFilter(buckets=[bucket], kinds=[Kind.observation, Kind.lesson])
    hits = svc.engine.search(query, f, k=depth)
    per: dict[str, list[tuple[float, str, bool]]] = defaultdict(list)
    for h in hits:
        if h.record.entity_name:
            per[h.record.entity_name].append(
                (h.score, h.record.content, h.record.kind is Kind.lesson)
            )
    names, direct = name_scores(svc, bucket, query, depth)
    scores: dict[str, float] = {}
    for name in set(per) | set(names):
        best = sorted((s for s, _, _ in per.get(name, [])), reverse=True)
        obs = sum(w * s for w, s in zip(OBS_WEIGHTS, best, strict=False))
        scores[name] = obs + NAME_WEIGHT * names.get(name, 0.0)
    ranked = sorted(scores, key=lambda n: (n not in direct, -scores[n], n))
    rows = svc.entity_rows(bucket, ranked)
    ranked = [n for n in ranked if n in rows]  # a record whose entity row is gone: skip
    flags = GraphFlags.read(svc, bucket, ranked, flag)
    kept = []
    for n in ranked:  # an entity left out gives its place to the next one
        if len(kept) >= limit:
            break
        if n in flags.entities and not include_suspicious:
            flags.left_out("entity")
        else:
            kept.append(n)
    entities = {e.name: e for e in svc._entities(bucket, [rows[n] for n in kept])}
    out = []
    for n in kept:
        hit = sorted(per.get(n, []), key=lambda p: -p[0])
        hidden = flags.observations.get(n, {})
        matched = [c for _, c, lesson in hit if not lesson and c not in hidden][:3]
        scored = ScoredEntity(**entities[n].model_dump(), score=round(scores[n], 4),
                              matched=matched)  # fmt: skip
        out.append(flags.entity(scored, include_suspicious, MarkedScoredEntity))
    mode = hits[0].explanation.mode if hits else "lexical"
    relations = flags.relations(svc.relations_among(bucket, kept), include_suspicious)
    return MarkedSearchNodesResult(
        entities=out,
        relations=relations,
        ranking=f"{mode}: entities named by every query word first; then s1 + 0.3*s2 + 0.1*s3 "
        "over observation hits + 0.5*name/type match",
        **flags.withheld,
    )
