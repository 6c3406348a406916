"""What ``git diff`` says happened to a range of old lines: the truth the citation statuses are
scored against (``citations.py``) and the stale functions the stale factor is measured on
(``citations_ranking.py``).

From ``git diff -U0 --no-renames OLD NEW``: the file deleted -> ``deleted``; a hunk that touches
the range -> ``changed``, unless the hunk only changes whitespace or the whole block reappears
among the added lines of a hunk (git's "moved block") -> ``moved``; otherwise the lines shifted
by the hunks before them -> ``moved``, or did not -> ``fresh``.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from retrieval.cite import norm

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


@dataclass
class Hunk:
    a: int
    b: int
    c: int
    d: int
    removed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)

    def touches(self, s: int, e: int) -> bool:
        if self.b == 0:  # an insertion after old line a
            return s <= self.a < e
        return self.a <= e and self.a + self.b - 1 >= s

    def before(self, s: int) -> bool:
        return self.a < s if self.b == 0 else self.a + self.b - 1 < s

    def whitespace_only(self) -> bool:
        return [n for x in self.removed if (n := norm(x))] == [
            n for x in self.added if (n := norm(x))
        ]


@dataclass
class FileDiff:
    deleted: bool = False
    hunks: list[Hunk] = field(default_factory=list)


def parse_diff(text: str) -> dict[str, FileDiff]:
    out: dict[str, FileDiff] = {}
    cur: FileDiff | None = None
    hunk: Hunk | None = None
    for line in text.split("\n"):
        if line.startswith("diff --git "):
            path = line.split(" b/", 1)[0][len("diff --git a/") :]
            cur = out.setdefault(path, FileDiff())
            hunk = None
        elif cur is None:
            continue
        elif line.startswith("deleted file mode"):
            cur.deleted = True
        elif m := _HUNK.match(line):
            a, b, c, d = m.groups()
            hunk = Hunk(int(a), 1 if b is None else int(b), int(c), 1 if d is None else int(d))
            cur.hunks.append(hunk)
        elif hunk is not None and line.startswith("-") and not line.startswith("---"):
            hunk.removed.append(line[1:])
        elif hunk is not None and line.startswith("+") and not line.startswith("+++"):
            hunk.added.append(line[1:])
    return out


def _contains(seq: list[str], sub: list[str]) -> bool:
    k = len(sub)
    return k > 0 and any(seq[i : i + k] == sub for i in range(len(seq) - k + 1))


def truth(fd: FileDiff | None, s: int, e: int, block: list[str]) -> tuple[str, str]:
    """The status git diff implies for old lines s..e (``block``: their text), and why."""
    if fd is None:
        return "fresh", "file unchanged"
    if fd.deleted:
        return "deleted", "file deleted"
    touching = [h for h in fd.hunks if h.touches(s, e)]
    shift = sum(h.d - h.b for h in fd.hunks if h.before(s))
    if not touching or all(h.whitespace_only() for h in touching):
        end_shift = shift + sum(h.d - h.b for h in touching)
        why = "no hunk in the range" if not touching else "whitespace-only hunk"
        return ("fresh" if shift == 0 and end_shift == 0 else "moved"), why
    want = [n for x in block if (n := norm(x))]
    if any(_contains([n for x in h.added if (n := norm(x))], want) for h in fd.hunks):
        return "moved", "block re-added whole (git's moved block)"
    return "changed", "hunk in the range"
