"""Codex CLI's session rollouts read as turns (the session indexer) and as the episode
detector's events (:mod:`ingest.sessions.transcripts` and :mod:`ingest.learning.episode_events` pick this reader
by a file's first line).

Where they are and what they hold, from Codex's own source (https://github.com/openai/codex:
``codex-rs/rollout/src/recorder.rs``, ``codex-rs/protocol/src/protocol.rs`` ``RolloutLine`` /
``RolloutItem``, ``codex-rs/protocol/src/models.rs`` ``ResponseItem``):

- ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`` (``CODEX_HOME`` defaults
  to ``~/.codex``; early builds wrote ``sessions/rollout-….jsonl``), appended to as the thread
  goes on; a hook's ``transcript_path`` names the file;
- one JSON object per line: ``{"timestamp", "type", "payload"}`` with ``type`` one of
  ``session_meta`` (first line: ``id`` (the thread id, a hook's ``session_id``), ``cwd``,
  ``git.branch``), ``turn_context`` (``cwd`` per turn), ``response_item`` (what the model saw
  and said), ``event_msg`` (UI events, which repeat the messages: not read) and ``compacted``
  (a summary: not read);
- ``response_item`` payloads: ``message`` (``role``; ``content``: ``input_text`` /
  ``output_text`` parts; a user message Codex adds for context, such as
  ``<environment_context>…</environment_context>`` or ``# AGENTS.md instructions …``, is no
  prompt: ``codex-rs/core/src/context`` tells them apart by a fixed list of marker tags, so
  does :func:`contextual` with the same list), ``function_call`` (``name``, ``arguments``: a
  JSON string, ``call_id``),
  ``local_shell_call`` (``action.command`` argv, ``call_id``), ``custom_tool_call`` (``name``,
  ``input``: ``apply_patch``'s patch), ``function_call_output`` / ``custom_tool_call_output``
  (``call_id``, ``output``: a string or ``input_text`` parts);
- the shell tools: ``shell`` (``command`` argv), ``shell_command`` (``command``),
  ``exec_command`` (``cmd``; a command still running after a while answers ``Process running
  with session ID N`` and a later ``write_stdin`` poll with that ``session_id`` reports its end).
  Their output leads with lines such as ``Exit code: N`` / ``Process exited with code N`` and
  ``Output:`` (``codex-rs/core/src/tools``), or, in early builds, is a JSON
  ``{"output", "metadata": {"exit_code"}}`` (:func:`exec_result` reads all three);
- edits are ``apply_patch`` calls: ``*** Begin Patch`` / ``*** Update File: PATH`` / ``*** Add
  File: PATH`` / ``*** Delete File: PATH`` blocks of ``+``/``-`` lines (:func:`patch_files`).

A turn's session is the rollout's thread id; items carry no ids, so a message's key is its line's
offset (the file is only appended to). Reading is bounded as :func:`ingest.sessions.transcripts.read_turns`
bounds it; a line of another shape is passed over, never an error; nothing here backtracks
(plain string operations only).
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections import OrderedDict
from pathlib import Path

from ingest.learning.episodes import Event
from ingest.learning.tool_events import (  # an edit's diff, another custom tool's input kept
    HUNK_CHARS,
    INPUT_CHARS,
    MAX_PENDING,
    clip_output,
    tool_event,
)
from ingest.sessions.transcript_base import (
    CWD_SCAN_BYTES,
    Turn,
    clip,
    error_excerpt,
    parse_line,
    str_field,
    tool_turn_text,
)
from ingest.sessions.transcripts_claude import MAX_WAITING, ClaudeCodeTurns, small_args

ROLLOUT_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context",
                           "compacted"})  # fmt: skip
CALLS = frozenset({"function_call", "local_shell_call", "custom_tool_call"})
OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})
SHELLS = frozenset({"shell", "container.exec", "shell_command", "exec_command", "local_shell"})
POLL = "write_stdin"
PATCH = "apply_patch"
MAX_ARGS_CHARS = 1_000_000  # a call's JSON arguments parsed up to this (a longer call: none)
MAX_JSON_OUTPUT = 8 * 2**20  # an early build's JSON output parsed up to this
PATCH_CHARS = 50_000  # of a waiting patch kept
HEADER_LINES = 12  # an output's head looked through for its exit status
HEADER_KEYS = ("Command:", "Chunk ID:", "Wall time:", "Total output lines:",
               "Original token count:", "Exit code:", "Process ")  # fmt: skip
PATCH_LINES = 20_000
MAX_META_CACHED = 256
_SHELL_BINS = frozenset({"bash", "sh", "zsh", "dash", "fish", "pwsh", "powershell"})
_meta_cache: OrderedDict[tuple, dict] = OrderedDict()


def is_rollout_entry(entry: dict) -> bool:
    """A rollout line: a ``type`` of :data:`ROLLOUT_TYPES` with an object ``payload``."""
    kind = entry.get("type")
    return (
        isinstance(kind, str) and kind in ROLLOUT_TYPES and isinstance(entry.get("payload"), dict)
    )


def _kind(payload: dict) -> str:
    kind = payload.get("type")
    return kind if isinstance(kind, str) else ""


def thread_of(path: Path) -> str:
    """The thread id a rollout's name ends with (its stem when it does not)."""
    stem = path.stem
    tail = stem[-36:]
    return tail if len(tail) == 36 and tail.count("-") == 4 else stem


