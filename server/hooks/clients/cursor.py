"""Cursor (1.7 and later): its agent hooks translated to our handlers, and its MCP server entry.

Where each part comes from:

- hooks: https://cursor.com/docs/agent/hooks. ``.cursor/hooks.json`` of the project (run from
  the project root, in a trusted workspace) or ``~/.cursor/hooks.json`` (run from
  ``~/.cursor/``), ``{"version": 1, "hooks": {EVENT: [{"command": …, "timeout": SECONDS,
  "matcher": …}]}}``. Every input carries ``conversation_id``, ``generation_id``,
  ``hook_event_name``, ``cursor_version``, ``workspace_roots`` and ``transcript_path`` (null
  when transcripts are off); a hook that crashes, times out or prints no valid JSON lets the
  action through (``failClosed`` is false by default).
- payloads as a running Cursor sends them (cursor-agent 2026.10.01, captured in
  https://github.com/forgeprint/forgelore/tree/main/testdata/agents/cursor, Apache-2.0): every
  event also carries ``session_id`` (the conversation's id); a shell command's result comes
  twice, as ``afterShellExecution`` (command and output, no exit status) and as ``postToolUse``
  (``tool_name`` ``Shell``, ``tool_output`` a JSON string ``{"output", "exitCode"}``) or, when
  it exits non-zero, ``postToolUseFailure`` (``error_message`` holds its output).
- MCP: https://cursor.com/docs/mcp. ``.cursor/mcp.json`` of the project or ``~/.cursor/mcp.json``,
  ``{"mcpServers": {NAME: {"command": …, "args": […]}}}``.

What each event feeds:

========================  ===================  ========================================
Cursor event              our handler          answer (stdout)
========================  ===================  ========================================
sessionStart              SessionStart         ``{"additional_context": briefing}``
beforeSubmitPrompt        UserPromptSubmit     ``{"continue": true}``: no context field
postToolUse (Shell)       PostToolUse          ``{"additional_context": lessons}``
postToolUseFailure        PostToolUseFailure   the same (undocumented: see below)
afterFileEdit             PostToolUse (edit)   ``{}``
preCompact                PreCompact           ``{}``
stop                      Stop                 ``{}`` (never a follow-up message)
sessionEnd                SessionEnd           ``{}``
========================  ===================  ========================================

The shell's results are read from ``postToolUse`` / ``postToolUseFailure`` and not from
``afterShellExecution``: one command fires both, and only the tool events carry an exit status
and a call id. Cursor documents no output for ``postToolUseFailure``; ``additional_context`` is
printed all the same (reported to reach the model by the capture above), and a build that
ignores it loses only the lesson's text. Every answer is a JSON object, ``{}`` when there is
nothing to say: Cursor reads an empty stdout as a failed hook (and goes on).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from . import config_files as cf
from .spec import Binding, ClientSpec, ConfigFile, Installer

NAME = "cursor"
TIMEOUT_S = 10  # seconds (Cursor's unit); ours is PATTERN_HOOK_DEADLINE (1.5 s)
SHELL = "Shell"  # Cursor's shell tool, as its tool hooks name it
BINDINGS = (
    Binding("sessionStart", "SessionStart"),
    Binding("beforeSubmitPrompt", "UserPromptSubmit"),
    Binding("postToolUse", "PostToolUse", SHELL),
    Binding("postToolUseFailure", "PostToolUseFailure", SHELL),
    Binding("afterFileEdit", "PostToolUse"),
    Binding("preCompact", "PreCompact"),
    Binding("stop", "Stop"),
    Binding("sessionEnd", "SessionEnd"),
)
CONTEXT_EVENTS = frozenset({"sessionStart", "postToolUse", "postToolUseFailure"})
MAX_EDITS = 50  # of one afterFileEdit's edits read
EDIT_CHARS = 6000  # of each edit's old and new text (the detector's diff reads as much)
FAILURES_SKIPPED = frozenset({"permission_denied"})  # a refusal, not a failing command
OUTPUT_TEXTS = ("output", "stdout", "stderr")  # the text fields of a Shell tool_output
OUTPUT_CODE = '"exitCode":'
LOST = (
    "per-prompt recall: beforeSubmitPrompt can only let the prompt through or block it (no "
    "context field); the prompt is recorded, and memories reach the agent at the session's "
    "start and after a failed command",
    "lessons after a failed command rely on additional_context in postToolUseFailure's "
    "answer, which Cursor's documentation lists no output for",
    "no session-start source (resume, clear, compact): the injected-memory ledger is not reset "
    "after a compaction",
    "transcripts hold no tool results and no times: indexed tool calls have no results, and "
    "the episode detector reads commands and edits from the hooks alone",
    "Cursor builds without the generic tool hooks (postToolUse, postToolUseFailure) give no "
    "command results: no lessons after failures and no learning from fixes",
    "cloud agents run no sessionStart, beforeSubmitPrompt or stop hooks, and no user-level "
    "hooks (~/.cursor/hooks.json)",
)


# --------------------------------------------------------------------------- input
def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _base(data: dict) -> dict:
    """The fields every event maps to: the session, its transcript, its folder."""
    roots = data.get("workspace_roots")
    root = next((r for r in roots if _str(r)), None) if isinstance(roots, list) else None
    out = {
        "session_id": _str(data.get("session_id")) or _str(data.get("conversation_id")),
        "transcript_path": _str(data.get("transcript_path")),
        "cwd": _str(data.get("cwd")) or root,
    }
    return {k: v for k, v in out.items() if v is not None}


def _command(data: dict) -> str | None:
    """The shell command of a tool event (``tool_input.command`` of the Shell tool)."""
    if data.get("tool_name") != SHELL or not isinstance(data.get("tool_input"), dict):
        return None
    return _str(data["tool_input"].get("command"))


def _exit_code(text: str) -> int | None:
    """The ``"exitCode":N`` a result's JSON text ends with, read without parsing it (a long
    output reaches us cut in its middle, which no JSON parser reads)."""
    at = text.rfind(OUTPUT_CODE)
    if at < 0:
        return None
    digits = text[at + len(OUTPUT_CODE) :].lstrip()[:12]
    n = len(digits) - len(digits.lstrip("-0123456789"))
    try:
        return int(digits[:n]) if n else None
    except ValueError:
        return None


def _tool_output(raw: object) -> dict | str | None:
    """``tool_output``: a JSON string of the tool's result (``{"output", "exitCode"}`` for the
    Shell tool, ``stdout`` in the documentation's example): those fields; the text itself (and
    its exit status when it names one) when it does not parse."""
    if not isinstance(raw, str):
        return None
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):
        parsed = None
    if not isinstance(parsed, dict):
        code = _exit_code(raw)
        return raw if code is None else {"output": raw, "exitCode": code}
    out: dict = {k: parsed[k] for k in OUTPUT_TEXTS if isinstance(parsed.get(k), str)}
    code = parsed.get("exitCode")
    if isinstance(code, int) and not isinstance(code, bool):
        out["exitCode"] = code
    return out


def _edits(raw: object) -> list[dict]:
    if not isinstance(raw, list):
        return []
    out = []
    for e in raw[:MAX_EDITS]:
        if isinstance(e, dict):
            out.append({k: e[k][:EDIT_CHARS] for k in ("old_string", "new_string")
                        if isinstance(e.get(k), str)})  # fmt: skip
    return out


def to_input(event: str, data: dict) -> tuple[str, dict] | None:
    """(our handler, its input) of one Cursor hook event; None: nothing of ours to do."""
    if not isinstance(data, dict):
        return None
    inp = _base(data)
    if event == "sessionStart":
        return "SessionStart", inp
    if event == "beforeSubmitPrompt":
        prompt = data.get("prompt")
        return ("UserPromptSubmit", {**inp, "prompt": prompt}) if isinstance(prompt, str) else None
    if event in ("postToolUse", "postToolUseFailure"):
        command = _command(data)
        if command is None:
            return None  # another tool (the matcher is the client's to honour)
        inp |= {"tool_name": "Bash", "tool_input": {"command": command}}
        if _str(data.get("tool_use_id")):
            inp["tool_use_id"] = data["tool_use_id"]
        if event == "postToolUse":
            return "PostToolUse", {**inp, "tool_response": _tool_output(data.get("tool_output"))}
        if data.get("failure_type") in FAILURES_SKIPPED:
            return None
        error = data.get("error_message")
        inp["error"] = error if isinstance(error, str) else ""
        if isinstance(data.get("is_interrupt"), bool):
            inp["is_interrupt"] = data["is_interrupt"]
        return "PostToolUseFailure", inp
    if event == "afterFileEdit":
        path = _str(data.get("file_path"))
        if path is None:
            return None
        edit = {"file_path": path, "edits": _edits(data.get("edits"))}
        return "PostToolUse", {**inp, "tool_name": "MultiEdit", "tool_input": edit}
    if event == "preCompact":
        trigger = _str(data.get("trigger"))
        return "PreCompact", ({**inp, "trigger": trigger} if trigger else inp)
    if event == "stop":
        return "Stop", inp
    if event == "sessionEnd":
        reason = _str(data.get("reason"))
        return "SessionEnd", ({**inp, "reason": reason} if reason else inp)
    return None


# --------------------------------------------------------------------------- output
def to_output(event: str, text: str) -> dict | None:
    """The JSON Cursor reads on stdout: the text as ``additional_context`` where an event takes
    one, ``{"continue": true}`` for a prompt, else ``{}`` (an answer with nothing in it)."""
    if event == "beforeSubmitPrompt":
        return {"continue": True}
    if event in CONTEXT_EVENTS:
        return {"additional_context": text} if text else {}
    return {} if event in {b.client_event for b in BINDINGS} else None


# --------------------------------------------------------------------------- install
is_ours = cf.ours_by("command")
TOP = {"version": 1}


def cursor_dir() -> Path:
    return Path.home() / ".cursor"


def hooks_path(scope: str, project: Path) -> Path:
    return (cursor_dir() if scope == "user" else project / ".cursor") / "hooks.json"


def mcp_path(scope: str, project: Path) -> Path:
    return (cursor_dir() if scope == "user" else project / ".cursor") / "mcp.json"


def wanted_hooks() -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for b in BINDINGS:
        hook = {"command": cf.hook_command(NAME, b.client_event), "timeout": TIMEOUT_S}
        if b.matcher is not None:
            hook["matcher"] = b.matcher
        out.setdefault(b.client_event, []).append(hook)
    return out


INSTALLER = Installer(
    files=(
        cf.flat_file(
            hooks_path, wanted_hooks, is_ours, [b.client_event for b in BINDINGS], top=TOP
        ),
        ConfigFile("server", mcp_path, cf.with_server, cf.without_server, cf.server_present),
    ),
    note="project hooks run only in a trusted workspace; Cursor reloads hooks.json on save",
)


def detect() -> bool:
    """Cursor's folder in the home directory, or its editor or agent command on PATH."""
    return (cursor_dir().is_dir() or shutil.which("cursor") is not None
            or shutil.which("cursor-agent") is not None)  # fmt: skip


SPEC = ClientSpec(name=NAME, title="Cursor", bindings=BINDINGS, to_input=to_input,
                  to_output=to_output, installer=INSTALLER, detect=detect, lost=LOST)  # fmt: skip
