"""The part of a long record that a query is about.

A record is embedded as word windows and ranks by its best one (``retrieval.engine``). When a
record is too long to quote whole within an injection budget, quoting its start shows the part
the query did not match: a chat exchange whose answer comes after a long problem statement, a
LongMemEval-style session part whose one relevant sentence sits in its middle. Instead the
excerpt is the record's best window for the query, widened word by word to ``max_chars``
(forward twice as fast as backward: what follows a match, such as the answer to a matched
question, is usually what the reader needs), with ``…`` where the content goes on.
"""

from __future__ import annotations

import re

import numpy as np

from retrieval.engine import Engine
from retrieval.records import Record

_WORD = re.compile(r"\S+")
FORWARD = 2  # words taken after the match for each word taken before it
MARK = "…"


def best_window(engine: Engine, rec: Record, qvec: np.ndarray) -> tuple[int, int] | None:
    """The content word range ``[start, end)`` of ``rec``'s window closest to ``qvec``; None
    when the record has no current vectors for the engine's model or they do not match its
    windows (a model or window size changed since it was embedded)."""
    spans = engine.spans(rec)
    if engine.embedder is None or not spans:
        return None
    vecs = engine.store.embeddings([rec.id], engine.embedder.model_id).get(rec.id)
    if vecs is None or len(vecs) != len(spans):
        return None
    return spans[int(np.argmax(vecs @ np.asarray(qvec, dtype=np.float32).reshape(-1)))]


def widen(content: str, span: tuple[int, int], max_chars: int) -> str:
    """``content``'s words ``span``, widened (``FORWARD`` words after for one before) while
    the excerpt stays within ``max_chars``; cut to ``max_chars`` when the span alone exceeds
    them. Original spacing and line breaks are kept; ``…`` marks omitted text."""
    marks = [m.span() for m in _WORD.finditer(content)]
    n = len(marks)
    a, b = max(0, min(span[0], n - 1)), max(1, min(span[1], n))

    def size(lo: int, hi: int) -> int:
        return marks[hi - 1][1] - marks[lo][0] + 2 * (len(MARK) + 1)

    while b - a > 1 and size(a, b) > max_chars:
        b -= 1
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


def excerpt(engine: Engine, rec: Record, qvec: np.ndarray | None, max_chars: int) -> str | None:
    """The text to quote for ``rec`` when its content exceeds ``max_chars``: the excerpt
    around its best window for ``qvec``. None when the content fits whole, or when no window
    can be chosen (no query vector, no current record vectors): the caller then quotes the
    content, cut at the budget."""
    if len(rec.content) <= max_chars or qvec is None:
        return None
    span = best_window(engine, rec, qvec)
    return None if span is None else widen(rec.content, span, max_chars)


__all__ = ["best_window", "excerpt", "widen"]
