"""Gemini CLI: its hook events translated to our handlers, our answers to its output JSON, and
its ``settings.json`` entries.

What Gemini CLI reads and sends (https://github.com/google-gemini/gemini-cli:
``docs/hooks/reference.md``, ``docs/hooks/index.md``, ``packages/core/src/hooks/types.ts``,
``hookEventHandler.ts``, ``hookRunner.ts``, ``hookPlanner.ts``; MCP servers:
``docs/reference/configuration.md``; https://geminicli.com/docs/hooks/reference):

- hooks: ``.gemini/settings.json`` of the project (run only in a trusted folder) or
  ``~/.gemini/settings.json`` (``$GEMINI_CLI_HOME`` instead of ``~`` when set), under
  ``"hooks": {EVENT: [{"matcher": …, "hooks": [{"type": "command", "command": …, "name": …,
  "timeout": MILLISECONDS}]}]}``. A tool event's matcher is a regular expression on the tool's
  name, a lifecycle event's an exact source (none: every one). Hooks are on unless
  ``hooksConfig.enabled`` is false.
- every input has ``session_id``, ``transcript_path`` (the session's JSONL file, ``""`` when
  nothing is recorded), ``cwd``, ``hook_event_name``, ``timestamp``; ``SessionStart`` adds
  ``source`` (startup | resume | clear), ``BeforeAgent`` ``prompt``, ``AfterTool``
  ``tool_name``, ``tool_input``, ``tool_response`` (``{llmContent, returnDisplay, error?}``:
  the tool's result before a hook's context is added), ``PreCompress`` ``trigger``
  (auto | manual), ``SessionEnd`` ``reason``, ``AfterAgent`` ``prompt``, ``prompt_response``.
- output on stdout, exit 0: ``{"hookSpecificOutput": {"hookEventName": EVENT,
  "additionalContext": TEXT}}`` adds context on ``SessionStart`` (the first turn), ``BeforeAgent``
  (appended to the prompt) and ``AfterTool`` (appended to the tool's result); Gemini CLI escapes
  ``<`` and ``>`` in it. ``PreCompress``, ``SessionEnd`` and ``AfterAgent`` take none from us.
  An exit status other than 0 and 1 is a *block* (stderr the reason), and stderr is read as the
  output when stdout is empty: so every command we install sends stderr nowhere and ends in
  ``|| true`` (a hook client that cannot even start never blocks a prompt).
- the MCP server: ``"mcpServers": {NAME: {"command": …, "args": […]}}`` in the same file.

A shell command's result reaches us through ``AfterTool`` (matcher ``^run_shell_command$``):
its output is read back from the tool's text (``server/service/prompting/gemini_shell.py``),
a failure (an exit status, a timeout, an error) goes to the failure handler, a success to the
tool handler; a command cancelled by the user or moved to the background is no result. Gemini
CLI gives a hook no call id, so the key is ``ingest.sessions.gemini_parts.run_key``'s, the one
the transcript reader gives the same call.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from server.service.prompting.gemini_shell import SHELL, shell_call

from . import config_files as cf
from .spec import Binding, ClientSpec, ConfigFile, Installer

NAME = "gemini"
HOOK_NAME = "pattern-memory"  # /hooks disable pattern-memory turns ours off
TIMEOUT_MS = 10_000  # Gemini CLI's limit; ours is PATTERN_HOOK_DEADLINE (1.5 s)
SHELL_MATCHER = f"^{SHELL}$"
BINDINGS = (
    Binding("SessionStart", "SessionStart"),
    Binding("BeforeAgent", "UserPromptSubmit"),
    Binding("AfterTool", "PostToolUse", SHELL_MATCHER),  # failures: PostToolUseFailure
    Binding("PreCompress", "PreCompact"),
    Binding("AfterAgent", "Stop"),
    Binding("SessionEnd", "SessionEnd"),
)
HANDLER = {b.client_event: b.handler for b in BINDINGS}
CONTEXT_EVENTS = ("SessionStart", "BeforeAgent", "AfterTool")  # those that add context
SOURCES = ("startup", "resume", "clear")
LOST = (
    "no event after a compression: the briefing is not given again in a compressed session "
    "(PreCompress only indexes)",
    "AfterTool names no call id: a command's result is matched to the transcript by its "
    "command, status and output (two identical runs count once)",
    "additionalContext has its < and > escaped by Gemini CLI",
    "project hooks run only in a trusted folder",
    "a sub-agent's session is indexed by index-sessions, not when the session ends",
)


def _str(data: dict, key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) and value else None


def _base(data: dict, handler: str) -> dict:
    out: dict = {"hook_event_name": handler}
    for key in ("session_id", "transcript_path", "cwd"):
        if (value := _str(data, key)) is not None:
            out[key] = value
    return out


def _shell(data: dict) -> tuple[str, dict] | None:
    """An ``AfterTool`` of the shell tool as our tool handler's input, or the failure
    handler's; None: not a shell call with a result."""
    call = shell_call(data.get("tool_name"), data.get("tool_input"), data.get("tool_response"))
    if call is None or call.result.cancelled or call.result.background:
        return None
    res = call.result
    inp = {**_base(data, "PostToolUse"), "tool_name": SHELL, "tool_input": data["tool_input"],
           "tool_use_id": call.key}  # fmt: skip
    if not res.failed:
        return "PostToolUse", {**inp, "tool_response": {"stdout": res.output, "exit_code": 0}}
    parts = [res.output, res.error]
    if res.exit_code not in (None, 0):
        parts.append(f"Exit Code: {res.exit_code}")
    error_text = "\n".join(p for p in parts if p).strip() or "(no output)"
    return "PostToolUseFailure", {**inp, "hook_event_name": "PostToolUseFailure",
                                  "error": error_text, "is_interrupt": False}  # fmt: skip


