"""A text under scan, and what is learnt about it once for every rule that reads it.

* :class:`Presence`: patterns whose occurrence anywhere in a text one pass of RE2's ``Set``
  finds for all of them (the rules' patterns, the words their prefilters name).
* :attr:`ScanText.bounded`: the text as RE2 must read it for a pattern with a word boundary.
  RE2's ``\\b`` knows only ASCII word characters, Python's every letter and digit:
  in ``東京note`` Python sees no boundary before ``note``, RE2 does; after ``ключ`` Python
  sees one, RE2 does not. Each letter or digit outside ASCII is read as an ASCII one (``Q``; a
  decimal digit as ``9``), so the two agree (the patterns read this way name neither
  character, see :func:`reads_bounded`).
* :meth:`ScanText.long_runs`: the runs of one class of characters longer than :data:`RUN`, where
  a match of a pattern with an unbounded repetition of that class can be longer than its usual
  bound (:mod:`.pattern_facts`). (Not in a ``Set``: counted repetitions of many classes at once
  make its automaton's states multiply, seconds on a text of one repeated tag.)
"""

from __future__ import annotations

import bisect
import re
from itertools import accumulate
from re import _constants as C  # noqa: N812
from re import _parser

import re2

from retrieval.regexes import linear_regex
from retrieval.regexes.regex_translate import inner

RUN = 256  # a run of one class of characters longer than this is a long one
SENTINELS = ("Q", "9")  # what a letter, and a decimal digit, outside ASCII is read as
# a letter or a digit outside ASCII (by RE2's tables; Python's decide what it is read as)
_ALNUM_OUTSIDE_ASCII = linear_regex.Pattern.of_re2(r"[^\x00-\x7f\P{L}]|[^\x00-\x7f\P{N}]")
_OUTSIDE_ASCII = re.compile(r"[^\x00-\x7f]+")  # (``re``: one run per match)
# (``re``: the maximal runs of letters and apostrophes, around a word found next to an
# apostrophe: one run per match, each read once)
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


class Scope:
    """The patterns (RE2's syntax) a kind of scan asks about a text: the rules' patterns
    (``rules``; those with a word boundary: ``bounded``, read in :attr:`ScanText.bounded`) and
    the words of their prefilters (``words``). One pass of RE2's ``Set`` reads each group: one
    ``Set`` of them all is slower than the passes of its groups (the states of its automaton
    multiply)."""

    GROUPS = ("rules", "bounded", "words")

    def __init__(self, name: str, merge: bool = False) -> None:
        """``merge``: read every pattern that finds in the bounded text what it finds in the
        text (:func:`safe_in_bounded`) in one pass over the bounded text (a scope of few
        patterns, whose automaton stays small)."""
        self.name = name
        self.merge = merge
        self._patterns: dict[str, list[str]] = {g: [] for g in self.GROUPS}
        self._sets: dict[tuple[str, ...], object] = {}

    def __repr__(self) -> str:
        return f"Scope({self.name!r})"

    def add(self, translated: str, group: str, safe: bool = False) -> tuple[str, int]:
        """Register a pattern in ``group`` (``safe``: it may be read in the bounded text)."""
        if self.merge and safe:
            group = "bounded"
        self._patterns[group].append(translated)
        self._sets.clear()
        return group, len(self._patterns[group]) - 1

    def _compiled(self, groups: tuple[str, ...]):
        if groups not in self._sets:
            options = re2.Options()
            options.max_mem = 256 << 20
            options.log_errors = False
            found = re2._re2.Set(re2._Anchor.UNANCHORED, options)
            patterns = [p for g in groups for p in self._patterns[g]]
            for p in [*patterns, ""]:  # the last one always occurs
                if found.Add(p.encode("utf-8")) < 0:
                    raise ValueError(f"RE2's Set refused {p!r}")
            if not found.Compile():
                raise ValueError("RE2's Set could not be compiled")
            self._sets[groups] = found
        return self._sets[groups]

    def occurring(self, groups: tuple[str, ...], text: str) -> dict[str, frozenset[int] | None]:
        """For each group, the indexes of its patterns that occur in ``text``; None if RE2
        could not tell (a failed pass reports nothing, not even the empty pattern)."""
        sizes = [len(self._patterns[g]) for g in groups]
        total = sum(sizes)
        if not total:
            return {g: frozenset() for g in groups}
        hits = self._compiled(groups).Match(linear_regex.utf8(text))
        if total not in hits:
            return dict.fromkeys(groups)
        out, base = {}, 0
        for g, size in zip(groups, sizes, strict=True):
            out[g] = frozenset(h - base for h in hits if base <= h < base + size)
            base += size
        return out


