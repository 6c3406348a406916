"""Ranking metrics as small pure functions (binary relevance).

``ranked`` is a list of document ids, best first; ``relevant`` a set of relevant ids.
Definitions follow the usual IR conventions (BEIR / pytrec_eval with binary gains):

- recall@k  = |top_k ∩ relevant| / |relevant|
- nDCG@k    = DCG@k / IDCG@k, DCG@k = Σ_{i<k, d_i ∈ rel} 1 / log2(i + 2)  (i 0-based),
              IDCG@k = Σ_{i < min(k, |rel|)} 1 / log2(i + 2)
- MRR@k     = 1 / (1-based rank of the first relevant doc in the top k), 0 if none
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

METRICS = ("recall@5", "recall@10", "ndcg@10", "mrr@10")


def _top(ranked: Sequence[str], k: int) -> list[str]:
    """The first k distinct ids (a duplicate id must not count twice)."""
    return list(dict.fromkeys(ranked))[:k]


def recall_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    rel = set(relevant)
    if not rel:
        return 0.0
    return len(rel.intersection(_top(ranked, k))) / len(rel)


def dcg_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    rel = set(relevant)
    return sum(1.0 / math.log2(i + 2) for i, d in enumerate(_top(ranked, k)) if d in rel)


def ndcg_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    rel = set(relevant)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(rel))))
    return dcg_at_k(ranked, rel, k) / ideal if ideal > 0 else 0.0


def mrr_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    rel = set(relevant)
    for i, d in enumerate(_top(ranked, k)):
        if d in rel:
            return 1.0 / (i + 1)
    return 0.0


def query_metrics(ranked: Sequence[str], relevant: Iterable[str]) -> dict[str, float]:
    """All reported metrics of one query."""
    rel = set(relevant)
    return {
        "recall@5": recall_at_k(ranked, rel, 5),
        "recall@10": recall_at_k(ranked, rel, 10),
        "ndcg@10": ndcg_at_k(ranked, rel, 10),
        "mrr@10": mrr_at_k(ranked, rel, 10),
    }


def mean_metrics(per_query: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Average per-query metrics; adds ``queries`` (the count). Empty input gives zeros."""
    n = len(per_query)
    out: dict[str, float] = {m: (sum(q[m] for q in per_query) / n if n else 0.0) for m in METRICS}
    out["queries"] = n
    return out


def evaluate(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Iterable[str]]) -> dict:
    """Mean metrics of a run ({query id: ranked ids}) over the queries that have relevant docs
    (a query missing from the run counts as an empty ranking)."""
    rows = []
    for qid, rel in qrels.items():
        rel = set(rel)
        if rel:
            rows.append(query_metrics(run.get(qid, []), rel))
    return mean_metrics(rows)
