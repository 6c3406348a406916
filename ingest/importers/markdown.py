"""Markdown as note-keeping tools write it: YAML front matter, then a body split by headings.

Shared by the basic-memory and Claude Code importers (and the basic-memory export, which
writes front matter back). Headings inside fenced code blocks are not headings.

Front matter is outside input, read within bounds: at most :data:`MAX_FRONT_MATTER_BYTES`, no
YAML aliases (``*name``: an alias is a reference a small text can multiply into billions of
values, or make recursive), at most :data:`MAX_NODES` values nested at most
:data:`~.bounded.MAX_DEPTH` levels. Past any of them the note's front matter is one clear
:class:`FrontMatterError`. Headings are read without a regular expression that could
backtrack.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from .bounded import MAX_DEPTH, plain, size_text

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING_START = re.compile(r"^(#{1,6})\s+")
LENIENT = re.compile(r"^([A-Za-z_][\w-]*)\s*:\s?(.*)$")
MAX_FRONT_MATTER_BYTES = 64 * 1024
MAX_NODES = 2_000


class FrontMatterError(ValueError):
    """Front matter that is not a YAML mapping, or over a limit."""


class _Refused(yaml.YAMLError):
    """Front matter over a limit (never read leniently)."""


class BoundedLoader(yaml.SafeLoader):
    """YAML's safe loader without aliases, with at most :data:`MAX_NODES` values nested at
    most :data:`~.bounded.MAX_DEPTH` levels."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._nodes = 0
        self._depth = 0

    def compose_node(self, parent, index):  # noqa: ANN001, ANN201 - PyYAML's signature
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _Refused(f"a YAML alias (*{event.anchor}); aliases are not read")
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise _Refused(f"more than {MAX_NODES} YAML values")
        if self._depth >= MAX_DEPTH:
            raise _Refused(f"YAML values nested deeper than {MAX_DEPTH} levels")
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


MAX_NUMBER_CHARS = 64  # a longer YAML number is not one YAML can build (the note's error)


def _number(loader: BoundedLoader, node: yaml.ScalarNode) -> Any:
    """A YAML int or float of at most :data:`MAX_NUMBER_CHARS` characters (YAML 1.1 builds
    ``1:1:1:…`` by multiplying by 60 per part, in time quadratic in its length)."""
    if len(node.value) > MAX_NUMBER_CHARS:
        raise ValueError(f"a number of {len(node.value)} characters")
    if node.tag.endswith(":int"):
        return yaml.SafeLoader.construct_yaml_int(loader, node)
    return yaml.SafeLoader.construct_yaml_float(loader, node)


BoundedLoader.add_constructor("tag:yaml.org,2002:int", _number)
BoundedLoader.add_constructor("tag:yaml.org,2002:float", _number)


def load_yaml(raw: str) -> Any:
    """The YAML value of ``raw`` through :class:`BoundedLoader`."""
    loader = BoundedLoader(raw)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def heading(line: str) -> tuple[int, str] | None:
    """(level, text) of an ATX heading line (``## Text ##``), None for any other line; the
    closing hashes and spaces are stripped as Markdown does, in time linear in the line."""
    m = HEADING_START.match(line)
    if m is None:
        return None
    title = line[m.end() :].rstrip().rstrip("#").rstrip()
    return len(m.group(1)), title


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
            size = len(raw.encode("utf-8", errors="replace"))
            if size > MAX_FRONT_MATTER_BYTES:
                raise FrontMatterError(
                    f"front matter of {size_text(size)} "
                    f"(at most {size_text(MAX_FRONT_MATTER_BYTES)} are read)"
                )
            try:
                meta = load_yaml(raw) if raw.strip() else {}
            except _Refused as exc:
                raise FrontMatterError(f"front matter with {exc}") from None
            except Exception as exc:  # noqa: BLE001 - not YAML, or a value YAML cannot build
                # (a date that does not exist, a number too long to convert): the note's error
                meta = _lenient(raw) if lenient else None
                if meta is None:
                    first = str(exc).split("\n", 1)[0][:200]
                    raise FrontMatterError(f"front matter is not valid YAML ({first})") from None
            if meta is None:
                meta = {}
            if not isinstance(meta, dict):
                raise FrontMatterError("front matter is not a YAML mapping")
            return plain(meta), "\n".join(lines[i + 1 :])
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
        h = None if fenced else heading(line)
        if h:
            level, title = h
            stack = [(lv, t) for lv, t in stack if lv < level] + [(level, title)]
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
