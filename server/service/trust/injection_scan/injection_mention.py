"""When a phrase an injection rule matches is not an instruction: it is quoted or discussed
(a sentence about attacks), it sits in a one-line code span, or it closes an element the text
opened itself. Used by :mod:`.injection` for each match.

Whether a sentence is about attacks is first looked up among the places the discussion words
stand in the text (found once per text by RE2, each confirmed by ``re`` where it stands); only
where none is found is the sentence read as it is. Each other check reads the match's line. A line of up to :data:`REACH` characters is read as it is;
a longer one through :class:`LineFacts`, built once per text (where its lines break, where each
quote character and each run of backticks stands), so a text of one long line with many
matches is not read again for each of them.
"""

from __future__ import annotations

import bisect
import re

import numpy as np

from retrieval.regexes import linear_regex
from server.service.trust.injection_scan.injection_markup import CLOSING, DISCUSSION, OPENING, URL
from server.service.trust.injection_scan.scan_text import ScanText

REACH = 2000
ASKED = 256  # places a text is asked about before its discussion words are read all at once
QUOTE_PAIRS = (('"', '"'), ("“", "”"), ("'", "'"), ("‘", "’"), ("«", "»"), ("「", "」"))
# (``re``: Python's word boundary, on the 160 characters before a match)
_DISCUSSION = re.compile(DISCUSSION.pattern)
# (``re``: on the 160 characters before a match; a break is one run of spaces after a mark or
# between two line breaks, read once)
_SENTENCE_BREAK = re.compile(r"[.!?]\s+|\n\s*\n")
# the opening tags of a text (for a closing tag of data: did the text open it itself?)
_OPENING_TAG = linear_regex.compile(r"<([a-z][a-z0-9_-]*)[\s>]")


class LineFacts:
    """Where a text's lines break, each quote character stands, and its runs of backticks."""

    def __init__(self, text: str):
        codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        self.n = len(text)
        self.breaks = np.flatnonzero(codes == 10)
        self.at = {c: np.flatnonzero(codes == ord(c)) for c in {*OPENING, *CLOSING}}
        ticks = self.at["`"]
        if len(ticks):
            starts = np.flatnonzero(np.diff(ticks, prepend=-2) != 1)
            self.runs = ticks[starts]  # where each run of backticks starts
            self.ends = ticks[np.append(starts[1:], len(ticks)) - 1] + 1
        else:
            self.runs = self.ends = np.zeros(0, dtype=np.int64)
        halves = (self.ends - self.runs + 1) // 2  # what ``"``" -> "`"`` leaves of a run
        self.halves = np.concatenate(([0], np.cumsum(halves)))
        self.triples = self.runs[(self.ends - self.runs) >= 3]

    def line_start(self, pos: int) -> int:
        i = bisect.bisect_left(self.breaks, pos)
        return int(self.breaks[i - 1]) + 1 if i else 0

    def line_end(self, pos: int) -> int:
        i = bisect.bisect_left(self.breaks, pos)
        return int(self.breaks[i]) if i < len(self.breaks) else self.n

    def count(self, ch: str, lo: int, hi: int) -> int:
        at = self.at[ch]
        return bisect.bisect_left(at, hi) - bisect.bisect_left(at, lo)

    def ticks_left(self, lo: int, hi: int) -> int:
        """How many backticks ``text[lo:hi].replace("``", "`")`` holds (``lo``: a line start)."""
        first = bisect.bisect_left(self.runs, lo)
        last = bisect.bisect_left(self.runs, hi)  # runs starting before hi
        if last <= first:
            return 0
        total = int(self.halves[last - 1] - self.halves[first])
        return total + (min(int(self.ends[last - 1]), hi) - int(self.runs[last - 1]) + 1) // 2

    def tick_between(self, lo: int, hi: int) -> bool:
        i = bisect.bisect_right(self.ends, lo)  # the first run ending after lo
        return i < len(self.runs) and max(int(self.runs[i]), lo) < hi

    def triple_between(self, lo: int, hi: int) -> bool:
        i = bisect.bisect_left(self.triples, lo)
        return i < len(self.triples) and int(self.triples[i]) + 3 <= hi


def _line_facts(st: ScanText) -> LineFacts:
    facts = st.memo.get(LineFacts)
    if facts is None:
        facts = st.memo[LineFacts] = LineFacts(st.text)
    return facts


def _line_start(st: ScanText, pos: int) -> tuple[int, LineFacts | None]:
    found = st.text.rfind("\n", max(0, pos - REACH), pos)
    if found >= 0 or pos <= REACH:
        return found + 1, None
    facts = _line_facts(st)
    return facts.line_start(pos), facts


def _words(st: ScanText) -> tuple[list[int], list[int]] | None:
    """Where the discussion words stand in the text (starts, ends; RE2 on the bounded text,
    where its word boundaries are Python's): places to confirm, not findings. Read once the
    text has been asked about more than :data:`ASKED` places (None before)."""
    words = st.memo.get(_words)
    if words is None:
        asked = st.memo[ASKED] = st.memo.get(ASKED, 0) + 1
        if asked <= ASKED:
            return None
        spans = [m.span() for m in DISCUSSION.finditer(st.bounded)]
        words = st.memo[_words] = ([a for a, _ in spans], [b for _, b in spans])
    return words


