"""Gemini CLI's recorded sessions read as conversation turns and as the episode detector's
events (:mod:`ingest.sessions.transcripts` and :mod:`ingest.learning.episode_events` pick this reader by a
file's first line).

Where and how Gemini CLI writes them (https://github.com/google-gemini/gemini-cli,
``packages/core/src/services/chatRecordingService.ts`` and ``chatRecordingTypes.ts``; one JSON
object per line since v0.39.0, one JSON document before):

- ``~/.gemini/tmp/<project>/chats/session-<YYYY-MM-DDTHH-MM>-<id8>.jsonl``
  (``$GEMINI_CLI_HOME`` instead of ``~`` when set); a sub-agent's in
  ``chats/<parent session id>/<its id>.jsonl``. The files name no folder: the project's is in
  ``~/.gemini/tmp/<project>/.project_root`` (``packages/core/src/config/projectRegistry.ts``).
  A hook's ``transcript_path`` is this file.
- The first line is the session's metadata ``{sessionId, projectHash, startTime, lastUpdated,
  kind?, directories?}``. A message is ``{id, timestamp, type, content, displayContent?}``
  (``type`` user | gemini | info | error | warning; ``content`` a string or Gemini API parts);
  a ``gemini`` one also has ``toolCalls: [{id, name, args, result, status, timestamp, …}]``,
  ``thoughts``, ``tokens``, ``model``. A message is appended again, whole, each time it
  changes (its token counts, its tool calls as they complete): the turns it already gave are
  not given twice (their keys are kept, :data:`MAX_SEEN` of them). ``{"$set": {…}}`` lines
  change the metadata (with ``messages``: the whole history again, after a compression or a
  masking of old outputs) and ``{"$rewindTo": id}`` undoes the history from a message on:
  both are passed over (what they re-list was read when it was appended).
- A tool call is written once it completed (``status`` success | error | cancelled), with its
  ``result``; the answer goes back to the model as a ``user`` message of ``functionResponse``
  parts, which is no prompt (parts and shell outputs: :mod:`ingest.sessions.gemini_parts`). What a hook
  added (``<hook_context>…</hook_context>``) is ours, not the user's or the tool's: it is left
  out. So are the user messages Gemini CLI itself drops on resume (``isIgnoredUserContent``:
  empty, or starting with ``/``, ``?``, ``<session_context>``, ``<hook_context>``).

Before v0.39 a session was one pretty-printed JSON document, ``session-….json``, rewritten in
place: :func:`read_document` reads it whole (at most :data:`MAX_DOCUMENT_BYTES`), once per
change (its checkpoint is its size and modification time, recorded only after a read that
parsed; a rewritten file fails the indexer's check of them and is read again from the start,
the same turn ids each time).

A shell call's detector event is keyed by :func:`run_key` (its command, exit code and first
output characters), which the hook's input gives too (Gemini CLI's ``AfterTool`` names no call
id): a command the hook reported is not fed twice when the transcript is read.

Every reader here is bounded (parts and calls per message, text through ``clip``) and passes
over a line of another shape: it never raises on what a file holds.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from ingest.sessions.gemini_parts import (
    MAX_CALLS,
    SHELL,
    call_outcome,
    completed_calls,
    parts_text,
    prompt_text,
    result_text,
    run_key,
    shell_result,
)
from ingest.sessions.transcript_base import (
    Checkpoint,
    ReadResult,
    Turn,
    clip,
    line_hash,
    parse_line,
    str_field,
    tool_turn_text,
)
from ingest.workspace.file_inside import NotRead, read_inside

if TYPE_CHECKING:  # the detector's modules are imported when its events are read
    from ingest.learning.episodes import Event

MESSAGE_TYPES = ("user", "gemini", "info", "error", "warning")
# turn keys remembered (a message appended again gives only what is new): two whole messages'
# (a reply's text and MAX_CALLS calls each, a prompt), so a message appended again never finds
# its own first keys pushed out while it is read
MAX_SEEN = 2 * (MAX_CALLS + 2)
MAX_DOCUMENT_BYTES = 32 * 2**20  # a legacy session document larger than this is skipped
ROOT_BYTES = 4096  # of a .project_root file read
EDITS = {"replace": "Edit", "write_file": "Write"}  # Gemini CLI's edit tools as the detector's
# the arguments that say what a call did, by Gemini CLI's tool names (others: the first scalars)
KEY_ARGS = {
    SHELL: ("command",),
    "read_file": ("file_path",),
    "write_file": ("file_path",),
    "replace": ("file_path",),
    "read_many_files": ("include",),
    "list_directory": ("dir_path",),
    "glob": ("pattern",),
    "grep_search": ("pattern", "dir_path"),
    "google_web_search": ("query",),
    "web_fetch": ("prompt",),
}


def is_gemini(entry: dict) -> bool:
    """A Gemini CLI session line: its metadata, a ``$set`` / ``$rewindTo`` record, or a message
    (``id``, ``type``, ``content`` at the top, no ``message`` and no ``role``)."""
    if "projectHash" in entry and "sessionId" in entry:
        return True
    if "$set" in entry or "$rewindTo" in entry:
        return True
    return (isinstance(entry.get("id"), str) and entry.get("type") in MESSAGE_TYPES
            and "content" in entry and "message" not in entry and "role" not in entry)  # fmt: skip


def is_document(path: Path) -> bool:
    """A legacy session document (``chats/…/*.json``, before v0.39)."""
    return path.suffix == ".json" and "chats" in path.parts


def project_root(path: str | Path) -> str | None:
    """The project folder of a session file, from ``tmp/<project>/.project_root`` (the file is
    in ``chats/`` or, a sub-agent's, in ``chats/<parent>/``): a regular file inside that folder
    of at most :data:`ROOT_BYTES` (:func:`~ingest.workspace.file_inside.read_inside`: opened without
    waiting on a named pipe or following a link); anything else there names no folder."""
    p = Path(path)
    for up in (p.parent.parent, p.parent.parent.parent):
        try:
            data, _ = read_inside(up / ".project_root", [up], ROOT_BYTES)
        except NotRead:
            continue
        text = data.decode("utf-8", "replace").strip()
        if text and "\n" not in text:
            return text
    return None


# --------------------------------------------------------------------------- turns
def _shown_args(name: str, args: object) -> object:
    keys = KEY_ARGS.get(name)
    if keys and isinstance(args, dict):
        return {k: args[k] for k in keys if k in args}
    return args


class GeminiTurns:
    """Parser state of a JSONL session (the interface of ``transcripts_claude.ClaudeCodeTurns``): the
    session's id and the keys of the turns given lately. Every line ends cleanly (nothing waits
    for another line), so every line is a checkpoint."""

    def __init__(self, path: Path, pending: dict | None = None, now: float = 0.0) -> None:
        self.path = Path(path)
        pending = pending if isinstance(pending, dict) else {}
        seen = pending.get("seen")
        seen = seen if isinstance(seen, list) else []
        self.seen = [s for s in seen if isinstance(s, str)][-MAX_SEEN:]
        self.session = str_field(pending.get("session"))
        self.parent = str_field(pending.get("parent"))
        self._cwd: str | None | bool = False  # not looked up yet

    def clean(self) -> bool:
        return True

    def pending(self) -> dict:
        out: dict = {"seen": list(self.seen)} if self.seen else {}
        if self.session:
            out["session"] = self.session
        if self.parent:
            out["parent"] = self.parent
        return out

    def flush_reply(self) -> list[Turn]:
        return []

    def flush_calls(self) -> list[Turn]:
        return []

    def give_up(self, now: float, after_s: float) -> list[Turn]:
        return []

    def cwd(self) -> str | None:
        if self._cwd is False:
            self._cwd = project_root(self.path)
        return self._cwd or None

    def _first(self, key: str) -> bool:
        """True the first time a turn key is met (a message appended again repeats it)."""
        digest = hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()[:16]
        if digest in self.seen:
            return False
        self.seen = [*self.seen, digest][-MAX_SEEN:]
        return True

    def meta(self, e: dict) -> None:
        sid = str_field(e.get("sessionId"))
        if sid and not self.session:
            self.session = sid[:200]
            if e.get("kind") == "subagent" and self.path.parent.name != "chats":
                self.parent = self.path.parent.name[:200]

    def session_name(self) -> str:
        sid = self.session or self.path.stem
        return f"{self.parent}/agent-{sid}" if self.parent else sid

    def _turn(self, e: dict, role: str, text: str, key: str,
              at: str | None = None) -> Turn:  # fmt: skip
        return Turn(self.session_name(), role, text, key, at or str_field(e.get("timestamp")),
                    self.cwd(), None, self.parent)  # fmt: skip

    def feed(self, e: dict) -> list[Turn]:
        if "projectHash" in e and "sessionId" in e:
            self.meta(e)
            return []
        mid = e.get("id")
        if not isinstance(mid, str) or e.get("type") not in ("user", "gemini"):
            return []  # $set, $rewindTo, info / error / warning lines
        out: list[Turn] = []
        if e["type"] == "user":
            text = prompt_text(e)
            if text and self._first(f"{mid}#u"):
                out.append(self._turn(e, "user", clip(text), f"{mid}#u"))
            return out
        text = parts_text(e.get("content"))
        if text and self._first(f"{mid}#a"):
            out.append(self._turn(e, "assistant", clip(text), f"{mid}#a"))
        for call in completed_calls(e):
            key = f"tool:{call['id'][:200]}"
            if not self._first(key):
                continue
            name = call["name"][:200]
            output, failed = call_outcome(call)
            text = tool_turn_text(name, _shown_args(name, call.get("args")), output, failed)
            out.append(self._turn(e, "tool", text, key, str_field(call.get("timestamp"))))
        return out


def entry_turns(e: dict, path: Path) -> list[Turn]:
    """The turns of one line read on its own (a reply looked up from a file's end)."""
    return GeminiTurns(path).feed(e)


def document_mark(st) -> str:
    """What a legacy session document's checkpoint holds: its size and modification time (it
    is rewritten in place, its changes at the top and the end; a rewrite changes the time)."""
    return "doc:" + line_hash(f"{st.st_size}:{st.st_mtime_ns}".encode())


def document_unchanged(path: Path, offset: int, mark: str) -> bool:
    """The document is still the one read to ``offset`` (:func:`document_mark`)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_size == offset and document_mark(st) == mark


def read_document(path: str | Path, offset: int = 0) -> ReadResult:
    """A legacy session document read whole from ``offset`` 0 (later offsets: nothing new; a
    changed document is read again from the start, :func:`document_unchanged`). Its
    checkpoint is its size and modification time, and only after a read that parsed (or of a
    document too large to read): a read that met the file half rewritten (Gemini CLI truncates
    it, then writes) records nothing, so the next read tries again."""
    path = Path(path)
    res = ReadResult("gemini")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return res
    try:
        before = os.fstat(fd)
        if offset != 0 or before.st_size == 0 or not stat.S_ISREG(before.st_mode):
            return res
        data = b""
        if before.st_size <= MAX_DOCUMENT_BYTES:
            chunks, size = [], 0
            while size <= MAX_DOCUMENT_BYTES and (
                chunk := os.read(fd, min(1 << 20, MAX_DOCUMENT_BYTES + 1 - size))
            ):
                chunks.append(chunk)
                size += len(chunk)
            data = b"".join(chunks)
        after = os.fstat(fd)
    except OSError:
        return res
    finally:
        os.close(fd)
    if document_mark(before) != document_mark(after):
        return res  # rewritten while read: the next read tries again
    if not data:  # too large to read: marked as seen until it changes
        res.bad_lines = 1
        res.checkpoints.append(Checkpoint(after.st_size, 0, document_mark(after), 1, {}))
        return res
    doc = parse_line(data) if len(data) == after.st_size else None
    messages = doc.get("messages") if doc is not None else None
    if doc is None or not isinstance(messages, list):
        res.bad_lines = 1  # half written, or not a session: no checkpoint, tried again
        return res
    reader = GeminiTurns(path)
    reader.meta(doc)
    for m in messages:
        if isinstance(m, dict):
            res.turns += reader.feed(m)
    res.checkpoints.append(Checkpoint(after.st_size, len(res.turns), document_mark(after), 1, {}))
    return res


# --------------------------------------------------------------------------- detector events
def events(e: dict, path: Path, prog) -> list[tuple[str, Event]]:
    """(session, event) of one line for the episode detector (``prog``: its
    ``FeedProgress``; the file's session is its first entry in ``prog.sessions``). Prompts and
    replies carry their message's key, tool calls their id (a shell command's
    :func:`run_key`), so a message appended again feeds nothing twice. The project folder is
    set on the line as its ``cwd`` (the detector's ``where`` reads it there)."""
    from ingest.learning.episodes import Event

    if "projectHash" in e and "sessionId" in e:
        sid = str_field(e.get("sessionId"))
        if sid and not prog.sessions:
            reader = GeminiTurns(path)
            reader.meta(e)
            prog.sessions = [reader.session_name()]
        return []
    mid = e.get("id")
    if not isinstance(mid, str) or e.get("type") not in ("user", "gemini"):
        return []
    session = prog.sessions[0] if prog.sessions else path.stem
    if "cwd" not in e and (root := project_root(path)):
        e["cwd"] = root
    at = str_field(e.get("timestamp"))
    if e["type"] == "user":
        text = prompt_text(e)
        if not text:
            return []
        return [(session, Event(kind="prompt", call=f"{mid}#u", at=at, text=text[:500]))]
    out: list[tuple[str, Event]] = []
    text = parts_text(e.get("content"))
    if text:
        out.append((session, Event(kind="say", call=f"{mid}#a", at=at, text=text)))
    for call in completed_calls(e):
        ev = call_event(call)
        if ev is not None:
            out.append((session, ev))
    return out


def call_event(call: dict) -> Event | None:
    """The detector's event of a completed shell or edit call (None for any other)."""
    from ingest.learning.episodes import Event
    from ingest.learning.tool_events import clip_output, tool_event

    name, args = call["name"], call.get("args")
    at = str_field(call.get("timestamp"))
    if name == SHELL and isinstance(args, dict) and isinstance(args.get("command"), str):
        text, error = result_text(call.get("result"))
        errored = error or call.get("status") == "error"  # Gemini CLI's own word
        res = shell_result(text, errored)
        if res.cancelled or res.background:
            return None
        output = f"{res.output}\n{res.error}".strip() if res.error else res.output
        command = args["command"]
        return Event(kind="run", call=run_key(command, res), at=at, command=command,
                     ok=not (res.failed or errored), output=clip_output(output))  # fmt: skip
    if name in EDITS:
        ok = call.get("status") == "success" and not result_text(call.get("result"))[1]
        return tool_event(EDITS[name], args, "", ok, call["id"][:200], at)
    return None
