"""What a Codex CLI shell result says: its exit status when it has a status line, else whether
its words report a failure (the hook faces reach :mod:`ingest` only through the service).

Codex's ``PostToolUse`` input for its shell tool (``tool_name`` ``Bash``) carries the command's
output as its ``tool_response``: a string without its exit status
(https://github.com/openai/codex, ``codex-rs/core/tests/suite/hooks.rs``), or, for other tools
and builds, an output that leads with ``Exit code: N`` / ``Process exited with code N``
(:func:`ingest.transcripts_codex.exec_result` reads every form a rollout holds too).
"""

from __future__ import annotations

from ingest.transcripts import error_excerpt
from ingest.transcripts_codex import exec_result, output_text


def shell_result(response: object) -> tuple[int | None, str | None, str]:
    """(exit code or None, id of a process still running or None, output text) of a
    ``tool_response``."""
    return exec_result(output_text(response))


def says_failed(text: str) -> bool:
    """The output reports a failure in its words (a traceback, an ``…Error:`` line, ``FAILED``,
    a non-zero exit status named, ``command not found``, …)."""
    return error_excerpt(text) is not None
