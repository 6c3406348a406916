"""What a pattern's matches must hold and how long they can be, read from the pattern itself.

The scans use these facts to skip text no match can be in, without changing what they find:

* ``needs``: sets of literal strings, every match contains one string of each set (``ignore``
  or ``disregard`` or …; then ``instructions`` or ``rules`` or …), with the word boundaries
  the pattern puts in or around them (:func:`literal_pattern`). A part of the pattern that
  may match nothing (``x?``, ``x{0,3}``, a lookaround) needs nothing.
* how long a match can be: its bounded parts add up to ``fixed`` characters; each repetition
  without a bound (``\\s*``, ``[\\w-]+``) is a run of characters of one class, listed in ``runs``
  with how many times it can occur in one match. In a text where no run of that class is
  longer than ``L``, a match is at most ``fixed + L * (sum of the counts)`` long.
* ``reads``: the same bound for what a backtracking matcher reads from the match's start: a
  match's length and the widest lookahead past it.

Only the case-sensitive parts of a pattern give needs (a pattern scoped ``(?i)`` needs nothing).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import product
from re import _constants as C  # noqa: N812
from re import _parser

from retrieval.regexes import derived, regex_translate

MAX_SET = 64  # the most strings a part is spelled out as
BOUNDARY = "\x01"  # a word boundary, in the strings of ``needs``
MAX_LEN = 40  # the longest string spelled out
_CHAR_OPS = (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN, C.CATEGORY)


@dataclass(frozen=True)
class Extent:
    """How long a match (or what is read for it) can be: ``fixed`` characters plus runs."""

    fixed: int
    runs: tuple[tuple[str, int], ...]  # (RE2 class of the run's characters, times it occurs)

    @property
    def count(self) -> int:
        return sum(n for _, n in self.runs)

    def bound(self, longest_run: int) -> int:
        """The longest match when no run of the listed classes is longer than ``longest_run``."""
        return self.fixed + longest_run * self.count


@dataclass(frozen=True)
class Need:
    """Strings a match holds one of, starting ``lo`` to ``hi`` characters after the match's
    start (``hi`` None: no bound)."""

    strings: frozenset[str]
    lo: int
    hi: int | None


@dataclass(frozen=True)
class Facts:
    needs: tuple[Need, ...]
    width: Extent
    reads: Extent


def facts(pattern: str, flags: int = 0, alternative: int | None = None) -> Facts:
    """The facts of ``pattern`` (of its top alternative number ``alternative`` when given: the
    pattern is an alternation ``a|b|c``), derived once for every process
    (:mod:`retrieval.regexes.derived`)."""
    return _FACTS.get(
        [pattern, int(flags), alternative],
        lambda: _derive(pattern, flags, alternative),
        _encode,
        _decode,
    )


def _derive(pattern: str, flags: int, alternative: int | None) -> Facts:
    tree = _parser.parse(pattern, flags)
    reader = _Reader(tree.state.flags)
    if alternative is None:
        items = list(tree)
    else:
        if len(tree) != 1 or tree[0][0] is not C.BRANCH:
            raise ValueError("the pattern is not an alternation")
        items = list(tree[0][1][1][alternative])
        reader.needs(list(tree), bool(tree.state.flags & C.SRE_FLAG_IGNORECASE))  # its groups
    exact, needs = reader.needs(items, bool(tree.state.flags & C.SRE_FLAG_IGNORECASE))
    if exact is not None:
        needs = [*needs, Need(frozenset(exact), 0, 0)]
    width = reader.extent(items)
    ahead = (0, Counter())
    for inner in reader.lookaheads(items):  # read past where they stand: the widest one
        f, r = reader.extent(inner)
        nested = [reader.extent(i) for i in reader.lookaheads(inner)]
        f += max((x for x, _ in nested), default=0)
        for _, runs in nested:
            r = r | runs
        ahead = (max(ahead[0], f), ahead[1] | r)
    reads = (width[0] + ahead[0], width[1] + ahead[1])
    useful = tuple(
        dict.fromkeys(n for n in needs if n.strings and all(x.strip(BOUNDARY) for x in n.strings))
    )
    return Facts(useful, _extent(width), _extent(reads))


# ---------------------------------------------------------------------- kept between processes

_FACTS = derived.Table("pattern-facts", (__file__, regex_translate.__file__))


def _encode(f: Facts) -> list:
    def extent(e: Extent) -> list:
        return [e.fixed, [[c, n] for c, n in e.runs]]

    return [[[sorted(n.strings), n.lo, n.hi] for n in f.needs], extent(f.width), extent(f.reads)]


def _int(value, none: bool = False) -> int | None:
    if (value is None and none) or type(value) is int:
        return value
    raise ValueError("not an int")


def _decode(value) -> Facts:
    def extent(e) -> Extent:
        fixed, runs = e
        return Extent(_int(fixed), tuple((_str(c), _int(n)) for c, n in runs))

    needs, width, reads = value
    return Facts(
        tuple(Need(frozenset(map(_str, s)), _int(lo), _int(hi, True)) for s, lo, hi in needs),
        extent(width),
        extent(reads),
    )


def _str(value) -> str:
    if not isinstance(value, str):
        raise ValueError("not a string")
    return value


def literal_pattern(strings: frozenset[str]) -> str:
    """A pattern in RE2's syntax matching each of ``strings`` (from :attr:`Facts.needs`)
    wherever a match of the pattern they come from holds it: a word boundary is kept where
    RE2's (ASCII) one holds wherever Python's does (next to an ASCII letter or digit of the
    string), else dropped."""
    out = []
    for s in sorted(strings, key=len):
        parts = s.split(BOUNDARY)
        piece = _escaped(parts[0])
        for i in range(1, len(parts)):
            left = parts[i - 1][-1:] if parts[i - 1] else None
            right = parts[i][:1] if parts[i] else None
            piece += (r"\b" if _keeps(left, right) else "") + _escaped(parts[i])
        out.append(piece)
    return "|".join(out)


def _escaped(text: str) -> str:
    return "".join(c if c.isascii() and c.isalnum() else f"\\x{{{ord(c):x}}}" for c in text)


def _word(ch: str | None) -> bool:
    return ch is not None and ch.isascii() and (ch.isalnum() or ch == "_")


def _keeps(left: str | None, right: str | None) -> bool:
    """Whether a word boundary between ``left`` and ``right`` (None: outside the string) holds
    wherever Python's does, in RE2's ASCII sense."""
    if left is not None and right is not None:
        return left.isascii() and right.isascii()
    return _word(left if left is not None else right)


def _plus(a: tuple[int, int | None], b: tuple[int, int | None]) -> tuple[int, int | None]:
    return a[0] + b[0], (None if a[1] is None or b[1] is None else a[1] + b[1])


def _shifted(need: Need, by: tuple[int, int | None]) -> Need:
    lo, hi = _plus((need.lo, need.hi), by)
    return Need(need.strings, lo, hi)


def _extent(raw: tuple[int, Counter]) -> Extent:
    fixed, runs = raw
    return Extent(fixed, tuple(sorted(runs.items())))


class _Reader:
    def __init__(self, flags: int):
        self.flags = flags
        self.translator = regex_translate._Translator(flags)
        self.translator.names = {}
        self.groups: dict[int, list] = {}

    # ------------------------------------------------------------------ needs

    def needs(self, items: list, nocase: bool = False) -> tuple[set[str] | None, list[Need]]:
        """(every string the sequence can match, or None; the sets a match needs one of, with
        where they start after the sequence's start)."""
        out: list[Need] = []
        current: set[str] | None = {""}
        at = here = (0, 0)  # where the strings of ``current`` start; where the next item does
        for op, av in items:
            exact, inner = self.node(op, av, nocase)
            out += [_shifted(n, here) for n in inner]
            width = self._width(op, av)
            if exact is not None and current is not None:
                joined = {a + b for a, b in product(current, exact)}
                if len(joined) <= MAX_SET and all(len(s) <= MAX_LEN for s in joined):
                    current = joined
                    here = _plus(here, width)
                    continue
            if current is not None:
                out.append(Need(frozenset(current), *at))
            current, at = exact, here
            here = _plus(here, width)
        if current is None:
            return None, out
        if at != (0, 0):  # the sequence as a whole is no one set of strings
            out.append(Need(frozenset(current), *at))
            return None, out
        return current, out

    def _width(self, op, av) -> tuple[int, int | None]:
        lo, hi = _parser.SubPattern(_parser.State(), [(op, av)]).getwidth()
        return lo, (None if hi >= C.MAXREPEAT else hi)

    def node(self, op, av, nocase: bool) -> tuple[set[str] | None, list[Need]]:  # noqa: C901
        if op is C.LITERAL:
            return (None, []) if nocase else ({chr(av)}, [])
        if op is C.IN:
            chars = self._class_chars(av)
            return (chars if chars is not None and not nocase else None), []
        if op is C.AT and av == C.AT_BOUNDARY:
            return {BOUNDARY}, []
        if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            return {""}, []
        if op is C.SUBPATTERN:
            group, add, _remove, sub = av
            if group is not None:
                self.groups[group] = list(sub)
            return self.needs(list(sub), nocase or bool(add & C.SRE_FLAG_IGNORECASE))
        if op is C.BRANCH:
            return self._branch(av[1], nocase)
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            lo, hi, item = av
            exact, inner = self.needs(list(item), nocase)
            if lo == 0:
                return self._repeats(exact, 0, hi), []
            once = [Need(frozenset(exact), 0, 0)] if exact and "" not in exact else []
            return self._repeats(exact, lo, hi), inner + once
        if op is C.ATOMIC_GROUP:
            return self.needs(list(av), nocase)
        return None, []  # any character, a class of many, a back reference

    def _branch(self, alternatives, nocase: bool) -> tuple[set[str] | None, list[Need]]:
        """Every string the alternatives match (when few), and up to three sets a match needs:
        the union of each alternative's rarest set, then of each one's next rarest, …"""
        exacts: set[str] | None = set()
        ranked: list[list[Need]] = []
        for alt in alternatives:
            exact, inner = self.needs(list(alt), nocase)
            if exacts is not None:
                exacts = exacts | exact if exact is not None else None
            sets = [*inner, *([Need(frozenset(exact), 0, 0)] if exact else [])]
            sets = [x for x in sets if x.strings and "" not in x.strings]
            ranked.append(sorted(sets, key=lambda x: rarity(x.strings), reverse=True))
        if exacts is not None and len(exacts) > MAX_SET:
            exacts = None
        if any(not sets for sets in ranked):
            return exacts, []
        out: list[Need] = []
        for k in range(3):
            picked = [sets[min(k, len(sets) - 1)] for sets in ranked]
            his = [x.hi for x in picked]
            union = Need(
                frozenset().union(*(x.strings for x in picked)),
                min(x.lo for x in picked),
                None if None in his else max(his),
            )
            if union not in out:
                out.append(union)
        return exacts, out

    @staticmethod
    def _repeats(exact: set[str] | None, lo: int, hi: int) -> set[str] | None:
        if exact is None or hi is C.MAXREPEAT or hi > 4:
            return None
        out: set[str] = set()
        for k in range(lo, hi + 1):
            out |= {"".join(p) for p in product(exact, repeat=k)}
            if len(out) > MAX_SET:
                return None
        return out

    @staticmethod
    def _class_chars(items) -> set[str] | None:
        out: set[str] = set()
        for op, av in items:
            if op is C.LITERAL:
                out.add(chr(av))
            elif op is C.RANGE and av[1] - av[0] < 16:
                out |= {chr(c) for c in range(av[0], av[1] + 1)}
            else:
                return None
        return out if len(out) <= 16 else None

    # ------------------------------------------------------------------ extent

    def extent(self, items: list) -> tuple[int, Counter]:
        fixed, runs = 0, Counter()
        for op, av in items:
            f, r = self.extent_of(op, av)
            fixed += f
            runs.update(r)
        return fixed, runs

    def extent_of(self, op, av) -> tuple[int, Counter]:  # noqa: C901
        if op in _CHAR_OPS:
            return 1, Counter()
        if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            return 0, Counter()
        if op is C.SUBPATTERN:
            if av[0] is not None:
                self.groups[av[0]] = list(av[3])
            return self.extent(list(av[3]))
        if op is C.ATOMIC_GROUP:
            return self.extent(list(av))
        if op is C.BRANCH:
            fixed, runs = 0, Counter()
            for alt in av[1]:
                f, r = self.extent(list(alt))
                fixed = max(fixed, f)
                runs = runs | r  # each class: the most any alternative has
            return fixed, runs
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            lo, hi, item = av
            if hi is C.MAXREPEAT:
                return 0, Counter({self.run_class(list(item)): 1})
            f, r = self.extent(list(item))
            return f * hi, Counter({k: v * hi for k, v in r.items()})
        if op is C.GROUPREF:
            return self.extent(self.groups.get(av, []))
        if op is C.GROUPREF_EXISTS:
            a = self.extent(list(av[1]))
            b = self.extent(list(av[2])) if av[2] else (0, Counter())
            return max(a[0], b[0]), a[1] | b[1]
        raise ValueError(f"no extent for {op}")

    def lookaheads(self, items: list) -> list[list]:
        """The contents of the lookaheads in ``items`` (not inside another lookahead)."""
        out, stack = [], list(items)
        while stack:
            op, av = stack.pop()
            if op in (C.ASSERT, C.ASSERT_NOT):
                if av[0] >= 0:
                    out.append(list(av[1]))
            else:
                stack += regex_translate.inner(op, av)
        return out

    def run_class(self, items: list) -> str:
        """An RE2 class of every character the items can match."""
        parts: set[str] = set()
        stack = list(items)
        while stack:
            op, av = stack.pop()
            if op is C.ANY:
                parts.add(r"(?s:.)" if self.flags & C.SRE_FLAG_DOTALL else r"[^\n]")
            elif op in _CHAR_OPS:
                parts.add(self.translator.node(op, av))
            elif op in (C.GROUPREF, C.GROUPREF_EXISTS):
                return r"(?s:.)"
            else:
                stack += regex_translate.inner(op, av)
        return "(?:" + "|".join(sorted(parts)) + ")" if parts else r"(?s:.)"


# a few words so common that a set holding one of them finds little
_COMMON = frozenset(
    "the a an of to in and or is are be it you your this that on for with as at by all any "
    "not no do if we i my me our can will".split()
)


def rarity(strings: set[str] | frozenset[str]) -> float:
    """How rarely a set's strings occur in text, roughly: longer strings are rarer, common words
    are not, and each string of a set adds its chances."""
    chance = 0.0
    for s in strings:
        word = s.replace(BOUNDARY, "").strip()
        if word in _COMMON:
            chance += 1.0
        else:  # a word boundary makes a short string rarer
            chance += 1.0 / (1 + len(word) + 2 * min(2, s.count(BOUNDARY))) ** 3
    return -chance
