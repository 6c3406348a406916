"""Regular expressions that run in linear time: Python's pattern syntax, matched by RE2.

A pattern applied to stored or incoming text must not backtrack: Python's ``re`` can take time
quadratic or exponential in the text on an ambiguous pattern, and it holds the GIL meanwhile.
:func:`compile` takes a Python pattern and its flags, translates it to RE2's syntax and returns
a :class:`Pattern` with the calls the code uses (``search``, ``match``, ``fullmatch``,
``finditer``, ``findall``, ``sub``, ``subn``, ``split``), offsets in characters as with ``re``.
RE2 matches in time linear in the text; a pattern it cannot run (a backreference, a lookahead or
a lookbehind) is refused with :class:`NotLinear`, never silently run by ``re``.

The translation keeps Python's meaning where RE2's differs: ``\\w``, ``\\d`` and ``\\s`` are
Unicode classes unless ``re.ASCII`` is given (RE2's are ASCII), ``\\s`` includes ``\\v`` and
the Unicode spaces, ``re.VERBOSE`` is read by Python's own parser, and a repetition over RE2's
limit of 1000 is split. Two differences remain: ``\\b`` is a boundary between an ASCII word
character and anything else (a Unicode letter next to an ASCII one is a boundary), and ``$``
without ``re.MULTILINE`` is the end of the text only (Python's also matches before a final
newline).

The text is encoded once per text for all patterns applied to it (the last text is kept), so a
scan of many patterns over one text, or a loop of ``search(text, pos)``, stays linear.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Callable, Iterator
from re import _constants as C  # noqa: N812
from re import _parser

import numpy as np
import re2

__all__ = ["Match", "NotLinear", "Pattern", "compile"]

ASCII, IGNORECASE, MULTILINE, DOTALL, VERBOSE = re.A, re.I, re.M, re.S, re.X
_MAX_REPEAT = 1000  # RE2's limit of one counted repetition
_MAX_MEM = 64 << 20  # RE2's budget for one pattern's program and its DFA cache

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
    original does, and more: the candidates of :class:`Windowed`)."""

    def __init__(self, flags: int, relaxed: bool = False):
        self.ascii = bool(flags & ASCII)
        self.relaxed = relaxed
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
        return (f"(?{prefix})" if prefix else "") + body, dict(state.groupdict)


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


def relaxed_alternatives(pattern: str, flags: int = 0) -> list[tuple[str, list]] | None:
    """For a pattern that is an alternation at its top (``a|b|c``): each alternative's relaxed
    form in RE2's syntax (see :class:`Windowed`), with its parsed items; None otherwise."""
    tree = _parser.parse(pattern, flags)
    if len(tree) != 1 or tree[0][0] is not C.BRANCH:
        return None
    translator = _Translator(flags, relaxed=True)
    translator.translate(pattern, flags)  # the groups' bodies, for a back reference
    prefix = "".join(c for f, c in _FLAG_LETTERS if tree.state.flags & f)
    prefix = f"(?{prefix})" if prefix else ""
    return [(prefix + translator.seq(alt), list(alt)) for alt in tree[0][1][1]]


# ---------------------------------------------------------------------- the text, encoded once


