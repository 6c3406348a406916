"""Python's regular expression syntax translated to RE2's, with Python's meaning (used by
:mod:`retrieval.regexes.linear_regex`).

``\\w``, ``\\d`` and ``\\s`` are Unicode classes unless ``re.ASCII`` is given (RE2's are
ASCII), ``\\s`` includes ``\\v`` and the Unicode spaces, ``re.VERBOSE`` is read by Python's own
parser, and a repetition over RE2's limit of 1000 is split. A construct RE2 cannot run (a
backreference, a lookahead or a lookbehind) raises :class:`NotLinear`. The *relaxed*
translation drops lookarounds and the word boundaries RE2 cannot keep, and reads a back
reference as its group's pattern: a pattern that matches wherever the original does, and more.
"""

from __future__ import annotations

import re
from re import _constants as C  # noqa: N812
from re import _parser

__all__ = ["NotLinear", "relaxed_alternatives", "translate"]

ASCII, IGNORECASE, MULTILINE, DOTALL, VERBOSE = re.A, re.I, re.M, re.S, re.X
_MAX_REPEAT = 1000  # RE2's limit of one counted repetition

# Python's classes (str patterns), in RE2's syntax, for use inside a character class
_WORD = r"\p{L}\p{N}_"
_DIGIT = r"\p{Nd}"
_SPACE = (
    r"\t\n\x{b}\f\r\x{1c}-\x{1f} \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}"
    r"\x{202f}\x{205f}\x{3000}"
)
_ASCII_CLASSES = {"word": r"0-9A-Za-z_", "digit": r"0-9", "space": r"\t\n\x{b}\f\r "}
_UNI_CLASSES = {"word": _WORD, "digit": _DIGIT, "space": _SPACE}
_RELAXED_CLASSES = {k: v + r"\x{80}-\x{10ffff}" for k, v in _ASCII_CLASSES.items()}
_CATEGORY = {
    C.CATEGORY_WORD: ("word", False),
    C.CATEGORY_NOT_WORD: ("word", True),
    C.CATEGORY_DIGIT: ("digit", False),
    C.CATEGORY_NOT_DIGIT: ("digit", True),
    C.CATEGORY_SPACE: ("space", False),
    C.CATEGORY_NOT_SPACE: ("space", True),
}
_FLAG_LETTERS = ((IGNORECASE, "i"), (MULTILINE, "m"), (DOTALL, "s"))


def inner(op, av) -> list:
    """The items a node of a parsed pattern holds: a group's, every branch's in order, a
    repeat's, a lookaround's, both arms of a conditional group; none for any other node."""
    if op is C.SUBPATTERN:
        return list(av[3])
    if op is C.BRANCH:
        return [item for alt in av[1] for item in alt]
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        return list(av[2])
    if op in (C.ASSERT, C.ASSERT_NOT):
        return list(av[1])
    if op is C.ATOMIC_GROUP:
        return list(av)
    if op is C.GROUPREF_EXISTS:
        return list(av[1]) + list(av[2] or [])
    return []


class NotLinear(ValueError):
    """A pattern RE2 cannot run: what it uses that needs backtracking."""


def _char(code: int) -> str:
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        raise NotLinear(f"a surrogate or out-of-range character U+{code:04X}")
    ch = chr(code)
    return ch if ch.isascii() and ch.isalnum() else f"\\x{{{code:x}}}"


