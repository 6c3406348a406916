"""Score fusion on hand-computed examples, and the hybrid ranker's use of it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.ranking import fusion
from retrieval.ranking.hybrid import FusionConfig
from retrieval.records import Record, RecordFilter

nan = float("nan")


def close(a, b):
    np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), atol=1e-9)


# ---------------------------------------------------------------------- minmax
def test_minmax():
    close(fusion.minmax([1.0, 2.0, 3.0]), [0.0, 0.5, 1.0])
    close(fusion.minmax([-4.0, 0.0, 4.0, 2.0]), [0.0, 0.5, 1.0, 0.75])


def test_minmax_missing_values_become_zero():
    close(fusion.minmax([nan, 2.0, 4.0, 3.0]), [0.0, 0.0, 1.0, 0.5])
    close(fusion.minmax([nan, nan]), [0.0, 0.0])
    close(fusion.minmax([]), [])


def test_minmax_constant_list_is_all_ones():
    close(fusion.minmax([5.0, 5.0, nan]), [1.0, 1.0, 0.0])
    close(fusion.minmax([7.0]), [1.0])


# ---------------------------------------------------------------------- zscore
def test_zscore():
    # mean 2, population std sqrt(2/3)
    s = math.sqrt(2 / 3)
    close(fusion.zscore([1.0, 2.0, 3.0]), [-1 / s, 0.0, 1 / s])


def test_zscore_missing_values_get_the_minimum():
    # present: [2, 4] -> mean 3, std 1 -> [-1, 1]; the missing one takes -1
    close(fusion.zscore([2.0, nan, 4.0]), [-1.0, -1.0, 1.0])


def test_zscore_degenerate_lists_are_zero():
    close(fusion.zscore([3.0, 3.0, 3.0]), [0.0, 0.0, 0.0])
    close(fusion.zscore([3.0, nan]), [0.0, 0.0])
    close(fusion.zscore([nan, nan]), [0.0, 0.0])


# ---------------------------------------------------------------------- convex
def test_convex_weights_the_vector_side_by_alpha():
    lex = [1.0, 2.0, 3.0]  # minmax -> [0, .5, 1]
    vec = [0.9, 0.5, 0.1]  # minmax -> [1, .5, 0]
    close(fusion.convex(lex, vec, 0.25), [0.25, 0.5, 0.75])
    close(fusion.convex(lex, vec, 1.0), [1.0, 0.5, 0.0])
    close(fusion.convex(lex, vec, 0.0), [0.0, 0.5, 1.0])


def test_convex_with_missing_scores_and_zscore():
    lex = [nan, 10.0, 20.0]  # minmax -> [0, 0, 1]
    vec = [0.8, 0.4, nan]  # minmax -> [1, 0, 0]
    close(fusion.convex(lex, vec, 0.5), [0.5, 0.0, 0.5])
    # zscore: lex present [10, 20] -> [-1, 1], missing -1; vec [0.8, 0.4] -> [1, -1], missing -1
    close(fusion.convex(lex, vec, 0.5, norm=fusion.zscore), [0.0, -1.0, 0.0])


# ---------------------------------------------------------------------- ranks / rrf
def test_ranks_are_descending_one_based_and_missing_last():
    close(fusion.ranks([0.1, 0.9, nan, 0.5]), [3, 1, math.inf, 2])
    close(fusion.ranks([2.0, 2.0, 1.0]), [1, 2, 3])  # ties keep list order
    close(fusion.ranks([nan, nan]), [math.inf, math.inf])
    close(fusion.ranks([-1.0, -3.0]), [1, 2])


def test_rrf():
    a = [3.0, 2.0, 1.0]  # ranks 1 2 3
    b = [1.0, 2.0, 3.0]  # ranks 3 2 1
    close(fusion.rrf(a, b), [1 / 61 + 1 / 63, 2 / 62, 1 / 63 + 1 / 61])
    close(fusion.rrf(a, b, k=0), [1 + 1 / 3, 1.0, 1 / 3 + 1])


def test_rrf_missing_contributes_nothing():
    a = [0.5, nan, 0.2]  # ranks 1 inf 2
    b = [nan, 0.7, 0.9]  # ranks inf 2 1
    close(fusion.rrf(a, b, k=10), [1 / 11, 1 / 12, 1 / 12 + 1 / 11])


# ---------------------------------------------------------------------- the hybrid ranker
CORPUS = [
    "rotate the api keys every ninety days",
    "api gateway timeouts after the deploy",
    "keys for the office are at the front desk",
    "deploy freeze during the holidays",
    "ninety percent of requests hit the cache",
    "a note about nothing in particular",
]


@pytest.fixture(scope="module", params=["convex-minmax", "convex-zscore", "rrf"])
def fused_engine(request, tmp_path_factory):
    method, _, norm = request.param.partition("-")
    cfg = FusionConfig(method=method, norm=norm or "minmax", alpha=0.5)
    eng = Engine(tmp_path_factory.mktemp("fusion"), HashEmbedder(), fusion=cfg)
    eng.add([Record(project_id="proj", agent_id="agent", content=t) for t in CORPUS])
    yield eng, cfg
    eng.close()


def test_hybrid_hits_explain_their_fused_score(fused_engine):
    eng, cfg = fused_engine
    hits = eng.search("rotate api keys ninety days", RecordFilter(), k=50, mode="hybrid")
    assert len(hits) == len(CORPUS)  # every record is a vector candidate
    assert hits[0].record.content == CORPUS[0]
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    ex = [h.explanation for h in hits]
    assert all(e.mode == "hybrid" for e in ex)
    # score completion: every candidate has both sides
    assert all(e.lexical_score is not None and e.vector_similarity is not None for e in ex)
    assert sorted(e.vector_rank for e in ex) == list(range(1, len(CORPUS) + 1))
    L = np.array([e.lexical_score for e in ex])
    V = np.array([e.vector_similarity for e in ex])
    if cfg.method == "rrf":
        expected = [
            (1 / (60 + e.lexical_rank) if e.lexical_rank else 0.0) + 1 / (60 + e.vector_rank)
            for e in ex
        ]
        # a record without any query term has a lexical score (0) but no lexical rank
        assert all((e.lexical_rank is None) == (e.lexical_score == 0) for e in ex)
    else:
        norm = fusion.zscore if cfg.norm == "zscore" else fusion.minmax
        expected = fusion.convex(L, V, cfg.alpha, norm)
    np.testing.assert_allclose([e.fused_score for e in ex], expected, atol=2e-3)
    np.testing.assert_allclose(scores, [e.fused_score for e in ex], atol=1e-4)


@pytest.mark.parametrize("mode", ["lexical", "vector"])
def test_single_retriever_scores_are_the_raw_scores(fused_engine, mode):
    eng, _ = fused_engine
    hits = eng.search("rotate api keys ninety days", RecordFilter(), k=50, mode=mode)
    for rank, h in enumerate(hits, 1):
        e = h.explanation
        assert e.mode == mode
        if mode == "lexical":
            assert e.vector_similarity is None and e.lexical_rank == rank
            assert h.score == pytest.approx(e.lexical_score, abs=1e-4)
        else:
            assert e.lexical_score is None and e.vector_rank == rank
            assert h.score == pytest.approx(e.vector_similarity, abs=1e-4)
    if mode == "lexical":  # only records sharing a term
        assert {h.record.content for h in hits} == set(CORPUS[:3] + [CORPUS[4]])


class FixedEmbedder:
    """Vectors chosen by hand: text -> 2-d unit vector at the given cosine to the query."""

    model_id = "fixed-2"
    dimension = 2

    def __init__(self, cosines: dict[str, float]) -> None:
        self.cosines = cosines

    def _vec(self, text: str) -> np.ndarray:
        c = self.cosines.get(text, 1.0)
        return np.array([c, math.sqrt(max(0.0, 1 - c * c))], dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return np.array([1.0, 0.0], dtype=np.float32)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._vec(t) for t in texts])


def test_rrf_gives_no_lexical_vote_to_records_without_a_query_term(open_engine, make_record):
    # A is the only lexical match and third by vector; B and C match no query term
    a, b, c = "zebra crossing", "pedestrian lights", "traffic island"
    eng = open_engine(
        FixedEmbedder({a: 0.1, b: 0.9, c: 0.8}), fusion=FusionConfig(method="rrf", rrf_k=60)
    )
    eng.add([make_record(t) for t in (a, b, c)])
    hits = eng.search("zebra", RecordFilter(), k=3, mode="hybrid")
    got = {h.record.content: h for h in hits}
    assert [e.explanation.vector_rank for e in (got[a], got[b], got[c])] == [3, 1, 2]
    assert got[a].explanation.lexical_rank == 1
    # completion scored B and C lexically (0.0: no term), which is no rank and no vote
    assert got[b].explanation.lexical_score == 0.0 and got[b].explanation.lexical_rank is None
    assert got[b].score == pytest.approx(1 / 61)
    assert got[c].score == pytest.approx(1 / 62)
    assert got[a].score == pytest.approx(1 / 61 + 1 / 63)
    assert [h.record.content for h in hits] == [a, b, c]
