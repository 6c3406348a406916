"""What a GitHub Copilot CLI tool result says, and which call of its session file it is (the
hook faces reach :mod:`ingest` only through the service).

Copilot CLI's ``postToolUse`` input names no tool call id, and a shell command that exits
non-zero is a successful ``bash`` call whose exit status is the last line of its output
(https://docs.github.com/en/copilot/reference/copilot-cli-reference/cli-hooks-reference; the
shapes :mod:`ingest.sessions.transcripts_copilot` reads from its session files).
"""

from __future__ import annotations

from pathlib import Path

from ingest.sessions.transcripts_copilot import TOOLS, as_claude, find_call, shell_output

__all__ = ["TOOLS", "as_claude", "call_of", "shell_output"]


def call_of(transcript: str, tool: str, args: dict) -> str | None:
    """The id of the call of ``tool`` with ``args`` that the session file ``transcript`` shows
    started and not finished (None: none, or a sub-agent's)."""
    return find_call(Path(transcript), tool, args)
