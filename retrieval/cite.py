"""Citations of code, as pure functions: the anchor of a cited line range, and where those lines
are in a newer version of the file (``fresh``, ``moved``, ``changed``).

A line is *normalized* by collapsing every run of whitespace to one space and stripping both
ends (indentation and trailing blanks do not count); blank lines are dropped. The *fingerprint*
of a range is the sha256 of its normalized lines joined by ``\\n``; the *lines hash* is the
sha256 of the exact lines. At write time an :class:`Anchor` keeps both, the file's sha256, and
the raw text of the cited lines (capped at :data:`MAX_TEXT` bytes, for ``verify``'s diff).

:func:`locate` compares an anchor with the current lines of the file:

1. the exact lines are still at the cited range: ``fresh``;
2. the normalized block is found whole somewhere in the file (the occurrence nearest the old
   range wins): ``fresh`` when that is the cited range (only whitespace changed), else
   ``moved`` with the new range;
3. otherwise ``changed``; the best fuzzy match (lines voted by shared normalized lines, scored by
   ``difflib`` ratio, accepted at :data:`FUZZY_MIN`) proposes where the code went, so ``verify``
   can diff against it and re-anchor to it.

Nothing here touches the store or the file system except :func:`read_lines`.
"""

from __future__ import annotations

import difflib
import hashlib
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from retrieval.regexes import linear_regex

MAX_TEXT = 4096  # bytes of the cited lines kept for verify's diff
MAX_PATH = 1024
MAX_CITATIONS = 20  # per record (explicit + detected)
# A changed block's new place is proposed when its best window shares this much (difflib ratio
# over normalized lines). Chosen on benchmarks/citations.py (docs/benchmarks.md, "Citations").
FUZZY_MIN = 0.5
FUZZY_CANDIDATES = 5  # offsets (by shared-line votes) scored with difflib

Status = Literal["fresh", "moved", "changed", "deleted"]
STALE: frozenset[str] = frozenset({"changed", "deleted"})


class CitationInput(BaseModel):
    """One cited file or line range, relative to the project root."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        min_length=1,
        max_length=MAX_PATH,
        description="File path relative to the project root (e.g. server/app.py).",
    )
    startLine: int | None = Field(
        default=None, ge=1, description="First cited line (1-based); omit to cite the whole file."
    )
    endLine: int | None = Field(
        default=None, ge=1, description="Last cited line (inclusive); default: startLine."
    )

    @model_validator(mode="after")
    def _range(self) -> CitationInput:
        if self.endLine is not None and self.startLine is None:
            raise ValueError("endLine needs startLine")
        if self.startLine is not None and self.endLine is None:
            self.endLine = self.startLine
        if self.startLine is not None and self.endLine < self.startLine:
            raise ValueError(f"endLine {self.endLine} is before startLine {self.startLine}")
        return self


class CitationState(BaseModel):
    """A citation as results carry it: what was cited and whether it still holds."""

    path: str = Field(description="Cited file, relative to the project root.")
    startLine: int | None = Field(default=None, description="Cited range (null: whole file).")
    endLine: int | None = None
    status: Status = Field(
        description="fresh: unchanged; moved: same lines elsewhere in the file (see "
        "currentStartLine); changed: the cited lines differ; deleted: the file is gone."
    )
    currentStartLine: int | None = Field(
        default=None, description="Where the cited lines are now (moved), or where the changed "
        "code most likely went (changed)."
    )  # fmt: skip
    currentEndLine: int | None = None
    checkedAt: datetime | None = Field(default=None, description="When this status was computed.")

    @property
    def stale(self) -> bool:
        return self.status in STALE

    @property
    def label(self) -> str:
        """``path:start-end`` (or the path alone for a whole-file citation)."""
        if self.startLine is None:
            return self.path
        if self.endLine in (None, self.startLine):
            return f"{self.path}:{self.startLine}"
        return f"{self.path}:{self.startLine}-{self.endLine}"


# ---------------------------------------------------------------------- lines
def split_lines(text: str) -> list[str]:
    """Lines as editors and ``git`` number them (``\\n`` only; a trailing ``\\r`` dropped)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def read_lines(data: bytes) -> list[str] | None:
    """The lines of a file's bytes, or None for a binary file (NUL byte or not UTF-8)."""
    if b"\x00" in data[:8192]:
        return None
    try:
        return split_lines(data.decode("utf-8"))
    except UnicodeDecodeError:
        return None