class _Encoded:
    """A text as UTF-8, and the character <-> byte offsets when it is not ASCII: measured from
    the nearest offset already known (a scan's offsets mostly move forward), and as two tables
    once the measures have read the text twice over."""

    __slots__ = ("_bytes_of", "_chars_of", "_known_b", "_known_c", "_read", "data", "text")

    def __init__(self, text: str):
        self.text = text
        self._bytes_of = self._chars_of = None
        self._known_c, self._known_b, self._read = [0], [0], 0
        if text.isascii():
            self.data = text.encode("ascii")
        else:
            self.data = text.encode("utf-8", "surrogatepass")

    def _tables(self) -> None:
        raw = np.frombuffer(self.data, dtype=np.uint8)
        lead = (raw & 0xC0) != 0x80  # the first byte of each character
        self._bytes_of = np.flatnonzero(lead)  # where each character starts
        self._chars_of = np.cumsum(lead, dtype=np.int32) - 1  # the character of each byte

    def _known(self, char: int, byte: int) -> None:
        i = bisect.bisect_left(self._known_c, char)
        if i == len(self._known_c) or self._known_c[i] != char:
            self._known_c.insert(i, char)
            self._known_b.insert(i, byte)

    def to_bytes(self, pos: int) -> int:
        if len(self.data) == len(self.text) or pos <= 0:
            return pos
        if pos >= len(self.text):
            return len(self.data)
        if self._bytes_of is None:
            i = bisect.bisect_right(self._known_c, pos) - 1
            char, byte = self._known_c[i], self._known_b[i]
            self._read += pos - char
            if self._read <= 2 * len(self.text):
                byte += len(self.text[char:pos].encode("utf-8", "surrogatepass"))
                self._known(pos, byte)
                return byte
            self._tables()
        return int(self._bytes_of[pos])

    def to_chars(self, offset: int) -> int:
        if len(self.data) == len(self.text) or offset <= 0:
            return offset
        if offset >= len(self.data):
            return len(self.text)
        if self._chars_of is None:
            i = bisect.bisect_right(self._known_b, offset) - 1
            char, byte = self._known_c[i], self._known_b[i]
            self._read += offset - byte
            if self._read <= 2 * len(self.data):
                try:
                    char += len(self.data[byte:offset].decode("utf-8", "surrogatepass"))
                except UnicodeDecodeError:  # not where a character starts
                    self._read = 3 * len(self.data)
                else:
                    self._known(char, offset)
                    return char
            self._tables()
        return int(self._chars_of[offset])


_RECENT = threading.local()  # the last few texts matched by this thread, encoded
_KEEP = 4


def utf8(text: str) -> bytes:
    """``text`` as RE2 reads it (kept for the next patterns applied to it)."""
    return _encoded(text).data


def _encoded(text: str) -> _Encoded:
    recent = getattr(_RECENT, "texts", None)
    if recent is None:
        recent = _RECENT.texts = []
    for enc in recent:
        if enc.text is text:
            return enc
    enc = _Encoded(text)
    recent.insert(0, enc)
    del recent[_KEEP:]
    return enc


# ---------------------------------------------------------------------- pattern and match


class Match:
    """One match; offsets in characters, as ``re.Match``."""

    __slots__ = ("_spans", "endpos", "pos", "re", "string")

    def __init__(self, pattern: Pattern, text: str, spans: list[tuple[int, int]], pos, endpos):
        self.re, self.string, self._spans, self.pos, self.endpos = (
            pattern,
            text,
            spans,
            pos,
            endpos,
        )

    def _index(self, group: int | str) -> int:
        if isinstance(group, str):
            if group not in self.re.groupindex:
                raise IndexError("no such group")
            return self.re.groupindex[group]
        if not 0 <= group <= self.re.groups:
            raise IndexError("no such group")
        return group

    def span(self, group: int | str = 0) -> tuple[int, int]:
        return self._spans[self._index(group)]

    def start(self, group: int | str = 0) -> int:
        return self.span(group)[0]

    def end(self, group: int | str = 0) -> int:
        return self.span(group)[1]

    def __getitem__(self, group: int | str) -> str | None:
        start, end = self.span(group)
        return None if start < 0 else self.string[start:end]

    def group(self, *groups: int | str):
        if len(groups) <= 1:
            return self[groups[0] if groups else 0]
        return tuple(self[g] for g in groups)

    def groups(self, default=None) -> tuple:
        return tuple(default if (g := self[i]) is None else g for i in range(1, self.re.groups + 1))

    def groupdict(self, default=None) -> dict[str, str | None]:
        return {n: default if (g := self[i]) is None else g for n, i in self.re.groupindex.items()}

    @property
    def lastindex(self) -> int | None:
        ends = [(e, -i) for i, (s, e) in enumerate(self._spans) if i and s >= 0]
        return -max(ends)[1] if ends else None

    def expand(self, template: str) -> str:
        return _expand(self, template)

    def __repr__(self) -> str:
        return f"<linear_regex.Match span={self.span()} match={self[0]!r}>"


