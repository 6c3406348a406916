"""GitHub Copilot CLI: its hook events translated to our handlers, and its files.

Sources (https://docs.github.com/en/copilot/reference/copilot-cli-reference/cli-hooks-reference,
/cli-config-dir-reference, https://docs.github.com/en/copilot/how-tos/copilot-cli/customize-copilot/add-mcp-servers;
every shape below was also seen in Copilot CLI 1.0.102's own hook inputs, see
``tests/fixtures/clients/copilot/SOURCES.md``):

- hooks: a JSON file ``{"version": 1, "hooks": {EVENT: [{"type": "command", "bash": …,
  "powershell": …, "cwd": …, "env": …, "timeoutSec": …}]}}`` in ``.github/hooks/`` of the
  project (any ``*.json``; ours is ``pattern-memory.json``) or in ``~/.copilot/hooks/`` (user
  scope; ``$COPILOT_HOME`` instead of ``~/.copilot``). A ``matcher`` regex on the tool's name
  is honoured for ``postToolUse`` (not for ``postToolUseFailure``, which we filter here);
- the MCP server: ``mcpServers`` of ``.github/mcp.json`` (project; ``.mcp.json`` is Claude
  Code's file too, so not ours to share) or ``~/.copilot/mcp-config.json`` (user), an entry
  ``{"type": "local", "command", "args", "tools": ["*"]}``;
- hook input (camelCase events): every event ``sessionId``, ``timestamp`` (ms), ``cwd``;
  ``sessionStart`` ``source`` (``startup`` | ``resume`` | ``new``), ``initialPrompt``;
  ``userPromptSubmitted`` ``prompt``; ``postToolUse`` ``toolName``, ``toolArgs`` (an object;
  older docs: a JSON string, read too), ``toolResult`` {``resultType``, ``textResultForLlm``};
  ``postToolUseFailure`` ``toolName``, ``toolArgs``, ``error``; ``agentStop`` and
  ``preCompact`` ``transcriptPath`` (and ``trigger``: ``manual`` | ``auto``); ``sessionEnd``
  ``reason``. No event names a tool call's id;
- output: ``{"additionalContext": TEXT}`` on stdout is added to the conversation for
  ``sessionStart`` (a user message), ``userPromptSubmitted`` (in the prompt, as a system
  reminder), ``postToolUse`` (after the tool's result) and ``postToolUseFailure``.

A shell command that exits non-zero is a *successful* ``bash`` call: its exit status is the
last line of ``textResultForLlm`` (``<shellId: N completed with exit code K>``), read here. The
session file (``~/.copilot/session-state/<sessionId>/events.jsonl``) is named by ``agentStop``
and ``preCompact`` only; for the other events it is found from the session id. A command's or
an edit's result reaches the episode detector live only when that file shows the call (its
id keeps the two apart); else it is read from the file when the turn ends.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from . import config_files as cf
from .spec import Binding, ClientSpec, ConfigFile, Installer

NAME = "copilot"
HOOKS_FILE = "pattern-memory.json"
TIMEOUT_S = 10  # the client's own limit (its default is 30); ours is PATTERN_HOOK_DEADLINE
TOOL_MATCHER = (
    "bash|powershell|edit|create"  # the shell and the edits (ingest.sessions.transcripts_copilot)
)
SHELL_TOOLS = ("bash", "powershell")
TOP = {"version": 1}
SOURCES = {"new": "startup", "startup": "startup", "resume": "resume"}
TRIGGERS = ("manual", "auto")
MAX_ID = 128  # of a session id used in a path
MAX_ARGS_JSON = 1_000_000  # of a toolArgs string parsed
BINDINGS = (
    Binding("sessionStart", "SessionStart"),
    Binding("userPromptSubmitted", "UserPromptSubmit"),
    Binding("postToolUse", "PostToolUse", TOOL_MATCHER),
    Binding("postToolUseFailure", "PostToolUseFailure"),
    Binding("preCompact", "PreCompact"),
    Binding("agentStop", "Stop"),
    Binding("sessionEnd", "SessionEnd"),
)
LOST = (
    "no tool call id in hook inputs: a command or edit reaches the episode detector at once only "
    "when the session file under $COPILOT_HOME/session-state (as the daemon sees it) shows the "
    "call; else, and for a sub-agent's calls, when the file is indexed at the end of the turn",
    "no session start after a compaction: memories recalled before /compact are not offered again "
    "in that session",
    "hooks are installed for bash (macOS, Linux); Windows' powershell hooks are not",
    "prompt mode (-p) runs the project's hooks only in a trusted folder (or with "
    "GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS=true) and its MCP servers only with "
    "GITHUB_COPILOT_PROMPT_MODE_WORKSPACE_MCP=true; user-scope hooks and servers always",
)
is_ours = cf.ours_by("bash")


def copilot_home() -> Path:
    return Path(os.environ.get("COPILOT_HOME") or Path.home() / ".copilot")


# --------------------------------------------------------------------------- translation in
def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def session_file(session: str | None) -> str | None:
    """The session's event file, ``$COPILOT_HOME/session-state/<id>/events.jsonl`` (the id must
    be a plain name: it becomes part of a path)."""
    if not session or len(session) > MAX_ID or not session.isascii():
        return None
    if not all(c.isalnum() or c in "-_" for c in session):
        return None
    return str(copilot_home() / "session-state" / session / "events.jsonl")


def tool_args(value: object) -> dict | None:
    """``toolArgs``: an object (what the CLI sends), or the JSON text of one (older docs)."""
    if isinstance(value, str) and len(value) <= MAX_ARGS_JSON:
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


def _tool(data: dict, inp: dict, transcript: str | None) -> dict | None:
    """Our tool fields of a ``postToolUse``: Claude Code's names (``Bash``, ``Edit``,
    ``Write``) with the call's id when the session file shows the call, else Copilot CLI's own
    name (which the episode detector does not follow: it reads the file instead)."""
    from server.service.prompting.copilot_calls import TOOLS, as_claude, call_of, shell_output

    tool, args = _str(data.get("toolName")), tool_args(data.get("toolArgs"))
    if tool not in TOOLS or args is None:
        return None
    result = data.get("toolResult") if isinstance(data.get("toolResult"), dict) else {}
    kind = result.get("resultType")
    if kind == "denied":
        return None  # nothing ran
    text = result.get("textResultForLlm") if isinstance(result.get("textResultForLlm"), str) else ""
    ok = kind in (None, "success")
    call = call_of(transcript, tool, args) if transcript else None
    name, ours = as_claude(tool, args)
    if tool in SHELL_TOOLS:
        if not isinstance(ours, dict) or not ours.get("command"):
            return None
        output, code = shell_output(text, None)
        response: dict = {"output": output}
        if code is not None:
            response["exit_code"] = code
        if not ok:
            response["is_error"] = True
    elif call is None:
        return None  # an edit the detector will read from the session file
    else:
        response = {"output": text, "success": ok}
    inp.update(tool_name=name if call else tool, tool_input=ours, tool_response=response)
    if call:
        inp["tool_use_id"] = call
    return inp


def to_input(event: str, data: dict) -> tuple[str, dict] | None:
    """Copilot CLI's hook input as our handler's (None: an event or a tool we leave alone)."""
    if not isinstance(data, dict):
        return None
    session = _str(data.get("sessionId"))
    inp: dict = {}
    if session:
        inp["session_id"] = session[:200]
    if _str(data.get("cwd")):
        inp["cwd"] = data["cwd"]
    transcript = _str(data.get("transcriptPath")) or session_file(session)
    if transcript:
        inp["transcript_path"] = transcript
    if event == "sessionStart":
        source = SOURCES.get(data.get("source")) if isinstance(data.get("source"), str) else None
        if source:
            inp["source"] = source
        return "SessionStart", inp
    if event == "userPromptSubmitted":
        if _str(data.get("prompt")):
            inp["prompt"] = data["prompt"]
        return "UserPromptSubmit", inp
    if event == "postToolUse":
        found = _tool(data, inp, transcript)
        return ("PostToolUse", found) if found is not None else None
    if event == "postToolUseFailure":
        args = tool_args(data.get("toolArgs"))
        if data.get("toolName") not in SHELL_TOOLS or not isinstance(args, dict):
            return None  # a failed edit or read: no command to find lessons for
        if not _str(args.get("command")):
            return None
        inp.update(tool_name=data["toolName"], tool_input={"command": args["command"]})
        if _str(data.get("error")):
            inp["error"] = data["error"]
        return "PostToolUseFailure", inp
    if event == "preCompact":
        if data.get("trigger") in TRIGGERS:
            inp["trigger"] = data["trigger"]
        return "PreCompact", inp
    if event == "agentStop":
        return "Stop", inp
    if event == "sessionEnd":
        if _str(data.get("reason")):
            inp["reason"] = data["reason"][:200]
        return "SessionEnd", inp
    return None


# --------------------------------------------------------------------------- translation out
INJECTS = ("sessionStart", "userPromptSubmitted", "postToolUse", "postToolUseFailure")


def to_output(event: str, text: str) -> dict | None:
    if not text or event not in INJECTS:
        return None
    return {"additionalContext": text}


# --------------------------------------------------------------------------- install
def hooks_path(scope: str, project: Path) -> Path:
    base = copilot_home() / "hooks" if scope == "user" else project / ".github" / "hooks"
    return base / HOOKS_FILE


def mcp_path(scope: str, project: Path) -> Path:
    return (
        copilot_home() / "mcp-config.json" if scope == "user" else project / ".github" / "mcp.json"
    )


def wanted_hooks() -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for b in BINDINGS:
        hook = {"type": "command", "bash": cf.hook_command(NAME, b.client_event),
                "timeoutSec": TIMEOUT_S}  # fmt: skip
        if b.matcher:
            hook["matcher"] = b.matcher
        out.setdefault(b.client_event, []).append(hook)
    return out


def server_entry() -> dict:
    return {"type": "local", **cf.server_entry(), "tools": ["*"]}


INSTALLER = Installer(files=(
    cf.flat_file(hooks_path, wanted_hooks, is_ours, [b.client_event for b in BINDINGS], top=TOP),
    ConfigFile("server", mcp_path, lambda doc: cf.with_server(doc, server_entry()),
               lambda doc: cf.without_server(doc, server_entry()), cf.server_present),
), note="Copilot CLI loads a project's hooks and MCP servers once the folder is trusted")  # fmt: skip


def session_files() -> list[Path]:
    """Every session's event file (``index-sessions`` without a path reads them)."""
    return sorted((copilot_home() / "session-state").glob("*/events.jsonl"))


def detect() -> bool:
    return copilot_home().is_dir() or shutil.which("copilot") is not None


SPEC = ClientSpec(name=NAME, title="GitHub Copilot CLI", bindings=BINDINGS, to_input=to_input,
                  to_output=to_output, installer=INSTALLER, detect=detect, lost=LOST)  # fmt: skip
