"""The matches of one pattern in a text under scan, found only where they can be, and exactly
those a search of the whole text finds.

A :class:`Finder` reads the pattern's facts (:mod:`.pattern_facts`): the literal strings every
match holds, and how long a match can be. It then looks for the pattern

* not at all when the text has no occurrence of it (one pass of RE2's ``Set`` for every
  pattern registered with :data:`.scan_text.PATTERNS` or :data:`.scan_text.BOUNDED`, the
  patterns RE2 runs fast: a search of the whole text is then cheap too);
* else only in ranges around the rarest of those strings (the *anchor*): a match that starts
  at or after ``pos`` holds an anchor at or after ``pos``, so it starts no further than its
  longest length before the first such anchor; the range reaches :data:`CHUNK` characters past
  that anchor, plus a match's longest length, and is searched only when it holds the other
  strings every match needs. RE2 reads the text around a range as context (a word boundary
  or a line's end at its edge is the text's), so a match found in a range is a match of the
  whole text, and the first one in the range is the first one of the text.

A pattern with a lookaround is matched as :class:`retrieval.regexes.linear_regex.Windowed` matches it:
RE2 finds where its relaxed form matches, Python's ``re`` tries the pattern there on as many
characters as it can read (the pattern's facts again), so that the window never hides a match
``re`` would find in the whole text. Where long runs make a match longer than that, the
window grows over them, within a budget of :data:`EXTRA` times the text's length per pattern
(past it the window keeps its bound: a text built to make each try read a long run again).
"""

from __future__ import annotations

from collections.abc import Iterator

from retrieval.regexes import linear_regex
from server.service.trust.injection_scan.pattern_facts import facts, literal_pattern, rarity
from server.service.trust.injection_scan.scan_text import (
    RUN,
    SCAN,
    ScanText,
    Scope,
    reads_bounded,
    run_class,
    safe_in_bounded,
)

CHUNK = 8192  # how far past an anchor one range reaches
EXTRA = 4  # the characters a pattern's tries may read past their bound, per text character


class _Strings:
    """A set of strings every match holds one of, and where the next one is (the searches of a
    text remembered, and shared by the rules and parts that need the same set)."""

    def __init__(self, pattern: str):
        self.rx = linear_regex.Pattern.of_re2(pattern)

    def next_in(self, st: ScanText, pos: int) -> int | None:
        return st.next_of(self.rx, pos)


_STRINGS: dict[str, _Strings] = {}


def _literals(strings: frozenset[str]) -> _Strings:
    """The strings of a set, one object per set (shared by the rules and parts that need it)."""
    pattern = literal_pattern(strings)
    if pattern not in _STRINGS:
        _STRINGS[pattern] = _Strings(pattern)
    return _STRINGS[pattern]


