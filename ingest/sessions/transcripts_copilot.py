"""GitHub Copilot CLI's session files read as conversation turns and as the episode
detector's events (:mod:`ingest.sessions.transcripts` and :mod:`ingest.learning.episode_events` pick this reader
by a file's first line).

Where they are: ``~/.copilot/session-state/<session id>/events.jsonl`` (``$COPILOT_HOME``
instead of ``~/.copilot`` when set), "an event log (``events.jsonl``)" per session
(https://docs.github.com/en/copilot/reference/copilot-cli-reference/cli-config-dir-reference);
the ``agentStop`` and ``preCompact`` hooks name the file as ``transcriptPath``
(https://docs.github.com/en/copilot/reference/copilot-cli-reference/cli-hooks-reference).

The lines are the CLI's session events, whose schema is published with its SDK
(https://github.com/github/copilot-sdk, ``nodejs/src/generated/session-events.ts``, MIT):
``{"type", "data", "id", "parentId", "timestamp"}`` (ISO 8601), plus ``agentId`` on a
sub-agent's events. We read:

- ``session.start``: ``data.sessionId``, ``data.context.cwd`` / ``.branch`` (the file's first
  line: the session and its folder for every turn);
- ``user.message``: ``data.content`` (the prompt as typed; ``transformedContent`` holds what
  hooks added, which is not the user's);
- ``assistant.message``: ``data.content`` (consecutive ones joined into one reply);
- ``tool.execution_start``: ``data.toolCallId``, ``toolName``, ``arguments`` (an object);
- ``tool.execution_complete``: ``data.toolCallId``, ``success``, ``result.content`` /
  ``result.detailedContent``, ``error.message``, and for the shell ``shellExecution.exitCode``.

What the schema does not say and files written by Copilot CLI 1.0.102 show (see
``tests/fixtures/clients/copilot/SOURCES.md``): the shell tool ``bash`` (``powershell`` on
Windows) takes ``{"command", "description"}`` and its output ends with a line
``<shellId: N completed with exit code K>``; a command that exits non-zero is still a
successful tool call (``success: true``); ``edit`` takes ``{"path", "old_str", "new_str"}`` and
``create`` ``{"path", "file_text"}``; text a ``postToolUse`` hook added is appended to
``result.content`` after ``\\n\\nTool "NAME" succeeded. Additional guidance from …`` (cut here:
it is ours, not the tool's). Those tools are named as Claude Code's (``Bash``, ``Edit``,
``Write``, with its argument names), so turns and episodes read alike across clients.

Bounds are :func:`ingest.sessions.transcripts.read_turns`' (lines, time, waiting calls); a line of another
shape or with a mistyped field is passed over, never an error; every search is a plain string
operation.
"""

from __future__ import annotations

import json
from pathlib import Path

from ingest.learning.episodes import Event
from ingest.learning.tool_events import MAX_PENDING, tool_event, waiting_args
from ingest.sessions.transcript_base import Turn, clip, str_field, tool_turn_text
from ingest.sessions.transcripts_claude import ClaudeCodeTurns, small_args

FILE_NAME = "events.jsonl"
SHELL_TOOLS = ("bash", "powershell")
# Copilot CLI's tool -> (Claude Code's name, {its argument: Claude Code's})
TOOLS: dict[str, tuple[str, dict[str, str]]] = {
    "bash": ("Bash", {"command": "command"}),
    "powershell": ("Bash", {"command": "command"}),
    "edit": ("Edit", {"path": "file_path", "old_str": "old_string", "new_str": "new_string"}),
    "create": ("Write", {"path": "file_path", "file_text": "content"}),
}
TRAILER = ("<shellId:", "completed with exit code ")
GUIDANCE = ('\n\nTool "', "Additional guidance from ")
HEAD_BYTES = 1024 * 1024  # of a file's start, read for its session.start line
_HEADS: dict[str, dict] = {}  # path -> its session.start facts (the first line never changes)
MAX_HEADS = 64


def is_copilot(entry: dict) -> bool:
    """A session event: a dotted ``type`` (``session.start``, ``user.message``, …) and a
    ``data`` object (Claude Code's types have no dot; no other format has ``data``)."""
    kind = entry.get("type")
    return isinstance(kind, str) and "." in kind and isinstance(entry.get("data"), dict)


def session_of(path: Path) -> str:
    """A file's session when its first line does not say: its folder's name (the session id)."""
    return path.parent.name if path.name == FILE_NAME and path.parent.name else path.stem