SCAN = Scope("scan")  # what the scan of a text asks
VARIANTS = Scope("variants", merge=True)  # what the scan of a variant of a text asks


def reads_bounded(pattern: str, flags: int) -> bool:
    """Whether ``pattern`` has a word boundary (then it is read in the bounded text, and it
    must name no sentinel character and no letter or digit outside ASCII: it reads each of
    those as it reads the other)."""
    tree = _parser.parse(pattern, flags)
    nodes, stack = [], list(tree)
    while stack:
        op, av = stack.pop()
        nodes.append((op, av))
        stack += inner(op, av)
    if not any(op is C.AT and av in (C.AT_BOUNDARY, C.AT_NON_BOUNDARY) for op, av in nodes):
        return False
    if tree.state.flags & C.SRE_FLAG_IGNORECASE or any(
        op is C.SUBPATTERN and av[1] & C.SRE_FLAG_IGNORECASE for op, av in nodes
    ):
        raise ValueError(f"a case-insensitive pattern with a word boundary: {pattern}")
    for op, av in nodes:
        if op in (C.LITERAL, C.NOT_LITERAL):
            _check_char(av, pattern)
        elif op is C.IN:
            for item_op, item in av:
                if item_op in (C.LITERAL, C.NOT_LITERAL):
                    _check_char(item, pattern)
                elif item_op is C.RANGE and (
                    item[1] > 0x7F or any(item[0] <= ord(s) <= item[1] for s in SENTINELS)
                ):
                    raise ValueError(f"a class with a range the bounded text changes: {pattern}")
    return True


def _check_char(code: int, pattern: str) -> None:
    ch = chr(code)
    if ch in SENTINELS or (code > 0x7F and ch.isalnum()):
        raise ValueError(f"the pattern names {ch!r}: {pattern}")


def _bounded(text: str, outside: str | None) -> str:
    if _ALNUM_OUTSIDE_ASCII.search(outside if outside is not None else text) is None:
        return text
    if outside is None:
        outside = "".join(_OUTSIDE_ASCII.findall(text))
    outside = {c for c in set(outside) if ord(c) > 0x7F and c.isalnum()}
    for sentinel, chars in ((SENTINELS[1], {c for c in outside if c.isdecimal()}),
                            (SENTINELS[0], {c for c in outside if not c.isdecimal()})):  # fmt: skip
        if 0 < len(chars) <= 8:  # a few: one replacement each (a search of one character)
            for c in sorted(chars):
                text = text.replace(c, sentinel)
        elif chars:
            text = re.sub("[" + "".join(map(re.escape, sorted(chars))) + "]", sentinel, text)
    return text