_TEMPLATE = re.compile(r"\\(?:g<(\w+)>|(\d{1,2})|(.))", re.S)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a", "\\": "\\"}


def _expand(m: Match, template: str) -> str:
    def one(t: re.Match) -> str:
        if t.group(3) is not None:
            return _ESCAPES.get(t.group(3), "\\" + t.group(3))
        ref = t.group(1) or t.group(2)
        return m[int(ref) if ref.isdigit() else ref] or ""

    return _TEMPLATE.sub(one, template) if "\\" in template else template


class Pattern:
    """A compiled pattern run by RE2: the calls of ``re.Pattern`` the code uses."""

    __slots__ = ("_rx", "flags", "groupindex", "groups", "pattern", "translated")

    def __init__(self, pattern: str, flags: int = 0, relaxed: bool = False):
        self.pattern, self.flags = pattern, flags
        self.translated, self.groupindex = _Translator(flags, relaxed).translate(pattern, flags)
        self._compile()

    @classmethod
    def of_re2(cls, translated: str) -> Pattern:
        """A pattern the code writes in RE2's syntax (a class of characters, literal strings),
        never one from outside."""
        self = object.__new__(cls)
        self.pattern = self.translated = translated
        self.flags, self.groupindex = 0, {}
        self._compile()
        return self

    def _compile(self) -> None:
        options = re2.Options()
        options.max_mem = _MAX_MEM
        options.log_errors = False
        try:
            self._rx = re2._re2.RE2(self.translated.encode("utf-8"), options)
        except re2.error as exc:  # pragma: no cover - the translation is RE2's syntax
            raise NotLinear(f"RE2 refused the pattern: {exc}") from exc
        if not self._rx.ok():
            raise NotLinear(f"RE2 refused the pattern: {self._rx.error()}")
        self.groups = self._rx.NumberOfCapturingGroups()

    def __repr__(self) -> str:
        return f"linear_regex.compile({self.pattern!r})"

    def _run(self, anchor, text: str, pos: int, endpos: int | None) -> Iterator[Match]:
        n = len(text)
        pos = max(0, min(pos, n))
        endpos = n if endpos is None else max(0, min(endpos, n))
        if pos > endpos:
            return
        enc = _encoded(text)
        data, at, stop = enc.data, enc.to_bytes(pos), enc.to_bytes(endpos)
        while True:
            spans = self._rx.Match(anchor, data, at, stop)
            whole = spans[0]
            if whole[0] < 0:
                return
            chars = [(enc.to_chars(s), enc.to_chars(e)) for s, e in spans]
            yield Match(self, text, chars, pos, endpos)
            if whole[1] == whole[0]:  # an empty match: step over one character
                if whole[1] >= stop:
                    return
                at = enc.to_bytes(chars[0][1] + 1)
            else:
                at = whole[1]

    def search(self, text: str, pos: int = 0, endpos: int | None = None) -> Match | None:
        return next(self._run(re2._Anchor.UNANCHORED, text, pos, endpos), None)

    def match(self, text: str, pos: int = 0, endpos: int | None = None) -> Match | None:
        return next(self._run(re2._Anchor.ANCHOR_START, text, pos, endpos), None)

    def fullmatch(self, text: str, pos: int = 0, endpos: int | None = None) -> Match | None:
        return next(self._run(re2._Anchor.ANCHOR_BOTH, text, pos, endpos), None)

    def finditer(self, text: str, pos: int = 0, endpos: int | None = None) -> Iterator[Match]:
        return self._run(re2._Anchor.UNANCHORED, text, pos, endpos)

    def findall(self, text: str, pos: int = 0, endpos: int | None = None) -> list:
        out = []
        for m in self.finditer(text, pos, endpos):
            if self.groups == 0:
                out.append(m[0])
            elif self.groups == 1:
                out.append(m[1] or "")
            else:
                out.append(m.groups(""))
        return out

    def subn(self, repl: str | Callable[[Match], str], text: str, count: int = 0):
        parts, end, done = [], 0, 0
        for m in self.finditer(text):
            if count and done >= count:
                break
            parts.append(text[end : m.start()])
            parts.append(repl(m) if callable(repl) else _expand(m, repl))
            end, done = m.end(), done + 1
        parts.append(text[end:])
        return "".join(parts), done

    def sub(self, repl: str | Callable[[Match], str], text: str, count: int = 0) -> str:
        return self.subn(repl, text, count)[0]

    def split(self, text: str, maxsplit: int = 0) -> list[str | None]:
        parts, end = [], 0
        for done, m in enumerate(self.finditer(text)):
            if maxsplit and done >= maxsplit:
                break
            parts.append(text[end : m.start()])
            parts.extend(m[i] for i in range(1, self.groups + 1))
            end = m.end()
        parts.append(text[end:])
        return parts


