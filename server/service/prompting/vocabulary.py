"""Lexical evidence that does not depend on the store: how much of a prompt's information a record
holds, with each word weighed by its rarity in a fixed background (``wordfreq``'s English word
frequencies), not by the store's own term statistics.

A store's IDF changes with every record (FTS5's bm25 IDF, log((N - df + 0.5) / (df + 0.5)), is
below zero for every term of a one-record store), so a lexical score from it judges the same
(prompt, record) pair differently in a young project and a big one. Here a word's weight is its
information content in general English: ``-log10(frequency)``, i.e. 9 - Zipf (Zipf = log10 of
the frequency per billion words, Speer et al., wordfreq 3), at least :data:`MIN_WEIGHT`; a word
the background does not know (an identifier, a name, a number, another script) weighs
:data:`UNKNOWN_WEIGHT`, as a word seen once in a billion. Words are compared by their Porter
step-1 stems (:mod:`retrieval.fulltext.stemmer`).

:func:`coverage` is the share of the prompt's weight whose words the record holds: 1.0 when it
holds every informative word, 0.0 when none.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from retrieval.fulltext.analyzer import STOPWORDS, query_terms
from retrieval.fulltext.stemmer import stem

LANGUAGE = "en"
UNKNOWN_WEIGHT = 9.0  # -log10 of one in a billion: a word the background never saw
# a name the prompt writes (a capitalised word inside a sentence: a person, a service, a
# library) says what the prompt is about more than any common word, however frequent the name
# is in English ("John", "Melanie", "Redis"): it weighs more than any background word
NAME_WEIGHT = 12.0
MIN_WEIGHT = 0.5  # the commonest content words still count a little
MAX_TERMS = 32
MAX_CHARS = 64 * 1024  # of a record's text read for the words it holds (twice a memory's limit)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


_loading = threading.Lock()
_warm_lock = threading.Lock()
_frequencies: dict[str, float] | None = None


def frequencies() -> dict[str, float]:
    """wordfreq's large English list: {word: frequency} (loaded once: importing wordfreq and
    reading the list take about a second; {} without wordfreq, when every word weighs
    :data:`UNKNOWN_WEIGHT`). Threads asking while it loads wait for that one load."""
    global _frequencies
    if _frequencies is None:
        with _loading:
            if _frequencies is None:
                _frequencies = _load()
    return _frequencies


def _load() -> dict[str, float]:
    try:
        import wordfreq
    except ImportError:  # pragma: no cover - a dependency; kept usable without it
        return {}
    return wordfreq.get_frequency_dict(LANGUAGE, wordlist="large")


_warming: threading.Thread | None = None


def warm() -> None:
    """Load :func:`frequencies` in a background thread (a daemon does it when it starts: the
    first prompt would otherwise spend its hook's deadline on it). One thread, however often
    it is called."""
    global _warming
    with _warm_lock:
        if _frequencies is None and _warming is None:
            _warming = threading.Thread(target=frequencies, name="vocabulary", daemon=True)
            _warming.start()


def warming() -> bool:
    """Whether :func:`warm`'s thread is still loading the list: a caller that can do without
    it (recall's informative gate score) does not wait, one that cannot (a hook) does."""
    thread = _warming
    return _frequencies is None and thread is not None and thread.is_alive()


def weight(word: str) -> float:
    """The information content of a lower-cased word in the background: -log10(frequency)."""
    f = frequencies().get(word)
    if not f:
        return UNKNOWN_WEIGHT
    return max(MIN_WEIGHT, min(UNKNOWN_WEIGHT, -math.log10(f)))


@dataclass(frozen=True)
class Terms:
    """A prompt's informative words: {stem: weight} (a stem weighs as its rarest surface form)."""

    weights: dict[str, float]

    @property
    def mass(self) -> float:
        return sum(self.weights.values())

    @classmethod
    def of(cls, text: str, max_terms: int = MAX_TERMS) -> Terms:
        out: dict[str, float] = {}
        named = names(text)
        for term in query_terms(text, max_terms=max_terms):
            s = stem(term)
            w = NAME_WEIGHT if term in named else weight(term)
            out[s] = max(out.get(s, 0.0), w)
        return cls(out)


_TOKEN = re.compile(r"[^\W\d_][\w']*|[.!?:;\n]", re.UNICODE)


def names(text: str) -> set[str]:
    """The lower-cased names ``text`` writes: capitalised words (an upper-case letter, then
    lower-case ones) that do not begin a sentence; an acronym (``CI``, ``SSL``) is not one."""
    out: set[str] = set()
    start = True
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok in ".!?:;\n":
            start = True
            continue
        word = tok.split("'")[0]
        if not start and word[:1].isupper() and word[1:].islower() and len(word) > 1:
            out.add(word.lower())
        start = False
    return out


def stems(text: str) -> set[str]:
    """Every stem of ``text``: its words lower-cased, and the parts of its mixed-case
    identifiers (``NullPointerException`` -> null, pointer, exception), stemmed."""
    out: set[str] = set()
    for token in _WORD.findall(text):
        low = token.lower()
        out.add(stem(low))
        if not (token.islower() or token.isupper() or token.isdigit()):
            parts = _CAMEL.findall(token)
            if len(parts) > 1:
                out.update(stem(p.lower()) for p in parts)
    return out - STOPWORDS


def held(text: str, wanted: set[str] | frozenset[str]) -> set[str]:
    """``stems(text) & wanted``, reading at most :data:`MAX_CHARS` of ``text`` and stemming
    only the words that can stem to one of ``wanted``: a stem is its word less a suffix, then
    perhaps with an ``e`` or ``i`` for its last letter, so every word but the last letter of
    its stem begins its word (a stem of three letters or more shares its word's first two, a
    shorter one its first)."""
    wanted = wanted - STOPWORDS
    if not wanted:
        return set()
    two = {s[:2] for s in wanted if len(s) >= 3}
    one = {s[:1] for s in wanted if len(s) < 3}
    out: set[str] = set()

    def take(low: str) -> None:
        if low[:2] in two or low[:1] in one:
            s = stem(low)
            if s in wanted:
                out.add(s)

    for token in set(_WORD.findall(text[:MAX_CHARS])):
        low = token.lower()
        take(low)
        if not (token.islower() or token.isupper() or token.isdigit()):
            parts = _CAMEL.findall(token)
            if len(parts) > 1:
                for p in parts:
                    take(p.lower())
    return out


def coverage(terms: Terms, held: Iterable[str] | set[str]) -> float:
    """The share of ``terms``' weight whose stems are in ``held`` (a record's :func:`stems`)."""
    total = terms.mass
    if total <= 0:
        return 0.0
    held = held if isinstance(held, set) else set(held)
    return sum(w for s, w in terms.weights.items() if s in held) / total