class _Candidates:
    """Where a pattern (or one of its top alternatives) matches, in RE2's syntax, searched only
    around the strings every match holds (none: the whole text)."""

    def __init__(self, pattern: linear_regex.Pattern, f, bounded: bool, anchored: bool):
        self.rx = pattern
        self.bounded = bounded
        needs = sorted(f.needs, key=lambda n: rarity(n.strings), reverse=True) if anchored else []
        # the rarest sets, and every set that stands a bounded distance after the start
        picked = needs[:3] + [n for n in needs[3:] if n.hi is not None][:2]
        self.needs = tuple((_literals(n.strings), n.lo, n.hi) for n in picked)
        self.classes = tuple(c for c, _ in f.width.runs) if self.needs else ()
        self.width = f.width.bound(RUN)
        # every match starts with one of the head's strings and holds one of the driver's a
        # bounded distance after its start (a rarer set): tried at the heads near each driver
        heads = [n for n in needs if n.lo == n.hi == 0]
        drivers = [n for n in needs if n.hi is not None and (n.lo, n.hi) != (0, 0)]
        self.head = _literals(heads[0].strings) if heads and drivers else None
        self.driver = (
            (_literals(drivers[0].strings), drivers[0].lo, drivers[0].hi)
            if heads and drivers and rarity(drivers[0].strings) > rarity(heads[0].strings)
            else None
        )

    def first(self, st: ScanText, pos: int):
        """The first match at or after ``pos`` (remembered for the next, later, ``pos``)."""
        known = st.memo.get(self)
        if known is not None and known[0] <= pos and (known[1] is None or known[1].start() >= pos):
            return known[1]
        m = self._headed(st, pos) if self.driver is not None else self._first(st, pos)
        st.memo[self] = (pos, m)
        return m

    def _headed(self, st: ScanText, pos: int):
        """The first match at or after ``pos``: a match that starts at s holds the driver's
        strings at s + lo to s + hi, so it starts within hi before the first of them at or
        after pos + lo, or after it; there it is tried at each head (RE2 anchored there)."""
        text = st.bounded if self.bounded else st.text
        driver, lo, hi = self.driver
        while pos <= st.n:
            at = driver.next_in(st, pos + lo)
            if at is None:
                return None
            start, last = max(pos, at - hi), at - lo
            while start <= last:
                head = self.head.next_in(st, start)
                if head is None:
                    return None
                if head > last:
                    break
                end = st.reach(self.classes, head + self.width, self.width)
                m = self.rx.match(text, head, end)
                if m is not None:
                    return m
                start = head + 1
            pos = last + 1
        return None

    def _first(self, st: ScanText, pos: int):
        """A match that starts at s holds one of each set's strings from ``lo`` to ``hi`` after
        s (``hi``: at most the match's length), at or after the first one at or after pos + lo:
        so s is at least that one's place less ``hi`` for every set. The range searched ends
        where the set that bounds it most is passed (or CHUNK on, when it comes often)."""
        text = st.bounded if self.bounded else st.text
        if not self.needs:
            return self.rx.search(text, pos)
        n, width = st.n, self.width
        while pos <= n:
            lo, last, binding = pos, None, None
            for rx, off_lo, off_hi in self.needs:
                at = rx.next_in(st, pos + off_lo)
                if at is None:
                    return None
                if off_hi is None:
                    run = st.first_run(self.classes, pos, at)
                    earliest = min(at, run[0] if run else at) - width
                else:
                    earliest = at - off_hi
                if binding is None or earliest > lo or (earliest == lo and last is None):
                    lo, last, binding = max(lo, earliest), at - off_lo, (rx, at, off_lo)
            rx, at, off_lo = binding
            following = rx.next_in(st, at + 1)
            if following is not None and following <= at + width:
                last = min(n, last + CHUNK)  # it comes often: one range for many of them
            last = max(last, lo)
            hi = st.reach(self.classes, last + width, width)
            m = self.rx.search(text, lo, hi)
            if m is not None and (m.start() <= last or hi >= n):
                return m
            if hi >= n:
                return None
            pos = last + 1
        return None


