"""Tool calls as the episode detector's events, the same for every client's transcript and hook.

A finished call is an event (:func:`tool_event`) when it is a shell command (``run``: the
command, whether it succeeded, its output up to :data:`MAX_OUTPUT`: :func:`clip_output`) or a
successful edit (``edit``: the path and a short diff, :func:`edit_hunk`); a call waiting for its
result keeps only the arguments that event needs (:func:`waiting_args`), at most
:data:`MAX_PENDING` calls at once.

The readers of each client (:mod:`ingest.learning.episode_events`,
:mod:`ingest.sessions.transcripts_codex` and its siblings) and the hooks import it.
"""

from __future__ import annotations

import difflib

from ingest.learning.episodes import Event

MAX_OUTPUT = 20_000  # of a command's output: its head and its tail beyond this
HUNK_CHARS = 1200  # of one edit's diff
INPUT_CHARS = 6000  # of a waiting call's string arguments
MAX_PENDING = 64
CUT_DEPTH = 4  # of a waiting call's nested arguments kept
EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
SHELL_TOOLS = frozenset({"Bash", "shell", "run_shell_command", "execute_command"})


def clip_output(text: str) -> str:
    if len(text) <= MAX_OUTPUT:
        return text
    head = MAX_OUTPUT // 5
    return f"{text[:head]}\n… [{len(text) - MAX_OUTPUT} characters left out] …\n{text[-(MAX_OUTPUT - head) :]}"


def _diff(old: str, new: str) -> str:
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=1)
    body = [ln for ln in lines if not ln.startswith(("---", "+++"))]
    return "\n".join(body)


def edit_hunk(tool: str, args: dict) -> str:
    """A short diff of what an edit call changed (a new file: its first lines)."""
    if tool == "MultiEdit":
        parts = [_diff(str(e.get("old_string", "")), str(e.get("new_string", "")))
                 for e in args.get("edits") or [] if isinstance(e, dict)]  # fmt: skip
        text = "\n".join(p for p in parts if p)
    elif tool == "Edit":
        text = _diff(str(args.get("old_string", ""))[:INPUT_CHARS],
                     str(args.get("new_string", ""))[:INPUT_CHARS])  # fmt: skip
    else:
        body = str(args.get("content") or args.get("new_source") or "")
        text = "\n".join("+" + ln for ln in body.splitlines()[:15])
    return text[:HUNK_CHARS]


def edit_path(args: dict) -> str:
    return str(args.get("file_path") or args.get("notebook_path") or args.get("path") or "")


def tool_event(tool: str, args: object, output: str, ok: bool, call: str = "",
               at: str | None = None) -> Event | None:  # fmt: skip
    """The event of one finished tool call (None: a call the detector does not follow)."""
    if not isinstance(args, dict):
        return None
    if tool in SHELL_TOOLS and isinstance(args.get("command"), str):
        return Event(kind="run", call=call, at=at, command=args["command"], ok=ok,
                     output=clip_output(output))  # fmt: skip
    if tool in EDIT_TOOLS and ok and edit_path(args):
        return Event(kind="edit", call=call, at=at, path=edit_path(args),
                     hunk=edit_hunk(tool, args))  # fmt: skip
    return None


def waiting_args(tool: str, args: object) -> dict:
    """The arguments of a waiting call the detector needs, strings clipped."""
    if not isinstance(args, dict) or not (tool in SHELL_TOOLS or tool in EDIT_TOOLS):
        return {}

    def cut(v, depth: int = 0):
        if isinstance(v, str):
            return v[:INPUT_CHARS]
        if depth >= CUT_DEPTH and isinstance(v, list | dict):
            return None
        if isinstance(v, list):
            return [cut(x, depth + 1) for x in v[:20]]
        if isinstance(v, dict):
            return {k: cut(x, depth + 1) for k, x in list(v.items())[:20]}
        return v

    return {k: cut(v) for k, v in args.items() if k != "description"}
