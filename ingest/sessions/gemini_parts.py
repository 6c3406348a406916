"""Gemini CLI's message parts and tool results read back (for :mod:`ingest.sessions.transcripts_gemini`
and the hook translation, ``server/hooks/clients/gemini.py``).

From https://github.com/google-gemini/gemini-cli: a message's ``content`` is a string or Gemini
API parts (``{text, thought?}``, ``{functionResponse: {id, name, response: {output | error}}}``,
``packages/core/src/utils/generateContentResponseUtilities.ts``); a completed tool call's
``result`` is the ``functionResponse`` parts sent to the model. A shell call's text
(``run_shell_command``, ``packages/core/src/tools/shell.ts``) is ``Output: …`` followed by
``Error: …``, ``Exit Code: N``, ``Signal: …``, ``Background PIDs: …``, ``Process Group PGID: N``
lines, inside ``<untrusted_context>`` tags (``utils/textUtils.ts``); an output past the
truncation threshold starts with an ``Output too large. …`` line (head and tail kept,
``utils/fileUtils.ts``). What a hook added (``<hook_context>…</hook_context>``, appended to a
prompt or to a tool's result: ``core/client.ts``, ``core/coreToolHookTriggers.ts``; prepended
to a ``gemini -p`` prompt: ``cli/src/gemini.tsx``) is ours and is left out, the prompt kept.
Gemini CLI's ``AfterTool`` hook input names no call id, so a shell result's key is
:func:`run_key`, which the hook's ``llmContent`` and the recorded ``result`` both give. A
trailing ``Error: …`` line is read as Gemini CLI's field only when Gemini CLI reports an error
for the call (else it is the command's own output).

Plain string operations only (linear time); every list read is bounded.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

MAX_PARTS = 256  # of one message's content parts read
MAX_CALLS = 256  # of one message's tool calls read
KEY_CHARS = 1000  # of a shell output in its run key
SHELL = "run_shell_command"
DONE = ("success", "error", "cancelled")
HOOK_OPEN, HOOK_CLOSE = "<hook_context>", "</hook_context>"
UNTRUSTED_OPEN, UNTRUSTED_CLOSE = "<untrusted_context>\n", "\n</untrusted_context>"
IGNORED_PREFIXES = ("/", "?", "<session_context>", HOOK_OPEN)  # sessionUtils.ts
TRUNCATED = "Output too large. Showing first "
CANCELLED = "Command was cancelled by user"
BACKGROUND = ("Command moved to background", "Command is running in background")
# the lines shell.ts writes after the output, in its order
SHELL_TAIL = ("Error: ", "Exit Code: ", "Signal: ", "Background PIDs: ", "Process Group PGID: ")


def _parts(content: object) -> list:
    if isinstance(content, str):
        return [{"text": content}]
    if isinstance(content, dict):
        return [content]
    return content[:MAX_PARTS] if isinstance(content, list) else []


def without_hook_context(text: str) -> str:
    """``text`` without a ``<hook_context>…</hook_context>`` a hook appended at its end."""
    end = text.rstrip()
    if end.endswith(HOOK_CLOSE):
        cut = end.rfind(HOOK_OPEN)
        if cut >= 0:
            return end[:cut].rstrip()
    return text


def without_leading_hook_context(text: str) -> str:
    """``text`` without a ``<hook_context>…</hook_context>`` at its start: ``gemini -p``
    prepends a SessionStart hook's context to the user's input, ``<hook_context>CTX
    </hook_context>\n\nPROMPT`` (``packages/cli/src/gemini.tsx``; Gemini CLI escapes ``<`` and
    ``>`` in CTX, so its first close tag ends it). Unclosed: nothing of it is the user's."""
    body = text.lstrip()
    if not body.startswith(HOOK_OPEN):
        return text
    end = body.find(HOOK_CLOSE)
    return body[end + len(HOOK_CLOSE) :].lstrip() if end >= 0 else ""


def parts_text(content: object) -> str:
    """The text parts of a message's content (strings too), without thoughts and without what
    a hook added (a part of its context alone, its context before or after a prompt)."""
    out = []
    for p in _parts(content):
        if isinstance(p, str):
            p = {"text": p}
        if not isinstance(p, dict) or p.get("thought") or not isinstance(p.get("text"), str):
            continue
        text = without_hook_context(without_leading_hook_context(p["text"]))
        if text.strip():
            out.append(text)
    return "\n".join(out).strip()


def has_function_response(content: object) -> bool:
    return any(isinstance(p, dict) and "functionResponse" in p for p in _parts(content))


