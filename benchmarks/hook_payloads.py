"""Each client's hook payloads for ``benchmarks/hooks.py --client``: what the client sends on
stdin for every event we install, adjusted in session ids and paths only.

- Codex CLI, Gemini CLI, Cursor, GitHub Copilot CLI: the recorded payloads in
  ``tests/fixtures/clients/<client>/`` (where each comes from: ``SOURCES.md`` there).
- Claude Code: no payload files are recorded; its inputs follow the hooks reference
  (https://code.claude.com/docs/en/hooks: ``session_id``, ``transcript_path``, ``cwd``,
  ``hook_event_name``, ``permission_mode`` and each event's fields, as
  ``tests/transcript_util.py`` builds them), the command results taken from a real Claude Code
  transcript (``tests/data/transcripts/drm-coverage-fix.jsonl``, PROVENANCE.md there).

The fixtures' project folders become ``cwd`` (the checkout, as the UserPromptSubmit benchmark
uses), their transcripts copies under ``work`` (Copilot CLI's session file under
``$COPILOT_HOME``, which the daemon must be given: :func:`daemon_env`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from server.hooks.clients import CLIENTS

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "clients"
CLAUDE_TRANSCRIPT = ROOT / "tests" / "data" / "transcripts" / "drm-coverage-fix.jsonl"
SESSION_KEYS = ("session_id", "conversation_id", "sessionId")
COPILOT_SID = "f857c138-d795-4185-a2ea-c980380573e5"
# which postToolUse of the recorded session each payload is (the view between is not ours)
COPILOT_NTH = {"postToolUse-bash-failed": 0, "postToolUse-edit": 2, "postToolUse-bash-passed": 3}

# (client event, payload file, variant shown beside the event when one event has several)
FILES: dict[str, list[tuple[str, str, str]]] = {
    "codex": [("SessionStart", "SessionStart", ""), ("UserPromptSubmit", "UserPromptSubmit", ""),
              ("PostToolUse", "PostToolUse", "failed"),
              ("PostToolUse", "PostToolUse-passed", "passed"), ("PreCompact", "PreCompact", ""),
              ("Stop", "Stop", ""), ("SessionEnd", "SessionEnd", "")],
    "gemini": [("SessionStart", "SessionStart", ""), ("BeforeAgent", "BeforeAgent", ""),
               ("AfterTool", "AfterTool-fail", "failed"), ("AfterTool", "AfterTool-pass", "passed"),
               ("PreCompress", "PreCompress", ""), ("AfterAgent", "AfterAgent", ""),
               ("SessionEnd", "SessionEnd", "")],
    "cursor": [("sessionStart", "sessionStart", ""), ("beforeSubmitPrompt", "beforeSubmitPrompt", ""),
               ("postToolUseFailure", "postToolUseFailure", ""), ("postToolUse", "postToolUse", ""),
               ("afterFileEdit", "afterFileEdit", ""), ("preCompact", "preCompact", ""),
               ("stop", "stop", ""), ("sessionEnd", "sessionEnd", "")],
    "copilot": [("sessionStart", "sessionStart", ""), ("userPromptSubmitted", "userPromptSubmitted", ""),
                ("postToolUse", "postToolUse-bash-failed", "failed"),
                ("postToolUse", "postToolUse-edit", "edit"),
                ("postToolUse", "postToolUse-bash-passed", "passed"),
                ("postToolUseFailure", "postToolUseFailure-edit", "edit"),
                ("preCompact", "preCompact", ""), ("agentStop", "agentStop", ""),
                ("sessionEnd", "sessionEnd", "")],
}  # fmt: skip
FOLDERS = {"codex": "payloads", "gemini": "hooks", "cursor": "payloads", "copilot": "payloads"}
# the fixture's folders -> a folder under ``work`` ("": the project folder, ``cwd``)
PATHS = {
    "codex": [("/home/dev/.codex/sessions/2026/11/02/", "codex"), ("/home/dev/shop", "")],
    "gemini": [("/home/dev/.gemini/tmp/shop-api/chats/", "gemini"), ("/home/dev/shop-api", "")],
    "cursor": [("/home/dev/.cursor/projects/home-dev-shop/agent-transcripts/", "cursor"),
               ("/home/dev/shop", "")],
    "copilot": [("/home/user/.copilot/", "copilot"), ("/home/user/repo", "")],
}  # fmt: skip
TRANSCRIPTS = {  # the fixture transcript -> its place under work
    "codex": ("rollout-2026-11-02T10-15-00-019a3c5e-7b21-7d40-9c2a-4f1e8d6b3a70.jsonl",
              "codex/rollout-2026-11-02T10-15-00-019a3c5e-7b21-7d40-9c2a-4f1e8d6b3a70.jsonl"),
    "gemini": ("session.jsonl", "gemini/session-2026-08-20T10-15-8f1c2d3e.jsonl"),
    "cursor": ("transcript.jsonl", "cursor/5b0e6f3a-2c41-4d8e-9a57-1f3c9d2e7b10/"
               "5b0e6f3a-2c41-4d8e-9a57-1f3c9d2e7b10.jsonl"),
    "copilot": ("session/events.jsonl", f"copilot/session-state/{COPILOT_SID}/events.jsonl"),
}  # fmt: skip

# team lessons for the failures above, so a failure hook finds and injects one
LESSONS = [
    {"name": "POOL_CLOSED", "entityType": "lesson",
     "observations": ["Reset the pool before reopening it: pool.reset() then open()"],
     "errorPattern": {"type": "PoolError", "message": "pool on port 5432 closed",
                      "context": "pytest tests/test_db.py"},
     "metadata": {"severity": "high", "environment": {}, "frequency": 2, "successRate": 0.9},
     "verificationSteps": [{"command": "pytest tests/test_db.py", "expectedOutput": "passed",
                            "successIndicators": ["passed"]}]},
    {"name": "PG_REFUSED", "entityType": "lesson",
     "observations": ["Start the database before the tests: docker compose up -d db"],
     "errorPattern": {"type": "OperationalError", "message": "connection to server at localhost "
                      "port 5432 failed: Connection refused", "context": "pytest -q tests/test_db.py"},
     "metadata": {"severity": "high", "environment": {}, "frequency": 2, "successRate": 0.9},
     "verificationSteps": [{"command": "pg_isready -h localhost", "expectedOutput":
                            "accepting connections", "successIndicators": ["accepting"]}]},
    {"name": "PARSE_PORT_NONE", "entityType": "lesson",
     "observations": ["parse_port gets None when PORT is unset: return None before .strip()"],
     "errorPattern": {"type": "AttributeError", "message": "'NoneType' object has no attribute "
                      "'strip'", "context": "pytest -q tests/test_config.py"},
     "metadata": {"severity": "high", "environment": {}, "frequency": 2, "successRate": 0.9},
     "verificationSteps": [{"command": "pytest -q tests/test_config.py", "expectedOutput": "passed",
                            "successIndicators": ["passed"]}]},
    {"name": "COVERAGE_FLOOR", "entityType": "lesson",
     "observations": ["A test that never calls the function covers nothing: call it"],
     "errorPattern": {"type": "CoverageFailure", "message": "Coverage failure: total of 50 is "
                      "less than fail-under=100", "context": "python -m pytest tests/ --cov=src"},
     "metadata": {"severity": "high", "environment": {}, "frequency": 2, "successRate": 0.9},
     "verificationSteps": [{"command": "just check", "expectedOutput": "100% reached",
                            "successIndicators": ["reached"]}]},
]  # fmt: skip


@dataclass(frozen=True)
class Sample:
    event: str  # the client's event name (the installed command's argument)
    label: str  # the event, and its variant when the event has several payloads
    payload: dict
    prompt: bool  # a prompt event: each run replaces ``prompt`` with a question
    upto: int | None = None  # Copilot CLI: the session file's lines when this hook started

    def for_session(self, sid: str, prompt: str | None = None) -> dict:
        out = {**self.payload, **({"prompt": prompt} if self.prompt and prompt else {})}
        for key in SESSION_KEYS:
            if key in out:
                out[key] = sid
        return out


def daemon_env(work: Path) -> dict[str, str]:
    """What the daemon must see: Copilot CLI's session files are found from its session ids."""
    return {"COPILOT_HOME": str(work / "copilot")}