class _Translator:
    """Python's parsed pattern -> RE2's syntax. ``relaxed``: lookarounds and word boundaries
    dropped, a backreference read as its group's pattern (a pattern that matches wherever the
    original does, and more: the candidates of :class:`Windowed`). ``capture=False``: every
    group a non-capturing one (where a pattern matches, not its groups)."""

    def __init__(self, flags: int, relaxed: bool = False, capture: bool = True):
        self.ascii = bool(flags & ASCII)
        self.relaxed = relaxed
        self.capture = capture
        self.bodies: dict[int, str] = {}
        self.boundary = self.non_ascii = False

    def classes(self) -> dict[str, str]:
        if self.ascii:
            return _ASCII_CLASSES
        # relaxed: the ASCII class and every other character (``\p{L}`` is hundreds of UTF-8
        # ranges in RE2's program, for each use)
        return _RELAXED_CLASSES if self.relaxed else _UNI_CLASSES

    def seq(self, items) -> str:
        items = list(items)
        out = []
        for i, (op, av) in enumerate(items):
            if (
                self.relaxed
                and op is C.AT
                and av == C.AT_BOUNDARY
                and (_ascii_word_edge(items[:i], last=True) or _ascii_word_edge(items[i + 1 :]))
            ):
                out.append(
                    r"\b"
                )  # next to an ASCII word character: RE2's holds where Python's does
            else:
                out.append(self.node(op, av))
        return "".join(out)

    def node(self, op, av) -> str:  # noqa: C901 - one branch per node kind
        if op is C.LITERAL:
            self.non_ascii |= av > 0x7F
            return _char(av)
        if op is C.NOT_LITERAL:
            return f"[^{_char(av)}]"
        if op is C.ANY:
            return "."
        if op is C.IN:
            return self.charset(av)
        if op is C.BRANCH:
            return "(?:" + "|".join(self.seq(b) for b in av[1]) + ")"
        if op is C.SUBPATTERN:
            group, add, remove, sub = av
            flags = self.scoped_flags(add, remove)
            body = self.seq(sub)
            if flags:
                body = f"(?{flags}:{body})"
            if group is None:
                return f"(?:{body})"
            self.bodies[group] = body
            if not self.capture:
                return f"(?:{body})"
            name = self.names.get(group)
            return f"(?P<{name}>{body})" if name else f"({body})"
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            return self.repeat(op, *av)
        if op is C.AT:
            return self.at(av)
        if op is C.CATEGORY:
            return self.charset([(op, av)])
        if self.relaxed and op in (C.ASSERT, C.ASSERT_NOT):
            return ""
        if self.relaxed and op is C.GROUPREF:
            return f"(?:{self.bodies[av]})"
        if self.relaxed and op is C.GROUPREF_EXISTS:
            return f"(?:{self.seq(av[1])}|{self.seq(av[2]) if av[2] else ''})"
        what = {
            C.GROUPREF: "a backreference",
            C.GROUPREF_EXISTS: "a conditional group",
            C.ASSERT: "a lookahead or lookbehind",
            C.ASSERT_NOT: "a negative lookahead or lookbehind",
        }.get(op, str(op).lower().replace("_", " "))
        raise NotLinear(f"RE2 has no {what}")

    def scoped_flags(self, add: int, remove: int) -> str:
        if (add | remove) & ASCII:
            raise NotLinear("RE2 has no scoped ASCII flag")
        on = "".join(c for f, c in _FLAG_LETTERS if add & f)
        off = "".join(c for f, c in _FLAG_LETTERS if remove & f)
        return on + (f"-{off}" if off else "")

    def repeat(self, op, lo: int, hi: int, item) -> str:
        body = self.seq(item)
        if self.relaxed and hi is not C.MAXREPEAT and len(body) > 40 and hi * len(body) > 4000:
            # a counted repetition of a long alternation is copied ``hi`` times into RE2's
            # program; relaxed, it is any ``lo * shortest`` to ``hi * longest`` characters
            shortest, longest = _parser.SubPattern(_parser.State(), item).getwidth()
            if longest < C.MAXREPEAT and hi * longest <= 4 * _MAX_REPEAT:
                return self.counted("(?s:.)", lo * shortest, hi * longest, "")
        lazy = "?" if op is C.MIN_REPEAT else ""
        atom = f"(?:{body})"
        if hi is C.MAXREPEAT:
            if lo == 0:
                return f"{atom}*{lazy}"
            if lo == 1:
                return f"{atom}+{lazy}"
            return self.counted(atom, lo, lo, lazy) + f"{atom}*{lazy}"
        return self.counted(atom, lo, hi, lazy)

    @staticmethod
    def counted(atom: str, lo: int, hi: int, lazy: str) -> str:
        """``atom{lo,hi}``, split into parts of at most RE2's limit (same strings matched)."""
        parts = []
        while hi > 0:
            step_hi = min(hi, _MAX_REPEAT)
            step_lo = min(lo, step_hi)
            parts.append(f"{atom}{{{step_lo},{step_hi}}}{lazy}")
            lo, hi = lo - step_lo, hi - step_hi
        return "".join(parts)

    def at(self, code) -> str:
        table = {
            C.AT_BEGINNING: "^",
            C.AT_BEGINNING_STRING: r"\A",
            C.AT_END: "$",
            C.AT_END_STRING: r"\z",
            C.AT_BOUNDARY: r"\b",
            C.AT_NON_BOUNDARY: r"\B",
        }
        if code not in table:
            raise NotLinear(f"RE2 has no {code}")
        if code in (C.AT_BOUNDARY, C.AT_NON_BOUNDARY):
            self.boundary = True
            if self.relaxed:
                return ""
        return table[code]

    def charset(self, items) -> str:
        negate = False
        positive: list[str] = []
        negated: list[str] = []  # \W, \D, \S inside a class: RE2 cannot join them to others
        for op, av in items:
            if op is C.NEGATE:
                negate = True
            elif op is C.LITERAL:
                positive.append(_char(av))
            elif op is C.RANGE:
                positive.append(f"{_char(av[0])}-{_char(av[1])}")
            elif op is C.CATEGORY:
                name, neg = _CATEGORY[av]
                if neg and self.relaxed and not self.ascii:  # not the ASCII class: a superset
                    negated.append(_ASCII_CLASSES[name])
                else:
                    (negated if neg else positive).append(self.classes()[name])
            else:
                raise NotLinear(f"a character class with {op}")
        if not negated:
            if not positive:
                return "[^\\x{0}-\\x{10ffff}]" if not negate else "(?s:.)"
            return f"[{'^' if negate else ''}{''.join(positive)}]"
        if negate:
            return self.word_less(positive, negated)
        parts = ([f"[{''.join(positive)}]"] if positive else []) + [f"[^{n}]" for n in negated]
        return "(?:" + "|".join(parts) + ")"

    def word_less(self, positive: list[str], negated: list[str]) -> str:
        """``[^\\W…]``: the word characters less some (``[^\\W_]`` letters and digits,
        ``[^\\W\\d_]`` letters)."""
        classes = self.classes()
        if len(negated) == 1 and not positive:
            return f"[{negated[0]}]"
        if self.relaxed and not self.ascii:
            return r"[0-9A-Za-z_\x{80}-\x{10ffff}]"  # a superset of any word class less some
        under = _char(ord("_"))
        if negated != [classes["word"]] or not set(positive) <= {under, classes["digit"]}:
            raise NotLinear("a negated class holding \\W, \\D or \\S and more")
        digits = classes["digit"] not in positive
        if self.ascii:
            kept = "A-Za-z" + ("0-9" if digits else "")
        else:
            kept = r"\p{L}" + (r"\p{N}" if digits else r"\p{Nl}\p{No}")
        return f"[{kept}{'' if under in positive else '_'}]"

    def translate(self, pattern: str, flags: int) -> tuple[str, dict[str, int]]:
        tree = _parser.parse(pattern, flags)
        state = tree.state
        self.names = {i: n for n, i in state.groupdict.items()}
        self.ascii = bool(state.flags & ASCII)
        body = self.seq(tree)
        if self.boundary and self.non_ascii and not self.relaxed:
            raise NotLinear("RE2's \\b is ASCII: a word boundary beside non-ASCII letters")
        prefix = "".join(c for f, c in _FLAG_LETTERS if state.flags & f)
        groups = dict(state.groupdict) if self.capture else {}
        return (f"(?{prefix})" if prefix else "") + body, groups


