"""The part of a long record that a query is about.

A record is embedded as word windows and ranks by its best one (``retrieval.engine``). When a
record is too long to quote whole within an injection budget, quoting its start shows the part
the query did not match: a chat exchange whose answer comes after a long problem statement, a
LongMemEval-style session part whose one relevant sentence sits in its middle. Instead the
excerpt is the record's start (what the user asked or stated, in an exchange) and its best window
for the query, widened word by word (forward twice as fast as backward: what follows a match,
such as the answer to a matched question, is usually what the reader needs) to ``max_chars``,
with ``…`` where the content goes on.
"""

from __future__ import annotations

import re

import numpy as np

from retrieval.engine import Engine
from retrieval.fulltext.analyzer import query_terms
from retrieval.ranking.guard import guarded
from retrieval.records import Record

_WORD = re.compile(r"\S+")
FORWARD = 2  # words taken after the match for each word taken before it
HEAD_SHARE = 1 / 3  # of an excerpt's room, kept for the record's start
MARK = "…"
MAX_CONTENT = 128 * 1024  # a longer record (a whole imported file) is quoted from its start
_REPLY = re.compile(r"^Reply: ", re.M)  # an exchange's reply line (ingest.sessions.exchanges)


Scored = tuple[list[tuple[int, int]], np.ndarray]  # a record's window spans, their cosines


def window_scores(
    engine: Engine, rec: Record, qvec: np.ndarray, spans: list[tuple[int, int]] | None = None
) -> Scored | None:
    """``rec``'s window spans (``engine.spans``, or ``spans`` already computed) and each
    window's cosine to ``qvec``; None when the record has no current vectors for the engine's
    model or they do not match its windows (a model or window size changed since)."""
    spans = spans if spans is not None else engine.spans(rec)
    if engine.embedder is None or not spans:
        return None
    vecs = engine.store.embeddings([rec.id], engine.embedder.model_id).get(rec.id)
    if vecs is None or len(vecs) != len(spans):
        return None
    return spans, vecs @ np.asarray(qvec, dtype=np.float32).reshape(-1)


def best_of(
    scored: Scored | None, first: int = 0, last: int | None = None
) -> tuple[int, int] | None:
    """The best-scored span among those that end after word ``first`` and start before word
    ``last``; None when there is none (or nothing was scored)."""
    if scored is None:
        return None
    spans, sims = scored
    keep = [i for i, (a, b) in enumerate(spans) if b > first and (last is None or a < last)]
    return spans[max(keep, key=lambda i: sims[i])] if keep else None


def best_window(
    engine: Engine, rec: Record, qvec: np.ndarray, first: int = 0, last: int | None = None
) -> tuple[int, int] | None:
    """The content word range ``[start, end)`` of ``rec``'s window closest to ``qvec`` among
    the windows that end after word ``first`` and start before word ``last``; None when there
    is none, or when the record has no current vectors (:func:`window_scores`)."""
    return best_of(window_scores(engine, rec, qvec), first, last)


def widen(
    content: str, span: tuple[int, int], max_chars: int, terms: frozenset[str] = frozenset()
) -> str:
    """``content``'s words ``span``, widened (``FORWARD`` words after for one before) while
    the excerpt stays within ``max_chars``. When the span alone exceeds them it is narrowed
    first: towards its words that hold a query term of ``terms`` (:func:`narrow`), else from
    its end. Original spacing and line breaks are kept; ``…`` marks omitted text."""
    found = list(_WORD.finditer(content))
    marks = [m.span() for m in found]
    n = len(marks)
    a, b = max(0, min(span[0], n - 1)), max(1, min(span[1], n))

    def size(lo: int, hi: int) -> int:
        return marks[hi - 1][1] - marks[lo][0] + 2 * (len(MARK) + 1)

    if b - a > 1 and size(a, b) > max_chars:
        hits = [bool(terms) and not terms.isdisjoint(query_terms(m.group())) for m in found[a:b]]
        lo, hi = narrow(hits, lambda i, j: size(a + i, a + j) <= max_chars)
        a, b = a + lo, a + hi
    grew = True
    while grew:
        grew = False
        for _ in range(FORWARD):
            if b < n and size(a, b + 1) <= max_chars:
                b, grew = b + 1, True
        if a > 0 and size(a - 1, b) <= max_chars:
            a, grew = a - 1, True
    text = content[marks[a][0] : marks[b - 1][1]]
    if len(text) > max_chars:
        text = text[: max(0, max_chars - len(MARK))]
    return f"{MARK} " * (a > 0) + text + f" {MARK}" * (b < n)


