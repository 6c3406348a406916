"""Codex CLI (OpenAI): its hook events onto our handlers, our answers in its output format, and
the files ``hooks install --client codex`` changes.

Verified in Codex's documentation (https://developers.openai.com/codex/hooks,
https://developers.openai.com/codex/config-reference) and source
(https://github.com/openai/codex, Apache-2.0):

- hooks: ``hooks.json`` beside each config layer, ``$CODEX_HOME/hooks.json`` (``~/.codex``) and
  ``<repo>/.codex/hooks.json`` (read only in a trusted project), ``{"hooks": {EVENT:
  [{"matcher": …, "hooks": [{"type": "command", "command": …, "timeout": SECONDS}]}]}}``
  (``codex-rs/config`` ``HooksFile``: no other top-level key; ``codex-rs/hooks/src/engine/
  discovery.rs``: a timeout defaults to 600 s). Codex runs a hook that is not managed only
  once the user trusted it (``/hooks`` in the CLI; trust is kept per hook as a hash in
  ``[hooks.state]`` of the user's config.toml), which we never write;
- the feature flag: ``[features] hooks`` (stable and on by default; its key was
  ``codex_hooks`` before Codex 0.130, a deprecated alias since: openai/codex#19012, #20522);
- stdin (``codex-rs/hooks/schema/generated/*.command.input.schema.json``): every event has
  ``session_id`` (the thread id), ``transcript_path`` (the rollout, or null), ``cwd``,
  ``hook_event_name``, ``model``; SessionStart adds ``source`` (startup | resume | clear |
  compact), UserPromptSubmit ``prompt``, PostToolUse ``tool_name`` (``Bash`` for every shell
  tool, ``apply_patch``, an MCP tool's name), ``tool_input`` (``{"command"}`` for Bash),
  ``tool_response`` and ``tool_use_id``, PreCompact ``trigger`` (manual | auto), Stop
  ``stop_hook_active``; SessionEnd (openai/codex#33895) ``reason``, with timeouts cut to 3 s;
- a Bash ``tool_response`` is the command's output as a string, without its exit status
  (``codex-rs/core/tests/suite/hooks.rs``): a status line in it is the command's own text, so
  the hook feeds the episode detector no run (the rollout's status decides) and the output's
  looks decide only whether lessons are shown (:mod:`server.service.prompting.codex_results`);
- stdout: ``{"hookSpecificOutput": {"hookEventName": EVENT, "additionalContext": TEXT}}`` adds
  context for SessionStart, UserPromptSubmit and PostToolUse (``codex-rs/hooks/src/schema.rs``;
  Stop's output takes no such object, so nothing is printed for the others);
- a matcher is exact names joined by ``|`` or a regex (``codex-rs/hooks/src/events/common.rs``);
- the MCP server: ``[mcp_servers.NAME]`` with ``command`` and ``args`` in ``config.toml`` of
  the same layers (a project's only when trusted).

config.toml is edited as text (:mod:`.config_files`): each line we add is marked, and removing
takes out our lines only (a ``[features]`` table we added goes with its last line).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from retrieval.errors import InvalidInput
from server.service.prompting.codex_results import UNKNOWN_STATUS_TOOL, says_failed, shell_result

from . import config_files as cf
from .spec import Binding, ClientSpec, ConfigFile, Installer

NAME = "codex"
BINDINGS = (
    Binding("SessionStart", "SessionStart"),
    Binding("UserPromptSubmit", "UserPromptSubmit"),
    Binding("PostToolUse", "PostToolUse", "Bash"),  # a failed command: PostToolUseFailure
    Binding("PreCompact", "PreCompact"),
    Binding("Stop", "Stop"),
    Binding("SessionEnd", "SessionEnd"),
)
TIMEOUT_S = {"SessionEnd": 3}  # Codex cuts SessionEnd's to 3 s; the others' limit is ours
DEFAULT_TIMEOUT_S = 10  # ours is PATTERN_HOOK_DEADLINE (1.5 s)
INJECTS = frozenset({"SessionStart", "UserPromptSubmit", "PostToolUse"})
FLAG_KEYS = ("hooks", "codex_hooks")
RENAMED_IN = (0, 130, 0)  # the first Codex whose flag is ``hooks``
FIELDS = {
    "SessionStart": ("source",),
    "UserPromptSubmit": ("prompt",),
    "PreCompact": ("trigger",),
    "SessionEnd": ("reason",),
    "Stop": (),
}
is_ours = cf.ours_by("command")
LOST = (
    "lessons after a command are shown when its output looks like a failure (Codex's hook input "
    "has no exit status); the episode detector takes every command's status from the rollout",
    "hooks run only once trusted in Codex (/hooks); a project's hooks and MCP server only in a "
    "trusted project",
    "SessionEnd only in Codex builds that have it (July 2026 on); earlier ones index at Stop",
)


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


def rollouts() -> list[Path]:
    """The rollouts under ``$CODEX_HOME/sessions`` (``YYYY/MM/DD/rollout-*.jsonl``, and the flat
    folder of early builds): ``index-sessions``' default paths for Codex; regular files only
    (a named pipe there would block its reader)."""
    root = codex_home() / "sessions"
    found = [*root.glob("rollout-*.jsonl"), *root.glob("*/*/*/rollout-*.jsonl")]
    return sorted(p for p in found if p.is_file())


def _str(data: dict, key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


def to_input(event: str, data: dict) -> tuple[str, dict] | None:
    """Codex's hook JSON as our input. A Bash result is the command's output alone: no exit
    status, and any ``Exit code: N`` line or error word in it is the command's own text. So
    the hook never tells the episode detector a status it cannot know: every Bash result is
    passed as Codex's own tool (``exec_command``), which the live detector does not follow
    (the rollout's ``function_call_output`` gives the run and its real status). What the
    output looks like decides only what is shown: an error-looking output (a traceback, an
    ``Error:`` line, ``FAILED``, a non-zero status line: :mod:`server.service.prompting.codex_results`)
    goes to the failure handler, for the lessons nearest it. Other tools' results are ignored (edits are read from the rollout)."""
    base = {k: v for k in ("session_id", "transcript_path", "cwd") if (v := _str(data, k))}
    if event in FIELDS:
        return event, {**base, **{k: v for k in FIELDS[event] if (v := _str(data, k))}}
    if event != "PostToolUse" or data.get("tool_name") != "Bash":
        return None
    tool_input = data.get("tool_input")
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if not isinstance(command, str) or not command.strip():
        return None
    call = {**base, "tool_name": UNKNOWN_STATUS_TOOL, "tool_input": {"command": command}}
    if (tid := _str(data, "tool_use_id")) is not None:
        call["tool_use_id"] = tid
    code, running, body = shell_result(data.get("tool_response"))
    if running is not None:
        return None  # no result yet
    if code or says_failed(body):  # looks failed: shown, never learned from
        return "PostToolUseFailure", {**call, "error": body}
    return "PostToolUse", {**call, "tool_response": body}


def to_output(event: str, text: str) -> dict | None:
    if not text or event not in INJECTS:
        return None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


# --------------------------------------------------------------------------- hooks.json
def hooks_path(scope: str, project: Path) -> Path:
    return codex_home() / "hooks.json" if scope == "user" else project / ".codex" / "hooks.json"


def config_path(scope: str, project: Path) -> Path:
    return codex_home() / "config.toml" if scope == "user" else project / ".codex" / "config.toml"


def wanted_groups() -> dict[str, list[dict]]:
    return cf.matcher_groups(BINDINGS, lambda b: {
        "type": "command", "command": cf.hook_command(NAME, b.client_event),
        "timeout": TIMEOUT_S.get(b.client_event, DEFAULT_TIMEOUT_S)})  # fmt: skip


# --------------------------------------------------------------------------- config.toml
@lru_cache(maxsize=1)
def flag_key() -> str:
    """``codex_hooks`` for a Codex older than 0.130 on this machine, else ``hooks``."""
    exe = shutil.which("codex")
    if exe is None:
        return FLAG_KEYS[0]
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10,
                             check=False).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return FLAG_KEYS[0]
    m = re.search(r"(\d{1,4})\.(\d{1,4})\.(\d{1,4})", out[:200])
    old = m is not None and tuple(int(x) for x in m.groups()) < RENAMED_IN
    return FLAG_KEYS[1] if old else FLAG_KEYS[0]


