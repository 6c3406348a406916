"""Cursor's agent transcripts read as conversation turns (:mod:`ingest.sessions.transcripts` picks this
reader by a file's first message line).

What Cursor documents: each hook's input names the conversation's transcript file
(``transcript_path``, null when transcripts are off; https://cursor.com/docs/agent/hooks), kept
under ``~/.cursor/projects/<workspace>/agent-transcripts/<conversation id>/<conversation
id>.jsonl`` (older builds: ``agent-transcripts/<id>.jsonl``; a sub-agent's in
``<id>/subagents/<sub-agent id>.jsonl``). Cursor does not document the lines' format; what
follows is what the files Cursor writes hold, as public readers of them agree (for example
https://github.com/forgeprint/forgelore's captured cursor-agent 2026.10.01 payloads name such
a file, and the parsers listed in ``tests/fixtures/clients/cursor/SOURCES.md`` read it alike):

- ``{"role": "user" | "assistant", "message": {"content": [BLOCK, …]}}``, one line per message,
  no ``type`` at the top; BLOCK ``{"type": "text", "text": …}`` or, in an assistant's message,
  ``{"type": "tool_use", "name": …, "input": {…}}`` (an ``id`` only sometimes);
- a user's text wraps the prompt as ``<user_query>…</user_query>``, often after a
  ``<timestamp>Tuesday, Sep 29, 2026, 2:29 AM (UTC-4)</timestamp>`` line (the file's only
  times); an assistant's text may hold a ``[REDACTED]`` line where its thinking was;
- ``{"type": "turn_ended", "status": …}`` after a turn, ``{"type": "metadata", …}`` at times.

No tool results and no working folder are written: a tool call is a turn of its own at once
(its tool and key arguments, no result), and the folder comes from the hook that names the file.
The session is the file's name (a sub-agent's: ``<conversation>/agent-<name>``).

Reading is bounded as :func:`ingest.sessions.transcripts.read_turns` bounds it (lines, time, a reply
that goes on past ``REPLY_CUT_CHARS`` cut, waiting calls: none here); a line of another shape is
passed over, never an error; the tags are found with plain string search.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from ingest.learning.episodes import Event
from ingest.sessions.transcript_base import (
    Reply,
    Turn,
    clip,
    key_args,
    str_field,
)

NOTES = ("metadata", "turn_ended")  # line types that say nothing of the file's format
USER_QUERY = ("<user_query>", "</user_query>")
TIMESTAMP = ("<timestamp>", "</timestamp>")
REDACTED = "[REDACTED]"
MAX_STAMP_CHARS = 80
# the arguments that say what a call did, by Cursor's tool names (others: the first scalars)
KEY_ARGS = {
    "Shell": ("command",),
    "Read": ("path",),
    "Write": ("path",),
    "StrReplace": ("path",),
    "Delete": ("path",),
    "Grep": ("pattern", "path"),
    "Glob": ("glob_pattern", "target_directory"),
    "Task": ("subagent_type", "description"),
}


def is_cursor(entry: dict) -> bool:
    """A Cursor message line: ``role`` and a ``message`` object, no ``type`` beside them."""
    return "role" in entry and isinstance(entry.get("message"), dict) and "type" not in entry


def session_of(path: Path) -> tuple[str, str | None]:
    """(the session, its parent's) of a transcript file: its name, a sub-agent's
    ``<conversation>/agent-<name>``."""
    if path.parent.name == "subagents":
        parent = path.parent.parent.name
        return f"{parent}/agent-{path.stem}", parent
    return path.stem, None


def parse_stamp(text: str) -> str | None:
    """``Tuesday, Sep 29, 2026, 2:29 AM (UTC-4)`` as ISO 8601; None for anything else."""
    text = text.strip()
    if len(text) > MAX_STAMP_CHARS or not text.endswith(")") or " (UTC" not in text:
        return None
    when, _, zone = text[:-1].rpartition(" (UTC")
    try:
        dt = datetime.strptime(when, "%A, %b %d, %Y, %I:%M %p")
        hours, _, minutes = (zone or "+0").partition(":")
        sign = -1 if hours.startswith("-") else 1
        offset = timedelta(hours=abs(int(hours)), minutes=int(minutes or 0))
        return dt.replace(tzinfo=timezone(sign * offset)).isoformat()
    except (ValueError, OverflowError):
        return None


def prompt_of(text: str) -> tuple[str, str | None]:
    """(the prompt, its time) of a user message's text: the ``<user_query>`` it wraps, after a
    leading ``<timestamp>`` (the text as it is when it has neither)."""
    body, stamp = text.strip(), None
    if body.startswith(TIMESTAMP[0]):
        end = body.find(TIMESTAMP[1])
        if end > 0:
            stamp = parse_stamp(body[len(TIMESTAMP[0]) : end])
            body = body[end + len(TIMESTAMP[1]) :].strip()
    start, end = body.find(USER_QUERY[0]), body.rfind(USER_QUERY[1])
    if 0 <= start < end:
        body = body[start + len(USER_QUERY[0]) : end].strip()
    return body, stamp


def _texts(blocks: list) -> list[str]:
    return [b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text"
            and isinstance(b.get("text"), str)]  # fmt: skip


def _said(text: str) -> str:
    """An assistant's text without the ``[REDACTED]`` lines standing for its thinking."""
    return "\n".join(ln for ln in text.splitlines() if ln.strip() != REDACTED).strip()


def tool_text(name: str, args: object) -> str:
    """``Shell(command=pytest -q) → no result recorded`` (Cursor writes none)."""
    keys = KEY_ARGS.get(name)
    shown = {k: args[k] for k in keys if k in args} if keys and isinstance(args, dict) else args
    return f"{name}({key_args(name, shown)}) → no result recorded"


class CursorTranscript:
    """Parser state of a Cursor transcript: the reply being read (the same interface as
    :mod:`ingest.sessions.transcripts`' Claude Code parser; no call ever waits for a result)."""

    def __init__(self, path: Path, pending: dict | None = None, now: float = 0.0) -> None:
        self.path = path
        # a cut reply's rest passed over
        self.reply: Reply[str] = Reply(isinstance(pending, dict) and pending.get("cut") is True)
        self.session, self.parent = session_of(path)

    def clean(self) -> bool:
        return not self.reply.parts

    def pending(self) -> dict:
        return {"cut": True} if self.reply.cut else {}

    def _turn(self, role: str, text: str, key: str, at: str | None = None) -> Turn:
        return Turn(self.session, role, text, key, at, None, None, self.parent)

    def flush_reply(self) -> list[Turn]:
        return self._reply_turn(self.reply.end())

    def add_reply(self, at: str, text: str) -> list[Turn]:
        """One more text of the reply being read; past ``REPLY_CUT_CHARS`` it is given at
        once, cut, and its rest passed over until the reply ends (as Claude Code's parser)."""
        return self._reply_turn(self.reply.add(at, text))

    def _reply_turn(self, done: tuple[str | None, str] | None) -> list[Turn]:
        return [] if done is None else [self._turn("assistant", done[1], f"{done[0]}#a")]

    def flush_calls(self) -> list[Turn]:
        return []

    def give_up(self, now: float, after_s: float) -> list[Turn]:
        return []

    def feed(self, e: dict) -> list[Turn]:
        at = str_field(e.get("_at")) or ""
        if e.get("type") == "turn_ended":
            return self.flush_reply()
        if not is_cursor(e):
            return []
        role, content = e.get("role"), e["message"].get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            return []
        if role == "user":
            out = self.flush_reply()
            prompt, stamp = prompt_of("\n".join(_texts(blocks)))
            if prompt:
                out.append(self._turn("user", clip(prompt), f"{at}#u", stamp))
            return out
        if role != "assistant":
            return []
        out = []
        for k, b in enumerate(blocks):
            if not isinstance(b, dict):
                continue
            if b.get("type") == "text" and isinstance(b.get("text"), str) and _said(b["text"]):
                out += self.add_reply(at, _said(b["text"]))
            elif b.get("type") == "tool_use":
                out += self.flush_reply()
                name = str(b.get("name") or "tool")[:200]
                cid = str_field(b.get("id"))
                key = f"tool:{cid[:200]}" if cid else f"{at}#t{k}"
                out.append(self._turn("tool", tool_text(name, b.get("input")), key))
        return out


def cursor_events(e: dict, path: Path) -> list[tuple[str, Event]]:
    """(session, event) of one line, for the episode detector: a prompt, or what the assistant
    said (its commands and edits come from the hooks, which carry their results)."""
    if not is_cursor(e) or e.get("role") not in ("user", "assistant"):
        return []
    content = e["message"].get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(blocks, list):
        return []
    session, _ = session_of(path)
    text = "\n".join(_texts(blocks))
    if e["role"] == "user":
        prompt, stamp = prompt_of(text)
        return [(session, Event(kind="prompt", at=stamp, text=prompt[:500]))] if prompt else []
    said = _said(text)
    return [(session, Event(kind="say", text=said))] if said else []