def narrow(hits: list[bool], fits) -> tuple[int, int]:
    """The sub-range ``[lo, hi)`` of a too-long span (``hits[i]``: word *i* holds a query
    term) that ``fits(lo, hi)``: words are dropped from the end whose half holds fewer hits
    (the end itself first when it holds none and the other does), from the right on a tie,
    so what stays is the densest run of matches or, with none, the span's start."""
    lo, hi = 0, len(hits)
    while hi - lo > 1 and not fits(lo, hi):
        mid = (lo + hi) // 2
        left, right = sum(hits[lo:mid]), sum(hits[mid:hi])
        if hits[lo] != hits[hi - 1]:
            drop_left = not hits[lo]
        else:
            drop_left = left < right
        lo, hi = (lo + 1, hi) if drop_left else (lo, hi - 1)
    return lo, hi


def excerpt(
    engine: Engine,
    rec: Record,
    qvec: np.ndarray | None,
    max_chars: int,
    terms: frozenset[str] = frozenset(),
) -> str | None:
    """The text to quote for ``rec`` when its content exceeds ``max_chars``. None when the
    content fits whole, or when no window can be chosen (no query vector, no current record
    vectors, a record longer than :data:`MAX_CONTENT`, a record the excerpt cannot read:
    :mod:`retrieval.ranking.guard`): the caller then quotes the content, cut at the budget. ``terms``: the query's terms
    (``retrieval.fulltext.analyzer.query_terms``), which a window too long for the room is narrowed to.

    - Anything but an exchange: :func:`part` of the content around its best window.
    - A chat exchange (``Prompt: … / Tools: … / Reply: …``, ``ingest.sessions.exchanges``): the head
      (prompt and tool line) and the reply each by :func:`part`, around each one's own best
      window, in half the room each (or what the other leaves): a question that matches the
      prompt still shows the answer, and a statement inside a long prompt still shows."""
    return guarded("excerpt", _excerpt, engine, rec, qvec, max_chars, terms, default=None,
                   record=rec.id)  # fmt: skip


def _excerpt(engine: Engine, rec: Record, qvec, max_chars: int, terms: frozenset[str]):
    if qvec is None or not max_chars < len(rec.content) <= MAX_CONTENT:
        return None
    spans = engine.spans(rec)
    if not spans:
        return None
    scored = window_scores(engine, rec, qvec, spans)  # read once, for every part
    content = rec.content
    reply = _REPLY.search(content) if content.startswith("Prompt: ") else None
    if reply is None:
        span = best_of(scored)
        return None if span is None else part(content, span, max_chars, terms)
    at = reply.start()
    head_text, tail = content[:at].rstrip(), content[at:]
    skip = len(_WORD.findall(content[:at]))  # the reply's first word, in content words
    sep = len(MARK) + 2  # " …\n" between the two
    head = part(head_text, best_of(scored, last=skip),
                max(max_chars // 2, max_chars - len(tail) - sep), terms)  # fmt: skip
    span = best_of(scored, first=skip)
    span = None if span is None else (max(0, span[0] - skip), span[1] - skip)
    tail = part(tail, span, max_chars - len(head) - sep, terms)
    joint = "\n" if head == head_text else f" {MARK}\n"
    return head.removesuffix(f" {MARK}") + joint + tail


def part(
    text: str, span: tuple[int, int] | None, max_chars: int, terms: frozenset[str] = frozenset()
) -> str:
    """``text`` within ``max_chars``: whole when it fits; else its start (``HEAD_SHARE`` of the
    room: what was asked or stated first) and the excerpt around ``span`` (a word range; None:
    the start alone), or one excerpt from the start when ``span`` is near it."""
    if len(text) <= max_chars:
        return text
    if span is None:
        return widen(text, (0, 1), max_chars)
    head = widen(text, (0, 1), int(max_chars * HEAD_SHARE)).removesuffix(f" {MARK}")
    if span[0] <= len(_WORD.findall(head)):
        return widen(text, (0, max(1, span[1])), max_chars, terms)
    return f"{head} {widen(text, span, max_chars - len(head) - 1, terms)}"


__all__ = ["best_of", "best_window", "excerpt", "part", "widen", "window_scores"]
