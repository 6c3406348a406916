"""Chunkers: a file's text -> chunks that each know their 1-based, inclusive line range.

By file type (:func:`chunk_text` dispatches on the name):
- Markdown: one chunk per heading section (ATX ``#`` and setext headings; fenced code is never
  mistaken for a heading); the title is the heading trail ``Install > Linux``
  (:mod:`ingest.workspace.units`);
- reStructuredText: the same, with underlined (and overlined) titles;
- Python: by top-level definitions (:mod:`ingest.workspace.pychunk`);
- other code: blank-line separated blocks, packed up to the size bound;
- plain text: paragraphs, packed up to the size bound.

Every structural unit larger than ``max_chars`` is split at blank lines (then at lines, then a
single huge line by characters); consecutive units smaller than ``min_chars`` are merged while
they fit. A split inside one unit may repeat the last ``overlap`` lines of the previous piece
(``overlap=0`` by default: measured in ``benchmarks/lab/chunking.py``, see docs/ingest.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from ingest.workspace.pychunk import python_units
from ingest.workspace.units import MAX_CHARS, Unit, markdown_units, rst_units

MIN_CHARS = 200
OVERLAP_LINES = 0

MARKDOWN = (".md", ".markdown", ".mdx", ".mkd")
RST = (".rst", ".rest")
PYTHON = (".py", ".pyi")
TEXT = (".txt", ".text", "")
CODE_EXT = frozenset(
    """c h cc cpp cxx hpp hh cs java kt kts scala go rs swift m mm js jsx mjs cjs ts tsx vue svelte
    rb php pl pm lua r jl dart ex exs erl hs ml mli clj sh bash zsh fish ps1 sql proto graphql
    gradle cmake make mk toml yaml yml json jsonc ini cfg conf xml html htm css scss less tf
    hcl nix zig v sv vhd groovy dockerfile""".split()
)


@dataclass(frozen=True)
class Chunk:
    text: str
    start_line: int  # 1-based, inclusive
    end_line: int  # 1-based, inclusive
    title: str = ""  # heading trail or definition name ("" for plain blocks)


def file_type(name: str) -> str:
    lower = name.lower()
    if lower.endswith(MARKDOWN):
        return "markdown"
    if lower.endswith(RST):
        return "rst"
    if lower.endswith(PYTHON):
        return "python"
    ext = lower.rsplit(".", 1)[-1] if "." in lower else ""
    if ext in CODE_EXT or lower in ("makefile", "dockerfile", "justfile"):
        return "code"
    return "text"


# ---------------------------------------------------------------------------- packing
def _size(lines: list[str], start: int, end: int) -> int:
    return sum(len(lines[i]) + 1 for i in range(start, end + 1))


def _trim(lines: list[str], start: int, end: int) -> tuple[int, int]:
    while start <= end and not lines[start].strip():
        start += 1
    while end >= start and not lines[end].strip():
        end -= 1
    return start, end


def _blocks(lines: list[str], start: int, end: int) -> list[tuple[int, int]]:
    """Blank-line separated blocks within [start, end]."""
    out, s = [], None
    for i in range(start, end + 1):
        if lines[i].strip():
            if s is None:
                s = i
        elif s is not None:
            out.append((s, i - 1))
            s = None
    if s is not None:
        out.append((s, end))
    return out


def _split_long(lines: list[str], start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """Pieces of a block at line boundaries, each ≤ max_chars when its lines allow."""
    out, s, size = [], start, 0
    for i in range(start, end + 1):
        n = len(lines[i]) + 1
        if size and size + n > max_chars:
            out.append((s, i - 1))
            s, size = i, 0
        size += n
    out.append((s, end))
    return out


def _absorb_small(
    lines: list[str], pieces: list[tuple[int, int]], max_chars: int, min_chars: int = MIN_CHARS
) -> list[tuple[int, int]]:
    """A lone heading or a closing ``return`` left as a tiny piece joins its neighbour (the
    next one first), overshooting ``max_chars`` by at most ``min_chars``."""
    out = list(pieces)
    i = 0
    while len(out) > 1 and i < len(out):
        s, e = out[i]
        if _size(lines, s, e) < min_chars:
            if i + 1 < len(out) and _size(lines, s, out[i + 1][1]) <= max_chars + min_chars:
                out[i : i + 2] = [(s, out[i + 1][1])]
                continue
            if i > 0 and _size(lines, out[i - 1][0], e) <= max_chars + min_chars:
                out[i - 1 : i + 1] = [(out[i - 1][0], e)]
                continue
        i += 1
    return out


def split_unit(
    lines: list[str], unit: Unit, max_chars: int, overlap: int = 0
) -> list[tuple[int, int]]:
    """Line ranges covering ``unit``: blank-line blocks packed greedily up to ``max_chars``;
    a block that alone is too large is cut at lines. Later pieces may start ``overlap`` lines
    early (never before the unit)."""
    pieces: list[tuple[int, int]] = []
    for bs, be in _blocks(lines, unit.start, unit.end):
        parts = (
            [(bs, be)]
            if _size(lines, bs, be) <= max_chars
            else _split_long(lines, bs, be, max_chars)
        )
        for ps, pe in parts:
            if pieces and _size(lines, pieces[-1][0], pe) <= max_chars:
                pieces[-1] = (pieces[-1][0], pe)
            else:
                pieces.append((ps, pe))
    pieces = _absorb_small(lines, pieces, max_chars)
    if overlap > 0:
        pieces = [pieces[0]] + [
            (max(unit.start, s - overlap, pieces[i][0] + 1), e)
            for i, (s, e) in enumerate(pieces[1:])
        ]
        pieces = [_trim(lines, s, e) for s, e in pieces]
    return pieces


def _cut_line(text: str, line: int, title: str, max_chars: int) -> list[Chunk]:
    return [
        Chunk(text[i : i + max_chars], line + 1, line + 1, title)
        for i in range(0, len(text), max_chars)
    ]


def pack(
    lines: list[str],
    units: list[Unit],
    *,
    max_chars: int = MAX_CHARS,
    min_chars: int = MIN_CHARS,
    overlap: int = OVERLAP_LINES,
) -> list[Chunk]:
    """Units -> chunks: big units split, small mergeable neighbours merged while they fit."""
    spans: list[tuple[int, int, str, bool]] = []  # start, end, title, mergeable
    for u in units:
        s, e = _trim(lines, u.start, u.end)
        if s > e:
            continue
        if _size(lines, s, e) <= max_chars:
            spans.append((s, e, u.title, u.mergeable))
            continue
        for ps, pe in split_unit(lines, Unit(s, e, u.title), max_chars, overlap):
            spans.append((ps, pe, u.title, False))
    merged: list[tuple[int, int, list[str], bool]] = []
    for s, e, title, mergeable in spans:
        if merged:
            ms, me, titles, mm = merged[-1]
            small = _size(lines, ms, me) < min_chars or _size(lines, s, e) < min_chars
            if mm and mergeable and small and _size(lines, ms, e) <= max_chars:
                merged[-1] = (ms, e, titles + ([title] if title else []), True)
                continue
        merged.append((s, e, [title] if title else [], mergeable))
    out: list[Chunk] = []
    for s, e, titles, _ in merged:
        title = ", ".join(dict.fromkeys(titles))
        if len(title) > 200:
            title = title[:199] + "…"
        text = "\n".join(lines[s : e + 1])
        if len(text) > max_chars and s == e:  # one huge line (minified, data)
            out.extend(_cut_line(text, s, title, max_chars))
        else:
            out.append(Chunk(text, s + 1, e + 1, title))
    return out


def bound_words(chunks: list[Chunk], max_words: int) -> list[Chunk]:
    """Split (at lines, in halves) any chunk with more than ``max_words`` whitespace words, so
    every chunk is embedded as one window (the engine windows longer texts by words)."""
    out: list[Chunk] = []
    for c in chunks:
        lines = c.text.split("\n")
        if len(c.text.split()) <= max_words or len(lines) < 2:
            out.append(c)
            continue
        mid = len(lines) // 2
        halves = [
            Chunk("\n".join(lines[:mid]), c.start_line, c.start_line + mid - 1, c.title),
            Chunk("\n".join(lines[mid:]), c.start_line + mid, c.end_line, c.title),
        ]
        out.extend(bound_words([h for h in halves if h.text.strip()], max_words))
    return out


# ---------------------------------------------------------------------------- dispatch
def chunk_text(
    name: str,
    text: str,
    *,
    max_chars: int = MAX_CHARS,
    min_chars: int = MIN_CHARS,
    overlap: int = OVERLAP_LINES,
    max_words: int | None = None,
) -> list[Chunk]:
    """Chunks of a file's text, chosen by its file name; ``max_words`` bounds the words of a
    chunk (see :func:`bound_words`)."""
    lines = text.splitlines()
    if not lines:
        return []
    kind = file_type(name)
    if kind == "python":
        units = python_units(text, lines)
    elif kind == "markdown":
        units = markdown_units(lines)
    elif kind == "rst":
        units = rst_units(lines)
    else:
        units = None
    if units is None:  # code, plain text, or Python that does not parse
        units = [Unit(0, len(lines) - 1, "", False)]
    chunks = pack(lines, units, max_chars=max_chars, min_chars=min_chars, overlap=overlap)
    return bound_words(chunks, max_words) if max_words else chunks
