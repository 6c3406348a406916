"""Regular expressions that run in linear time: Python's pattern syntax, matched by RE2.

A pattern applied to stored or incoming text must not backtrack: Python's ``re`` can take time
quadratic or exponential in the text on an ambiguous pattern, and it holds the GIL meanwhile.
:func:`compile` takes a Python pattern and its flags, translates it to RE2's syntax and returns
a :class:`Pattern` with the calls the code uses (``search``, ``match``, ``fullmatch``,
``finditer``, ``findall``, ``sub``, ``subn``, ``split``), offsets in characters as with ``re``.
RE2 matches in time linear in the text; a pattern it cannot run (a backreference, a lookahead or
a lookbehind) is refused with :class:`NotLinear`, never silently run by ``re``.

The translation (:mod:`retrieval.regexes.regex_translate`) keeps Python's meaning where RE2's differs:
``\\w``, ``\\d`` and ``\\s`` are Unicode classes unless ``re.ASCII`` is given, ``\\s`` includes
``\\v`` and the Unicode spaces, a repetition over RE2's limit of 1000 is split. Two differences
remain: ``\\b`` is a boundary between an ASCII word character and anything else (a Unicode
letter next to an ASCII one is a boundary; the injection scan reads such patterns in a text
where every letter outside ASCII is an ASCII one, see :mod:`server.service.trust.injection_scan.scan_text`), and
``$`` without ``re.MULTILINE`` is the end of the text only (Python's also matches before a
final newline).

The text is encoded once per text for all patterns applied to it (the last few texts are kept),
and a character offset is measured from the nearest one known, so a scan of many patterns over
one text, or a loop of ``search(text, pos)``, stays linear.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Callable, Iterator
from re import _parser

import numpy as np
import re2

from retrieval.regexes import derived, regex_translate
from retrieval.regexes.regex_translate import (
    NotLinear,
    _Translator,
    relaxed_alternatives,
    translate,
)

__all__ = [
    "Match",
    "NotLinear",
    "Pattern",
    "alternative_forms",
    "compile",
    "relaxed_alternatives",
    "translate",
]

_MAX_MEM = 64 << 20  # RE2's budget for one pattern's program and its DFA cache


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
        return self._spans[0][0] if group == 0 else self.span(group)[0]

    def end(self, group: int | str = 0) -> int:
        return self._spans[0][1] if group == 0 else self.span(group)[1]

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

    __slots__ = ("_compiled", "_relax", "flags", "groupindex", "groups", "pattern", "translated")

    def __init__(self, pattern: str, flags: int = 0, relaxed: bool = False, capture: bool = True):
        """``capture=False``: where it matches, without its groups (RE2 then finds a match by
        its automata alone, never by a slower pass over the match for the groups' places).

        RE2 compiles the pattern at its first search when an earlier process compiled it
        already (its number of groups is kept, :mod:`.derived`); else here, so a pattern RE2
        refuses raises :class:`NotLinear` at once."""
        self.pattern, self.flags, self._relax = pattern, flags, relaxed
        self.translated, self.groupindex = _translated(pattern, flags, relaxed, capture)
        self._compiled = None

        def derive() -> int:
            self._compile()
            return self.groups

        self.groups = _SYNTAX.get(["groups", self.translated], derive, int, _an_int)

    @classmethod
    def of_re2(cls, translated: str) -> Pattern:
        """A pattern the code writes in RE2's syntax (a class of characters, literal strings),
        never one from outside."""
        self = object.__new__(cls)
        self.pattern = self.translated = translated
        self.flags, self.groupindex, self._relax = 0, {}, None
        self._compiled = None
        self._compile()
        return self

    def _compile(self) -> None:
        options = re2.Options()
        options.max_mem = _MAX_MEM
        options.log_errors = False
        try:
            rx = re2._re2.RE2(self.translated.encode("utf-8"), options)
        except re2.error as exc:  # pragma: no cover - the translation is RE2's syntax
            raise NotLinear(f"RE2 refused the pattern: {exc}") from exc
        if not rx.ok():
            raise NotLinear(f"RE2 refused the pattern: {rx.error()}")
        self.groups = rx.NumberOfCapturingGroups()
        self._compiled = rx

    @property
    def _rx(self):
        """RE2's compiled pattern (compiled at the first search, see ``__init__``)."""
        if self._compiled is None:
            self._compile()
        return self._compiled

    def __repr__(self) -> str:
        return f"linear_regex.compile({self.pattern!r})"

    def bare(self) -> Pattern:
        """The same pattern without its groups (see ``capture``)."""
        if not self.groups:
            return self
        if self._relax is None:  # written in RE2's syntax: its groups stay
            raise ValueError("a pattern written in RE2's syntax has no bare twin")
        return Pattern(self.pattern, self.flags, self._relax, capture=False)

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

    def _first(self, anchor, text: str, pos: int, endpos: int | None) -> Match | None:
        """The first match ``_run`` yields (one call of RE2, no generator)."""
        n = len(text)
        pos = max(0, min(pos, n))
        endpos = n if endpos is None else max(0, min(endpos, n))
        if pos > endpos:
            return None
        enc = _encoded(text)
        if len(enc.data) == n:  # ASCII: a byte offset is a character offset
            spans = self._rx.Match(anchor, enc.data, pos, endpos)
            return None if spans[0][0] < 0 else Match(self, text, spans, pos, endpos)
        spans = self._rx.Match(anchor, enc.data, enc.to_bytes(pos), enc.to_bytes(endpos))
        if spans[0][0] < 0:
            return None
        chars = [(enc.to_chars(s), enc.to_chars(e)) for s, e in spans]
        return Match(self, text, chars, pos, endpos)

    def search(self, text: str, pos: int = 0, endpos: int | None = None) -> Match | None:
        return self._first(re2._Anchor.UNANCHORED, text, pos, endpos)

    def match(self, text: str, pos: int = 0, endpos: int | None = None) -> Match | None:
        return self._first(re2._Anchor.ANCHOR_START, text, pos, endpos)

    def fullmatch(self, text: str, pos: int = 0, endpos: int | None = None) -> Match | None:
        return self._first(re2._Anchor.ANCHOR_BOTH, text, pos, endpos)

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

    __slots__ = ("_compiled", "_relaxed", "flags", "groupindex", "groups", "pattern", "window")

    def __init__(self, pattern: str, flags: int, window: int):
        self.pattern, self.flags = pattern, flags
        self._compiled: re.Pattern | None = None  # ``re``'s, compiled at its first try
        self._relaxed = Pattern(pattern, flags, relaxed=True, capture=False)  # where, only
        widest, self.groups, self.groupindex = _shape(pattern, flags)
        self.window = max(1, min(window, widest + 1))

    @property
    def _exact(self) -> re.Pattern:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self.flags)
        return self._compiled

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