def norm(line: str) -> str:
    return " ".join(line.split())


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def normalized(lines: list[str], first: int = 1) -> list[tuple[int, str]]:
    """(line number, normalized text) of the non-blank lines; ``first`` numbers lines[0]."""
    return [(first + i, n) for i, ln in enumerate(lines) if (n := norm(ln))]


@dataclass(frozen=True)
class Anchor:
    """What a citation remembers of its lines (None range: the whole file)."""

    start: int | None
    end: int | None
    lines_hash: str | None = None
    fingerprint: str | None = None
    n_norm: int = 0  # normalized (non-blank) lines in the range
    lead: int = 0  # blank lines before the first non-blank one
    trail: int = 0  # blank lines after the last non-blank one
    text: str = ""  # the raw cited lines, capped at MAX_TEXT bytes

    @property
    def whole_file(self) -> bool:
        return self.start is None


def cap(text: str, limit: int = MAX_TEXT) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", errors="ignore")


def anchor(lines: list[str] | None, start: int | None, end: int | None) -> Anchor:
    """The anchor of ``lines[start..end]`` (1-based, inclusive); whole file when start is None.
    Raises ValueError when the range is not inside the file."""
    if start is None:
        return Anchor(None, None)
    if lines is None:
        raise ValueError("a binary file can only be cited whole (no line range)")
    end = start if end is None else end
    if start > len(lines) or end > len(lines):
        raise ValueError(f"lines {start}-{end} are outside the file ({len(lines)} lines)")
    block = lines[start - 1 : end]
    norms = normalized(block, start)
    lead = (norms[0][0] - start) if norms else 0
    trail = (end - norms[-1][0]) if norms else 0
    return Anchor(
        start=start,
        end=end,
        lines_hash=sha("\n".join(block)),
        fingerprint=sha("\n".join(n for _, n in norms)),
        n_norm=len(norms),
        lead=lead,
        trail=trail,
        text=cap("\n".join(block)),
    )


# ---------------------------------------------------------------------- locating
@dataclass(frozen=True)
class Location:
    status: Status
    start: int | None = None  # where the cited lines are now (moved / fresh), or the best guess
    end: int | None = None  # of where the changed code went (changed), else None
    ratio: float | None = None  # fuzzy similarity of the guess (changed only)


def _exact(a: Anchor, norms: list[tuple[int, str]], first: str) -> list[tuple[int, int]]:
    """Every (first, last) line number pair where the normalized block occurs."""
    k = a.n_norm
    out = []
    texts = [n for _, n in norms]
    for i in range(len(norms) - k + 1):
        if texts[i] == first and sha("\n".join(texts[i : i + k])) == a.fingerprint:
            out.append((norms[i][0], norms[i + k - 1][0]))
    return out


def _fuzzy(a: Anchor, norms: list[tuple[int, str]]) -> tuple[int, int, float] | None:
    """The best window for the (possibly capped) stored block: offsets voted by shared
    normalized lines, the top few scored by difflib's ratio."""
    old = [n for _, n in normalized(split_lines(a.text))]
    if not old or not norms:
        return None
    texts = [n for _, n in norms]
    where: dict[str, list[int]] = {}
    for j, t in enumerate(old):
        where.setdefault(t, []).append(j)
    votes: Counter[int] = Counter()
    for i, t in enumerate(texts):
        for j in where.get(t, ()):
            votes[i - j] += 1
    if not votes:
        return None
    k = len(old)
    best: tuple[int, int, float] | None = None
    for offset, _ in votes.most_common(FUZZY_CANDIDATES):
        lo, hi = max(0, offset), min(len(texts), offset + k)
        if lo >= hi:
            continue
        ratio = difflib.SequenceMatcher(None, old, texts[lo:hi], autojunk=False).ratio()
        if best is None or ratio > best[2]:
            best = (lo, hi, ratio)
    if best is None:
        return None
    lo, hi, ratio = best
    return norms[lo][0], norms[hi - 1][0], ratio