# The user-role texts Codex adds itself (start, end), as Codex recognises them: its
# ``CONTEXTUAL_USER_MARKERS`` (``codex-rs/core/src/context/contextual_user_message.rs``: the
# registered fragments' markers, ``user_instructions.rs``, ``environment_context.rs``,
# ``skill_instructions.rs``, ``user_shell_command.rs``, ``turn_aborted.rs``,
# ``subagent_notification.rs``, ``internal_model_context.rs``, ``extension_context.rs``,
# ``legacy_goal_context.rs``, ``next_prompt_suggestion.rs``, ``agent_message_board_notification.rs``;
# ``<external_KEY>``: ``AdditionalContextUserFragment``; ``<hook_prompt …>``:
# ``codex-rs/protocol/src/items.rs`` ``parse_hook_prompt_fragment``), matched as Codex matches
# them: the trimmed text starts with the first and ends with the second, ASCII case ignored.
# Any other ``<tag>…</tag>`` text (a pasted ``<template>``) is the user's own prompt.
CONTEXTUAL_USER_MARKERS = (
    ("# agents.md instructions", "</instructions>"),
    ("<user_instructions>", "</user_instructions>"),  # older rollouts' AGENTS.md
    ("<agents_instructions>", "</agents_instructions>"),
    ("<environment_context>", "</environment_context>"),
    ("<multiagent_context>", "</multiagent_context>"),
    ("<skill>", "</skill>"),
    ("<user_shell_command>", "</user_shell_command>"),
    ("<turn_aborted>", "</turn_aborted>"),
    ("<subagent_notification>", "</subagent_notification>"),
    ("<agent_message_board_notification>", "</agent_message_board_notification>"),
    ("<goal_context>", "</goal_context>"),
    ("<codex_internal_context", "</codex_internal_context>"),
    ("<extension_context>", "</extension_context>"),
    ("<next_prompt_suggestion>", "</next_prompt_suggestion>"),
    ("<hook_prompt", "</hook_prompt>"),
    ("<external_", ">"),  # <external_KEY>…</external_KEY>: a close tag checked too
)
# Codex's legacy warnings, kept to filter old sessions (``LegacyUnifiedExecProcessLimitWarning``,
# ``LegacyModelMismatchWarning``; ``LegacyApplyPatchExecCommandWarning`` also has an end)
CONTEXTUAL_WARNINGS = (
    "Warning: The maximum number of unified exec processes you can keep open is",
    "Warning: Your account was flagged for potentially high-risk cyber activity",
)
APPLY_PATCH_WARNING = ("Warning: apply_patch was requested via ",
                       "Use the apply_patch tool instead of exec_command.")  # fmt: skip


def contextual(text: str) -> bool:
    """A user-role text Codex adds itself (:data:`CONTEXTUAL_USER_MARKERS`, its legacy
    warnings); a ``<tag>…</tag>`` of any other name is the user's."""
    s = text.strip()
    if s.startswith(CONTEXTUAL_WARNINGS) or (
        s.startswith(APPLY_PATCH_WARNING[0]) and s.endswith(APPLY_PATCH_WARNING[1])
    ):
        return True
    head, tail = s[:64].lower(), s[-64:].lower()
    for start, end in CONTEXTUAL_USER_MARKERS:
        if head.startswith(start) and tail.endswith(end) and len(s) >= len(start) + len(end):
            return start != "<external_" or "</external_" in tail
    return False


