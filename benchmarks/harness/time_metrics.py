"""Per-question metrics of the chat-history sets, as pure functions (``relevance.py
longmemeval``, ``benchmarks/lab/time_lab.py``).

- ``session_recall_any@k``: an answer session among the first k sessions;
- ``recall_all@k``: every answer session among the first k sessions;
- ``turn_recall_any@k``: a unit holding an answer turn among the first k units;
- ``ndcg@10`` over the sessions (binary gains);
- ``newest_first``: the newest answer session ranks above every older one (an older one not
  ranked at all counts as below); only for questions whose answer sessions have at least two
  different dates (knowledge-update questions hold the old value and the new one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from benchmarks.harness.metrics import ndcg_at_k, query_metrics

KS = (5, 10)


def newest_first(sessions: Sequence[str], dates: Mapping[str, float]) -> float | None:
    if len(set(dates.values())) < 2:
        return None
    newest = max(dates, key=lambda s: dates[s])
    rank = {s: i for i, s in enumerate(sessions)}
    if newest not in rank:
        return 0.0
    older = [s for s in dates if dates[s] < dates[newest]]
    return float(all(rank[newest] < rank.get(s, len(sessions)) for s in older))


def longmemeval_metrics(
    sessions: Sequence[str],
    units: Sequence[tuple[str, bool]],
    gold: Sequence[str],
    gold_dates: Mapping[str, float],
) -> dict[str, float]:
    """``sessions``: session ids best first; ``units``: (session, holds an answer turn) of the
    ranked units best first."""
    g = set(gold)
    out = {f"session_recall_any@{k}": float(bool(g & set(sessions[:k]))) for k in KS}
    out.update({f"turn_recall_any@{k}": float(any(h for _, h in units[:k])) for k in KS})
    out["ndcg@10"] = ndcg_at_k(sessions, g, 10)
    out["recall_all@10"] = float(g <= set(sessions[:10]))
    nf = newest_first(sessions, gold_dates)
    if nf is not None:
        out["newest_first"] = nf
    return out


def locomo_metrics(ranked: Sequence[str], gold: set[str]) -> dict[str, float]:
    return query_metrics(ranked, gold)


def mean_rows(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each metric's mean over the rows that have it, and ``queries`` (all rows)."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    out = {}
    for k in keys:
        vals = [r[k] for r in rows if k in r]
        out[k] = round(sum(vals) / len(vals), 4)
    out["queries"] = len(rows)
    return out
