"""Transcripts read as the episode detector's events (:class:`ingest.learning.episodes.Event`).

The session indexer's turns (:mod:`ingest.sessions.transcripts`) are abbreviated for search; the
detector needs more of each tool call (:mod:`ingest.learning.tool_events`): a shell command
whole, its output up to ``MAX_OUTPUT``, and what an edit changed. So it reads the same files
itself, from its own offset, with the same formats:

- **Claude Code**: ``tool_use`` blocks (``Bash`` {command}, ``Edit`` {file_path, old_string,
  new_string}, ``MultiEdit`` {file_path, edits}, ``Write`` {file_path, content},
  ``NotebookEdit`` {notebook_path, new_source}) are kept until their ``tool_result``
  ({tool_use_id, content, is_error}) arrives; then a Bash call is a ``run`` event, a successful
  edit an ``edit`` event with a short diff. The assistant's text blocks are ``say`` events, a
  user's message a ``prompt`` (tool results, meta entries, slash-command echoes and compaction
  summaries are not prompts). The session is ``sessionId`` (a sidechain's:
  ``sessionId/agent-<agentId>``, as the indexer names it).
- **Cursor** (:mod:`ingest.sessions.transcripts_cursor`): prompts and the assistant's words only; its
  transcripts hold no tool results, so its commands and edits come from its hooks.
- **Gemini CLI** (:mod:`ingest.sessions.transcripts_gemini`): prompts, replies, shell calls (``run``,
  keyed as its hook keys them) and ``replace`` / ``write_file`` edits, from its JSONL sessions.
- **Codex CLI** (:mod:`ingest.sessions.transcripts_codex`): prompts, replies, shell commands (``run``,
  keyed by ``call_id`` as its hook keys them; a command still running is ended by its poll) and
  ``apply_patch`` edits, from its rollouts.
- **GitHub Copilot CLI** (:mod:`ingest.sessions.transcripts_copilot`): prompts, replies, ``bash`` /
  ``powershell`` commands (``run``, keyed by ``toolCallId``) and ``edit`` / ``create`` edits.
- **Generic JSONL** (``{"session", "role", "content", "timestamp"}``): ``user`` is a prompt,
  ``assistant`` a say; a ``tool`` line is a run or an edit when it says which tool it ran:
  ``"tool"`` (``Bash``, ``Edit``, ``Write``, …), ``"input"`` (the tool's arguments, as in
  Claude Code), ``"is_error"`` or ``"exit_code"``, and optionally ``"id"``; its ``content``
  is the output.

Only complete lines are read; calls waiting for their results are carried in
:class:`FeedProgress` (at most :data:`MAX_PENDING`, their inputs clipped, each with when it was
made or first seen). A call still waiting ``dangling_s`` after that (the session indexer's
bound, ``PATTERN_SESSION_DANGLING_S``) is given up on when a read reaches the end of the file:
dropped with its arguments (a client killed mid-call never writes its result; without a result
the call is no event of the detector's). The caller screens the row before it stores it.

Bounds: a line longer than :data:`MAX_LINE_BYTES` is skipped unread, a line that is not a JSON
object is passed over (``transcript_base.parse_line``), a read takes about ``max_bytes`` and at
most :data:`MAX_READ_SECONDS` (and the line it is reading then), a waiting call keeps
``CUT_DEPTH`` levels of its arguments, 20 items each, and an edit's diff reads ``INPUT_CHARS``
of each side (:mod:`ingest.learning.tool_events`).
"""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel, Field

from ingest.learning.episodes import Event
from ingest.learning.tool_events import (
    EDIT_TOOLS,
    MAX_PENDING,
    SHELL_TOOLS,
    tool_event,
    waiting_args,
)
from ingest.sessions.transcript_base import (
    COMPACT_PREFIX,
    line_hash,
    parse_line,
    result_text,
    str_field,
    waiting_since,
)
from ingest.sessions.transcripts import find_newline
from ingest.sessions.transcripts_claude import message_blocks
from ingest.sessions.transcripts_codex import codex_events, is_rollout_entry
from ingest.sessions.transcripts_copilot import copilot_events, is_copilot
from ingest.sessions.transcripts_cursor import NOTES, cursor_events, is_cursor
from ingest.sessions.transcripts_gemini import events as gemini_events
from ingest.sessions.transcripts_gemini import is_gemini

MAX_LINE_BYTES = 64 * 2**20  # a longer line is skipped, never held whole
MAX_READ_SECONDS = 10.0  # a read stops after the line it is reading then


class FeedProgress(BaseModel):
    """Where the detector's reading of one transcript stands."""

    offset: int = 0
    line_hash: str = ""
    line_len: int = 0
    format: str | None = None
    # tool_use id -> {name, args, entry: {timestamp}, seen}: a call waiting for its result
    pending: dict[str, dict] = Field(default_factory=dict)
    sessions: list[str] = Field(default_factory=list)  # the sessions read from the file


def _session(e: dict, path: Path) -> str:
    sid = str(e.get("sessionId") or path.stem)
    if e.get("isSidechain"):
        agent = e.get("agentId") or path.stem.removeprefix("agent-")
        return f"{sid}/agent-{agent}"
    return sid


def give_up(prog: FeedProgress, now: float, after_s: float) -> list[str]:
    """Drop the calls waiting at least ``after_s`` (:func:`~ingest.sessions.transcript_base.waiting_since`); their
    ids. A call kept before calls had a time is taken as first seen ``now``."""
    for v in prog.pending.values():
        seen = v.get("seen")
        if isinstance(seen, bool) or not isinstance(seen, int | float) or seen != seen:
            v["seen"] = now  # absent (or not a time): first seen now
    gone = [c for c, v in prog.pending.items() if now - waiting_since(v, now) >= after_s]
    for cid in gone:
        del prog.pending[cid]
    return gone