# ---------------------------------------------------------------------- derived, kept on disk

_SYNTAX = derived.Table("re2-syntax", (regex_translate.__file__, __file__), (re2._re2.__file__,))


def _an_int(value) -> int:
    if type(value) is not int:
        raise ValueError("not an int")
    return value


def _shape(pattern: str, flags: int) -> tuple[int, int, dict[str, int]]:
    """(the widest match, the number of groups, the named groups) of a pattern ``re`` runs."""

    def derive():
        tree = _parser.parse(pattern, flags)
        return [tree.getwidth()[1], tree.state.groups - 1, dict(tree.state.groupdict)]

    def decode(value):
        widest, groups, names = value
        _an_int(widest), _an_int(groups)
        if not isinstance(names, dict) or not all(
            isinstance(k, str) and type(v) is int for k, v in names.items()
        ):
            raise ValueError("a bad group index")
        return value

    widest, groups, names = _SYNTAX.get(["shape", pattern, int(flags)], derive, list, decode)
    return widest, groups, dict(names)


def _encode_translation(value) -> dict:
    if isinstance(value, NotLinear):
        return {"error": str(value)}
    return {"re2": value[0], "groups": value[1]}


def _decode_translation(value):
    if "error" in value:
        if not isinstance(value["error"], str):
            raise ValueError("a bad error")
        return NotLinear(value["error"])
    translated, groups = value["re2"], value["groups"]
    if not isinstance(translated, str) or not isinstance(groups, dict):
        raise ValueError("a bad translation")
    if not all(isinstance(k, str) and type(v) is int for k, v in groups.items()):
        raise ValueError("a bad group index")
    return translated, groups


def _translated(pattern: str, flags: int, relaxed: bool, capture: bool) -> tuple[str, dict]:
    """``pattern`` in RE2's syntax and its named groups (:mod:`.regex_translate`), derived
    once for every process (:mod:`.derived`)."""

    def derive():
        try:
            return _Translator(flags, relaxed, capture).translate(pattern, flags)
        except NotLinear as exc:
            return exc

    got = _SYNTAX.get(
        ["re2", pattern, int(flags), relaxed, capture],
        derive,
        _encode_translation,
        _decode_translation,
    )
    if isinstance(got, NotLinear):
        raise NotLinear(str(got))
    return got[0], dict(got[1])


def _forms(value) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("bad alternatives")
    return value


def alternative_forms(pattern: str, flags: int = 0, capture: bool = True) -> list[str] | None:
    """The relaxed forms of :func:`relaxed_alternatives` (without their parsed items), derived
    once for every process."""
    return _SYNTAX.get(
        ["alternatives", pattern, int(flags), capture],
        lambda: (
            None
            if (alts := relaxed_alternatives(pattern, flags, capture)) is None
            else [p for p, _ in alts]
        ),
        lambda v: v,
        _forms,
    )


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