def copilot_session(work: Path, sid: str, upto: int | None = None) -> None:
    """Copilot CLI's session file for ``sid``: the recorded one, as it was when the hook started
    (its first ``upto`` lines): the daemon finds the hook's tool call there."""
    path = work / "copilot" / "session-state" / sid / "events.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = (work / TRANSCRIPTS["copilot"][1]).read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:upto]), encoding="utf-8")


def copilot_upto(lines: list[str], event: str, nth: int) -> int | None:
    """The session file's length when the ``nth`` hook of ``event`` started (None: whole)."""
    starts = [i for i, x in enumerate(lines)
              if '"type":"hook.start"' in x and f'"hookType":"{event}"' in x]  # fmt: skip
    return starts[nth] + 1 if nth < len(starts) else None


def _local(text: str, client: str, work: Path, cwd: Path) -> str:
    for old, new in PATHS[client]:
        text = text.replace(old, f"{work / new}/" if new else str(cwd))
    return text


def samples(client: str, work: Path, cwd: Path) -> list[Sample]:
    """Every event we install for ``client``, with its payload; transcripts copied to ``work``."""
    if client == "claude":
        return claude_samples(work, cwd)
    prompt_events = {b.client_event for b in CLIENTS[client].bindings
                     if b.handler == "UserPromptSubmit"}  # fmt: skip
    src, dest = TRANSCRIPTS[client]
    target = work / dest
    target.parent.mkdir(parents=True, exist_ok=True)
    text = (FIXTURES / client / src).read_text(encoding="utf-8")
    target.write_text(_local(text, client, work, cwd), encoding="utf-8")
    out = []
    lines = text.splitlines(keepends=True)
    for event, name, variant in FILES[client]:
        raw = (FIXTURES / client / FOLDERS[client] / f"{name}.json").read_text(encoding="utf-8")
        payload = json.loads(_local(raw, client, work, cwd))
        label = f"{event} ({variant})" if variant else event
        upto = copilot_upto(lines, event, COPILOT_NTH.get(name, 0)) if client == "copilot" else None
        out.append(Sample(event, label, payload, event in prompt_events, upto))
    return out