def claude_events(e: dict, path: Path, prog: FeedProgress,
                  now: float | None = None) -> list[tuple[str, Event]]:  # fmt: skip
    """(session, event) of one Claude Code entry."""
    kind, blocks = message_blocks(e)
    if kind is None:
        return []
    session, at = _session(e, path), str_field(e.get("timestamp"))
    out: list[tuple[str, Event]] = []
    texts: list[str] = []
    for b in blocks:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text" and str(b.get("text", "")).strip():
            texts.append(str(b["text"]))
        elif kind == "assistant" and b.get("type") == "tool_use" and b.get("id"):
            name = str(b.get("name") or "")
            if name in SHELL_TOOLS or name in EDIT_TOOLS:
                prog.pending[str(b["id"])] = {
                    "name": name, "args": waiting_args(name, b.get("input")),
                    "entry": {"timestamp": at if isinstance(at, str) else None},
                    "seen": time.time() if now is None else now,
                }  # fmt: skip
                while len(prog.pending) > MAX_PENDING:
                    del prog.pending[next(iter(prog.pending))]
        elif kind == "user" and b.get("type") == "tool_result":
            call = prog.pending.pop(str(b.get("tool_use_id") or ""), None)
            if call is not None:
                ev = tool_event(call["name"], call["args"], result_text(b.get("content")),
                                not b.get("is_error"), str(b.get("tool_use_id")), at)  # fmt: skip
                if ev is not None:
                    out.append((session, ev))
    text = "\n\n".join(texts).strip()
    if text and kind == "assistant":
        out.append((session, Event(kind="say", at=at, text=text)))
    elif text and not e.get("isCompactSummary") and not text.startswith(COMPACT_PREFIX):
        if not text.startswith(("<command-", "<local-command-")):
            out.append((session, Event(kind="prompt", at=at, text=text[:500])))
    return out


def generic_events(e: dict, path: Path) -> list[tuple[str, Event]]:
    role = str(e.get("role") or "").strip().lower()
    session, at = str(e.get("session") or path.stem), str_field(e.get("timestamp"))
    content = e.get("content")
    text = content if isinstance(content, str) else result_text(content)
    if role == "user" and text.strip():
        return [(session, Event(kind="prompt", at=at, text=text[:500]))]
    if role == "assistant" and text.strip():
        return [(session, Event(kind="say", at=at, text=text))]
    if role == "tool" and isinstance(e.get("tool"), str):
        code = e.get("exit_code")
        ok = not e.get("is_error") and (not isinstance(code, int) or code == 0)
        ev = tool_event(e["tool"], e.get("input"), text, ok, str(e.get("id") or ""), at)
        return [(session, ev)] if ev is not None else []
    return []


def where(e: dict) -> dict[str, str]:
    """The working directory and git branch an entry names (those it has)."""
    return {k: v for k, f in (("cwd", "cwd"), ("branch", "gitBranch"))
            if isinstance(v := e.get(f), str) and v}  # fmt: skip


def read_events(path: str | Path, prog: FeedProgress, *, final: bool = False,
                max_bytes: int = 4 * 2**20, dangling_s: float | None = None,
                now: float | None = None) -> tuple[list[tuple[str, Event]], dict[str, dict]]:  # fmt: skip
    """The events of the complete lines after ``prog.offset`` (about ``max_bytes`` of them),
    advancing ``prog``; also {session: {cwd, branch}} as its entries first name them.
    ``final``: an unfinished last line that is a whole entry is read too. ``dangling_s``: a
    read that reaches the end gives up on the calls waiting that long (``now``: the clock)."""
    path = Path(path)
    now = time.time() if now is None else now
    out: list[tuple[str, Event]] = []
    places: dict[str, dict] = {}
    with open(path, "rb") as fh:
        fh.seek(prog.offset)
        read = 0
        ended = False  # the read reached the end of what is written
        until = time.monotonic() + MAX_READ_SECONDS
        while read < max_bytes and time.monotonic() < until:
            line = fh.readline(MAX_LINE_BYTES + 1)
            if not line:
                ended = True
                break
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):  # skipped, not held
                nl, _ = find_newline(fh, prog.offset + len(line))
                if nl is None:
                    ended = True
                    break
                read += nl + 1 - prog.offset
                prog.offset = nl + 1
                fh.seek(prog.offset)
                continue
            if not line.endswith(b"\n") and not (final and line.rstrip().endswith(b"}")):
                ended = True
                break
            read += len(line)
            prog.offset += len(line)
            prog.line_hash, prog.line_len = line_hash(line[-65536:]), len(line[-65536:])
            e = parse_line(line)
            if e is None:
                continue
            if prog.format is None and e.get("type") not in NOTES:
                prog.format = ("codex" if is_rollout_entry(e) else
                               "gemini" if is_gemini(e) else "cursor" if is_cursor(e) else
                               "copilot" if is_copilot(e) else
                               "claude-code" if "message" in e or e.get("type") else
                               "generic" if "role" in e else None)  # fmt: skip
            found = claude_events(e, path, prog, now) if prog.format == "claude-code" else (
                generic_events(e, path) if prog.format == "generic" else
                cursor_events(e, path) if prog.format == "cursor" else
                gemini_events(e, path, prog) if prog.format == "gemini" else
                copilot_events(e, path, prog, now) if prog.format == "copilot" else
                codex_events(e, path, prog, now) if prog.format == "codex" else [])  # fmt: skip
            for session, _ev in found:
                places.setdefault(session, where(e))
                if session not in prog.sessions:
                    prog.sessions = [*prog.sessions, session][-MAX_PENDING:]
            out += found
    if ended and dangling_s is not None:
        give_up(prog, now, dangling_s)
    return out, places
