"""Long queries: the part of a prompt that talks about what the store holds.

Real prompts are rarely a bare question: people paste log lines, code and instructions around
it. Asked whole, such a prompt loses on both sides of the hybrid ranker: the embedding model
reads 256 word pieces (a question after 150 words of pasted output is cut off, and what is left
is mostly the wrapper), and the lexical side keeps the first 32 terms. Measured on LoCoMo
questions wrapped in 100-200-word prompts: evidence recall@10 0.19 instead of 0.77.

So a query longer than ``LONG_QUERY_WORDS`` words is split into its sentences and lines
(:func:`windows`), and each window gets a *salience*: how completely the best visible record
covers it (``probe``: the record's bm25 for the window's terms over the window's IDF mass;
terms the store never saw, such as a pasted log's tokens, count for nothing), times the log of
how many known terms it has, doubled for a sentence that asks (ends with ``?``). Only the
``PROBES`` windows with the most rare known terms are probed. The most salient window is then
the query: its embedding on the vector side, its known terms on the lexical side.

Chosen on LoCoMo dev (docs/benchmarks.md, "Hooks"), recall@10 of wrapped questions: the whole
prompt 0.190; max over the prompt and the 1/2/3 windows with the rarest known terms (IDF
salience) 0.468/0.397/0.335 (that salience finds the question 10 % of the time: a wrapper's
sentences also use words the store knows); with the probe and the question cue it finds it
97 % of the time: prompt + best window 0.678, + two best 0.692, the best window alone on both
sides 0.741 (two windows 0.722; adding the prompt's other known terms to the lexical side
0.680). Bare questions: 0.768. Queries up to ``LONG_QUERY_WORDS`` words rank exactly as before.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .analyzer import query_terms

LONG_QUERY_WORDS = 48
WINDOW_WORDS = 32
SALIENT_VIEWS = 1
MAX_TERMS = 32
PROBES = 8  # windows probed against the store (those with the rarest known terms)
QUESTION_BONUS = 1.0  # a window that asks (ends with "?") counts 1 + this times

_PIECES = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass
class QueryViews:
    lexical: list[str] | None  # the terms for the lexical side (None: the query's own)
    vector: list[str]  # texts whose best cosine is a record's similarity


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
    salient: int = SALIENT_VIEWS,
    max_terms: int = MAX_TERMS,
    probe: Callable[[list[str]], float] | None = None,
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
    wins = windows(query)
    scores = [salience(w, idf) for w in wins]
    if probe is not None:
        probed = sorted(range(len(wins)), key=lambda i: -scores[i])[:PROBES]
        for i in range(len(wins)):
            scores[i] = 0.0 if i not in probed else _covered(wins[i], idf, probe)
    ranked = sorted(range(len(wins)), key=lambda i: -scores[i])
    top = [wins[i] for i in ranked[:salient] if scores[i] > 0]
    if not top:
        return QueryViews(None, [query])
    lexical: list[str] = []
    for w in top:
        lexical += [t for t in query_terms(w, 10_000) if idf.get(t, 0.0) > 0.0]
    return QueryViews(list(dict.fromkeys(lexical))[:max_terms], top)


def _covered(window: str, idf: Mapping[str, float], probe) -> float:
    known = [t for t in dict.fromkeys(query_terms(window, 10_000)) if idf.get(t, 0.0) > 0.0]
    mass = sum(idf[t] for t in known)
    if mass <= 0:
        return 0.0
    asks = 1.0 + QUESTION_BONUS if window.rstrip().endswith("?") else 1.0
    return asks * min(probe(known) / mass, 1.5) * math.log1p(len(known))