def _edge(items, last: bool) -> tuple[set[int] | None, bool]:
    """The characters the sequence ``items`` can begin (``last``: end) with, None if any, and
    whether it can match nothing."""
    chars: set[int] = set()
    for op, av in reversed(items) if last else items:
        if op is C.LITERAL:
            return chars | {av}, False
        if op is C.IN:
            if any(o is not C.LITERAL for o, _ in av):
                return None, False
            return chars | {a for _, a in av}, False
        if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            continue
        if op is C.SUBPATTERN:
            inner, empty = _edge(av[3], last)
        elif op is C.BRANCH:
            inner, empty = set(), False
            for alt in av[1]:
                got, e = _edge(alt, last)
                inner = None if got is None or inner is None else inner | got
                empty = empty or e
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            inner, empty = _edge(av[2], last)
            empty = empty or av[0] == 0
        else:
            return None, False
        if inner is None:
            return None, False
        chars |= inner
        if not empty:
            return chars, False
    return chars, True


def _ascii_word_edge(items, last: bool = False) -> bool:
    """Whether ``items`` always begin (``last``: end) with an ASCII letter, digit or ``_``."""
    chars, empty = _edge(items, last)
    return (
        not empty
        and chars is not None
        and bool(chars)
        and all(c < 0x80 and (chr(c).isalnum() or c == 0x5F) for c in chars)
    )


def translate(pattern: str, flags: int = 0) -> str:
    """``pattern`` in RE2's syntax, with Python's meaning (see the module's docstring)."""
    return _Translator(flags).translate(pattern, flags)[0]


def relaxed_alternatives(
    pattern: str, flags: int = 0, capture: bool = True
) -> list[tuple[str, list]] | None:
    """For a pattern that is an alternation at its top (``a|b|c``): each alternative's relaxed
    form in RE2's syntax (see :class:`Windowed`; ``capture=False``: with no capturing group),
    with its parsed items; None otherwise."""
    tree = _parser.parse(pattern, flags)
    if len(tree) != 1 or tree[0][0] is not C.BRANCH:
        return None
    translator = _Translator(flags, relaxed=True, capture=capture)
    translator.translate(pattern, flags)  # the groups' bodies, for a back reference
    prefix = "".join(c for f, c in _FLAG_LETTERS if tree.state.flags & f)
    prefix = f"(?{prefix})" if prefix else ""
    return [(prefix + translator.seq(alt), list(alt)) for alt in tree[0][1][1]]


# ---------------------------------------------------------------------- the text, encoded once
