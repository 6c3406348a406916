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
  read only when present (a missing one is never guessed):
  :mod:`ingest.sessions.transcripts_claude`.
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
``max_seconds``; a reply held past
:data:`~ingest.sessions.transcript_base.REPLY_CUT_CHARS` is cut: given as a turn at once (its
first ``MAX_TURN_CHARS``, marked ``cut``), the rest of it passed over until the reply ends, and
every line meanwhile is a checkpoint (``pending["cut"]``), so a reply that never ends (a client
writing assistant lines for megabytes) is neither held whole nor read again by every read; at
most ``MAX_WAITING`` calls wait for their results (the oldest are recorded without them); the
lookups from a file's end read its last ``max_bytes``, the session's folder its first
:data:`CWD_SCAN_BYTES`.

Each format's reader is named in one table (:data:`READERS`); the turn, the read results and
the line and text helpers every reader shares are in :mod:`ingest.sessions.transcript_base`.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from ingest.sessions.transcript_base import (
    CWD_SCAN_BYTES,
    Checkpoint,
    ReadResult,
    Turn,
    clip,
    line_hash,
    parse_line,
    result_text,
    str_field,
)
from ingest.sessions.transcripts_claude import ClaudeCodeTurns
from ingest.sessions.transcripts_codex import CodexRollout
from ingest.sessions.transcripts_copilot import CopilotTurns, entry_cwd
from ingest.sessions.transcripts_cursor import CursorTranscript
from ingest.sessions.transcripts_gemini import (
    GeminiTurns,
    document_unchanged,
    is_document,
    is_gemini,
    project_root,
    read_document,
)
from ingest.workspace.file_inside import NotRead, read_head

MAX_LINE_BYTES = 64 * 1024 * 1024  # a longer line is skipped as a bad line, never held whole
SCAN_CHUNK = 1024 * 1024  # looking for the end of a long line
MAX_READ_SECONDS = 10.0  # a read stops at its first checkpoint after this long
CODEX_TYPES = ("session_meta", "response_item", "event_msg", "turn_context", "compacted")


def detect_format(entry: dict) -> str | None:
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
                if (
                    res.format not in (None, "claude-code", "generic")
                    and type(cc) is ClaudeCodeTurns
                ):
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


# the reader of each format whose entries carry replies across lines (Claude Code's: the rest)
READERS: dict[str, type] = {
    "cursor": CursorTranscript,
    "gemini": GeminiTurns,
    "codex": CodexRollout,
    "copilot": CopilotTurns,
}


def _parser(fmt: str | None, path: Path, pending: dict | None, now: float):
    """The reader of ``fmt`` (:data:`READERS`; Claude Code's for any other format)."""
    return READERS.get(fmt or "", ClaudeCodeTurns)(path, pending, now)


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
            cc = ClaudeCodeTurns(path)
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
            if entry_cwd(e):
                return entry_cwd(e)
    return project_root(path)  # Gemini CLI's sessions name no folder


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
