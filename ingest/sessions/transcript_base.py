"""What every transcript reader shares: the turn and its read results, line parsing, text cuts.

- :class:`Turn` (one user message, one assistant reply or one tool call with its result),
  :class:`Checkpoint` and :class:`ReadResult` (what :func:`ingest.sessions.transcripts.read_turns`
  returns);
- :func:`parse_line`: one JSON line as an object, or None (not JSON, not UTF-8, nested beyond the
  parser, a number of thousands of digits; a lone surrogate in a string becomes ``?``);
- the text of a turn, abbreviated: :func:`clip`, :func:`cut_reply`, :func:`tool_turn_text`
  (the tool, its key arguments, the first lines of an error: :func:`error_excerpt`);
- :func:`waiting_since`: since when a call waits for its result.

The readers of each client's transcripts (:mod:`ingest.sessions.transcripts_claude` and its
siblings) and the episode detector's events (:mod:`ingest.learning.episode_events`) import it.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

NAMESPACE = uuid.UUID("8d3f6c2e-41b7-4a0e-9c55-7e2b1f0a9d64")
MAX_TURN_CHARS = 8000  # a pasted log is kept up to this, the rest is marked as omitted
REPLY_CUT_CHARS = 4 * MAX_TURN_CHARS  # a reply held longer is cut (given, the rest passed over)
S = TypeVar("S")  # what a reply's first text came with (Reply.start)
TOOL_RESULT_CHARS = 400  # a tool result: its first lines up to this
ERROR_LINES = 6
COMPACT_PREFIX = "This session is being continued from a previous conversation"
CWD_SCAN_BYTES = 1024 * 1024  # of a transcript's start, looked through for its folder


# the arguments that say what a call did (Claude Code's tool names); others: first scalars
KEY_ARGS = {
    "Bash": ("command",),
    "Read": ("file_path",),
    "Write": ("file_path",),
    "Edit": ("file_path",),
    "MultiEdit": ("file_path",),
    "NotebookEdit": ("notebook_path",),
    "Grep": ("pattern", "path", "glob"),
    "Glob": ("pattern", "path"),
    "WebFetch": ("url",),
    "WebSearch": ("query",),
    "Task": ("subagent_type", "description"),
    "Agent": ("subagent_type", "description"),
}


# an output that failed although the tool did not say so
FAILED_LINE = re.compile(
    r"Traceback \(most recent call last\)|^\s*(?:\w+\.)*\w*(?:Error|Exception)\b[:(]|"
    r"^(?:error|fatal|FAILED|FAIL)\b[:\s]|\bexit (?:code|status)[: ]+[1-9]\d*|"
    r"^npm ERR!|panicked at|Segmentation fault|command not found",
    re.MULTILINE,
)


def parse_line(raw: bytes | str) -> dict | None:
    """One transcript line as a JSON object; None for anything else (not JSON, not UTF-8,
    nested beyond the parser, a number too long to read, not an object). A lone surrogate
    (``"\\ud800"`` escaped in the line) becomes ``?``: the text is stored, which needs UTF-8."""
    try:
        entry = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(entry, dict):
        return None
    if _ESCAPED_SURROGATE.search(raw if isinstance(raw, bytes) else raw.encode("utf-8", "replace")):
        entry = _without_surrogates(entry)
    return entry


_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


def _utf8(s: str) -> str:
    return s.encode("utf-8", "replace").decode("utf-8")


def _without_surrogates(value: dict) -> dict:
    """``value`` with every string (keys too) made encodable (a walk without recursion)."""
    root: list = [value]
    stack: list = [(root, 0)]
    while stack:
        holder, key = stack.pop()
        v = holder[key]
        if isinstance(v, str):
            holder[key] = _utf8(v)
        elif isinstance(v, list):
            stack.extend((v, i) for i in range(len(v)))
        elif isinstance(v, dict):
            fixed = {(_utf8(k) if isinstance(k, str) else k): x for k, x in v.items()}
            holder[key] = fixed
            stack.extend((fixed, k) for k in fixed)
    return root[0]


def str_field(value: object) -> str | None:
    """An entry's field that must be a string (a folder, a branch, a time): else none."""
    return value if isinstance(value, str) else None