class ScanText:
    """A (folded) text and what the scan learns about it once."""

    __slots__ = ("_bounded", "_found", "_outside", "_runs", "ascii", "budget", "memo", "n",
                 "scope", "text")  # fmt: skip

    def __init__(self, text: str, outside: str | None = None, scope: Scope = SCAN):
        """``outside``: the characters of ``text`` that are not ASCII, when known (any others
        with them do no harm). ``scope``: what the scan asks about it."""
        self.text = text
        self._outside = outside
        self.scope = scope
        self.n = len(text)
        self.ascii = text.isascii()
        self._bounded: str | None = None
        self._runs: dict[str, list[tuple[int, int]]] = {}
        self._found: dict[str, frozenset[int] | None] = {}
        self.budget: dict[object, int] = {}  # characters a rule may still read past its bound
        self.memo: dict[object, object] = {}  # what a reader of the text computed once

    @property
    def bounded(self) -> str:
        if self._bounded is None:
            self._bounded = self.text if self.ascii else _bounded(self.text, self._outside)
        return self._bounded

    def occurs(self, keys: dict[Scope, tuple[str, int]]) -> bool:
        """Whether the pattern registered as ``keys`` occurs (True when unknown)."""
        key = keys.get(self.scope)
        if key is None:
            return True
        group, index = key
        if group not in self._found:
            text = self.bounded if group == "bounded" else self.text
            self._found.update(self.scope.occurring((group,), text))
        found = self._found[group]
        return found is None or index in found

    def next_of(self, rx: linear_regex.Pattern, pos: int) -> int | None:
        """Where the first match of ``rx`` at or after ``pos`` starts. Each search is kept as
        the stretch of text it read (from ``pos`` to what it found, nothing in between), so a
        later question inside a stretch already read is answered without a search."""
        starts, found = self.memo.setdefault(rx, ([], []))
        i = bisect.bisect_right(starts, pos) - 1
        if i >= 0 and (found[i] is None or found[i] >= pos):
            return found[i]
        m = rx.search(self.text, pos)
        hit = None if m is None else m.start()
        starts.insert(i + 1, pos)
        found.insert(i + 1, hit)
        return hit

    # ------------------------------------------------------------------ long runs

    def long_runs(self, cls: str) -> list[tuple[int, int]]:
        """The runs of characters of ``cls`` (RE2's syntax, registered with :func:`run_class`)
        of :data:`RUN` or more (a character outside ASCII counts as one of every class: more
        runs than there are, never fewer)."""
        if cls not in self._runs:
            rx = _RUNS[cls]
            self._runs[cls] = [m.span() for m in rx.finditer(self.text)] if self.n >= RUN else []
        return self._runs[cls]

    def first_run(self, classes: tuple[str, ...], lo: int, hi: int) -> tuple[int, int] | None:
        """The long run of any of ``classes`` that overlaps [lo, hi) and starts first.

        The first few questions of a text are answered by a look at the stretch itself (a long
        run that overlaps it holds :data:`RUN` characters within RUN of it; there are none in
        most texts); past :data:`LOCAL` of them, or where one is found, by the runs of the whole
        text (one pass for each class asked about)."""
        if not classes or self.n < RUN:
            return None
        if not all(cls in self._runs for cls in classes):
            asked = self.memo.get(LOCAL, 0)
            if asked < LOCAL:
                self.memo[LOCAL] = asked + 1
                a, b = max(0, lo - RUN), min(self.n, hi + RUN)
                if _any_run(classes).search(self.text, a, b) is None:
                    return None
        runs = self.memo.get(classes)
        if runs is None:  # the runs of all of them, by where they start
            runs = self.memo[classes] = sorted({r for cls in classes for r in self.long_runs(cls)})
        if not runs:
            return None
        ends = self.memo.get((classes, "ends"))
        if ends is None:  # the furthest end of the runs up to each: the first run ending past
            ends = self.memo[(classes, "ends")] = list(accumulate((e for _, e in runs), max))
        i = bisect.bisect_right(ends, lo)  # the first run that ends past lo (in one search)
        if i < len(runs) and runs[i][0] < hi:
            return runs[i]
        return None

    def reach(
        self, classes: tuple[str, ...], end: int, bound: int, limit: int | None = None
    ) -> int:
        """``end`` moved past every long run within ``bound`` characters before it, each run
        moving it to ``bound`` characters past the run; once past ``limit`` (a caller's budget)
        it stops there, somewhere past ``limit``, without reading the runs further on."""
        stop = self.n if limit is None else min(self.n, limit)
        while end < self.n and (run := self.first_run(classes, end - bound, end)) is not None:
            end = max(end, run[1] + bound)
            if end > stop:
                break
        return min(end, self.n)


