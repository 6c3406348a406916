"""Score fusion as small pure numpy functions. Every input array is aligned to one candidate
list; ``nan`` marks "this retriever has no score for this candidate".
"""

from __future__ import annotations

import numpy as np


def minmax(x: np.ndarray) -> np.ndarray:
    """Min-max normalisation to [0, 1]; missing values become 0 (the list minimum)."""
    x = np.asarray(x, dtype=np.float64)
    ok = ~np.isnan(x)
    out = np.zeros_like(x)
    if ok.any():
        lo, hi = x[ok].min(), x[ok].max()
        out[ok] = (x[ok] - lo) / (hi - lo) if hi > lo else 1.0
    return out


def zscore(x: np.ndarray) -> np.ndarray:
    """Standard score (x - mean) / std over present values; missing values get the minimum."""
    x = np.asarray(x, dtype=np.float64)
    ok = ~np.isnan(x)
    out = np.zeros_like(x)
    if ok.sum() > 1:
        mu, sd = x[ok].mean(), x[ok].std()
        out[ok] = (x[ok] - mu) / sd if sd > 0 else 0.0
        out[~ok] = out[ok].min()
    return out


def convex(lexical: np.ndarray, vector: np.ndarray, alpha: float, norm=minmax) -> np.ndarray:
    """Convex combination  s = alpha * N(vector) + (1 - alpha) * N(lexical)
    (Bruch et al., "An Analysis of Fusion Functions for Hybrid Retrieval", TOIS 2023)."""
    return alpha * norm(vector) + (1.0 - alpha) * norm(lexical)


def ranks(x: np.ndarray) -> np.ndarray:
    """1-based descending ranks; missing values rank last (inf)."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(-np.nan_to_num(x, nan=-np.inf), kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(1, len(x) + 1)
    r[np.isnan(x)] = np.inf
    return r


def rrf(*scores: np.ndarray, k: float = 60.0) -> np.ndarray:
    """Reciprocal rank fusion  s = sum_i 1 / (k + rank_i)  (Cormack et al., SIGIR 2009)."""
    return sum(1.0 / (k + ranks(s)) for s in scores)
