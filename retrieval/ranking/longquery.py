"""Long queries: a pasted report is evidence from every sentence; a question wrapped in pasted
output is its question.

Real prompts are rarely a bare question. Some are a bug report or an issue pasted whole ("fix
this"): every sentence is evidence, and the record that shares most of them is the answer. Others
wrap a question in log lines, code and instructions: the wrapper is noise, the question is all
that matters. One treatment serves both: a query longer than ``LONG_QUERY_WORDS`` words is asked
whole, and its *salient window* is weighed in by how much it stands out.

- Views (:func:`views`): the lexical side gets every query term the store knows (the
  ``MAX_TERMS`` rarest; terms the store never saw, such as a pasted log's tokens, are left out),
  the vector side the whole query. The salient window is the sentence or line most completely
  covered by one record (``probe``: that record's bm25 for the window's terms over their IDF
  mass, times the log of how many there are, doubled for a sentence that asks).
- Weight (:func:`salient_weight`): w in [0, 1], 1 when the salient window stands out among the
  windows (``gap`` = 1 - second best / best, ramped over ``GAP_LO``..``GAP_HI``) or when its best
  record matches it clearly better than the whole query's best record matches the whole (cosine
  ``gain``, ramped over ``GAIN_LO``..``GAIN_HI``). The ranker then adds ``w * SALIENT_TERMS``
  times the window's bm25 to the lexical side (bm25 sums over query terms: the window's terms
  count that many times more), moves ``w * SALIENT_VECTOR`` of the vector side to the window's
  cosine, and moves the vector weight of the fusion from ``FusionConfig.long_alpha`` (a report:
  the embedding of the whole text leads) to ``alpha`` (a wrapped question: asked like one).

Measured (docs/benchmarks.md, "Long queries, code and chat histories"): recall@10 on Jira bug
reports as queries 0.524 with the salient window alone, 0.655 this way (its better single side:
0.610); LoCoMo questions wrapped in 100-200-word prompts 0.742 either way on the direct store
(bare questions 0.768). Queries up to ``LONG_QUERY_WORDS`` words rank exactly as before.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from retrieval.fulltext.analyzer import query_terms

LONG_QUERY_WORDS = 48
WINDOW_WORDS = 32
MAX_TERMS = 64  # known terms of a long query on the lexical side (the rarest)
SALIENT_TERMS = 10.0  # the salient window's terms count up to this many times more
SALIENT_VECTOR = 1.0  # the salient window's share of the vector side, at full weight
GAP_LO, GAP_HI = 0.2, 0.5  # salient_weight: the gap ramp
GAIN_LO, GAIN_HI = 0.0, 0.1  # salient_weight: the cosine-gain ramp
PROBES = 8  # windows probed against the store (those with the rarest known terms)
QUESTION_BONUS = 1.0  # a window that asks (ends with "?") counts 1 + this times

_PIECES = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass
class QueryViews:
    lexical: list[str] | None  # the terms for the lexical side (None: the query's own)
    vector: list[str]  # texts embedded for the vector side: the query, then its salient window
    salient_terms: list[str] = field(default_factory=list)  # the salient window's known terms
    gap: float = 0.0  # how far the salient window stands out: 1 - (second best / best)

    @property
    def salient(self) -> str | None:
        return self.vector[1] if len(self.vector) > 1 else None


def ramp(x: float, lo: float, hi: float) -> float:
    """0 below ``lo``, 1 above ``hi``, linear between."""
    return min(1.0, max(0.0, (x - lo) / (hi - lo)))


def salient_weight(gap: float, gain: float) -> float:
    """How much a long query is its salient window, in [0, 1]: 1 when the window stands out
    among the query's windows (``gap``) or when its best record matches it clearly better than
    the whole query's best record matches the whole (``gain``, a cosine difference): a question
    wrapped in pasted output. 0 for a report whose every sentence is evidence."""
    return max(ramp(gap, GAP_LO, GAP_HI), ramp(gain, GAIN_LO, GAIN_HI))


def windows(query: str, size: int = WINDOW_WORDS, min_words: int = 4) -> list[str]:
    """The sentences and lines of ``query``: a piece longer than ``size`` words is cut into
    pieces of ``size`` words, one shorter than ``min_words`` words joins the next."""
    out: list[str] = []
    carry: list[str] = []
    for piece in _PIECES.split(query):
        words = carry + piece.split()
        carry = []
        if len(words) < min_words:
            carry = words
            continue
        for i in range(0, len(words), size):
            out.append(" ".join(words[i : i + size]))
    if carry:
        if out:
            out[-1] = f"{out[-1]} {' '.join(carry)}"
        else:
            out.append(" ".join(carry))
    return [w for w in out if w.strip()]


def salience(window: str, idf: Mapping[str, float]) -> float:
    """Mean IDF of the window's terms that occur in the store, times the log of how many do
    (a window naming several rare known things beats one naming a single one)."""
    known = [idf[t] for t in query_terms(window, 10_000) if idf.get(t, 0.0) > 0.0]
    if not known:
        return 0.0
    asks = 1.0 + QUESTION_BONUS if window.rstrip().endswith("?") else 1.0
    return asks * (sum(known) / len(known)) * math.log1p(len(known))


def is_long(query: str) -> bool:
    return len(query.split()) > LONG_QUERY_WORDS


def views(
    query: str,
    doc_freqs: Callable[[Sequence[str]], Mapping[str, int]],
    n_docs: int,
    probe: Callable[[list[str]], float] | None = None,
    max_terms: int = MAX_TERMS,
) -> QueryViews:
    """The views of a long query (module docstring); a short query is its own only view.
    ``probe(terms)``: the best bm25 any visible record gets for those terms; without it the
    windows are ranked by their known terms' IDF alone (:func:`salience`)."""
    if not is_long(query):
        return QueryViews(None, [query])
    terms = query_terms(query, 10_000)
    dfs = doc_freqs(terms)
    n = max(1, n_docs)
    idf = {t: math.log(1 + (n - df + 0.5) / (df + 0.5)) if df > 0 else 0.0
           for t, df in dfs.items()}  # fmt: skip
    known = [t for t in terms if idf.get(t, 0.0) > 0.0]
    if len(known) > max_terms:  # the rarest, in the query's order
        keep = set(sorted(known, key=lambda t: -idf[t])[:max_terms])
        known = [t for t in known if t in keep]
    salient, gap = best_window(query, idf, probe)
    if salient is None:
        return QueryViews(known or None, [query])
    sal_terms = [t for t in dict.fromkeys(query_terms(salient, 10_000)) if idf.get(t, 0.0) > 0.0]
    return QueryViews(known, [query, salient], sal_terms[:MAX_TERMS], gap)