def _marked(line: str) -> bool:
    return line.rstrip().endswith(cf.TOML_MARK)


def _bare_mark(line: str) -> bool:
    return line.strip() == cf.TOML_MARK


def _is_table_line(line: str) -> bool:
    return line.lstrip().startswith("[")


def _our_flag_line(line: str) -> bool:
    body = line.rstrip()[: -len(cf.TOML_MARK)].strip() if _marked(line) else ""
    return any(body.replace(" ", "") == f"{k}=true" for k in FLAG_KEYS)


def _drop_block(lines: list[str], head: int, end: int) -> list[str]:
    """``lines`` without ``[head, end)`` and the marked blank line that parts it from above."""
    start = head - 1 if head > 0 and _bare_mark(lines[head - 1]) else head
    return lines[:start] + lines[end:]


def _table_end(lines: list[str], head: int) -> int:
    return next((j for j in range(head + 1, len(lines)) if _is_table_line(lines[j])), len(lines))


def _with_flag(text: str) -> str:
    features = cf.toml_data(text).get("features")
    if features is not None and (not isinstance(features, dict)
                                 or any(k in features for k in FLAG_KEYS)):  # fmt: skip
        return text  # the user's own choice stands
    try:
        return cf.toml_set(text, ("features",), flag_key(), True)
    except InvalidInput:  # [features] written in a form not edited line by line: on by default
        return text


