"""Unit tests of the benchmark metric functions (hand-computed expectations)."""

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.harness.metrics import (  # noqa: E402
    evaluate,
    mean_metrics,
    mrr_at_k,
    ndcg_at_k,
    query_metrics,
    recall_at_k,
)


def test_recall_counts_relevant_in_top_k():
    ranked = ["a", "b", "c", "d", "e", "f"]
    assert recall_at_k(ranked, {"b", "f"}, 5) == 0.5
    assert recall_at_k(ranked, {"b", "f"}, 6) == 1.0
    assert recall_at_k(ranked, {"z"}, 10) == 0.0
    assert recall_at_k(ranked, set(), 10) == 0.0
    assert recall_at_k([], {"a"}, 10) == 0.0


def test_recall_ignores_duplicate_ids():
    assert recall_at_k(["a", "a", "a", "b"], {"b"}, 2) == 1.0


def test_ndcg_binary_gains():
    assert ndcg_at_k(["a", "b"], {"a"}, 10) == pytest.approx(1.0)
    # one relevant doc at rank 2: 1/log2(3)
    assert ndcg_at_k(["x", "a"], {"a"}, 10) == pytest.approx(1 / math.log2(3))
    # two relevant, found at ranks 1 and 3: (1 + 1/2) / (1 + 1/log2(3))
    expected = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    assert ndcg_at_k(["a", "x", "b"], {"a", "b"}, 10) == pytest.approx(expected)
    # the ideal is capped at k
    assert ndcg_at_k(["a"], {"a", "b", "c"}, 1) == pytest.approx(1.0)
    assert ndcg_at_k(["x", "y", "z", "a"], {"a"}, 3) == 0.0
    assert ndcg_at_k(["a"], set(), 10) == 0.0


def test_mrr_first_relevant():
    assert mrr_at_k(["a", "b", "c"], {"c", "b"}, 10) == pytest.approx(0.5)
    assert mrr_at_k(["a", "b", "c"], {"c"}, 2) == 0.0
    assert mrr_at_k(["c"], {"c"}, 10) == 1.0


def test_query_metrics_keys():
    m = query_metrics(["a", "b"], {"b"})
    assert set(m) == {"recall@5", "recall@10", "ndcg@10", "mrr@10"}
    assert m["mrr@10"] == 0.5 and m["recall@5"] == 1.0


def test_mean_and_evaluate():
    rows = [query_metrics(["a"], {"a"}), query_metrics(["x"], {"a"})]
    avg = mean_metrics(rows)
    assert avg["queries"] == 2
    assert avg["recall@10"] == 0.5 and avg["ndcg@10"] == 0.5
    assert mean_metrics([])["queries"] == 0
    run = {"q1": ["a", "b"], "q2": ["c"]}
    qrels = {"q1": {"b"}, "q2": {"d"}, "q3": {"e"}, "q4": set()}
    res = evaluate(run, qrels)
    assert res["queries"] == 3  # q4 has no relevant docs; q3 is missing from the run
    assert res["recall@10"] == pytest.approx(1 / 3)
    assert res["mrr@10"] == pytest.approx(0.5 / 3)