def line_hash(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()[:32]


def clip(text: str, limit: int = MAX_TURN_CHARS) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return f"{text[:limit].rstrip()} … [{len(text) - limit} more characters not stored]"


def cut_reply(parts: list[str]) -> str:
    """The text of a reply cut while it goes on: its start, marked ``cut`` (how much more is
    not known: what was read of it beyond :data:`MAX_TURN_CHARS`, and then the rest)."""
    text = "\n\n".join(parts).strip()
    more = max(0, len(text) - MAX_TURN_CHARS)
    return f"{text[:MAX_TURN_CHARS].rstrip()} … [cut: {more}+ more characters not stored]"


class Reply(Generic[S]):
    """The assistant reply being read, text by text, with what its first text came with
    (``start``: its entry, its time). Past :data:`REPLY_CUT_CHARS` it is given at once, cut
    (:func:`cut_reply`), and its rest is passed over (``cut``) until it ends (:meth:`end`)."""

    def __init__(self, cut: bool = False) -> None:
        self.parts: list[str] = []
        self.start: S | None = None
        self.chars = 0
        self.cut = cut

    def add(self, start: S, text: str) -> tuple[S | None, str] | None:
        """One more text: (the reply's start, its text cut) once it is past the bound, else None."""
        if self.cut:
            return None
        if not self.parts:
            self.start = start
        self.parts.append(text)
        self.chars += len(text)
        if self.chars <= REPLY_CUT_CHARS:
            return None
        done = (self.start, cut_reply(self.parts))
        self.parts, self.start, self.chars, self.cut = [], None, 0, True
        return done

    def end(self) -> tuple[S | None, str] | None:
        """The reply ended: (its start, its text clipped), None when none was read; a cut
        reply's rest is over (the next text starts a new reply)."""
        self.cut = False
        if not self.parts:
            return None
        done = (self.start, clip("\n\n".join(self.parts)))
        self.parts, self.start, self.chars = [], None, 0
        return done


def error_excerpt(text: str, is_error: bool = False, lines: int = ERROR_LINES) -> str | None:
    """The first lines of an error when ``text`` reports one (``is_error``, a traceback, an
    ``…Error:`` line, a non-zero exit status), from the first line that says so; else None."""
    if not text or not text.strip():
        return "(no output)" if is_error else None
    m = FAILED_LINE.search(text)
    if m is None and not is_error:
        return None
    rows = text.strip().splitlines()
    start = text[: m.start()].count("\n") if m else 0
    if m and "Traceback" in m.group(0):  # the exception line of a Python traceback is last
        tail = [r for r in rows[start:] if r.strip()]
        picked = tail[:2] + tail[-(lines - 2) :] if len(tail) > lines else tail
    else:
        picked = rows[start : start + lines]
    return clip("\n".join(picked), TOOL_RESULT_CHARS * 2)


def key_args(name: str, args: object) -> str:
    if not isinstance(args, dict):
        return ""
    keys = (
        KEY_ARGS.get(name) or [k for k, v in args.items() if isinstance(v, str | int | float)][:2]
    )
    parts = []
    for k in keys:
        v = args.get(k)
        if v is None or v == "":
            continue
        v = " ".join(str(v).split())
        parts.append(f"{k}={v[:200] + '…' if len(v) > 200 else v}")
    return ", ".join(parts)


def result_text(content: object) -> str:
    """A tool_result's content (a string, or blocks of which the text ones count)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for b in content:
            if isinstance(b, dict) and b.get("type") == "text":
                out.append(str(b.get("text", "")))
            elif isinstance(b, dict):
                out.append(f"[{b.get('type', 'block')}]")
        return "\n".join(out)
    return "" if content is None else str(content)


def tool_turn_text(name: str, args: object, result: str | None, is_error: bool) -> str:
    """``Bash(command=pytest -q) → error: <first lines>`` / ``→ ok: <first line> (N lines)``."""
    head = f"{name}({key_args(name, args)})"
    if result is None:
        return f"{head} → no result recorded"
    err = error_excerpt(result, is_error)
    if err is not None:
        return f"{head} → error:\n{err}"
    rows = [r for r in result.strip().splitlines() if r.strip()]
    if not rows:
        return f"{head} → ok"
    first = rows[0][:TOOL_RESULT_CHARS]
    more = f" ({len(rows)} lines, {len(result)} characters)" if len(rows) > 1 else ""
    return f"{head} → ok: {first}{more}"


@dataclass
class Turn:
    session: str
    role: str  # user | assistant | tool
    text: str
    key: str  # stable within its session: the entry uuid (+ block), the tool_use id, …
    timestamp: str | None = None
    cwd: str | None = None
    git_branch: str | None = None
    parent_session: str | None = None

    def record_id(self) -> str:
        return str(uuid.uuid5(NAMESPACE, f"{self.session}\x00{self.key}"))


@dataclass
class Checkpoint:
    offset: int  # bytes consumed
    turns: int  # turns emitted before it
    line_hash: str  # of the line ending at offset
    line_len: int
    pending: dict = field(default_factory=dict)  # calls waiting there (JSON: read_turns(pending=))


@dataclass
class ReadResult:
    format: str | None
    turns: list[Turn] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    bad_lines: int = 0
    # bytes of an unfinished last line (no newline yet) that start at the last checkpoint (or
    # at the offset read from): the next read may pass them as ``scanned``
    partial: int = 0


def _epoch(ts: object) -> float | None:
    """An entry's ISO 8601 ``timestamp`` as seconds since the epoch (None when unreadable)."""
    if not isinstance(ts, str) or not ts:
        return None
    try:
        dt = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt.timestamp() if dt.tzinfo is not None else None


def waiting_since(call: dict, now: float) -> float:
    """Since when a call (a value of ``pending["calls"]``) waits: its entry's timestamp, or
    when the reader first saw it when that is earlier or the timestamp is missing."""
    made = _epoch((call.get("entry") or {}).get("timestamp"))
    seen = call.get("seen", now)
    return seen if made is None else min(made, seen)