def best_window(query: str, idf: Mapping[str, float], probe=None) -> tuple[str | None, float]:
    """The window of ``query`` most completely covered by one record (``probe``; by IDF
    salience alone without it) and its gap to the next (1 - second / best); (None, 0) when no
    window holds a known term."""
    wins = windows(query)
    scores = [salience(w, idf) for w in wins]
    if probe is not None:
        probed = set(sorted(range(len(wins)), key=lambda i: -scores[i])[:PROBES])
        scores = [_covered(w, idf, probe) if i in probed else 0.0 for i, w in enumerate(wins)]
    order = sorted(range(len(wins)), key=lambda i: -scores[i])
    if not order or scores[order[0]] <= 0:
        return None, 0.0
    second = scores[order[1]] if len(order) > 1 else 0.0
    return wins[order[0]], 1.0 - second / scores[order[0]]


def _covered(window: str, idf: Mapping[str, float], probe) -> float:
    known = [t for t in dict.fromkeys(query_terms(window, 10_000)) if idf.get(t, 0.0) > 0.0]
    mass = sum(idf[t] for t in known)
    if mass <= 0:
        return 0.0
    asks = 1.0 + QUESTION_BONUS if window.rstrip().endswith("?") else 1.0
    return asks * min(probe(known) / mass, 1.5) * math.log1p(len(known))
