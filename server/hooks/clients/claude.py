"""Claude Code: our handlers are its hook events, one for one (its fields are our ``HookInput``).

Where Claude Code reads what we install (https://code.claude.com/docs/en/hooks,
https://code.claude.com/docs/en/settings, https://code.claude.com/docs/en/mcp):

- hooks: ``.claude/settings.json`` of the project (project scope) or
  ``~/.claude/settings.json`` (user scope; ``$CLAUDE_CONFIG_DIR`` when set), under
  ``"hooks": {EVENT: [{"matcher": …, "hooks": [{"type": "command", "command": …,
  "timeout": …}]}]}``; events without tools take no matcher;
- the MCP server: ``.mcp.json`` at the project root (project scope) or the top-level
  ``mcpServers`` of ``~/.claude.json`` (user scope). Claude Code does not read MCP servers
  from ``settings.json``.

A hook prints ``{"hookSpecificOutput": {"hookEventName": EVENT, "additionalContext": TEXT}}``
to add context (SessionStart, UserPromptSubmit, PostToolUse, PostToolUseFailure).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from . import config_files as cf
from .spec import HANDLERS, Binding, ClientSpec, ConfigFile, Installer

NAME = "claude"
# event -> matcher (None: the event takes none). Failed commands come from the Bash tool.
MATCHERS: dict[str, str | None] = {
    "SessionStart": "startup|resume|clear|compact",
    "UserPromptSubmit": None,
    "PostToolUse": "Bash",
    "PostToolUseFailure": "Bash",
    "PreCompact": None,
    "Stop": None,
    "SessionEnd": None,
}
TIMEOUT_S = 10  # the client's own limit; ours is PATTERN_HOOK_DEADLINE (1.5 s)
BINDINGS = tuple(Binding(event, event, matcher) for event, matcher in MATCHERS.items())
is_ours = cf.ours_by("command")


def to_input(event: str, data: dict) -> tuple[str, dict] | None:
    """Claude Code's hook JSON is our input as it is."""
    return (event, data) if event in HANDLERS else None


def to_output(event: str, text: str) -> dict | None:
    if not text:
        return None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def config_dir() -> Path:
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")


def settings_path(scope: str, project: Path) -> Path:
    return (
        config_dir() / "settings.json" if scope == "user" else project / ".claude" / "settings.json"
    )


def wanted_groups() -> dict[str, list[dict]]:
    return cf.matcher_groups(BINDINGS, lambda b: {
        "type": "command", "command": cf.hook_command(NAME, b.client_event), "timeout": TIMEOUT_S})  # fmt: skip


INSTALLER = Installer(files=(
    cf.groups_file(settings_path, wanted_groups, is_ours, MATCHERS),
    # .mcp.json: ours to delete when left empty; ~/.claude.json: Claude Code's own state, never
    ConfigFile("server", lambda scope, project: project / ".mcp.json" if scope == "project" else None,
               cf.with_server, cf.without_server, cf.server_present),
    ConfigFile("server", lambda scope, project: Path.home() / ".claude.json" if scope == "user" else None,
               cf.with_server, cf.without_server, cf.server_present, drop_empty=False),
))  # fmt: skip


# The plugin's hooks (packaging/claude/hooks.json, named by .claude-plugin/plugin.json): the same
# events and matchers, run through the plugin's launcher (packaging/claude/hook.sh), which does
# nothing until the plugin's environment exists. ${CLAUDE_PLUGIN_ROOT} is substituted by Claude
# Code in hook commands (https://code.claude.com/docs/en/plugins-reference, "Environment
# variables").
PLUGIN_HOOK = 'sh "${CLAUDE_PLUGIN_ROOT}/packaging/claude/hook.sh" '


def plugin_hooks() -> dict:
    """The plugin's ``hooks.json`` document (a test keeps the file equal to it)."""
    hooks = cf.matcher_groups(BINDINGS, lambda b: {
        "type": "command", "command": PLUGIN_HOOK + b.client_event, "timeout": TIMEOUT_S})  # fmt: skip
    return {"description": "pattern-memory: recall, lessons and session indexing", "hooks": hooks}


def detect() -> bool:
    return config_dir().is_dir() or shutil.which("claude") is not None


SPEC = ClientSpec(name=NAME, title="Claude Code", bindings=BINDINGS, to_input=to_input,
                  to_output=to_output, installer=INSTALLER, detect=detect)  # fmt: skip