def locate(a: Anchor, lines: list[str] | None, file_sha: str, anchored_sha: str) -> Location:
    """Where the anchored lines are in the file now (``lines``: its current lines; ``file_sha``:
    its current sha256; ``anchored_sha``: the sha256 it had when the anchor was taken)."""
    if file_sha == anchored_sha:
        return Location("fresh", a.start, a.end)
    if a.whole_file or lines is None:
        return Location("changed")
    if a.end <= len(lines) and sha("\n".join(lines[a.start - 1 : a.end])) == a.lines_hash:
        return Location("fresh", a.start, a.end)
    norms = normalized(lines)
    if a.n_norm == 0:  # only blank lines were cited: nothing to look for
        return Location("changed")
    first = norm(next(ln for ln in split_lines(a.text) if norm(ln)))
    found = _exact(a, norms, first)
    if found:
        lo, hi = min(found, key=lambda p: (abs(p[0] - a.lead - a.start), p[0]))
        start, end = lo - a.lead, min(hi + a.trail, len(lines))
        if (start, end) == (a.start, a.end):
            return Location("fresh", start, end)
        return Location("moved", start, end)
    guess = _fuzzy(a, norms)
    if guess is not None and guess[2] >= FUZZY_MIN:
        return Location("changed", guess[0], guess[1], round(guess[2], 3))
    return Location("changed", ratio=round(guess[2], 3) if guess else None)


# ---------------------------------------------------------------------- detection in text
_PATH = linear_regex.compile(  # (RE2: a run of word characters is read once, not per split)
    r"(?:^|[^\w/.\-:@])"
    r"(/?(?:[\w.\-]+/)*[\w\-]*[A-Za-z_][\w.\-]*\.[A-Za-z][A-Za-z0-9]{0,7})"
    r"(?:(?::|#L)(\d{1,7})(?:(?:-L?|–|:)(\d{1,7}))?)?"
    r"(?:[^\w/]|$)"  # (matched, not looked at: a search goes on from the path's end)
)


@dataclass(frozen=True)
class Mention:
    path: str
    start: int | None
    end: int | None


def mentions(text: str, limit: int = MAX_CITATIONS) -> list[Mention]:
    """File paths in ``text``: ``path/to/file.py``, ``file.py:120``, ``file.py:120-140`` and
    ``file.py#L10-L20`` (a URL's path is not a mention). The caller keeps those that exist."""
    out: dict[tuple, Mention] = {}
    pos = 0
    while (m := _PATH.search(text, pos)) is not None:
        pos = max(m.end(1), m.end(2), m.end(3))
        path = m.group(1).rstrip(".")
        if "://" in text[max(0, m.start(1) - 3) : m.start(1) + 3] or len(path) > MAX_PATH:
            continue
        start = int(m.group(2)) if m.group(2) else None
        end = int(m.group(3)) if m.group(3) else start
        if start is not None and (start < 1 or end < start):
            start = end = None
        key = (path, start, end)
        out.setdefault(key, Mention(path, start, end))
        if len(out) >= limit:
            break
    return list(out.values())


def unified_diff(old: str, new: str, path: str, old_label: str, new_label: str) -> str:
    """A unified diff of the cited lines (as written) against the lines there now."""
    return "".join(
        difflib.unified_diff(
            [ln + "\n" for ln in split_lines(old)],
            [ln + "\n" for ln in split_lines(new)],
            fromfile=f"{path} ({old_label})",
            tofile=f"{path} ({new_label})",
        )
    )


def posix(path: Path) -> str:
    return path.as_posix()