def to_input(event: str, data: dict) -> tuple[str, dict] | None:
    """Gemini CLI's hook JSON as our handler's input (fields it lacks are left out)."""
    handler = HANDLER.get(event)
    if handler is None or not isinstance(data, dict):
        return None
    inp = _base(data, handler)
    if event == "SessionStart":
        if data.get("source") in SOURCES:
            inp["source"] = data["source"]
    elif event == "BeforeAgent":
        if isinstance(data.get("prompt"), str):
            inp["prompt"] = data["prompt"]
    elif event == "AfterTool":
        return _shell(data)
    elif event == "PreCompress":
        if isinstance(data.get("trigger"), str):
            inp["trigger"] = data["trigger"]
    elif event == "SessionEnd":
        if isinstance(data.get("reason"), str):
            inp["reason"] = data["reason"]
    return handler, inp


def to_output(event: str, text: str) -> dict | None:
    if not text or event not in CONTEXT_EVENTS:
        return None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


# --------------------------------------------------------------------------- install
def gemini_home() -> Path:
    """``~/.gemini`` (``$GEMINI_CLI_HOME/.gemini`` when set, as Gemini CLI's ``homedir()``)."""
    return Path(os.environ.get("GEMINI_CLI_HOME") or Path.home()) / ".gemini"


def settings_path(scope: str, project: Path) -> Path:
    if scope == "user":
        return gemini_home() / "settings.json"
    return project / ".gemini" / "settings.json"


def hook_command(event: str) -> str:
    """The hook client's command; on POSIX its stderr goes nowhere and its status is 0 even if
    the interpreter is gone (Gemini CLI runs it with ``bash -c``; a status of 2 would block)."""
    command = cf.hook_command(NAME, event)
    return command if os.name == "nt" else f"{command} 2>/dev/null || true"


is_ours = cf.ours_by("command")


def wanted_groups() -> dict[str, list[dict]]:
    return cf.matcher_groups(BINDINGS, lambda b: {
        "name": HOOK_NAME, "type": "command", "command": hook_command(b.client_event),
        "timeout": TIMEOUT_MS})  # fmt: skip


INSTALLER = Installer(files=(
    cf.groups_file(settings_path, wanted_groups, is_ours, HANDLER),
    ConfigFile("server", settings_path, cf.with_server, cf.without_server, cf.server_present),
))  # fmt: skip


# The extension's hooks (packaging/gemini/hooks/hooks.json; Gemini CLI reads an extension's
# hooks from <extension>/hooks/hooks.json and substitutes ${extensionPath} in them,
# docs/extensions/reference.md). The extension is a copy of this repository: its hook client
# runs with the system's python3 (standard library only); until the extension's MCP server
# (uvx) has started the store's daemon, a hook finds none and prints nothing.
# the system's python3 has none of the project's packages: it never starts the daemon
# (PATTERN_HOOK_SPAWN=0), the extension's MCP server (uvx) does
EXTENSION_HOOK = ('PATTERN_HOOK_SPAWN=0 python3 -S "${extensionPath}/server/hooks/hookclient.py"'
                  " --client gemini ")  # fmt: skip


def extension_hooks() -> dict:
    """The extension's ``hooks/hooks.json`` document (a test keeps the file equal to it)."""
    return {"hooks": cf.matcher_groups(BINDINGS, lambda b: {
        "name": HOOK_NAME, "type": "command", "timeout": TIMEOUT_MS,
        "command": f"{EXTENSION_HOOK}{b.client_event} 2>/dev/null || true"})}  # fmt: skip


def session_files(home: Path | None = None) -> list[Path]:
    """Gemini CLI's sessions on this machine (``index-sessions``' default paths; the files
    ``ingest/sessions/transcripts_gemini.py`` reads): ``tmp/*/chats/session-*.jsonl``, sub-agents'
    ``tmp/*/chats/*/*.jsonl``, and the ``session-*.json`` documents of builds before v0.39 that
    have no ``.jsonl`` copy (Gemini CLI writes one when it resumes such a session). ``home``:
    the ``.gemini`` folder (:func:`gemini_home`). Regular files only (a named pipe there
    would block its reader)."""
    chats = (gemini_home() if home is None else home) / "tmp"
    found = [*chats.glob("*/chats/session-*.jsonl"), *chats.glob("*/chats/*/*.jsonl")]
    found += [
        p for p in chats.glob("*/chats/session-*.json") if not p.with_suffix(".jsonl").exists()
    ]
    return sorted(p for p in found if p.is_file())


def detect() -> bool:
    return gemini_home().is_dir() or shutil.which("gemini") is not None


SPEC = ClientSpec(name=NAME, title="Gemini CLI", bindings=BINDINGS, to_input=to_input,
                  to_output=to_output, installer=INSTALLER, detect=detect, lost=LOST)  # fmt: skip
