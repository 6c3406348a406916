"""A file's structural units: spans of lines with a title, found by markup, before packing.

- :class:`Unit`: a span of lines (0-based, inclusive), its title, whether it may be merged;
- :func:`markdown_units`: one unit per heading section (ATX ``#`` and setext headings; fenced
  code is never mistaken for a heading), titled by the heading trail ``Install > Linux``;
- :func:`rst_units`: the same for reStructuredText's underlined (and overlined) titles.

Python's units come from :mod:`ingest.workspace.pychunk`; :mod:`ingest.workspace.chunkers`
packs units into chunks of at most :data:`MAX_CHARS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_CHARS = 1200  # a chunk's size bound (a larger unit is split)


@dataclass
class Unit:
    """A structural span of lines (0-based, inclusive) with its title."""

    start: int
    end: int
    title: str = ""
    mergeable: bool = True  # small units may be packed with their neighbours


_ATX = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)\s*$")
_RST_ADORN = re.compile(r"^([=\-`:'\"~^_*+#<>.])\1+\s*$")


def _sections(headings: list[tuple[int, int, str]], n: int) -> list[Unit]:
    """(start line, level, text) headings -> units with heading-trail titles."""
    units: list[Unit] = []
    first = headings[0][0] if headings else n
    if first > 0:
        units.append(Unit(0, first - 1, ""))
    trail: list[tuple[int, str]] = []
    for i, (start, level, text) in enumerate(headings):
        while trail and trail[-1][0] >= level:
            trail.pop()
        trail.append((level, text.strip()))
        end = headings[i + 1][0] - 1 if i + 1 < len(headings) else n - 1
        units.append(Unit(start, end, " > ".join(t for _, t in trail if t)))
    return units


def markdown_units(lines: list[str]) -> list[Unit]:
    headings: list[tuple[int, int, str]] = []
    fence: str | None = None
    for i, line in enumerate(lines):
        m = _FENCE.match(line)
        if m:
            fence = None if fence == m.group(1) else (fence or m.group(1))
            continue
        if fence:
            continue
        m = _ATX.match(line)
        if m:
            headings.append((i, len(m.group(1)), m.group(2)))
            continue
        if (
            i > 0
            and _SETEXT.match(line)
            and lines[i - 1].strip()
            and not _ATX.match(lines[i - 1])
            and (not headings or headings[-1][0] != i - 1)
            and (i < 2 or not lines[i - 2].strip())
        ):
            headings.append((i - 1, 1 if line.strip()[0] == "=" else 2, lines[i - 1]))
    return _sections(headings, len(lines))


def rst_units(lines: list[str]) -> list[Unit]:
    styles: list[tuple[str, bool]] = []
    headings: list[tuple[int, int, str]] = []
    i = 0
    while i < len(lines) - 1:
        title, under = lines[i], lines[i + 1]
        m = _RST_ADORN.match(under)
        if (
            m
            and title.strip()
            and not title.startswith((" ", "\t"))
            and not _RST_ADORN.match(title)
            and len(under.rstrip()) >= len(title.rstrip())
        ):
            over = i > 0 and lines[i - 1].strip() == under.strip()
            style = (m.group(1), over)
            if style not in styles:
                styles.append(style)
            headings.append((i - 1 if over else i, styles.index(style) + 1, title))
            i += 2
            continue
        i += 1
    return _sections(headings, len(lines))