class Windowed:
    """A pattern that needs a lookaround or a backreference, matched in bounded windows: RE2
    finds where its relaxed form (lookarounds and word boundaries dropped) matches, the leftmost
    place first; there, and only there, Python's ``re`` matches the pattern itself, anchored, on
    at most ``window`` characters (a lookbehind still sees the text before). Every match of the
    pattern is a match of the relaxed form, so none is missed unless it is longer than the
    window; each try of ``re`` is bounded by the window, so the time stays linear in the text."""

    __slots__ = ("_exact", "_relaxed", "flags", "groupindex", "groups", "pattern", "window")

    def __init__(self, pattern: str, flags: int, window: int):
        self.pattern, self.flags = pattern, flags
        self._exact = re.compile(pattern, flags)
        self._relaxed = Pattern(pattern, flags, relaxed=True)
        widest = _parser.parse(pattern, flags).getwidth()[1]
        self.window = max(1, min(window, widest + 1))
        self.groups, self.groupindex = self._exact.groups, self._exact.groupindex

    def __repr__(self) -> str:
        return f"linear_regex.compile({self.pattern!r}, window={self.window})"

    def _run(self, text: str, pos: int, endpos: int | None) -> Iterator[re.Match]:
        n = len(text)
        endpos = n if endpos is None else max(0, min(endpos, n))
        at = max(0, pos)
        while at <= endpos:
            cand = self._relaxed.search(text, at, endpos)
            if cand is None:
                return
            start = cand.start()
            m = self._exact.match(text, start, min(endpos, start + self.window))
            if m is None:
                at = start + 1
                continue
            yield m
            at = m.end() if m.end() > start else start + 1

    def search(self, text: str, pos: int = 0, endpos: int | None = None) -> re.Match | None:
        return next(self._run(text, pos, endpos), None)

    def match(self, text: str, pos: int = 0, endpos: int | None = None) -> re.Match | None:
        if self._relaxed.match(text, pos, endpos) is None:
            return None
        stop = len(text) if endpos is None else min(endpos, len(text))
        return self._exact.match(text, pos, min(stop, max(pos, 0) + self.window))

    def fullmatch(self, text: str, pos: int = 0, endpos: int | None = None) -> re.Match | None:
        stop = len(text) if endpos is None else min(endpos, len(text))
        if stop - max(pos, 0) > self.window or self._relaxed.fullmatch(text, pos, stop) is None:
            return None
        return self._exact.fullmatch(text, pos, stop)

    def finditer(self, text: str, pos: int = 0, endpos: int | None = None) -> Iterator[re.Match]:
        return self._run(text, pos, endpos)

    findall = Pattern.findall
    subn = Pattern.subn
    sub = Pattern.sub
    split = Pattern.split


def compile(  # noqa: A001 - the name ``re`` uses
    pattern: str, flags: int = 0, window: int | None = None
) -> Pattern | Windowed:
    """``pattern`` (Python's syntax and flags) run by RE2. A pattern RE2 cannot run raises
    :class:`NotLinear`, unless ``window`` is given: then it is matched in windows of at most
    that many characters (:class:`Windowed`)."""
    try:
        return Pattern(pattern, flags)
    except NotLinear:
        if window is None:
            raise
        return Windowed(pattern, flags, window)
