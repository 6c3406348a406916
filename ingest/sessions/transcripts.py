"""Agent transcripts read as conversation turns, incrementally, from a byte offset.

Two formats, told apart by the first entry of a file:

- **Claude Code** (``~/.claude/projects/<folder>/<session>.jsonl``; a sub-agent's sidechain in
  ``<session>/subagents/agent-<id>.jsonl``). One JSON object per line. We read the entries of
  ``type`` ``user`` and ``assistant``: ``message.content`` is a string or a list of blocks
  (``text``, ``tool_use`` {id, name, input}, ``tool_result`` {tool_use_id, content, is_error},
  ``thinking``, which we skip), with ``uuid``, ``sessionId``, ``timestamp`` (ISO 8601), ``cwd``,
  ``gitBranch``, ``isSidechain`` and, on sidechain entries, ``agentId``. Every other type
  (summary, system, file-history-snapshot, …) is skipped. The entry shape is the one shown in
  https://docs.claude.com/en/docs/claude-code/sdk/sdk-sessions ; the fields beyond it are
  read only when present (a missing one is never guessed).
- **Generic JSONL**: ``{"session", "role", "content", "timestamp"}`` per line (role ``user``,
  ``assistant`` or ``tool``; optional ``cwd``, ``gitBranch``, ``parentSession``).
- **Cursor** (``{"role", "message"}`` lines without ``type``): :mod:`ingest.sessions.transcripts_cursor`.
- **Gemini CLI** (a ``sessionId`` + ``projectHash`` first line; before v0.39 one JSON document,
  ``chats/…/*.json``): :mod:`ingest.sessions.transcripts_gemini`.
- **Codex CLI** (rollout lines ``{"timestamp", "type": "session_meta" | "response_item" | …,
  "payload"}``, ``~/.codex/sessions/…/rollout-*.jsonl``): :mod:`ingest.sessions.transcripts_codex`.
- **GitHub Copilot CLI** (session events ``{"type": "session.start", "data": …}``,
  ``~/.copilot/session-state/<id>/events.jsonl``): :mod:`ingest.sessions.transcripts_copilot`.

A *turn* is one user message, one assistant reply (consecutive text blocks joined), or one
tool call with its result, abbreviated: the tool, its key arguments and the first lines of an
error (a large output is never stored whole).

Incremental reading: :func:`read_turns` parses complete lines from an offset and returns the
turns with *checkpoints*: line ends where no reply is half-read (a reply may go on in the next
entry). A caller commits turns up to a checkpoint together with the checkpoint (offset, hash of
the line that ends there, and the tool calls still waiting for their results there, in a small
JSON form); the next read starts there with those calls, after checking that line is still the
same: a transcript that was rewritten or truncated is read again from the start (turn ids are
derived from the entries, so nothing is stored twice).

A tool call without its result never holds the reading up: the turns before and after it are
committed while it waits (a permission prompt, a long command, or ``index-sessions`` running in
the client's own shell tool). A call still waiting ``dangling_s`` after it was made (its entry's
timestamp, else when the reader first saw it) is given up on: it is recorded without its result
(a client killed mid-call never writes one); a result arriving later still gets its own turn.

A line still being written (no newline yet) is never consumed, even under ``final``, unless it
is a whole JSON entry; the bytes of such a line already scanned are reported
(:attr:`ReadResult.partial`) so that the next read looks for its end from there instead of
reading it all again. A line longer than ``MAX_LINE_BYTES`` is skipped (a bad line) without
being held in memory.

Bounds: a line of at most ``MAX_LINE_BYTES`` is parsed (:func:`parse_line`: not JSON, not
UTF-8, nested beyond the parser, a number of thousands of digits: a bad line; a lone surrogate
in a string becomes ``?``); a read stops at its first checkpoint after ``max_bytes`` or
``max_seconds``; a reply held past :data:`REPLY_CUT_CHARS` is cut: given as a turn at once (its
first ``MAX_TURN_CHARS``, marked ``cut``), the rest of it passed over until the reply ends, and
every line meanwhile is a checkpoint (``pending["cut"]``), so a reply that never ends (a client
writing assistant lines for megabytes) is neither held whole nor read again by every read; at
most :data:`MAX_WAITING` calls wait for their results (the oldest are recorded without them);
the lookups from a file's end read its last ``max_bytes``, the session's folder its first
:data:`CWD_SCAN_BYTES`.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

NAMESPACE = uuid.UUID("8d3f6c2e-41b7-4a0e-9c55-7e2b1f0a9d64")
MAX_TURN_CHARS = 8000  # a pasted log is kept up to this, the rest is marked as omitted
REPLY_CUT_CHARS = 4 * MAX_TURN_CHARS  # a reply held longer is cut (given, the rest passed over)
TOOL_RESULT_CHARS = 400  # a tool result: its first lines up to this
ERROR_LINES = 6
COMPACT_PREFIX = "This session is being continued from a previous conversation"
MAX_LINE_BYTES = 64 * 1024 * 1024  # a longer line is skipped as a bad line, never held whole
SCAN_CHUNK = 1024 * 1024  # looking for the end of a long line
ABANDONED_KEPT = 32  # given-up calls remembered, so a late result still names its tool
MAX_WAITING = 256  # calls waiting for their results; beyond, the oldest is given up
MAX_READ_SECONDS = 10.0  # a read stops at its first checkpoint after this long
CWD_SCAN_BYTES = 1024 * 1024  # of a transcript's start, looked through for its folder
CODEX_TYPES = ("session_meta", "response_item", "event_msg", "turn_context", "compacted")

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


def detect_format(entry: dict) -> str | None:
    from ingest.sessions.transcripts_gemini import is_gemini  # it imports this module

    if entry.get("type") in CODEX_TYPES and isinstance(entry.get("payload"), dict):
        return "codex"  # ingest.sessions.transcripts_codex.is_rollout_entry
    if is_gemini(entry):
        return "gemini"
    if "role" in entry and isinstance(entry.get("message"), dict) and "type" not in entry:
        return "cursor"  # ingest.sessions.transcripts_cursor.is_cursor
    if "." in str(entry.get("type") or "") and isinstance(entry.get("data"), dict):
        return "copilot"  # ingest.sessions.transcripts_copilot.is_copilot
    if "message" in entry or entry.get("type") in ("user", "assistant", "summary", "system"):
        return "claude-code"
    if "role" in entry and "content" in entry:
        return "generic"
    return None


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


_ENTRY_FIELDS = ("sessionId", "isSidechain", "agentId", "timestamp", "cwd", "gitBranch", "_at")


def _small_args(name: str, args: object) -> dict:
    """The arguments :func:`key_args` shows, as short strings (a waiting call is kept in the
    progress row: a Write's whole content must not be)."""
    if not isinstance(args, dict):
        return {}
    keys = (
        KEY_ARGS.get(name) or [k for k, v in args.items() if isinstance(v, str | int | float)][:2]
    )
    out = {}
    for k in keys:
        v = args.get(k)
        if v is not None and v != "":
            out[k] = " ".join(str(v).split())[:201]  # key_args clips at 200 and marks the cut
    return out


def message_blocks(e: dict) -> tuple[str | None, list]:
    """(``user`` or ``assistant``, its content blocks) of a Claude Code entry; no blocks for any
    other entry (a meta line, a summary, a message without content blocks). A string content is
    one text block."""
    kind, msg = e.get("type"), e.get("message")
    if kind not in ("user", "assistant") or not isinstance(msg, dict) or e.get("isMeta"):
        return None, []
    content = msg.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    return (kind, blocks) if isinstance(blocks, list) else (None, [])


class _ClaudeCode:
    """Parser state of a Claude Code transcript: a reply being read, calls awaiting results.

    A waiting call is kept in a JSON form (its tool, shown arguments, the entry fields its turn
    needs, when it was first seen), so the state at a line end can be committed with it
    (:attr:`Checkpoint.pending`) and a later read can start from there."""

    def __init__(self, path: Path, pending: dict | None = None, now: float = 0.0) -> None:
        self.path = path
        self.now = now
        self.reply: list[str] = []
        self.reply_entry: dict | None = None
        self.reply_chars = 0
        pending = pending or {}
        self.calls: dict[str, dict] = dict(pending.get("calls") or {})  # tool_use id -> call
        self.gave_up: dict[str, dict] = dict(pending.get("gave_up") or {})
        self.cut = pending.get("cut") is True  # passing over the rest of a reply cut

    def clean(self) -> bool:
        """No reply half-read: the state here is the waiting calls (and a cut reply's rest
        being passed over) alone."""
        return not self.reply

    def pending(self) -> dict:
        out: dict = {}
        if self.calls:
            out["calls"] = dict(self.calls)
        if self.gave_up:
            out["gave_up"] = dict(self.gave_up)
        if self.cut:
            out["cut"] = True
        return out

    def add_reply(self, e: dict, text: str) -> list[Turn]:
        """One more text of the reply being read (``e``: its entry). Past
        :data:`REPLY_CUT_CHARS` the reply is given at once, cut (:func:`cut_reply`), and its
        rest is passed over until it ends (:meth:`flush_reply`)."""
        if self.cut:
            return []
        if not self.reply:
            self.reply_entry = e
        self.reply.append(text)
        self.reply_chars += len(text)
        if self.reply_chars <= REPLY_CUT_CHARS:
            return []
        first = self.reply_entry or {}
        turn = self._turn(first, "assistant", cut_reply(self.reply),
                          f"{first.get('uuid') or first.get('_at')}#a")  # fmt: skip
        self.reply, self.reply_entry, self.reply_chars, self.cut = [], None, 0, True
        return [turn]

    def _session(self, e: dict) -> tuple[str, str | None]:
        sid = str(e.get("sessionId") or self.path.stem)
        if e.get("isSidechain"):
            agent = e.get("agentId") or self.path.stem.removeprefix("agent-")
            return f"{sid}/agent-{agent}", sid
        return sid, None

    def _turn(self, e: dict, role: str, text: str, key: str) -> Turn:
        session, parent = self._session(e)
        return Turn(session, role, text, key, str_field(e.get("timestamp")),
                    str_field(e.get("cwd")), str_field(e.get("gitBranch")), parent)  # fmt: skip

    def flush_reply(self) -> list[Turn]:
        """The reply read, ended (a cut one's rest is over: the next text is a new reply)."""
        self.cut = False
        if not self.reply:
            return []
        e = self.reply_entry or {}
        text = clip("\n\n".join(self.reply))
        self.reply, self.reply_entry, self.reply_chars = [], None, 0
        return [self._turn(e, "assistant", text, f"{e.get('uuid') or e.get('_at')}#a")]

    def _abandon(self, cids: list[str]) -> list[Turn]:
        """Record these waiting calls without their results (remembered for a late result)."""
        out = []
        for cid in cids:
            c = self.calls.pop(cid)
            out.append(self._turn(c["entry"], "tool", tool_turn_text(c["name"], c["args"], None,
                                                                     False), f"tool:{cid}"))  # fmt: skip
            self.gave_up[cid] = {"name": c["name"], "args": c["args"]}
        while len(self.gave_up) > ABANDONED_KEPT:
            del self.gave_up[next(iter(self.gave_up))]
        return out

    def flush_calls(self) -> list[Turn]:
        return self._abandon(list(self.calls))

    def give_up(self, now: float, after_s: float) -> list[Turn]:
        """The calls waiting at least ``after_s`` (:func:`waiting_since`), recorded without
        their results."""
        return self._abandon(
            [c for c, v in self.calls.items() if now - waiting_since(v, now) >= after_s]
        )

    def feed(self, e: dict) -> list[Turn]:
        kind, blocks = message_blocks(e)
        if kind is None:
            return []
        out: list[Turn] = []
        if kind == "assistant":
            for b in blocks:
                if not isinstance(b, dict):
                    continue
                if b.get("type") == "text" and str(b.get("text", "")).strip():
                    out += self.add_reply(e, str(b["text"]))
                elif b.get("type") == "tool_use":
                    out += self.flush_reply()
                    name = str(b.get("name") or "tool")[:200]
                    self.calls[str(b.get("id") or f"{e.get('_at')}")[:200]] = {
                        "name": name, "args": _small_args(name, b.get("input")),
                        "entry": {k: e[k] for k in _ENTRY_FIELDS
                                  if k in e and isinstance(e[k], str | bool)}, "seen": self.now,
                    }  # fmt: skip
                    if len(self.calls) > MAX_WAITING:
                        out += self._abandon(list(self.calls)[: len(self.calls) - MAX_WAITING])
            return out
        out += self.flush_reply()
        texts = []
        for b in blocks:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_result":
                cid = str(b.get("tool_use_id") or "")
                call = self.calls.pop(cid, None) or self.gave_up.pop(cid, None)
                name, args = (call["name"], call["args"]) if call else ("tool", None)
                text = tool_turn_text(name, args, result_text(b.get("content")),
                                      bool(b.get("is_error")))  # fmt: skip
                out.append(self._turn(e, "tool", text, f"tool:{cid or e.get('_at')}"))
            elif b.get("type") == "text" and str(b.get("text", "")).strip():
                texts.append(str(b["text"]))
        text = "\n\n".join(texts).strip()
        if text and not e.get("isCompactSummary") and not text.startswith(COMPACT_PREFIX):
            if not text.startswith(("<command-", "<local-command-")):
                out.append(self._turn(e, "user", clip(text), f"{e.get('uuid') or e.get('_at')}#u"))
        return out


def _generic_turn(e: dict, path: Path, at: int) -> list[Turn]:
    role = str(e.get("role") or "").strip().lower()
    if role not in ("user", "assistant", "tool"):
        return []
    content = e.get("content")
    text = result_text(content) if not isinstance(content, str) else content
    if not text.strip():
        return []
    session = str(e.get("session") or path.stem)
    digest = hashlib.sha256(f"{role}\x00{text}".encode()).hexdigest()[:16]
    key = f"{e.get('timestamp') or f'@{at}'}#{digest}"  # the same line read again: same key
    return [Turn(session, role, clip(text), key, str_field(e.get("timestamp")),
                 str_field(e.get("cwd")), str_field(e.get("gitBranch")),
                 str_field(e.get("parentSession")))]  # fmt: skip


def valid_offset(path: Path, offset: int, expected_hash: str, length: int) -> bool:
    """True when the line ending at ``offset`` is still the one we read (not rewritten); a
    legacy Gemini CLI session document: still the size and time it had when it was read."""
    if offset == 0:
        return True
    if expected_hash.startswith("doc:"):
        from ingest.sessions.transcripts_gemini import document_unchanged, is_document

        return is_document(Path(path)) and document_unchanged(Path(path), offset, expected_hash)
    try:
        with open(path, "rb") as fh:
            if fh.seek(0, 2) < offset or length <= 0 or length > offset:
                return False
            fh.seek(offset - length)
            return line_hash(fh.read(length)) == expected_hash
    except OSError:
        return False


def find_newline(fh, start: int) -> tuple[int | None, int]:
    """(offset of the first newline at or after ``start``, or None; where the scan stopped),
    reading ``SCAN_CHUNK`` at a time: a long line is never held whole."""
    fh.seek(start)
    at = start
    while True:
        chunk = fh.read(SCAN_CHUNK)
        if not chunk:
            return None, at
        i = chunk.find(b"\n")
        if i >= 0:
            return at + i, at + i + 1
        at += len(chunk)


def _ends_like_json(fh, end: int) -> bool:
    """Whether the bytes before ``end`` end with ``}`` (blanks aside): an unfinished line can
    only be a whole entry then."""
    fh.seek(max(0, end - 64))
    return fh.read(end - max(0, end - 64)).rstrip().endswith(b"}")


def read_turns(path: str | Path, offset: int = 0, fmt: str | None = None, *, flush: bool = False,
               final: bool = False, max_bytes: int | None = None, pending: dict | None = None,
               dangling_s: float | None = None, now: float | None = None,
               scanned: int = 0,
               max_seconds: float | None = MAX_READ_SECONDS) -> ReadResult:  # fmt: skip
    """Parse complete lines from ``offset``. ``flush``: the reply at the end is complete (the
    client said its turn ended); ``final``: the session is over, calls without results are
    recorded too, and an unfinished last line is read if it is a whole entry. ``max_bytes``:
    stop at the first checkpoint after about that much (a long backfill in parts), and
    ``max_seconds``: after that long.
    ``pending``: the calls waiting at ``offset`` (the committed checkpoint's); ``dangling_s``:
    give up on a call waiting longer (recorded without its result; ``now``: the wall clock).
    ``scanned``: bytes after ``offset`` known to hold no newline (the previous read's
    :attr:`ReadResult.partial`). Turns after the last checkpoint are half-read: the caller
    drops them."""
    path = Path(path)
    if path.suffix == ".json":
        from ingest.sessions.transcripts_gemini import is_document, read_document

        if is_document(path):  # Gemini CLI's sessions before v0.39: one JSON document
            return read_document(path, offset)
    res = ReadResult(fmt)
    now = time.time() if now is None else now
    until = None if max_seconds is None else time.monotonic() + max_seconds
    cc = _parser(fmt, path, pending, now)
    start_pending = cc.pending()
    pos, last = offset, b""
    unfinished = 0  # bytes of an unfinished line at pos
    with open(path, "rb") as fh:
        size = fh.seek(0, 2)
        if 0 < scanned and offset + scanned <= size:
            nl, stop = find_newline(fh, offset + scanned)
            if nl is None and not (final and stop > offset + scanned
                                   and _ends_like_json(fh, stop)):  # fmt: skip
                unfinished = stop - offset  # still the line seen last time: not read again
        fh.seek(offset)
        while not unfinished:
            line = fh.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            start = pos
            if not line.endswith(b"\n"):
                if len(line) > MAX_LINE_BYTES:  # far too long to parse: skip it as a bad line
                    nl, stop = find_newline(fh, start + len(line))
                    if nl is None:
                        unfinished = stop - start
                        break
                    pos = nl + 1
                    fh.seek(max(start, pos - 4096))
                    last = fh.read(pos - max(start, pos - 4096))
                    res.bad_lines += 1
                    entry = None
                elif not final or not line.rstrip().endswith(b"}"):
                    unfinished = len(line)  # still being written
                    break
                else:
                    entry = _entry(line)
                    if entry is None:  # a half-written entry: wait for the rest
                        unfinished = len(line)
                        break
                    pos, last = start + len(line), line[-65536:]
            else:
                pos, last = start + len(line), line[-65536:]
                entry = _entry(line)
                if entry is None and line.strip():
                    res.bad_lines += 1
            if entry is not None:
                res.format = res.format or detect_format(entry)
                entry["_at"] = f"@{start}"
                if res.format not in (None, "claude-code", "generic") and type(cc) is _ClaudeCode:
                    cc = _parser(res.format, path, pending, now)
                if res.format in ("claude-code", "cursor", "gemini", "copilot", "codex"):
                    res.turns += cc.feed(entry)
                elif res.format == "generic":
                    res.turns += _generic_turn(entry, path, start)
            if cc.clean():
                res.checkpoints.append(Checkpoint(pos, len(res.turns), line_hash(last), len(last),
                                                  cc.pending()))  # fmt: skip
                if max_bytes is not None and pos - offset >= max_bytes:
                    return res
                if until is not None and time.monotonic() > until:
                    return res
    before = len(res.turns)
    if flush or final:
        res.turns += cc.flush_reply()
    if final:
        res.turns += cc.flush_calls()
    elif dangling_s is not None:
        res.turns += cc.give_up(now, dangling_s)
    base = res.checkpoints[-1] if res.checkpoints else None
    if cc.clean() and (len(res.turns) > before or (base.offset if base else offset) < pos
                       or (base.pending if base else start_pending) != cc.pending()):  # fmt: skip
        # at ``offset`` itself no line was read: the caller keeps the line it has (length 0)
        res.checkpoints.append(Checkpoint(pos, len(res.turns), line_hash(last) if last else "",
                                          len(last), cc.pending()))  # fmt: skip
    if unfinished and pos == (res.checkpoints[-1].offset if res.checkpoints else offset):
        res.partial = unfinished
    return res


def _parser(fmt: str | None, path: Path, pending: dict | None, now: float):
    """The parser of a format whose entries carry replies across lines (Cursor's reader
    imports this module, so it is imported here when needed)."""
    if fmt == "cursor":
        from ingest.sessions.transcripts_cursor import CursorTranscript

        return CursorTranscript(path, pending, now)
    if fmt == "gemini":
        from ingest.sessions.transcripts_gemini import GeminiTurns

        return GeminiTurns(path, pending, now)
    if fmt == "codex":
        from ingest.sessions.transcripts_codex import CodexRollout

        return CodexRollout(path, pending, now)
    if fmt == "copilot":
        from ingest.sessions.transcripts_copilot import CopilotTurns

        return CopilotTurns(path, pending, now)
    return _ClaudeCode(path, pending, now)


def _entry(line: bytes) -> dict | None:
    return parse_line(line)


def _tail(path: str | Path, max_bytes: int) -> bytes | None:
    """The last ``max_bytes`` of a file (None when it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(0, size - max_bytes))
            return fh.read(max_bytes)
    except OSError:
        return None


def last_turn(path: str | Path, max_bytes: int = 262_144) -> str | None:
    """The last reply (or message) of a transcript, read from its end: what a short prompt
    such as "yes, do that" refers to."""
    path = Path(path)
    data = _tail(path, max_bytes)
    if data is None:
        return None
    for raw in reversed(data.splitlines()):
        e = parse_line(raw)
        if e is None:
            continue
        if detect_format(e) == "generic":
            turns = _generic_turn(e, path, 0)
        elif detect_format(e) == "gemini":
            turns = _parser("gemini", path, None, 0.0).feed(e)
        elif detect_format(e) == "codex":
            turns = _parser("codex", path, None, 0.0).feed(e)
        elif detect_format(e) == "copilot":
            cc = _parser("copilot", path, None, 0.0)
            turns = cc.feed(e) + cc.flush_reply()
        else:
            cc = _ClaudeCode(path)
            turns = cc.feed(e) + cc.flush_reply()
        turns = [t for t in turns if t.role in ("user", "assistant")]
        if turns:
            return clip(turns[-1].text, 2000)
    return None


def session_cwd(path: str | Path, max_lines: int = 200) -> str | None:
    """The first ``cwd`` a transcript names (it decides the project, as for identity), among
    its first ``max_lines`` lines within its first :data:`CWD_SCAN_BYTES`. Only a regular file
    is read (:func:`~ingest.workspace.file_inside.read_head`: a named pipe at a session path never
    blocks the caller); anything else names none."""
    from ingest.workspace.file_inside import NotRead, read_head

    try:
        data = read_head(path, CWD_SCAN_BYTES)
    except NotRead:
        return None
    for raw in data.split(b"\n")[:max_lines]:
        e = parse_line(raw)
        if e is not None and isinstance(e.get("cwd"), str) and e["cwd"]:
            return e["cwd"]
        if e is not None and detect_format(e) == "codex" and e["type"] == "session_meta":
            cwd = e["payload"].get("cwd")
            if isinstance(cwd, str) and cwd:
                return cwd
        if e is not None and detect_format(e) == "copilot":  # its start's data.context.cwd
            from ingest.sessions.transcripts_copilot import entry_cwd

            if entry_cwd(e):
                return entry_cwd(e)
    from ingest.sessions.transcripts_gemini import (
        project_root,  # Gemini CLI's sessions name no folder
    )

    return project_root(path)


def tool_result_text(path: str | Path, tool_use_id: str, max_bytes: int = 262_144) -> str | None:
    """The output of one tool call (its ``tool_result`` block), looked up from the end."""
    data = _tail(path, max_bytes)
    if data is None:
        return None
    needle = tool_use_id.encode()
    for raw in reversed(data.splitlines()):
        if needle not in raw:
            continue
        e = parse_line(raw)
        msg = e.get("message") if e is not None else None
        content = msg.get("content") if isinstance(msg, dict) else None
        for b in content if isinstance(content, list) else []:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                if b.get("tool_use_id") == tool_use_id:
                    return result_text(b.get("content"))
    return None
