"""Step 1 of the Porter stemmer (M. F. Porter, "An algorithm for suffix stripping", Program 14(3),
1980, pp. 130-137): plurals, ``-ed`` and ``-ing``, and a final ``y`` after a vowel-bearing stem.

FTS5's ``porter`` tokenizer stems the whole way; a comparison of two short texts outside the
index (the prompt gate, :mod:`server.service.prompting.gate`) needs only the inflections, so that
"retries" meets "retry", "payments" meets "payment" and "failed" meets "failing", without the
later steps' merging of unrelated words ("general" and "generous" both become "gener").
"""

from __future__ import annotations

from functools import lru_cache

_VOWELS = frozenset("aeiou")
MAX_WORD = 64  # a longer "word" (a hash, a run of letters in a dump) is returned as it is


def consonants(word: str) -> list[bool]:
    """Porter's consonant at each position of ``word``: not a, e, i, o, u, and not a ``y``
    after a consonant (a ``y`` first is one), read left to right in one pass."""
    out: list[bool] = []
    prev = False
    for i, ch in enumerate(word):
        if ch in _VOWELS:
            c = False
        elif ch == "y":
            c = i == 0 or not prev
        else:
            c = True
        out.append(c)
        prev = c
    return out


def measure(stem: str) -> int:
    """m in [C](VC)^m[V]: the number of vowel-consonant sequences."""
    m, prev_vowel = 0, False
    for consonant in consonants(stem):
        vowel = not consonant
        if prev_vowel and not vowel:
            m += 1
        prev_vowel = vowel
    return m


def _has_vowel(stem: str) -> bool:
    return not all(consonants(stem))


def _double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and consonants(word)[-1]


def _cvc(word: str) -> bool:
    """*o: the stem ends consonant-vowel-consonant, the last not w, x or y."""
    if len(word) < 3:
        return False
    c1, v, c2 = consonants(word)[-3:]
    return c1 and not v and c2 and word[-1] not in "wxy"


def _step1a(w: str) -> str:
    if w.endswith("sses") or w.endswith("ies"):
        return w[:-2]
    if w.endswith("ss"):
        return w
    if w.endswith("s"):
        return w[:-1]
    return w


def _step1b(w: str) -> str:
    if w.endswith("eed"):
        return w[:-1] if measure(w[:-3]) > 0 else w
    for suffix in ("ed", "ing"):
        if w.endswith(suffix) and _has_vowel(w[: -len(suffix)]):
            w = w[: -len(suffix)]
            if w.endswith(("at", "bl", "iz")):
                return w + "e"
            if _double_consonant(w) and w[-1] not in "lsz":
                return w[:-1]
            if measure(w) == 1 and _cvc(w):
                return w + "e"
            return w
    return w


def _step1c(w: str) -> str:
    if w.endswith("y") and _has_vowel(w[:-1]):
        return w[:-1] + "i"
    return w


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Porter's step 1 of a lower-cased word; words of one or two letters or of more than
    :data:`MAX_WORD`, and anything with a digit or a non-ASCII letter (identifiers, numbers,
    other scripts), are returned as they are."""
    if not 2 < len(word) <= MAX_WORD or not word.isascii() or not word.isalpha():
        return word
    return _step1c(_step1b(_step1a(word)))