_MEMBERS: dict[str, str] = {}  # for each class, its ASCII characters (as an RE2 class body)
_RUNS: dict[str, linear_regex.Pattern] = {}
_ANY_RUN: dict[tuple[str, ...], linear_regex.Pattern] = {}
LOCAL = 64  # questions about long runs a text answers by a look at a stretch of it


def _run_of(members: str) -> linear_regex.Pattern:
    """RUN or more characters of a class, a character outside ASCII counting as one of it."""
    return linear_regex.Pattern.of_re2(f"[{members}\\x{{80}}-\\x{{10ffff}}]{{{RUN},}}")


def run_class(cls: str) -> str:
    """Register ``cls`` (a class in RE2's syntax) for :meth:`ScanText.long_runs`."""
    if cls not in _MEMBERS:
        rx = linear_regex.Pattern.of_re2(cls)
        inside = [c for c in range(128) if rx.fullmatch(chr(c)) is not None]
        _MEMBERS[cls] = "".join(f"\\x{{{c:x}}}" for c in inside)
        _RUNS[cls] = _run_of(_MEMBERS[cls])
    return cls


def _any_run(classes: tuple[str, ...]) -> linear_regex.Pattern:
    """A long run of any of ``classes`` (of their union: a superset)."""
    if classes not in _ANY_RUN:
        _ANY_RUN[classes] = _run_of("".join(sorted({_MEMBERS[c] for c in classes})))
    return _ANY_RUN[classes]


def token_pattern(words: frozenset[str], loose: bool = False) -> str:
    """RE2: one of ``words`` standing as a word of letters (``loose``: beside an apostrophe
    too, where the word may be part of a longer one such as ``don't``)."""
    edge = "[^a-z]" if loose else "[^a-z']"
    body = "|".join(re2.escape(w) for w in sorted(words))
    return rf"(?:\A|{edge})(?:{body})(?:{edge}|\z)"


def has_token(st: ScanText, words: frozenset[str], clean: dict, loose: dict,
              loose_rx: linear_regex.Pattern) -> bool:  # fmt: skip
    """Whether one of ``words`` is a word of ``st`` as ``[a-z]+(?:'[a-z]+)?`` reads its words."""
    if st.occurs(clean):
        return True
    if not st.occurs(loose):
        return False
    text, done = st.text, -1
    for m in loose_rx.finditer(text):
        if m.start() < done:
            continue
        start, end = m.start(), m.end()
        while start > 0 and (text[start - 1].isascii() and text[start - 1].islower()
                             or text[start - 1] == "'"):  # fmt: skip
            start -= 1
        while end < st.n and (text[end].isascii() and text[end].islower() or text[end] == "'"):
            end += 1
        if not words.isdisjoint(_WORD.findall(text, start, end)):
            return True
        done = end
    return False


def safe_in_bounded(pattern: str, flags: int) -> bool:
    """Whether ``pattern`` finds in :attr:`ScanText.bounded` what it finds in the text: it
    names no letter or digit outside ASCII, no sentinel, no range past ASCII, and ignores no
    case (each letter and digit outside ASCII is a sentinel there, and reads as one: ``\\w``,
    ``\\d``, ``.`` and the negated classes of ASCII characters take both)."""
    tree = _parser.parse(pattern, flags)
    if tree.state.flags & C.SRE_FLAG_IGNORECASE:
        return False
    stack = list(tree)
    while stack:
        op, av = stack.pop()
        if op in (C.LITERAL, C.NOT_LITERAL) and not _plain_char(av):
            return False
        if op is C.IN:
            for item_op, item in av:
                if item_op in (C.LITERAL, C.NOT_LITERAL) and not _plain_char(item):
                    return False
                if item_op is C.RANGE and (
                    item[1] > 0x7F or any(item[0] <= ord(s) <= item[1] for s in SENTINELS)
                ):
                    return False
        elif op is C.SUBPATTERN and av[1] & C.SRE_FLAG_IGNORECASE:
            return False
        stack += inner(op, av)
    return True


def _plain_char(code: int) -> bool:
    ch = chr(code)
    return ch not in SENTINELS and not (code > 0x7F and ch.isalnum())