def start_facts(entry: dict) -> dict:
    """{session, cwd, branch} a ``session.start`` (or ``session.resume``) names."""
    data = entry.get("data") if isinstance(entry.get("data"), dict) else {}
    ctx = data.get("context") if isinstance(data.get("context"), dict) else {}
    facts = {"session": str_field(data.get("sessionId")), "cwd": str_field(ctx.get("cwd")),
             "branch": str_field(ctx.get("branch"))}  # fmt: skip
    return {k: v for k, v in facts.items() if v}


def entry_cwd(entry: dict) -> str | None:
    """The folder a session's start names (None for any other line)."""
    if entry.get("type") in ("session.start", "session.resume"):
        return start_facts(entry).get("cwd")
    return None


def head(path: Path) -> dict:
    """{session, cwd, branch} of a file's first line (remembered per file once read)."""
    key = str(path)
    if key in _HEADS:
        return _HEADS[key]
    try:
        if not path.is_file():
            return {}
        with open(path, "rb") as fh:
            first = fh.read(HEAD_BYTES).split(b"\n", 1)[0]
        e = json.loads(first)
    except (OSError, ValueError, RecursionError):
        return {}
    facts = start_facts(e) if isinstance(e, dict) and e.get("type") == "session.start" else {}
    if facts:
        while len(_HEADS) >= MAX_HEADS:
            del _HEADS[next(iter(_HEADS))]
        _HEADS[key] = facts
    return facts


def as_claude(tool: str, args: object) -> tuple[str, object]:
    """Copilot CLI's shell and edit tools as Claude Code's (name and argument names); other
    tools as they are."""
    known = TOOLS.get(tool)
    if known is None or not isinstance(args, dict):
        return tool, args
    name, names = known
    return name, {ours: args[theirs] for theirs, ours in names.items()
                  if isinstance(args.get(theirs), str)}  # fmt: skip


def split_trailer(text: str) -> tuple[str, int | None]:
    """(output without its ``<shellId: N completed with exit code K>`` last line, K)."""
    body, _, last = text.rstrip().rpartition("\n")
    if not (last.startswith(TRAILER[0]) and last.endswith(">") and TRAILER[1] in last):
        return text, None
    digits = last[last.rindex(TRAILER[1]) + len(TRAILER[1]) : -1].strip()
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 6):
        return text, None
    return body, int(digits)


def without_guidance(text: str) -> str:
    """A tool result without the text ``postToolUse`` hooks appended to it."""
    at = text.rfind(GUIDANCE[0])
    if at >= 0 and GUIDANCE[1] in text[at:]:
        return text[:at]
    return text


def shell_output(text: str, code: int | None) -> tuple[str, int | None]:
    """(the shell tool's output with the exit status said in words, the status): the CLI's
    trailer line goes, a non-zero status is named."""
    body, said = split_trailer(text)
    code = code if code is not None else said
    if code:
        body = f"{body.rstrip()}\n(exit code {code})".lstrip("\n")
    return body, code


def completion(data: dict, tool: str) -> tuple[str, bool]:
    """(output, ok) of a ``tool.execution_complete``'s data for the tool ``tool``."""
    result = data.get("result") if isinstance(data.get("result"), dict) else {}
    error = data.get("error") if isinstance(data.get("error"), dict) else {}
    content = str_field(result.get("content"))
    text = without_guidance(content) if content is not None else (
        str_field(result.get("detailedContent")) or "")  # fmt: skip
    ok = data.get("success") is True
    if not ok and str_field(error.get("message")):
        text = f"{error['message']}\n{text}".strip()
    if tool in SHELL_TOOLS:
        shell = data.get("shellExecution") if isinstance(data.get("shellExecution"), dict) else {}
        code = shell.get("exitCode")
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        text, code = shell_output(text, code)
        ok = ok and not code
    return text, ok


def _session(e: dict, path: Path, facts: dict) -> tuple[str, str | None]:
    """(the session, its parent's) of an event: a sub-agent's is ``<session>/agent-<id>``."""
    sid = facts.get("session") or session_of(path)
    agent = str_field(e.get("agentId"))
    return (f"{sid}/agent-{agent[:200]}", sid) if agent else (sid, None)


