"""Markdown as note-keeping tools write it: YAML front matter, then a body split by headings.

Shared by the basic-memory and Claude Code importers (and the basic-memory export, which
writes front matter back). Headings inside fenced code blocks are not headings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import yaml

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LENIENT = re.compile(r"^([A-Za-z_][\w-]*)\s*:\s?(.*)$")


class FrontMatterError(ValueError):
    """Front matter that is not a YAML mapping."""


def _plain(value: Any) -> Any:
    """YAML values as JSON-able ones (dates as ISO strings)."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _lenient(raw: str) -> dict[str, Any] | None:
    """``key: value`` lines split at their first colon (front matter written by hand or by a
    model, not always valid YAML: ``description: a: b``); None when a line is not one."""
    out: dict[str, Any] = {}
    for line in raw.split("\n"):
        if not line.strip():
            continue
        m = LENIENT.match(line)
        if m is None:
            return None
        out[m.group(1)] = m.group(2).strip().strip("'\"")
    return out


def split_front_matter(text: str, *, lenient: bool = False) -> tuple[dict[str, Any], str]:
    """(front matter, body) of a Markdown text; ``({}, text)`` without front matter. Raises
    :class:`FrontMatterError` for front matter that is not a YAML mapping (with ``lenient``,
    plain ``key: value`` lines are accepted too)."""
    text = text.lstrip("\ufeff")
    if not text.startswith("---"):
        return {}, text
    lines = text.split("\n")
    if lines[0].strip() != "---":
        return {}, text
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            raw = "\n".join(lines[1:i])
            try:
                meta = yaml.safe_load(raw) if raw.strip() else {}
            except yaml.YAMLError as exc:
                meta = _lenient(raw) if lenient else None
                if meta is None:
                    first = str(exc).split("\n", 1)[0]
                    raise FrontMatterError(f"front matter is not valid YAML ({first})") from None
            if meta is None:
                meta = {}
            if not isinstance(meta, dict):
                raise FrontMatterError("front matter is not a YAML mapping")
            return _plain(meta), "\n".join(lines[i + 1 :])
    return {}, text


def dump_front_matter(meta: dict[str, Any]) -> str:
    """``meta`` as a front matter block (``---`` lines included), keys in the given order."""
    body = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{body}---\n"


@dataclass
class Section:
    """A heading (its text, with the headings above it) and the lines under it."""

    path: list[str]
    level: int
    lines: list[str]

    @property
    def title(self) -> str:
        return " > ".join(self.path)

    @property
    def text(self) -> str:
        return "\n".join(self.lines).strip()


def sections(body: str) -> list[Section]:
    """``body`` split at its headings (outside code fences); the text before the first heading
    is a section with an empty path. Each section holds its own heading line."""
    out = [Section([], 0, [])]
    stack: list[tuple[int, str]] = []
    fenced = False
    for line in body.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        m = None if fenced else HEADING.match(line)
        if m:
            level = len(m.group(1))
            stack = [(lv, t) for lv, t in stack if lv < level] + [(level, m.group(2))]
            out.append(Section([t for _, t in stack], level, [line]))
        else:
            out[-1].lines.append(line)
    return [s for s in out if s.text]


def outside_fences(body: str) -> list[tuple[int, str, bool]]:
    """``(line number, line, inside a code fence)`` for every line of ``body``."""
    out = []
    fenced = False
    for i, line in enumerate(body.split("\n")):
        if FENCE.match(line):
            out.append((i, line, True))
            fenced = not fenced
            continue
        out.append((i, line, fenced))
    return out
