"""What a Codex CLI shell result in a hook looks like: a status line when it leads with one, and
whether its words report a failure (the hook faces reach :mod:`ingest` only through the
service). Both decide only whether lessons are shown: the hook's output is the command's own
text (a failing check may print ``Exit code: 0`` first), so no status read here reaches the
episode detector, which takes every run's status from the rollout's ``function_call_output``.

Codex's ``PostToolUse`` input for its shell tool (``tool_name`` ``Bash``) carries the command's
output as its ``tool_response``: a string without its exit status
(https://github.com/openai/codex, ``codex-rs/core/tests/suite/hooks.rs``), or, for other tools
and builds, an output that leads with ``Exit code: N`` / ``Process exited with code N``
(:func:`ingest.sessions.transcripts_codex.exec_result` reads every form a rollout holds too).
"""

from __future__ import annotations

from ingest.sessions.transcript_base import error_excerpt
from ingest.sessions.transcripts_codex import exec_result, output_text

# the tool name a Codex hook's shell result is passed under (Codex's own name of its shell
# tool): a command whose status the hook cannot know, never a run for the live detector (the
# lessons shown for it are sent as a ``shown`` event, for the rollout's run of that call)
UNKNOWN_STATUS_TOOL = "exec_command"


def shell_result(response: object) -> tuple[int | None, str | None, str]:
    """(exit code or None, id of a process still running or None, output text) of a
    ``tool_response``."""
    return exec_result(output_text(response))


def says_failed(text: str) -> bool:
    """The output reports a failure in its words (a traceback, an ``…Error:`` line, ``FAILED``,
    a non-zero exit status named, ``command not found``, …)."""
    return error_excerpt(text) is not None
