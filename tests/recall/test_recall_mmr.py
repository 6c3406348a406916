"""recall's MMR keeps each candidate's similarity to the chosen set up to date instead of
recomputing it every round: the same order and the same near-duplicates dropped as the
straightforward definition, with one similarity per pair."""

from __future__ import annotations

import random

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.records import RecordFilter
from server.service.memories.memory import MemoryService
from server.service.recalling import recall as rc


def reference(svc, hits, scores):
    """MMR as defined: every round, each candidate's max similarity over all chosen."""
    sim = rc._similarity_fn(svc, hits)
    pool = sorted(hits, key=lambda h: -scores[h.record.id])
    chosen, dropped = [], 0
    while pool:
        best, best_val, dup = None, -1e9, []
        for h in pool:
            m = max((sim(h.record, c.record) for c in chosen), default=0.0)
            if m >= rc.DUPLICATE_SIM:
                dup.append(h)
                continue
            v = rc.MMR_LAMBDA * scores[h.record.id] - (1 - rc.MMR_LAMBDA) * m
            if v > best_val:
                best, best_val = h, v
        for h in dup:
            pool.remove(h)
        dropped += len(dup)
        if best is None:
            break
        chosen.append(best)
        pool.remove(best)
    return chosen, dropped


def test_incremental_mmr_matches_the_definition(tmp_path, make_record):
    rng = random.Random(3)
    words = "deploy pipeline invoice postgres cache wheel token staging billing kafka".split()
    texts = [" ".join(rng.choice(words) for _ in range(6)) for _ in range(60)]
    texts += texts[:8]  # exact duplicates: dropped as near-duplicates
    svc = MemoryService(Engine(tmp_path / "s", HashEmbedder()))
    try:
        svc.engine.add([make_record(t) for t in texts])
        total_dropped = 0
        for query in ("deploy the invoice pipeline", "kafka cache", "staging token billing"):
            hits = svc.engine.search(query, RecordFilter(), k=60)
            scores = {h.record.id: h.score + rng.random() * 0.01 for h in hits}
            got, dropped = rc.diversify(svc, hits, scores)
            want, want_dropped = reference(svc, hits, scores)
            assert [h.record.id for h in got] == [h.record.id for h in want]
            assert dropped == want_dropped
            total_dropped += dropped
        assert total_dropped > 0  # the near-duplicate rule was exercised
    finally:
        svc.engine.close()
