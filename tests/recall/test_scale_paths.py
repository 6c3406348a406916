"""The fast paths added for recall latency at scale give the same answers as the slow ones:
one FTS5 pass with every score (``LexicalIndex.search_all``) vs top-k + ``score_ids``; the
id-pinned ``filter_ids``; Chroma queries without ``count()``/metadata; document-frequency
pruning only when asked for; data-parallel bulk embedding."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.fulltext.lexical import LexicalIndex
from retrieval.records import Record, RecordFilter, Scope

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda".split()


def _uniq(i: int) -> str:
    return "uq" + chr(97 + i % 26) + chr(97 + i // 26)


def _corpus(n: int = 120) -> list[Record]:
    rng = np.random.default_rng(5)
    out = []
    for i in range(n):
        words = list(rng.choice(WORDS, size=6)) + [_uniq(i)]
        if i % 2 == 0:
            words.append("common")
        out.append(
            Record(
                project_id="p",
                agent_id=f"a{i % 3}",
                scope=[Scope.private, Scope.team, Scope.public][i % 3],
                content=" ".join(words),
            )
        )
    return out


def test_search_all_matches_search_and_score_ids(engine):
    engine.add(_corpus())
    lex = engine.lexical
    f = RecordFilter(buckets=["private/p/a0", "public"])
    q = f"alpha gamma common {_uniq(6)} {_uniq(9)}"
    top, every = lex.search_all(q, f, 10)
    ref = lex.search(q, f, 10)
    assert np.allclose([s for _, s in top], [s for _, s in ref])  # ties may swap ids
    assert [s for _, s in top] == sorted((s for _, s in top), reverse=True)
    assert all(every[r] == pytest.approx(s) for r, s in top)
    visible = engine.store.list(f)
    want = lex.score_ids(q, [r.id for r in visible])
    assert set(every) == set(want)
    for rid, s in want.items():
        assert every[rid] == pytest.approx(s)
    assert all(r.bucket in f.buckets for r in engine.store.get(list(every)).values())


def test_hybrid_scores_unchanged_by_search_all(engine):
    engine.add(_corpus())
    f = RecordFilter(buckets=["team/p", "public"])
    q = "beta delta common"
    fast = engine.search(q, f, k=15)

    def slow_search(query, flt, limit, conn=None):
        return engine.lexical.search(query, flt, limit), None

    engine.ranker.lexical.search_all = slow_search  # no scores: completion via score_ids
    slow = engine.search(q, f, k=15)
    assert [h.record.id for h in fast] == [h.record.id for h in slow]
    assert [h.explanation.lexical_score for h in fast] == [
        h.explanation.lexical_score for h in slow
    ]


def test_filter_ids_keeps_order_and_visibility(engine):
    recs = engine.add(_corpus(60))
    f = RecordFilter(buckets=["private/p/a0"])
    ids = [r.id for r in reversed(recs)] + ["missing-id"]
    got = engine.store.filter_ids(f, ids)
    assert got == [r.id for r in reversed(recs) if r.bucket == "private/p/a0"]


@pytest.mark.usefixtures("vector_index")  # the index, not the exact scan
def test_vector_query_small_and_empty_buckets(engine):
    recs = engine.add(_corpus(5))
    q = engine.embedder.embed_query("alpha")
    hits = engine.vectors.query(
        ["private/p/a0", "team/p", "nobody"], engine.embedder.model_id, q, 50
    )
    assert {h[0] for h in hits} == {r.id for r in recs if r.bucket in ("private/p/a0", "team/p")}


def test_df_pruning_is_opt_in(engine):
    engine.add(_corpus())
    assert engine.lexical.max_df is None
    pruned = LexicalIndex(engine.store, max_df=0.3, min_terms=1)
    a, b = _uniq(3), _uniq(5)
    q = f"common {a} {b} nonexistentword"
    assert pruned.prune_terms(["common", a, b, "nonexistentword"]) == [a, b]
    assert pruned.match_expr(q) == f'"{a}" OR "{b}"'
    assert engine.lexical.match_expr(q).count(" OR ") == 3
    # at least min_terms (rarest first) survive even when every term is common
    keep2 = LexicalIndex(engine.store, max_df=0.01, min_terms=2)
    assert keep2.prune_terms(["common", "alpha", a]) == ["alpha", a]


@pytest.mark.slow
def test_bulk_workers_match_single_call(real_embedder):
    texts = [f"sentence number {i} about {WORDS[i % len(WORDS)]} and more words" for i in range(80)]
    mode = real_embedder.bulk_mode
    threads = real_embedder.bulk_threads
    try:
        real_embedder.bulk_mode, real_embedder.bulk_threads = "workers", 2
        a = real_embedder.embed_documents(texts)
        real_embedder.bulk_mode = "intra-op"
        b = real_embedder.embed_documents(texts)
    finally:
        real_embedder.bulk_mode, real_embedder.bulk_threads = mode, threads
    assert a.shape == b.shape
    assert float((a * b).sum(1).min()) > 0.99999


def test_query_vector_cache_is_a_small_lru(monkeypatch):
    from retrieval.embedding.embedder import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder()
    calls = []

    def fake_encode(text):
        calls.append(text)
        return np.full(4, float(len(calls)), dtype=np.float32)

    monkeypatch.setattr(emb, "_encode_query", fake_encode)
    emb.query_cache = 2
    a = emb.embed_query("a")
    assert emb.embed_query("a") is a and not a.flags.writeable
    emb.embed_query("b")
    emb.embed_query("a")  # a is now the most recent
    emb.embed_query("c")  # evicts b
    emb.embed_query("a")
    emb.embed_query("b")
    assert calls == ["a", "b", "c", "b"]
    emb.query_cache = 0
    emb.embed_query("a")
    assert calls[-1] == "a"


def test_prefetched_completion_equals_reading_the_vectors(engine):
    recs = engine.add(_corpus(30))
    ranker = engine.ranker
    q = engine.embedder.embed_query("alpha gamma")
    ids = [r.id for r in recs[:12]] + ["missing-id"]
    direct = ranker._exact(q, ids)
    stored = engine.store.embeddings(ids[:5], engine.embedder.model_id)
    assert ranker._exact(q, ids, stored) == direct
    slow = {
        rid: float(np.max(m @ q))
        for rid, m in engine.store.embeddings(ids, engine.embedder.model_id).items()
    }
    assert direct.keys() == slow.keys()
    assert all(direct[r] == pytest.approx(slow[r], abs=1e-6) for r in slow)