class CopilotTurns(ClaudeCodeTurns):
    """Parser state of a Copilot CLI session file: the reply being read and the calls waiting
    for their results (the Claude Code parser's, whose bookkeeping it shares)."""

    def __init__(self, path: Path, pending: dict | None = None, now: float = 0.0) -> None:
        super().__init__(path, pending, now)
        self.facts = head(path)

    def _turn(self, e: dict, role: str, text: str, key: str) -> Turn:
        session, parent = _session(e, self.path, self.facts)
        return Turn(session, role, text, key, str_field(e.get("timestamp")),
                    self.facts.get("cwd"), self.facts.get("branch"), parent)  # fmt: skip

    def feed(self, e: dict) -> list[Turn]:
        if not is_copilot(e):
            return []
        kind, data = e["type"], e["data"]
        if kind == "assistant.message":
            text = str_field(data.get("content"))
            return self.add_reply(e, text) if text and text.strip() else []
        out = self.flush_reply()
        cid = str_field(data.get("toolCallId"))
        if kind == "tool.execution_start" and cid:
            name, args = as_claude(str(data.get("toolName") or "tool")[:200], data.get("arguments"))
            entry = {k: e[k] for k in ("agentId", "timestamp", "_at") if isinstance(e.get(k), str)}
            self.calls[cid[:200]] = {"name": name, "args": small_args(name, args),
                                     "entry": entry, "seen": self.now, "tool": data.get("toolName")}  # fmt: skip
            if len(self.calls) > 256:  # transcripts_claude.MAX_WAITING
                out += self._abandon(list(self.calls)[: len(self.calls) - 256])
        elif kind == "tool.execution_complete" and cid:
            call = self.calls.pop(cid[:200], None) or self.gave_up.pop(cid[:200], None)
            name, args = (call["name"], call["args"]) if call else ("tool", None)
            tool = str((call or {}).get("tool") or ("bash" if name == "Bash" else name))
            text, ok = completion(data, tool)
            out.append(self._turn(e, "tool", tool_turn_text(name, args, text, not ok),
                                  f"tool:{cid[:200]}"))  # fmt: skip
        elif kind == "user.message":
            text = str_field(data.get("content"))
            if text and text.strip():
                out.append(self._turn(e, "user", clip(text), f"{e.get('id') or e.get('_at')}#u"))
        return out


def copilot_events(e: dict, path: Path, prog, now: float | None = None) -> list[tuple[str, Event]]:
    """(session, event) of one line, for the episode detector (``prog``: its
    :class:`~ingest.learning.episode_events.FeedProgress`): a prompt, a reply, a finished shell command
    (``run``) or a successful edit. The session's folder and branch are set on ``e`` (``cwd``,
    ``gitBranch``) for :func:`ingest.learning.episode_events.where`."""
    import time

    if not is_copilot(e):
        return []
    facts = head(path)
    for ours, theirs in (("cwd", "cwd"), ("gitBranch", "branch")):
        if facts.get(theirs):
            e[ours] = facts[theirs]
    session, _ = _session(e, path, facts)
    kind, data, at = e["type"], e["data"], str_field(e.get("timestamp"))
    if kind == "user.message":
        text = str_field(data.get("content")) or ""
        return [(session, Event(kind="prompt", at=at, text=text[:500]))] if text.strip() else []
    if kind == "assistant.message":
        text = str_field(data.get("content")) or ""
        return [(session, Event(kind="say", at=at, text=text))] if text.strip() else []
    cid = str_field(data.get("toolCallId"))
    if not cid:
        return []
    if kind == "tool.execution_start":
        tool = str_field(data.get("toolName")) or ""
        if tool in TOOLS:
            name, args = as_claude(tool, data.get("arguments"))
            prog.pending[cid[:200]] = {"name": name, "args": waiting_args(name, args), "tool": tool,
                                       "entry": {"timestamp": at},
                                       "seen": time.time() if now is None else now}  # fmt: skip
            while len(prog.pending) > MAX_PENDING:
                del prog.pending[next(iter(prog.pending))]
        return []
    if kind == "tool.execution_complete":
        call = prog.pending.pop(cid[:200], None)
        if call is None:
            return []
        text, ok = completion(data, str(call.get("tool") or ""))
        ev = tool_event(call["name"], call["args"], text, ok, cid[:200], at)
        return [(session, ev)] if ev is not None else []
    return []


def find_call(path: Path, tool: str, args: object, max_bytes: int = 262_144) -> str | None:
    """The id of the last call of ``tool`` with ``args`` that the file shows started and not
    yet finished (a hook fires between the two), read from the file's last ``max_bytes``;
    None when there is none, or the call is a sub-agent's."""
    try:
        if path.suffix != ".jsonl" or not path.is_file():  # never a FIFO or a device
            return None
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(0, size - max_bytes))
            data = fh.read(max_bytes)
    except (OSError, ValueError):  # ValueError: a NUL in the name
        return None
    finished: set[str] = set()
    for raw in reversed(data.split(b"\n")):
        if b'"tool.execution_' not in raw:
            continue
        try:
            e = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if not isinstance(e, dict) or not is_copilot(e):
            continue
        cid = str_field(e["data"].get("toolCallId"))
        if not cid:
            continue
        if e["type"] == "tool.execution_complete":
            finished.add(cid)
        elif e["type"] == "tool.execution_start" and cid not in finished:
            if e["data"].get("toolName") == tool and e["data"].get("arguments") == args:
                return None if e.get("agentId") else cid
    return None
