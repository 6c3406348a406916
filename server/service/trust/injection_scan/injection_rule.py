"""One rule of the injection scan: a pattern over folded text, its finding's kind and weight,
and the prefilter that says when it is tried. The tables of rules are in
:mod:`.injection_rules`, :mod:`.injection_intent` and :mod:`.injection_escape`.

A rule's pattern is searched by a :class:`.rule_search.Finder` (only where a match can be, the
same matches as a search of the whole text), or, for tags that must be paired, by
:class:`PairedTags`.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from retrieval.regexes import linear_regex
from server.service.trust.injection_scan.rule_search import Finder
from server.service.trust.injection_scan.scan_text import (
    SCAN,
    ScanText,
    Scope,
    has_token,
    token_pattern,
)

STRONG, MEDIUM, WEAK = 1.0, 0.6, 0.5
# how far Python's ``re`` reads for a pattern with a lookaround when nothing else bounds it
# (:class:`retrieval.regexes.linear_regex.Windowed`; the scan reads as far as the pattern can match)
WINDOW = 1000


class Words:
    """Words of a prefilter, and whether one of them is a word of a text (as the tokens
    ``[a-z]+(?:'[a-z]+)?`` of the folded text read)."""

    def __init__(self, words: str | frozenset[str] = ""):
        self.words = frozenset(words.split()) if isinstance(words, str) else frozenset(words)
        self._clean: dict[Scope, tuple[str, int]] = {}
        self._loose: dict[Scope, tuple[str, int]] = {}
        if self.words:
            self._loose_rx = linear_regex.Pattern.of_re2(token_pattern(self.words, loose=True))
            self.register(SCAN)

    def register(self, scope: Scope) -> None:
        if self.words and scope not in self._clean:
            safe = all(w.isascii() for w in self.words)
            self._clean[scope] = scope.add(token_pattern(self.words), "words", safe)
            self._loose[scope] = scope.add(token_pattern(self.words, loose=True), "words", safe)

    def __bool__(self) -> bool:
        return bool(self.words)

    def __repr__(self) -> str:
        return f"Words({' '.join(sorted(self.words))!r})"

    def any_in(self, st: ScanText) -> bool:
        return has_token(st, self.words, self._clean, self._loose, self._loose_rx)


@dataclass(frozen=True)
class Rule:
    """A pattern over folded text, tried only when its prefilter passes: one of its ``words``
    (whole words) or ``subs`` (substrings) occurs, one of the ``need`` words when it has some,
    and its ``pre`` pattern (a cheap one, for a rule whose pattern is dear) when it has one. A
    rule with no words and no subs always runs."""

    kind: str
    weight: float
    rx: object  # linear_regex.Pattern | linear_regex.Windowed | PairedTags
    words: Words = field(default_factory=Words)
    subs: tuple[str, ...] = ()
    need: Words = field(default_factory=Words)
    mentionable: bool = True  # a quoted or discussed phrase is not an instruction
    quotable: bool = True  # a quoted phrase is a mention (not for tool names: they are quoted)
    pre: Finder | None = None
    accept: Callable[[re.Match], bool] | None = None  # a match this rejects is no finding
    finder: object = None  # Finder | PairedTags

    def __post_init__(self) -> None:
        if self.finder is None:
            finder = self.rx if isinstance(self.rx, PairedTags) else Finder(self.rx)
            object.__setattr__(self, "finder", finder)

    def register(self, scope: Scope) -> None:
        """Ask ``scope``'s one pass over a text about this rule's pattern and prefilter."""
        for part in (self.finder, self.pre, self.words, self.need):
            if part is not None:
                part.register(scope)

    def absent(self, st: ScanText) -> bool:
        """Known not to match anywhere in ``st`` (without searching)."""
        return self.finder.absent(st)

    def applies(self, st: ScanText) -> bool:
        if self.need and not self.need.any_in(st):
            return False
        if not self._triggered(st):
            return False
        return self.pre is None or self.pre.search(st) is not None

    def _triggered(self, st: ScanText) -> bool:
        if not self.words and not self.subs:
            return True
        if self.words and self.words.any_in(st):
            return True
        if st.ascii and self.subs and not self.subs[0].isascii():
            return False  # Cyrillic / CJK triggers cannot occur in ASCII text
        return any(map(st.text.__contains__, self.subs))

    def search(self, st: ScanText, pos: int = 0):
        return self.finder.search(st, pos)

    def finditer(self, st: ScanText) -> Iterator:
        return self.finder.finditer(st)


def rule(
    kind: str,
    weight: float,
    pattern: str,
    words: str = "",
    subs: tuple[str, ...] = (),
    need: str = "",
    mentionable: bool = True,
    quotable: bool = True,
    pre: str | None = None,
    accept: Callable[[re.Match], bool] | None = None,
    anchored: bool = False,
    candidates: str | None = None,
) -> Rule:
    """A rule (see :class:`Rule`); ``anchored``: its pattern is one RE2 runs slowly over whole
    texts; ``candidates``: a pattern matching wherever the rule's matches that ``accept``
    keeps start (see :class:`.rule_search.Finder`)."""
    rx = linear_regex.compile(pattern, re.M, window=WINDOW)
    pre_finder = Finder(linear_regex.compile(pre, re.M, window=WINDOW)) if pre else None
    where = linear_regex.compile(candidates, re.M, window=WINDOW) if candidates else None
    return Rule(
        kind, weight, rx, Words(words), subs, Words(need), mentionable, quotable, pre_finder,
        accept, Finder(rx, anchored, where),
    )  # fmt: skip


class PairedTags:
    r"""``<name>…</name>`` for the given names, the body ``lo`` to ``hi`` characters, the first
    closing tag after the opening one (a lazy body), and the matches of ``also``: what
    ``<(name|…)>[\s\S]{lo,hi}?</\1\s*>`` matches, found by RE2 in linear time (the
    backreference needs ``re``, and ``re`` tries the whole body after every opening tag).
    Opening tags are read only where a closing tag follows within ``hi`` characters."""

    def __init__(self, names: str, lo: int, hi: int, also: str | None = None):
        self.pattern = rf"<({names})>[\s\S]{{{lo},{hi}}}?</\1\s*>" + (f"|{also}" if also else "")
        self._exact = re.compile(self.pattern, re.M)
        self._opens = linear_regex.compile(rf"<({names})>")
        self._closes = Finder(linear_regex.compile(rf"</({names})\s*>"))
        self._also = Finder(linear_regex.compile(also, re.M)) if also else None
        self.lo, self.hi = lo, hi

    def register(self, scope: Scope) -> None:
        for part in (self._closes, self._also):
            if part is not None:
                part.register(scope)

    def absent(self, st: ScanText) -> bool:
        return self._closes.absent(st) and (self._also is None or self._also.absent(st))

    def _spans(self, st: ScanText) -> Iterator[tuple[int, int]]:
        text = st.text
        closes: dict[str, list[int]] = {}
        reach: list[tuple[int, int]] = []  # where opening tags can have a closing one
        for m in self._closes.finditer(st):
            closes.setdefault(m[1], []).append(m.start())
            lo, hi = max(0, m.start() - self.hi - 2 * len(m[1]) - 2), m.start()
            if reach and lo <= reach[-1][1]:
                reach[-1] = (reach[-1][0], hi)
            else:
                reach.append((lo, hi))
        for lo, hi in reach:
            for m in self._opens.finditer(text, lo, hi):
                body, name = m.end(), m[1]
                ends = closes.get(name, [])
                i = bisect.bisect_left(ends, body + self.lo)
                if i < len(ends) and ends[i] - body <= self.hi:
                    yield m.start(), text.index(">", ends[i]) + 1
        if self._also is not None:
            yield from (m.span() for m in self._also.finditer(st))

    def finditer(self, st: ScanText | str) -> Iterator[re.Match]:
        if isinstance(st, str):
            st = ScanText(st)
        last = -1
        for start, end in sorted(self._spans(st)):
            if start < last:
                continue
            m = self._exact.match(st.text, start, end)
            if m is not None:
                last = m.end()
                yield m

    def search(self, st: ScanText, pos: int = 0) -> re.Match | None:
        return next((m for m in self.finditer(st) if m.start() >= pos), None)


def paired(kind: str, weight: float, tags: PairedTags, words: str = "", subs=()) -> Rule:
    """A rule whose pattern is a :class:`PairedTags`."""
    return Rule(kind, weight, tags, Words(words), subs)
