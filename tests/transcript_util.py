"""Claude Code transcripts and hook inputs for tests, written from the documented formats.

Transcript entries follow the shape in Claude Code's docs
(https://docs.claude.com/en/docs/claude-code/sdk/sdk-sessions: one JSON object per line,
``type`` user/assistant, ``uuid``/``parentUuid``, ``timestamp``, ``message.content`` a string
or blocks ``text`` / ``tool_use`` {id, name, input} / ``tool_result`` {tool_use_id, content,
is_error}) plus the session fields every entry carries (``sessionId``, ``cwd``, ``gitBranch``,
``isSidechain``; ``agentId`` on a sub-agent's sidechain). Hook inputs follow the hooks reference
(https://code.claude.com/docs/en/hooks: ``session_id``, ``transcript_path``, ``cwd``,
``hook_event_name`` and each event's own fields).
"""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

T0 = datetime(2025, 3, 4, 9, 30, tzinfo=UTC)


class TranscriptWriter:
    """Appends Claude Code entries to a transcript file, one line each."""

    def __init__(self, path: Path, session: str = "sess-1", cwd: str = "/work/app",
                 branch: str = "main", sidechain_agent: str | None = None) -> None:  # fmt: skip
        self.path = Path(path)
        self.session = session
        self.cwd = cwd
        self.branch = branch
        self.agent = sidechain_agent
        self.parent: str | None = None
        self.n = itertools.count()
        self.tool_ids = itertools.count(1)

    def _entry(self, kind: str, content, **extra) -> dict:
        i = next(self.n)
        uid = f"{self.session}-{'side-' if self.agent else ''}{i:04d}"
        e = {"parentUuid": self.parent, "isSidechain": bool(self.agent), "userType": "external",
             "cwd": self.cwd, "sessionId": self.session, "version": "2.0.0",
             "gitBranch": self.branch, "type": kind, "uuid": uid,
             "timestamp": (T0 + timedelta(seconds=30 * i)).isoformat().replace("+00:00", "Z"),
             "message": {"role": kind, "content": content}, **extra}  # fmt: skip
        if self.agent:
            e["agentId"] = self.agent
        self.parent = uid
        return e

    def write(self, *entries: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            for e in entries:
                fh.write(json.dumps(e) + "\n")

    def user(self, text: str) -> dict:
        e = self._entry("user", text)
        self.write(e)
        return e

    def assistant(self, text: str) -> dict:
        e = self._entry("assistant", [{"type": "text", "text": text}])
        self.write(e)
        return e

    def tool(self, name: str, args: dict, output: str, is_error: bool = False) -> str:
        tid = f"toolu_{self.session}_{next(self.tool_ids):03d}"
        use = self._entry("assistant", [{"type": "tool_use", "id": tid, "name": name,
                                         "input": args}])  # fmt: skip
        result = self._entry("user", [{"type": "tool_result", "tool_use_id": tid,
                                       "content": output, "is_error": is_error}])  # fmt: skip
        self.write(use, result)
        return tid

    def tool_use_only(self, name: str, args: dict) -> str:
        tid = f"toolu_{self.session}_{next(self.tool_ids):03d}"
        self.write(self._entry("assistant", [{"type": "tool_use", "id": tid, "name": name,
                                              "input": args}]))  # fmt: skip
        return tid

    def tool_result(self, tid: str, output: str, is_error: bool = False) -> None:
        self.write(self._entry("user", [{"type": "tool_result", "tool_use_id": tid,
                                         "content": output, "is_error": is_error}]))  # fmt: skip


def hook_input(event: str, transcript: Path | None, session: str = "sess-1",
               cwd: str = "/work/app", **fields) -> dict:  # fmt: skip
    return {"session_id": session, "transcript_path": str(transcript) if transcript else None,
            "cwd": cwd, "hook_event_name": event, "permission_mode": "default", **fields}  # fmt: skip


def grow(path: Path, lines: list[str], upto: int) -> None:
    """The transcript ``path`` holding ``lines[:upto]``, its new lines appended as a client
    appends them (a rewrite, truncated then written, can be read half-way by the daemon)."""
    have = path.read_text(encoding="utf-8").count("\n") if path.exists() else 0
    if upto > have:
        with path.open("a", encoding="utf-8") as fh:
            fh.write("".join(lines[have:upto]))
