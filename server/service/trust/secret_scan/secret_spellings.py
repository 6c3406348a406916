"""Secrets spelled another way than the secret scan's patterns read them.

The scan (:mod:`.secrets`) reads text as it is. Two spellings hide a credential from it while
any reader undoes them in one step:

- **invisible characters** inside a token: a zero-width space, a soft hyphen, a word joiner, a
  byte-order mark, a direction mark, Unicode tag characters (:data:`INVISIBLE`). They render as
  nothing and a copy or a ``str.replace`` removes them. :func:`invisible_cuts` finds them,
  :func:`without_cuts` gives the text without them and :func:`origin` maps a position in that
  text back to the original, so a finding there covers the original characters, invisible ones
  included;
- **hex dumps**: a run of at least :data:`MIN_HEX` hex digits, an even count, possibly wrapped
  over lines (``xxd -p .env``, ``binascii.hexlify``, ``bytes.hex()``). :func:`hex_runs` gives
  each such run with the text it decodes to, each character that is not printable a line
  break (a dump joined to a line of digits, or of a file with binary parts, still reads as
  text where it is text), when it has at least :data:`MIN_PRINTABLE` printable characters.

Everything here is linear in the text: RE2 patterns, one pass over the characters from the first
invisible one, ``bytes.fromhex`` on each run (the runs do not overlap), and at most
:data:`MAX_HEX_DIGITS` digits decoded per text.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator

import re2

# format characters that render as nothing: soft hyphen, combining grapheme joiner, Arabic
# letter mark, Mongolian vowel separator, zero-width space / non-joiner / joiner, the direction
# marks, embeddings and isolates, word joiner and invisible operators, byte-order mark, and the
# tag characters (``U+E0000``-``U+E007F``, text no font draws)
INVISIBLE = (
    "\u00ad\u034f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
    "\U000e0000-\U000e007f"
)
_INVISIBLE_SET = frozenset(
    chr(c)
    for a, b in (
        (0xAD, 0xAD),
        (0x34F, 0x34F),
        (0x61C, 0x61C),
        (0x180E, 0x180E),
        (0x200B, 0x200F),
        (0x202A, 0x202E),
        (0x2060, 0x2064),
        (0x2066, 0x2069),
        (0xFEFF, 0xFEFF),
        (0xE0000, 0xE007F),
    )  # fmt: skip
    for c in range(a, b + 1)
)
MIN_HEX = 32  # hex digits of a run worth decoding (16 bytes)
MIN_PRINTABLE = 16  # printable characters a decoded run needs to be read as text
MAX_HEX_DIGITS = 4 * 1024 * 1024  # decoded per text, over all its runs
_INVISIBLE_RE = re2.compile(f"[{INVISIBLE}]")
# whether a text needs either reader: one pass, usually finding nothing
UNUSUAL = re2.compile(f"[{INVISIBLE}]|[0-9A-Fa-f]{{{MIN_HEX}}}")


def _unusual_bytes() -> bytes:
    """:data:`UNUSUAL` on a text's UTF-8, ASCII lower-cased, read as Latin-1 (the secret scan
    adds it to the one pass of its rules' hints): each invisible character's bytes."""
    by_lead: dict[bytes, list[int]] = {}
    for c in sorted(_INVISIBLE_SET):
        b = c.encode("utf-8")
        by_lead.setdefault(b[:-1], []).append(b[-1])
    alternatives = [
        "".join(f"\\x{x:02x}" for x in lead) + "[" + "".join(f"\\x{x:02x}" for x in last) + "]"
        for lead, last in by_lead.items()
    ]
    return ("|".join([f"[0-9a-f]{{{MIN_HEX}}}", *alternatives])).encode("ascii")


UNUSUAL_BYTES = _unusual_bytes()
# a run of hex digits, then whole lines of them (a dump wrapped at 60 or 32 columns)
_HEX_RUN = re2.compile(rf"(?m)[0-9A-Fa-f]{{{MIN_HEX},}}(?:\r?\n[0-9A-Fa-f]+\r?$)*")


def invisible_cuts(text: str) -> list[int]:
    """The positions of the invisible characters of ``text``, in order (none: ``[]``)."""
    first = _INVISIBLE_RE.search(text)
    if first is None:
        return []
    start = first.start()
    return [i for i, c in enumerate(text[start:], start) if c in _INVISIBLE_SET]


def without_cuts(text: str, cuts: list[int]) -> str:
    """``text`` without the characters at ``cuts`` (sorted positions)."""
    parts, cursor = [], 0
    for i in cuts:
        parts.append(text[cursor:i])
        cursor = i + 1
    parts.append(text[cursor:])
    return "".join(parts)


def origin(cuts: list[int]) -> Callable[[int, int], tuple[int, int]]:
    """A function from a span of ``without_cuts(text, cuts)`` to the span of ``text`` that holds
    the same visible characters and every invisible one between them."""
    shifted = [c - k for k, c in enumerate(cuts)]  # where each cut would stand once removed

    def at(j: int) -> int:
        return j + bisect.bisect_right(shifted, j)

    def span(start: int, end: int) -> tuple[int, int]:
        return (at(start), at(end - 1) + 1) if end > start else (at(start), at(start))

    return span


def _text(data: bytes) -> str | None:
    """``data`` as text, each character that is not printable (a byte that is not UTF-8: U+FFFD)
    a line break; None when fewer than :data:`MIN_PRINTABLE` characters are printable."""
    chars = [
        c if (c.isprintable() and c != "\ufffd") or c in "\r\t" else "\n"
        for c in data.decode("utf-8", errors="replace")
    ]
    return "".join(chars) if len(chars) - chars.count("\n") >= MIN_PRINTABLE else None


def _decoded(digits: str) -> list[str]:
    """The texts ``digits`` decode to: as they stand when their count is even, else without
    the first and without the last (a hex letter glued in front or behind)."""
    tries = [digits] if len(digits) % 2 == 0 else [digits[1:], digits[:-1]]
    return [t for d in tries if len(d) >= MIN_HEX and (t := _text(bytes.fromhex(d)))]


def hex_runs(text: str) -> Iterator[tuple[int, int, list[str]]]:
    """(start, end, texts it decodes to) for each run of hex digits of ``text`` that decodes to
    text (:func:`_text`), until :data:`MAX_HEX_DIGITS` digits were decoded."""
    budget = MAX_HEX_DIGITS
    for m in _HEX_RUN.finditer(text):
        digits = "".join(m.group().split())
        if len(digits) > budget:
            return
        budget -= len(digits)
        if texts := _decoded(digits):
            yield m.start(), m.end(), texts


__all__ = ["INVISIBLE", "MIN_HEX", "UNUSUAL", "UNUSUAL_BYTES", "hex_runs", "invisible_cuts", "origin",
           "without_cuts"]  # fmt: skip