def claude_samples(work: Path, cwd: Path) -> list[Sample]:
    lines = CLAUDE_TRANSCRIPT.read_text(encoding="utf-8").splitlines(keepends=True)
    transcript = work / "claude" / "session.jsonl"
    transcript.parent.mkdir(parents=True, exist_ok=True)
    transcript.write_text("".join(lines).replace("/tmp/tmp8fga7k7q", str(cwd)), encoding="utf-8")
    entries = [json.loads(x) for x in lines]

    def block(n: int) -> dict:  # line n's first content block (1-based, as PROVENANCE.md counts)
        return entries[n - 1]["message"]["content"][0]

    def inp(event: str, **fields) -> dict:
        return {"session_id": "claude", "transcript_path": str(transcript), "cwd": str(cwd),
                "hook_event_name": event, "permission_mode": "default", **fields}  # fmt: skip

    fail, passed = block(24), block(34)
    prompt = entries[1]["message"]["content"]
    return [
        Sample("SessionStart", "SessionStart", inp("SessionStart", source="startup"), False),
        Sample("UserPromptSubmit", "UserPromptSubmit", inp("UserPromptSubmit", prompt=prompt), True),
        Sample("PostToolUseFailure", "PostToolUseFailure", inp(
            "PostToolUseFailure", tool_name="Bash", tool_input=fail["input"], tool_use_id=fail["id"],
            error=block(25)["content"], is_interrupt=False), False),
        Sample("PostToolUse", "PostToolUse", inp(
            "PostToolUse", tool_name="Bash", tool_input=passed["input"], tool_use_id=passed["id"],
            tool_response={"stdout": block(35)["content"], "stderr": "", "interrupted": False,
                           "isImage": False}), False),
        Sample("PreCompact", "PreCompact", inp("PreCompact", trigger="auto", custom_instructions=""), False),
        Sample("Stop", "Stop", inp("Stop", stop_hook_active=False), False),
        Sample("SessionEnd", "SessionEnd", inp("SessionEnd", reason="other"), False),
    ]  # fmt: skip


def installed_hooks(client: str, project: Path) -> dict[str, tuple[str, str | None]]:
    """The hook commands ``hooks install --client CLIENT`` writes into ``project``, with their
    matchers, by client event (each client runs its command through a shell)."""
    from server.hooks import install

    install.install("project", project, client=client)
    (hooks_file,) = [f.path("project", project) for f in CLIENTS[client].installer.files
                     if f.kind == "hooks"]  # fmt: skip
    out = {}
    for event, entries in json.loads(hooks_file.read_text(encoding="utf-8"))["hooks"].items():
        for entry in entries:
            for hook in entry.get("hooks", [entry]):  # matcher groups, or flat entries
                cmd = hook.get("command") or hook.get("bash")
                if isinstance(cmd, str) and "hookclient.py" in cmd:
                    out[event] = (cmd, entry.get("matcher"))
    return out


def installed_commands(client: str, project: Path) -> dict[str, str]:
    """The commands of :func:`installed_hooks`, by client event."""
    return {event: cmd for event, (cmd, _) in installed_hooks(client, project).items()}
