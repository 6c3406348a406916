"""What a Gemini CLI shell call's ``AfterTool`` input says: the command, its result read back
from the tool's text, and the key the session file reader gives the same call (the hook faces
reach :mod:`ingest` only through the service).

Gemini CLI's ``AfterTool`` input carries the tool's ``llmContent`` as ``tool_response``, before a
hook's context is appended, and no call id (https://github.com/google-gemini/gemini-cli,
``packages/core/src/core/coreToolHookTriggers.ts``); the shell tool's text is read by
:func:`ingest.sessions.gemini_parts.shell_result`, which reads the recorded result alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from ingest.sessions.gemini_parts import SHELL, ShellResult, parts_text, run_key, shell_result

__all__ = ["SHELL", "ShellCall", "shell_call"]


@dataclass(frozen=True)
class ShellCall:
    command: str
    result: ShellResult
    key: str  # the episode detector's call key (ingest.sessions.gemini_parts.run_key)


def shell_call(tool_name: object, tool_input: object, response: object) -> ShellCall | None:
    """The shell call of an ``AfterTool`` input (None: another tool, or a malformed one)."""
    if tool_name != SHELL or not isinstance(tool_input, dict) or not isinstance(response, dict):
        return None
    command = tool_input.get("command")
    if not isinstance(command, str) or not command.strip():
        return None
    content = response.get("llmContent")
    error = response.get("error")
    # a trailing "Error: …" line is Gemini CLI's field only when it reports an error itself
    res = shell_result(content if isinstance(content, str) else parts_text(content),
                       errored=bool(error))  # fmt: skip
    message = error.get("message") if isinstance(error, dict) else None
    if isinstance(message, str) and message and not res.error:
        res.error = message  # a spawn failure: in the tool's error, maybe not in its text
    return ShellCall(command, res, run_key(command, res))