def _without_flag(text: str) -> str:
    lines = text.splitlines(keepends=True)
    kept = [ln for ln in lines if not _our_flag_line(ln)]
    if len(kept) == len(lines):
        return text
    head = next((i for i, ln in enumerate(kept) if _marked(ln)
                 and cf._header_line(ln) == "features"), None)  # fmt: skip
    if head is not None:
        end = _table_end(kept, head)
        if all(not ln.strip() or ln.lstrip().startswith("#") for ln in kept[head + 1 : end]):
            kept = _drop_block(kept, head, end)
    out = "".join(kept)
    cf.toml_data(out)
    return out


def _flag_present(text: str) -> list[str]:
    return [ln.split("=")[0].strip() for ln in text.splitlines() if _our_flag_line(ln)][:1]


def _ours_in_block(line: str) -> bool:
    return _marked(line) and not _bare_mark(line) and not _is_table_line(line)


def _server_header(text: str) -> tuple[list[str], int | None]:
    lines = text.splitlines(keepends=True)
    name = f"mcp_servers.{cf.SERVER_NAME}"
    at = next(
        (i for i, ln in enumerate(lines) if _marked(ln) and cf._header_line(ln) == name), None
    )
    return lines, at


def _with_server(text: str) -> str:
    return cf.toml_add_table(text, ("mcp_servers", cf.SERVER_NAME), cf.server_entry())


def _without_server(text: str) -> str:
    """Our ``[mcp_servers.pattern-memory]`` table, while it still is what install wrote."""
    servers = cf.toml_data(text).get("mcp_servers")
    lines, at = _server_header(text)
    if (
        at is None
        or not isinstance(servers, dict)
        or servers.get(cf.SERVER_NAME) != cf.server_entry()
    ):
        return text
    end = at + 1
    while end < len(lines) and _ours_in_block(lines[end]):
        end += 1
    out = "".join(_drop_block(lines, at, end))
    cf.toml_data(out)
    return out


def _server_present(text: str) -> list[str]:
    servers = cf.toml_data(text).get("mcp_servers")
    return [cf.SERVER_NAME] if isinstance(servers, dict) and cf.SERVER_NAME in servers else []


INSTALLER = Installer(
    files=(
        cf.groups_file(hooks_path, wanted_groups, is_ours, [b.client_event for b in BINDINGS]),
        ConfigFile("setting", config_path, _with_flag, _without_flag, _flag_present, fmt="toml",
                   label="the hooks feature flag ([features])"),
        ConfigFile("server", config_path, _with_server, _without_server, _server_present,
                   fmt="toml"),
    ),
    note="Codex runs new hooks only once you trust them: open /hooks in Codex and trust the "
         "pattern-memory hooks (a project's hooks and MCP server load only in a trusted project).",
)  # fmt: skip


def detect() -> bool:
    return codex_home().is_dir() or shutil.which("codex") is not None


SPEC = ClientSpec(name=NAME, title="Codex CLI", bindings=BINDINGS, to_input=to_input,
                  to_output=to_output, installer=INSTALLER, detect=detect, lost=LOST)  # fmt: skip