def result_text(result: object) -> tuple[str, bool]:
    """(text, an error?) of a tool call's ``result`` parts: each ``functionResponse``'s
    ``response.output`` (and ``response.error``), other parts' text; a hook's context left out."""
    texts, error = [], False
    for p in _parts(result):
        if not isinstance(p, dict):
            continue
        fr = p.get("functionResponse")
        if isinstance(fr, dict):
            resp = fr.get("response")
            if isinstance(resp, dict):
                if isinstance(resp.get("output"), str):
                    texts.append(resp["output"])
                if isinstance(resp.get("error"), str) and resp["error"]:
                    texts.append(resp["error"])
                    error = True
        elif isinstance(p.get("text"), str):
            texts.append(p["text"])
    return without_hook_context("\n".join(texts)), error


@dataclass
class ShellResult:
    output: str
    exit_code: int | None = None
    error: str = ""
    cancelled: bool = False  # by the user
    background: bool = False  # runs on: no result yet

    @property
    def failed(self) -> bool:
        return bool(self.error) or (self.exit_code not in (None, 0)) or self.timed_out

    @property
    def timed_out(self) -> bool:
        return self.output.startswith("Command was automatically cancelled")


def shell_result(text: str, errored: bool = False) -> ShellResult:
    """A ``run_shell_command`` output (its ``llmContent``, or the recorded result) read back:
    the wrapper, a truncation header and a hook's context taken off, the trailing fields
    parsed from the end (plain string operations: linear time). ``errored``: Gemini CLI itself
    reports an error for the call (the hook's ``tool_response.error``, a recorded call's
    ``status`` ``error``): only then is a trailing ``Error: …`` line its field; else it is the
    command's own last line (``tail deploy.log`` exits 0 with ``Error: none`` last)."""
    if text.startswith(TRUNCATED):
        text = text.partition("\n")[2]
    text = without_hook_context(text)
    if text.startswith(UNTRUSTED_OPEN):
        text = text[len(UNTRUSTED_OPEN) :]
        cut = text.rfind(UNTRUSTED_CLOSE)
        text = text[:cut] if cut >= 0 else text
    if text.startswith(CANCELLED):
        return ShellResult(text, cancelled=True)
    if text.startswith(BACKGROUND):
        return ShellResult(text, background=True)
    if not text.startswith("Output: "):
        return ShellResult(text)  # a summary, a timeout, a refusal: the text as it is
    lines = text[len("Output: ") :].split("\n")
    fields: dict[str, str] = {}
    for name in reversed(SHELL_TAIL):
        if name == "Error: " and not errored:
            continue
        if len(lines) > 1 and lines[-1].startswith(name):
            fields[name] = lines.pop()[len(name) :]
    output = "\n".join(lines)
    code = fields.get("Exit Code: ", "").strip()
    digits = code.removeprefix("-")
    exit_code = int(code) if digits.isascii() and digits.isdigit() and len(code) < 12 else None
    return ShellResult("" if output == "(empty)" else output, exit_code, fields.get("Error: ", ""))


def run_key(command: str, res: ShellResult) -> str:
    """The detector's call key of a shell command's result, the same from the hook's input
    and from the transcript (no call id is given to a hook): two runs with the same command,
    status and first :data:`KEY_CHARS` of output are one event."""
    raw = f"{command}\x00{res.exit_code}\x00{res.error[:200]}\x00{res.output[:KEY_CHARS]}"
    return "gemini-run:" + hashlib.sha256(raw.encode("utf-8", "replace")).hexdigest()[:24]


def completed_calls(message: dict) -> list[dict]:
    """A ``gemini`` message's completed tool calls (at most :data:`MAX_CALLS`)."""
    calls = message.get("toolCalls")
    if not isinstance(calls, list):
        return []
    return [c for c in calls[:MAX_CALLS] if isinstance(c, dict) and isinstance(c.get("id"), str)
            and isinstance(c.get("name"), str) and c.get("status") in DONE]  # fmt: skip


def call_outcome(call: dict) -> tuple[str, bool]:
    """(output text, an error?) of a completed tool call."""
    text, error = result_text(call.get("result"))
    if call.get("name") == SHELL:
        errored = error or call.get("status") == "error"
        res = shell_result(text, errored)
        out = res.output if not res.error else f"{res.output}\n{res.error}".strip()
        return out, res.failed or errored
    return text, error or call.get("status") != "success"


def prompt_text(message: dict) -> str | None:
    """A user message's prompt (None: a tool's answer, or a message Gemini CLI ignores)."""
    content = message.get("content")
    if has_function_response(content):
        return None
    text = parts_text(content)
    return None if not text or text.startswith(IGNORED_PREFIXES) else text