def _reach(st: ScanText, words: tuple[list[int], list[int]], i: int) -> tuple[int, int]:
    """The places a phrase can start at to be in the sentence of discussion word ``i``, as
    :func:`discussed` confirms it there: past the character after the word as ``re`` matches
    it in the whole text (a match that reads no further matches when the text ends at the
    phrase too), within 160 characters of its start, before the next break (empty when ``re``
    finds no word there)."""
    reach = st.memo.setdefault(_reach, {})
    if i not in reach:
        text, begin = st.text, words[0][i]
        m = _DISCUSSION.match(text, begin)
        if m is None:
            reach[i] = (st.n + 1, -1)
        else:
            stop = begin + 160
            for c in ".!?\n":
                at = text.find(c, begin, stop)
                stop = stop if at < 0 else at
            reach[i] = (m.end() + 1, stop)
    return reach[i]


def discussed(st: ScanText, start: int) -> bool:
    """A phrase at ``start`` is in a sentence about attacks (or quoting, examples, …): a
    discussion word stands in the 160 characters before it, in its sentence."""
    text = st.text
    lo = max(0, start - 160)
    words = _words(st)
    if words is not None and text.find("://", lo, start) < 0:
        # the nearest word's reach, found once per word
        i = bisect.bisect_right(words[1], start) - 1
        if i >= 0 and (reach := _reach(st, words, i))[0] <= start <= reach[1]:
            return True
        # the nearest word before it, where ``re`` confirms it: the sentence holds it when no
        # break stands between (a break holds one of ``.!?`` or a line break, and a word
        # starts with a letter, never inside a break's spaces)
        starts, ends = words
        i = bisect.bisect_right(ends, start) - 1
        if (
            i >= 0
            and starts[i] >= lo
            and all(text.find(c, starts[i], start) < 0 for c in ".!?\n")
            and _DISCUSSION.match(text, starts[i], start) is not None
        ):
            return True
    return _discussed(text, start)


def discussed_to(st: ScanText, start: int) -> int:
    """The last place up to which every place from ``start`` on is in a sentence about attacks
    as one discussion word's sentence shows (the nearest word before ``start``, within
    :func:`_reach`, no ``://`` before any of them: a reading of each sentence finds that word
    in it); ``start - 1`` when none is known (the text's words not read yet, or none holds
    ``start``)."""
    words = st.memo.get(_words)
    if words is None:
        return start - 1
    i = bisect.bisect_right(words[1], start) - 1
    if i < 0:
        return start - 1
    lo, hi = _reach(st, words, i)
    if not lo <= start <= hi or st.text.find("://", max(0, start - 160), hi) >= 0:
        return start - 1
    return hi


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _discussed(text: str, start: int) -> bool:
    """:func:`discussed`, by a reading of the sentence itself (the 160 characters before it,
    less the tail of a word the window's edge cuts: ``unquoted`` is no ``quoted``)."""
    lo = max(0, start - 160)
    if lo and _word_char(text[lo - 1]):
        while lo < start and _word_char(text[lo]):
            lo += 1
    before = text[lo:start]
    if "://" in before:
        before = URL.sub(" ", before)
    if any(c in before for c in ".!?\n"):  # where its sentence starts (a break holds one)
        ends = [m.end() for m in _SENTENCE_BREAK.finditer(before)]
        sentence = before[ends[-1] :] if ends else before
    else:
        sentence = before
    return _DISCUSSION.search(sentence) is not None


def is_mention(st: ScanText, start: int, end: int, quotes: bool = True) -> bool:
    """A phrase in a sentence about attacks, or quoted (inside a short quotation on its line;
    ``quotes=False``: not for a rule whose words are quoted anyway, such as a tool's name), is
    discussed rather than issued."""
    if discussed(st, start):
        return True
    return quotes and quoted(st, start, end)


def quoted(st: ScanText, start: int, end: int) -> bool:
    """A phrase inside a short quotation on its line."""
    text = st.text
    line_start, facts = _line_start(st, start)
    tail = text[end : end + 60].split("\n", 1)[0]
    if start > line_start and text[start - 1] in OPENING and any(q in tail for q in CLOSING):
        return True
    head = None if facts is not None else text[line_start:start]
    for open_, close in QUOTE_PAIRS:
        if close not in tail:
            continue
        if head is not None:
            n_open, n_close = head.count(open_), head.count(close)
        else:
            n_open, n_close = (
                facts.count(open_, line_start, start),
                facts.count(close, line_start, start),
            )
        opened = n_open % 2 if open_ == close else n_open - n_close
        if opened > 0:
            return True
    return False


def in_inline_code(st: ScanText, start: int, end: int) -> bool:
    """Inside a one-line `code span` (a document naming a token, not a payload)."""
    text = st.text
    line_start, facts = _line_start(st, start)
    line_end = text.find("\n", end, end + REACH)
    if line_end < 0 and end + REACH < st.n:
        facts = facts or _line_facts(st)
    if facts is None:
        line_end = st.n if line_end < 0 else line_end
        return (
            text[line_start:start].replace("``", "`").count("`") % 2 == 1
            and "`" in text[end:line_end]
            and "```" not in text[line_start:line_end]
        )
    line_end = facts.line_end(end)
    return (
        facts.ticks_left(line_start, start) % 2 == 1
        and facts.tick_between(end, line_end)
        and not facts.triple_between(line_start, line_end)
    )


def closes_its_own(st: ScanText, m, opened: dict[str, int]) -> bool:
    """A closing tag (the pattern's ``tag`` group) of an element the text opened before it: an
    XML sample (``<context>…</context>`` in a README), not the end of the framing's quote.
    ``opened``: where each tag is first opened (the text's opening tags read once)."""
    tag = m.groupdict().get("tag")
    if tag is None:
        return False
    if not opened:
        opened[""] = 0
        for o in _OPENING_TAG.finditer(st.text):
            opened.setdefault(o[1], o.start())
    return opened.get(tag, st.n) < m.start()
