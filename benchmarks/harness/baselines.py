"""The plain baselines every relevance run prints beside the engine: a stdlib BM25 and the
embedding model alone, over the same documents and queries.

- :class:`StdlibBM25`: Okapi BM25 over lower-cased ``[a-z0-9]+`` tokens of the whole text
  (stopwords kept out, no stemming), every query token counted as often as it occurs (as
  ``rank_bm25`` does):

      score(D, Q) = sum_{t in Q} idf(t) * f(t, D) * (k1 + 1) / (f(t, D) + k1 * (1 - b + b * |D| / avgdl))
      idf(t)      = ln(1 + (N - n(t) + 0.5) / (n(t) + 0.5))          (Lucene's non-negative idf)

  with k1 = 1.2, b = 0.75 (Robertson & Zaragoza, "The Probabilistic Relevance Framework", 2009).
- :func:`dense_scores`: the model's cosine between the whole query and each whole document, one
  vector each (the model truncates at its 256 word pieces), as a user of the bare model gets.
- :func:`blend`: their 50/50 min-max blend.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from retrieval.fulltext.analyzer import STOPWORDS

_TOKEN = re.compile(r"[a-z0-9]+")
K1, B = 1.2, 0.75


def tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS and len(t) > 1]


class StdlibBM25:
    """BM25 over a fixed list of documents (pure Python dictionaries, numpy for the sums)."""

    def __init__(self, docs: Sequence[str] | Sequence[Counter]) -> None:
        self.tf = [d if isinstance(d, Counter) else Counter(tokens(d)) for d in docs]
        self.n = len(self.tf)
        self.dl = np.array([sum(c.values()) for c in self.tf], dtype=np.float64)
        self.avgdl = float(self.dl.mean()) if self.n else 1.0
        self.post: dict[str, list[tuple[int, int]]] = {}
        for i, c in enumerate(self.tf):
            for t, f in c.items():
                self.post.setdefault(t, []).append((i, f))

    def idf(self, term: str) -> float:
        df = len(self.post.get(term, ()))
        return math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(self.n)
        norm = K1 * (1.0 - B + B * self.dl / self.avgdl)
        for term, qtf in Counter(tokens(query)).items():
            post = self.post.get(term)
            if not post:
                continue
            idx = np.fromiter((i for i, _ in post), dtype=np.int64, count=len(post))
            f = np.fromiter((f for _, f in post), dtype=np.float64, count=len(post))
            out[idx] += qtf * self.idf(term) * f * (K1 + 1.0) / (f + norm[idx])
        return out


def dense_scores(embedder, query: str, doc_vectors: np.ndarray) -> np.ndarray:
    """Cosine of the whole query (one vector) with each document's one vector."""
    q = np.asarray(embedder.embed_documents([query])[0], dtype=np.float32)
    return doc_vectors @ q


def whole_vectors(embedder, texts: Sequence[str]) -> np.ndarray:
    """One vector per whole text (truncated by the model)."""
    return np.asarray(embedder.embed_documents(list(texts)), dtype=np.float32)


def minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.ones_like(x)


def blend(lexical: np.ndarray, dense: np.ndarray) -> np.ndarray:
    """0.5 * minmax(lexical) + 0.5 * minmax(dense) over all documents."""
    return 0.5 * minmax(lexical) + 0.5 * minmax(dense)


def top_ids(scores: np.ndarray, ids: Sequence[str], k: int = 10) -> list[str]:
    k = min(k, len(ids))
    if k <= 0:
        return []
    part = np.argpartition(-scores, k - 1)[:k]
    return [ids[i] for i in part[np.argsort(-scores[part], kind="stable")]]
