"""Text analysis for the lexical index: identifier splitting, stopwords, FTS5 query building.

FTS5's ``porter unicode61`` tokenizer already splits on punctuation (``snake_case``,
``org.jfree.chart``) and stems English. What it cannot do is split ``NullPointerException``
or ``getHTTPResponse``; :func:`identifier_parts` adds those parts as extra indexed terms, so a
query for "null pointer" finds the exception and a query for the class name still matches
the whole token exactly.
"""

from __future__ import annotations

import re

# word = letters/digits/underscore runs (FTS5 splits the same places, minus underscore)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# camelCase / PascalCase / ACRONYMWord / digit boundaries
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    s t d ll m re ve y did didn doesn don isn wasn weren won wouldn shouldn couldn also""".split()
)


def identifier_parts(text: str) -> str:
    """Extra terms for mixed-case identifiers: ``NullPointerException`` -> ``null pointer exception``."""
    extra: list[str] = []
    for token in _WORD.findall(text):
        if token.islower() or token.isupper() or token.isdigit():
            continue
        parts = _CAMEL.findall(token)
        if len(parts) > 1:
            extra.extend(p.lower() for p in parts)
    return " ".join(extra)


def query_terms(text: str, max_terms: int = 32) -> list[str]:
    """Lower-cased, de-duplicated content terms of a query (identifier parts included)."""
    seen: dict[str, None] = {}
    for token in _WORD.findall(text):
        candidates = [token.lower()]
        parts = _CAMEL.findall(token)
        if len(parts) > 1:
            candidates.extend(p.lower() for p in parts)
        for term in candidates:
            if term in STOPWORDS or (len(term) == 1 and not term.isdigit()):
                continue
            seen.setdefault(term, None)
    return list(seen)[:max_terms]


def fts_or_query(terms: list[str]) -> str:
    """An FTS5 MATCH expression OR-ing quoted terms (quoting neutralises FTS5 syntax)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