class Finder:
    """Exact searches of one pattern (a ``linear_regex`` one, run by RE2, or a windowed one)
    in a :class:`ScanText`. One pass of RE2's ``Set`` tells whether it occurs, and then it is
    searched in the whole text; ``anchored``: for a pattern RE2 runs slowly (counted gaps after
    words of every text: its automaton has too many states), it is searched only around its
    anchors instead, each top alternative apart, and kept out of the ``Set``."""

    def __init__(self, rx, anchored: bool = False, candidates=None):
        self.rx = rx
        self.windowed = isinstance(rx, linear_regex.Windowed)
        relaxed = rx._relaxed if self.windowed else rx
        if candidates is not None:  # the rule's own, tighter where its ``accept`` is
            if not self.windowed:
                raise ValueError("candidates are for a pattern tried by re")
            relaxed = getattr(candidates, "_relaxed", None) or candidates.bare()
        self.light = presence = not anchored
        self.bounded = not self.windowed and reads_bounded(rx.pattern, rx.flags)
        # read in the bounded text too (a relaxed pattern is not: its classes take every
        # character outside ASCII, a sentinel not always)
        self.safe = not self.windowed and (self.bounded or safe_in_bounded(rx.pattern, rx.flags))
        f = facts(rx.pattern, rx.flags)
        alternatives = (
            None if presence else linear_regex.alternative_forms(rx.pattern, rx.flags, False)
        )
        if self.windowed and alternatives:  # only a start is needed from each
            self.parts = tuple(
                _Candidates(
                    linear_regex.Pattern.of_re2(p), facts(rx.pattern, rx.flags, i), False, True
                )
                for i, p in enumerate(alternatives)
            )
        else:
            self.parts = (_Candidates(relaxed, f, self.bounded, anchored),)
        self.candidates = relaxed
        # the classes whose long runs can make a match longer: read for a search around
        # anchors, and for the window of a pattern with a lookaround
        self._read_runs = tuple(c for c, _ in f.reads.runs) if self.windowed else ()
        self.read_classes = self._read_runs
        self.reads = f.reads.bound(RUN) + 1  # and the character after, for ``$`` and ``\b``
        self.presence: dict[Scope, tuple[str, int]] = {}
        self.register(SCAN)

    def register(self, scope: Scope) -> None:
        """Ask ``scope``'s one pass over a text about this pattern (and its long runs)."""
        for cls in (*self._read_runs, *(c for part in self.parts for c in part.classes)):
            run_class(cls)
        if self.light and scope not in self.presence:
            group = "bounded" if self.bounded else "rules"
            self.presence[scope] = scope.add(self.candidates.translated, group, self.safe)

    def __repr__(self) -> str:
        return f"Finder({self.rx!r})"

    @property
    def exact(self):
        """The pattern with a lookaround, as ``re`` runs it (compiled at its first try)."""
        return self.rx._exact

    # ------------------------------------------------------------------ searches

    def absent(self, st: ScanText) -> bool:
        """Known to have no match in ``st`` (from the one pass over it)."""
        return bool(self.presence) and not st.occurs(self.presence)

    def search(self, st: ScanText, pos: int = 0):
        """The first match at or after ``pos``: what ``rx.search(text, pos)`` finds."""
        if self.absent(st):
            return None
        if not self.windowed:
            return self.parts[0].first(st, pos)
        while (start := self._start(st, pos)) is not None:
            m = self.exact.match(st.text, start, self._read_end(st, start))
            if m is not None:
                return m
            pos = start + 1
        return None

    def try_at(self, st: ScanText, start: int):
        """The match of a pattern with a lookaround at ``start`` (``re``), or None."""
        return self.exact.match(st.text, start, self._read_end(st, start))

    def quiet_end(self, st: ScanText, start: int) -> int | None:
        """Where every match at ``start`` ends by, when no long run makes one longer than its
        bound (None then: :meth:`_read_end` may spend its budget there)."""
        end = min(st.n, start + self.reads)
        if end >= st.n or not self.read_classes or st.memo.get(self.read_classes) == []:
            return end  # (the text's long runs of these classes, once read: none)
        return end if st.reach(self.read_classes, end, self.reads, end) == end else None

    def quiet_over(self, st: ScanText, first: int, last: int) -> bool:
        """Whether :meth:`quiet_end` is known (not None) at every place from ``first`` to
        ``last``: no long run overlaps what a try at one of them reads."""
        if not self.read_classes or st.memo.get(self.read_classes) == []:
            return True  # (the text's long runs of these classes, once read: none)
        end = min(st.n, last + self.reads)
        return st.first_run(self.read_classes, first, end) is None

    def _start(self, st: ScanText, pos: int) -> int | None:
        """Where the relaxed pattern first matches at or after ``pos``."""
        starts = [m.start() for part in self.parts if (m := part.first(st, pos)) is not None]
        return min(starts, default=None)

    def finditer(self, st: ScanText) -> Iterator:
        """The matches ``rx.finditer`` finds, in order."""
        pos = 0
        while pos <= st.n and (m := self.search(st, pos)) is not None:
            yield m
            pos = m.end() if m.end() > m.start() else m.start() + 1

    def _read_end(self, st: ScanText, start: int) -> int:
        """Where ``re`` may stop reading for a try at ``start``: past all it can read, or past
        its bound once the budget of reads over long runs is spent."""
        end = min(st.n, start + self.reads)
        if end >= st.n or not self.read_classes:
            return end
        left = st.budget.get(self, EXTRA * st.n)
        longer = st.reach(self.read_classes, end, self.reads, end + left)
        if longer > end:
            if longer - end <= left:
                st.budget[self] = left - (longer - end)
                return longer
        return end