def message_text(payload: dict) -> tuple[str | None, str]:
    """(role, its text) of a ``message`` item; a user's context parts left out."""
    role, content = payload.get("role"), payload.get("content")
    if role not in ("user", "assistant") or not isinstance(content, list):
        return None, ""
    parts = []
    for c in content:
        if isinstance(c, dict) and c.get("type") in ("input_text", "output_text", "text"):
            text = c.get("text")
            if isinstance(text, str) and text.strip() and not (role == "user" and contextual(text)):
                parts.append(text)
    return role, "\n\n".join(parts).strip()


def output_text(output: object) -> str:
    """A call output's text: a string, or its text parts (an image is ``[image]``)."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(str(c.get("text", "")) if c.get("type") in ("input_text", "output_text", "text")
                         else "[image]" for c in output if isinstance(c, dict))  # fmt: skip
    if isinstance(output, dict) and isinstance(output.get("content"), str):
        return output["content"]
    return ""


def _int_after(line: str, prefix: str) -> int | None:
    word = line[len(prefix) :].strip().split(" ", 1)[0] if line.startswith(prefix) else ""
    return int(word) if word.lstrip("-").isdigit() and len(word) <= 12 else None


def exec_result(text: str) -> tuple[int | None, str | None, str]:
    """(exit code, id of a process still running, output) of a shell tool's output; ``(None,
    None, text)`` when it says neither."""
    s = text.lstrip()
    if s.startswith('{"output"') and len(text) <= MAX_JSON_OUTPUT:
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            data = None
        meta = data.get("metadata") if isinstance(data, dict) else None
        if isinstance(meta, dict) and isinstance(data.get("output"), str):
            code = meta.get("exit_code")
            return (code if isinstance(code, int) and not isinstance(code, bool) else None,
                    None, data["output"])  # fmt: skip
    if not s.startswith(HEADER_KEYS):
        return None, None, text
    code = running = None
    lines = s[:4096].split("\n", HEADER_LINES)
    for i, line in enumerate(lines[:HEADER_LINES]):
        line = line.rstrip("\r")
        if line.startswith("Output:"):
            rest = s.split("\n", i + 1)
            return code, running, rest[i + 1] if len(rest) > i + 1 else ""
        for prefix in ("Exit code:", "Process exited with code"):
            code = _int_after(line, prefix) if code is None else code
        for prefix in ("Process running with session ID", "Process running with command ID"):
            if running is None and line.startswith(prefix):
                running = line[len(prefix) :].strip()[:40] or None
    return code, running, s


def patch_files(patch: str) -> list[tuple[str, str]]:
    """(path, its ``+``/``-`` lines) of each file an ``apply_patch`` patch touches."""
    files: list[tuple[str, list[str]]] = []
    size = 0  # of the current file's lines kept
    for line in patch.split("\n", PATCH_LINES)[:PATCH_LINES]:
        line = line.rstrip("\r")
        for head, mark in (("*** Update File: ", ""), ("*** Add File: ", ""),
                           ("*** Delete File: ", "(deleted)")):  # fmt: skip
            if line.startswith(head):
                files.append((line[len(head) :].strip()[:500], [mark] if mark else []))
                size = 0
                break
        else:
            if line.startswith("*** Move to: ") and files:
                files[-1] = (line[13:].strip()[:500], files[-1][1])
            elif files and line[:1] in ("+", "-") and size < HUNK_CHARS:
                files[-1][1].append(line[:HUNK_CHARS])
                size += len(line) + 1
    return [(p, "\n".join(h)[:HUNK_CHARS]) for p, h in files if p]


def _arguments(payload: dict) -> dict:
    raw = payload.get("arguments")
    if isinstance(raw, str) and len(raw) <= MAX_ARGS_CHARS:
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            return {}
        return data if isinstance(data, dict) else {}
    return raw if isinstance(raw, dict) else {}


def _argv_command(argv: object) -> str | None:
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return None
    if len(argv) == 3 and argv[1] in ("-lc", "-c") and Path(argv[0]).name in _SHELL_BINS:
        return argv[2]
    return shlex.join(argv[:200])


def call_of(payload: dict) -> tuple[str, dict] | None:
    """(our tool name, its arguments) of a call item: a shell command is ``Bash``
    ``{"command"}`` (as Codex names it to its hooks), a patch ``apply_patch`` ``{"patch"}``, a
    poll ``write_stdin`` ``{"session_id"}``; any other tool its own name and arguments."""
    kind = payload.get("type")
    if kind == "local_shell_call":
        action = payload.get("action") if isinstance(payload.get("action"), dict) else {}
        command = _argv_command(action.get("command"))
        return ("Bash", {"command": command}) if command else None
    name = str(payload.get("name") or "tool")[:200]
    if kind == "custom_tool_call":
        text = payload.get("input") if isinstance(payload.get("input"), str) else ""
        return (PATCH, {"patch": text}) if name == PATCH else (name, {"input": text[:INPUT_CHARS]})
    args = _arguments(payload)
    if name in SHELLS:
        command = args.get("cmd") if name == "exec_command" else args.get("command")
        if isinstance(command, list) and len(command) == 2 and command[0] == PATCH:
            return PATCH, {"patch": str(command[1])}
        command = command if isinstance(command, str) else _argv_command(command)
        if command and command.startswith(PATCH) and "*** Begin Patch" in command:
            return PATCH, {"patch": command[command.find("*** Begin Patch") :]}
        return ("Bash", {"command": command}) if command else None
    if name == PATCH:
        text = args.get("input") if isinstance(args.get("input"), str) else ""
        return PATCH, {"patch": text}
    if name == POLL:
        return POLL, {"session_id": str(args.get("session_id", ""))[:40]}
    return name, args


def patch_ok(text: str) -> bool:
    code, _, _ = exec_result(text)
    return code == 0 if code is not None else "Success. Updated the following files" in text[:4096]


def rollout_meta(path: Path) -> dict:
    """``{"session", "cwd", "branch"}`` of a rollout, from its ``session_meta`` line (read once
    per file, within its first :data:`~ingest.sessions.transcript_base.CWD_SCAN_BYTES`)."""
    try:
        st = path.stat()
        key = (str(path), st.st_dev, st.st_ino)
    except OSError:
        key = (str(path), 0, 0)
    if key in _meta_cache:
        return _meta_cache[key]
    meta = {"session": thread_of(path)}
    try:
        with open(path, "rb") as fh:
            head = fh.read(CWD_SCAN_BYTES)
    except OSError:
        head = b""
    for raw in head.split(b"\n", 8)[:8]:
        e = parse_line(raw)
        if e is not None and e.get("type") == "session_meta" and isinstance(e.get("payload"), dict):
            meta = meta_of(e["payload"], meta)
            break
    _meta_cache[key] = meta
    while len(_meta_cache) > MAX_META_CACHED:
        _meta_cache.popitem(last=False)
    return meta


def meta_of(payload: dict, meta: dict) -> dict:
    git = payload.get("git") if isinstance(payload.get("git"), dict) else {}
    out = dict(meta)
    for k, v in (("session", payload.get("id")), ("cwd", payload.get("cwd")),
                 ("branch", git.get("branch"))):  # fmt: skip
        if isinstance(v, str) and v:
            out[k] = v[:4096]
    return out


class CodexRollout(ClaudeCodeTurns):
    """Parser state of a rollout for :func:`ingest.sessions.transcripts.read_turns`: the thread's id and
    folder, and the calls waiting for their outputs (kept in the same JSON form as Claude
    Code's, so a checkpoint can carry them). Messages are whole items: no reply is half-read."""

    def __init__(self, path: Path, pending: dict | None = None, now: float = 0.0) -> None:
        super().__init__(path, pending, now)
        saved = (pending or {}).get("codex")
        self.meta = dict(saved) if isinstance(saved, dict) else {"session": thread_of(path)}

    def pending(self) -> dict:
        return {**super().pending(), "codex": dict(self.meta)}

    def _turn(self, e: dict, role: str, text: str, key: str) -> Turn:
        return Turn(self.meta.get("session") or thread_of(self.path), role, text, key,
                    str_field(e.get("timestamp")), self.meta.get("cwd"), self.meta.get("branch"))  # fmt: skip

    def feed(self, e: dict) -> list[Turn]:
        kind, p = e.get("type"), e.get("payload")
        if not isinstance(p, dict):
            return []
        if kind == "session_meta" and not self.meta.get("read"):
            self.meta = {**meta_of(p, self.meta), "read": True}
        elif kind == "turn_context" and isinstance(p.get("cwd"), str) and p["cwd"]:
            self.meta["cwd"] = p["cwd"][:4096]
        if kind != "response_item":
            return []
        item = _kind(p)
        if item == "message":
            role, text = message_text(p)
            if role and text:
                return [self._turn(e, role, clip(text), f"{e.get('_at')}#{role[0]}")]
        elif item in CALLS and isinstance(p.get("call_id"), str):
            call = call_of(p)
            if call is not None and call[0] != POLL:
                name, args = call
                shown = {"files": ", ".join(f for f, _ in patch_files(args["patch"]))[:400]} \
                    if name == PATCH else small_args(name, args)  # fmt: skip
                self.calls[p["call_id"][:200]] = {
                    "name": name, "args": shown, "seen": self.now,
                    "entry": {k: e[k] for k in ("timestamp", "_at") if isinstance(e.get(k), str)},
                }  # fmt: skip
                if len(self.calls) > MAX_WAITING:
                    return self._abandon(list(self.calls)[: len(self.calls) - MAX_WAITING])
        elif item in OUTPUTS and isinstance(p.get("call_id"), str):
            cid = p["call_id"][:200]
            call = self.calls.pop(cid, None) or self.gave_up.pop(cid, None)
            if call is None:
                return []  # a poll's output, or a call never seen
            text = output_text(p.get("output"))
            if call["name"] == PATCH:
                err, text = not patch_ok(text), exec_result(text)[2]
            else:
                code, running, text = exec_result(text)
                err = code is not None and code != 0
                text = f"{text}\n(still running)" if running else text
            return [self._turn(e, "tool", tool_turn_text(call["name"], call["args"], text, err),
                               f"tool:{cid}")]  # fmt: skip
        return []


def turn_of(e: dict) -> tuple[str, str] | None:
    """(role, text) of a rollout line that is a user's or the assistant's message."""
    p = e.get("payload")
    if e.get("type") != "response_item" or not isinstance(p, dict) or p.get("type") != "message":
        return None
    role, text = message_text(p)
    return (role, text) if role and text else None


def codex_events(e: dict, path: Path, prog, now: float | None = None) -> list[tuple[str, Event]]:
    """(session, event) of one rollout line for the episode detector; ``prog`` is its
    :class:`~ingest.learning.episode_events.FeedProgress` (calls waiting for outputs, and commands
    still running, ``run:<id>``). The line gets the rollout's ``cwd`` and ``gitBranch`` (the
    reader names a session's folder from its lines)."""
    meta = rollout_meta(path)
    session = meta.get("session") or thread_of(path)
    for k, field in (("cwd", "cwd"), ("branch", "gitBranch")):
        if meta.get(k):
            e[field] = meta[k]
    p = e.get("payload")
    if e.get("type") != "response_item" or not isinstance(p, dict):
        return []
    at, item = str_field(e.get("timestamp")), _kind(p)
    now = time.time() if now is None else now
    if item == "message":
        role, text = message_text(p)
        if role == "user" and text:
            return [(session, Event(kind="prompt", at=at, text=text[:500]))]
        return [(session, Event(kind="say", at=at, text=text))] if role and text else []
    cid = p.get("call_id")
    if not isinstance(cid, str) or not cid:
        return []
    cid = cid[:200]
    if item in CALLS:
        call = call_of(p)
        if call is not None and call[0] in ("Bash", PATCH, POLL):
            name, args = call
            args = {"patch": args["patch"][:PATCH_CHARS]} if name == PATCH else args
            prog.pending[cid] = {"name": name, "args": args, "entry": {"timestamp": at},
                                 "seen": now}  # fmt: skip
            while len(prog.pending) > MAX_PENDING:
                del prog.pending[next(iter(prog.pending))]
        return []
    if item not in OUTPUTS:
        return []
    call = prog.pending.pop(cid, None)
    if call is None:
        return []
    text = output_text(p.get("output"))
    if call["name"] == PATCH:
        if not patch_ok(text):
            return []
        cwd = meta.get("cwd") or ""
        return [(session, Event(kind="edit", call=cid if i == 0 else f"{cid}#{i}", at=at,
                                path=f if os.path.isabs(f) or not cwd else os.path.join(cwd, f),
                                hunk=hunk))
                for i, (f, hunk) in enumerate(patch_files(call["args"].get("patch") or ""))]  # fmt: skip
    code, running, body = exec_result(text)
    if call["name"] == POLL:
        run = (
            prog.pending.pop(f"run:{call['args'].get('session_id')}", None)
            if code is not None
            else None
        )
        if run is None:
            return []
        cid, call = run["call"], run
    elif running is not None:
        prog.pending[f"run:{running}"] = {**call, "call": cid}
        while len(prog.pending) > MAX_PENDING:
            del prog.pending[next(iter(prog.pending))]
        return []
    ok = code == 0 if code is not None else error_excerpt(body) is None
    ev = tool_event("Bash", call["args"], clip_output(body), ok, cid, at)
    return [(session, ev)] if ev is not None else []
