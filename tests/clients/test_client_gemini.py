"""Gemini CLI: its hook payloads (``tests/fixtures/clients/gemini``, SOURCES.md there) translated
to our handlers and our answers to its stdout JSON (pure functions), its settings.json entries
installed beside a user's own and removed byte for byte (checked against Gemini CLI's published
settings schema), its recorded sessions read as turns and as the episode detector's events (the
JSONL files and the older one-document files), the extension's manifest and hooks, hostile
payloads and lines (Hypothesis, bounded), and one session through the daemon's hook routes (a
failed command gets its lesson; fail, edit, pass becomes one learned lesson)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.learning.episode_events import FeedProgress, read_events
from ingest.learning.episodes import SessionEpisodes, feed
from ingest.sessions.gemini_parts import shell_result
from ingest.sessions.transcript_base import parse_line
from ingest.sessions.transcripts import last_turn, read_turns, session_cwd, valid_offset
from server.hooks import install
from server.hooks.clients import gemini
from server.hooks.clients.spec import HANDLERS
from server.service.prompting.hook_events import HookInput, response_failure
from tests.mcp_util import hook_daemon, wait_for

ROOT = Path(__file__).resolve().parents[2]
FIX = Path(__file__).parents[1] / "fixtures" / "clients" / "gemini"
SID = "8f1c2d3e-5b6a-4c7d-9e0f-1a2b3c4d5e6f"
TRANSCRIPT = "/home/dev/.gemini/tmp/shop-api/chats/session-2026-08-20T10-15-8f1c2d3e.jsonl"
BASE = {"session_id": SID, "transcript_path": TRANSCRIPT, "cwd": "/home/dev/shop-api"}
SCHEMA = json.loads((FIX / "settings.schema.excerpt.json").read_text(encoding="utf-8"))
FUZZ = settings(max_examples=50, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip


def payload(name: str) -> dict:
    return json.loads((FIX / "hooks" / f"{name}.json").read_text(encoding="utf-8"))


def session_dir(tmp_path: Path, root: str = "/home/dev/shop-api") -> Path:
    """``<home>/.gemini/tmp/<project>/chats`` with the project's ``.project_root``."""
    chats = tmp_path / ".gemini" / "tmp" / "shop-api" / "chats"
    chats.mkdir(parents=True)
    (chats.parent / ".project_root").write_text(root, encoding="utf-8")
    return chats


# ------------------------------------------------------------------ events in, answers out
def test_lifecycle_events_translate():
    cases = {"SessionStart": ("SessionStart", {"source": "startup"}),
             "BeforeAgent": ("UserPromptSubmit", {"prompt": payload("BeforeAgent")["prompt"]}),
             "PreCompress": ("PreCompact", {"trigger": "auto"}),
             "AfterAgent": ("Stop", {}), "SessionEnd": ("SessionEnd", {"reason": "exit"})}  # fmt: skip
    for event, (handler, extra) in cases.items():
        assert gemini.to_input(event, payload(event)) == (
            handler, {"hook_event_name": handler, **BASE, **extra})  # fmt: skip
    odd = {**payload("SessionStart"), "source": "compact", "transcript_path": ""}
    assert gemini.to_input("SessionStart", odd)[1] == {"hook_event_name": "SessionStart",
        "session_id": SID, "cwd": BASE["cwd"]}  # fmt: skip
    assert gemini.to_input("BeforeModel", payload("BeforeAgent")) is None


def test_a_failed_command_goes_to_the_failure_handler():
    handler, inp = gemini.to_input("AfterTool", payload("AfterTool-fail"))
    assert handler == "PostToolUseFailure" and inp["tool_name"] == "run_shell_command"
    assert inp["tool_input"]["command"] == "pytest -q tests/test_config.py"
    assert inp["error"].startswith("F ") and inp["error"].endswith(
        "1 failed in 0.04s\nExit Code: 1"
    )
    assert "untrusted_context" not in inp["error"] and "PGID" not in inp["error"]
    assert inp["is_interrupt"] is False and inp["tool_use_id"].startswith("gemini-run:")
    HookInput.model_validate(inp)


def test_a_passing_command_and_what_is_no_result():
    handler, inp = gemini.to_input("AfterTool", payload("AfterTool-pass"))
    assert handler == "PostToolUse"
    assert response_failure(inp["tool_response"]) == (
        ".                                                                        [100%]\n"
        "1 passed in 0.02s", False)  # fmt: skip
    assert gemini.to_input("AfterTool", payload("AfterTool-cancelled")) is None
    bg = {**payload("AfterTool-pass"), "tool_response": {"llmContent": "<untrusted_context>\n"
          "Command moved to background (PID: 4711). Output hidden.\n</untrusted_context>"}}  # fmt: skip
    assert gemini.to_input("AfterTool", bg) is None
    for other in ({"tool_name": "read_file", "tool_input": {"file_path": "x"}},
                  {"tool_input": "not an object"}, {"tool_input": {"command": 7}},
                  {"tool_response": "text"}):  # fmt: skip
        assert gemini.to_input("AfterTool", {**payload("AfterTool-pass"), **other}) is None
    spawn = {**payload("AfterTool-pass"), "tool_response": {
        "llmContent": [{"text": "Output: (empty)\nError: spawn bash ENOENT"}],
        "error": {"message": "spawn bash ENOENT", "type": "shell_execute_error"}}}  # fmt: skip
    handler, inp = gemini.to_input("AfterTool", spawn)
    assert handler == "PostToolUseFailure" and inp["error"] == "spawn bash ENOENT"


def test_shell_outputs_read_back():
    text = ("Output too large. Showing first 8,000 and last 32,000 characters. For full output "
            "see: /tmp/x.txt\n<untrusted_context>\nOutput: a\nb\nError: boom\nExit Code: -2\n"
            "Signal: 9\nProcess Group PGID: 7\n</untrusted_context>\n\n"
            "<hook_context>lesson</hook_context>")  # fmt: skip
    res = shell_result(text, errored=True)  # Gemini CLI reported the error itself
    assert (res.output, res.exit_code, res.error, res.failed) == ("a\nb", -2, "boom", True)
    res = shell_result(text)  # else the last "Error: " line is the command's own output
    assert (res.output, res.exit_code, res.error, res.failed) == ("a\nb\nError: boom", -2, "", True)
    assert shell_result("<untrusted_context>\nOutput: (empty)\n</untrusted_context>").output == ""
    assert shell_result("Output: x\nExit Code: ٣").exit_code is None  # not an ASCII number
    assert shell_result("Command was automatically cancelled because it exceeded").failed
    assert not shell_result("a summary of the output").failed


def test_answers_are_what_gemini_reads():
    for event in ("SessionStart", "BeforeAgent", "AfterTool"):
        assert gemini.to_output(event, "remember X") == {
            "hookSpecificOutput": {"hookEventName": event, "additionalContext": "remember X"}
        }
        assert gemini.to_output(event, "") is None
    assert all(
        gemini.to_output(e, "x") is None for e in ("PreCompress", "AfterAgent", "SessionEnd")
    )


def test_bindings():
    spec = gemini.SPEC
    assert spec.events == {"SessionStart", "BeforeAgent", "AfterTool", "PreCompress",
                           "AfterAgent", "SessionEnd"} and spec.lost  # fmt: skip
    assert {b.client_event: b.matcher for b in spec.bindings if b.matcher} == {
        "AfterTool": "^run_shell_command$"
    }
    assert re.fullmatch(gemini.SHELL_MATCHER, "run_shell_command")
    assert not re.search(gemini.SHELL_MATCHER, "mcp_x_run_shell_command")


# ------------------------------------------------------------------ install
USER_SETTINGS = """{
    "model": {"name": "gemini-2.5-pro"},
    "hooks": {"AfterTool": [{"matcher": "write_file|replace",
                             "hooks": [{"type": "command", "command": "./fmt.sh", "timeout": 5000}]}]},
    "mcpServers": {"other": {"command": "npx", "args": ["other"]}}
}"""


def test_install_beside_the_users_settings_then_uninstall_byte_for_byte(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path / "home"))
    project = tmp_path / "repo"
    path = project / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(USER_SETTINGS, encoding="utf-8")

    install.install("project", project, client="gemini")
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, SCHEMA)  # Gemini CLI's own schema of these keys
    assert doc["model"] == {"name": "gemini-2.5-pro"}
    mine, ours = doc["hooks"]["AfterTool"]  # the user's group first, ours after
    assert mine["hooks"][0]["command"] == "./fmt.sh" and ours["matcher"] == "^run_shell_command$"
    hook = ours["hooks"][0]
    assert hook["timeout"] == 10_000 and hook["name"] == "pattern-memory"
    if os.name != "nt":
        assert hook["command"].endswith(
            "hookclient.py --client gemini AfterTool 2>/dev/null || true"
        )
    assert set(doc["hooks"]) == gemini.SPEC.events
    assert set(doc["mcpServers"]) == {"other", "pattern-memory"}

    before = path.read_bytes()
    assert any("already" in line for line in install.install("project", project, client="gemini"))
    assert path.read_bytes() == before
    assert "BeforeAgent" in " ".join(install.status(project, "gemini"))

    install.uninstall("project", project, client="gemini")
    assert path.read_text(encoding="utf-8") == USER_SETTINGS


def test_user_scope_and_a_file_with_comments(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path))
    path = tmp_path / ".gemini" / "settings.json"
    install.install("user", tmp_path / "repo", client="gemini")
    assert set(json.loads(path.read_text())) == {"hooks", "mcpServers"} and gemini.detect()
    install.uninstall("user", tmp_path / "repo", client="gemini")
    assert not path.exists()
    text = '{\n  // a comment Gemini CLI allows\n  "model": {"name": "x"}\n}\n'
    path.write_text(text, encoding="utf-8")
    with pytest.raises(Exception, match="not valid JSON"):  # refused, never rewritten
        install.install("user", tmp_path / "repo", client="gemini")
    assert path.read_text(encoding="utf-8") == text


# ------------------------------------------------------------------ the extension
def test_the_extension_manifest_and_its_hooks():
    manifest = json.loads((ROOT / "gemini-extension.json").read_text(encoding="utf-8"))
    assert re.fullmatch(r"[a-zA-Z0-9-]+", manifest["name"])  # extension-manager.ts validateName
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert manifest["version"] == version
    server = manifest["mcpServers"]["pattern-memory"]
    jsonschema.validate(server, {**SCHEMA, "$ref": "#/$defs/MCPServerConfig"})
    assert server["command"] == "uvx" and server["args"] == [
        "--from", "${extensionPath}", "pattern-memory", "serve"]  # fmt: skip
    context = ROOT / manifest["contextFileName"]
    assert context.is_file() and context.resolve().is_relative_to(ROOT)
    hooks = json.loads((ROOT / "packaging" / "gemini" / "hooks" / "hooks.json").read_text())
    assert hooks == gemini.extension_hooks()
    jsonschema.validate({"hooks": hooks["hooks"]}, SCHEMA)
    assert all(h["command"].endswith(" 2>/dev/null || true") for groups in hooks["hooks"].values()
               for g in groups for h in g["hooks"])  # fmt: skip


@pytest.mark.skipif(
    os.name == "nt" or not shutil.which("bash"), reason="the extension's hooks run in bash"
)
def test_an_extension_hook_on_a_cold_start(tmp_path):
    """No python3 at all, then one without the project's packages and no daemon: exit 0, no
    output on stdout or stderr (Gemini CLI would read either)."""
    command = gemini.extension_hooks()["hooks"]["BeforeAgent"][0]["hooks"][0]["command"]
    command = command.replace("${extensionPath}", str(ROOT))
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("dirname", "cat"):
        if shutil.which(tool):
            os.symlink(shutil.which(tool), bare / tool)
    env = {"PATH": str(bare), "HOME": str(tmp_path), "PATTERN_HOME": str(tmp_path / "store"),
           "PATTERN_HOOK_DEADLINE": "0.3"}  # fmt: skip
    stdin = (FIX / "hooks" / "BeforeAgent.json").read_bytes()
    bash = shutil.which("bash")
    run = subprocess.run(
        [bash, "-c", command], input=stdin, capture_output=True, env=env, timeout=20
    )
    assert (run.returncode, run.stdout, run.stderr) == (0, b"", b"")
    base = getattr(sys, "_base_executable", sys.executable)
    probe = subprocess.run([base, "-c", "import chromadb"], capture_output=True)
    if probe.returncode == 0:
        pytest.skip("the base interpreter has the project's packages: not a cold start")
    os.symlink(base, bare / "python3")
    start = time.monotonic()
    run = subprocess.run(
        [bash, "-c", command], input=stdin, capture_output=True, env=env, timeout=20
    )
    assert (run.returncode, run.stdout, run.stderr) == (0, b"", b"")
    assert time.monotonic() - start < 5


# ------------------------------------------------------------------ transcripts
TURNS = [
    ("user", "d1b2c3d4-e5f6-4071-8b82-c3d4e5f60718#u",
     "the config tests fail with AttributeError on parse_port, fix it"),
    ("assistant", "4a1f0c6e-2d3b-4e5f-8a9b-0c1d2e3f4a5b#a", "I'll run the config tests to see the failure."),
    ("tool", "tool:run_shell_command__run_shell_command_1787220931850_0",
     "run_shell_command(command=pytest -q tests/test_config.py) → error:\nFAILED "
     "tests/test_config.py::test_parse_port - AttributeError: 'NoneType' object has no attribute 'strip'\n"
     "1 failed in 0.04s"),
    ("assistant", "5b2e1d7f-3e4c-4f6a-9bac-1d2e3f4a5b6c#a",
     "parse_port calls .strip() on a missing value. I'll return None when the value is None."),
    ("tool", "tool:replace__replace_1787220952210_1", "replace(file_path=/home/dev/shop-api/src/shop/"
     "config.py) → ok: Successfully modified file: /home/dev/shop-api/src/shop/config.py (1 replacements)."),
    ("tool", "tool:run_shell_command__run_shell_command_1787220965401_2",
     "run_shell_command(command=pytest -q tests/test_config.py) → ok: .                           "
     "                                             [100%] (2 lines, 97 characters)"),
    ("assistant", "7d4a3f91-5a6e-4b8c-9dce-3f4a5b6c7d8e#a",
     "parse_port now returns None for an empty value; the config tests pass."),
]  # fmt: skip


def test_the_session_as_turns_whole_and_in_parts(tmp_path):
    path = session_dir(tmp_path) / "session-2026-08-20T10-15-8f1c2d3e.jsonl"
    shutil.copy(FIX / "session.jsonl", path)
    res = read_turns(path)
    assert res.format == "gemini" and res.bad_lines == 0
    assert [(t.role, t.key, t.text) for t in res.turns] == TURNS  # no hook context, no repeats
    assert {(t.session, t.cwd, t.parent_session) for t in res.turns} == {
        (SID, "/home/dev/shop-api", None)
    }
    # a read resumed at every line end (with its pending state) gives the same turns, once
    for cp in res.checkpoints:
        first = res.turns[: cp.turns]
        rest = read_turns(path, cp.offset, "gemini", pending=json.loads(json.dumps(cp.pending)))
        assert [t.key for t in first + rest.turns] == [k for _, k, _ in TURNS]
    assert session_cwd(path) == "/home/dev/shop-api"
    assert last_turn(path) == TURNS[-1][2]


def test_the_legacy_document_is_read_whole_once(tmp_path):
    path = session_dir(tmp_path) / "session-2026-08-20T10-15-8f1c2d3e.json"
    shutil.copy(FIX / "session-legacy.json", path)
    res = read_turns(path)
    assert [(t.role, t.key, t.text) for t in res.turns] == TURNS
    [cp] = res.checkpoints
    assert cp.offset == path.stat().st_size and valid_offset(
        path, cp.offset, cp.line_hash, cp.line_len
    )
    assert read_turns(path, cp.offset, "gemini").turns == []
    doc = json.loads(path.read_text())
    doc["messages"] = doc["messages"][:2]  # rewritten in place: read again from the start
    path.write_text(json.dumps(doc, indent=2))
    assert not valid_offset(path, cp.offset, cp.line_hash, cp.line_len)
    broken = path.with_name("x.json")
    broken.write_text("{")
    assert read_turns(broken).bad_lines == 1


def test_the_session_for_the_detector_and_a_subagents_name(tmp_path):
    events, _ = read_events(FIX / "session.jsonl", prog := FeedProgress())
    kinds = {(ev.kind, ev.call) for _, ev in events}
    runs = [e for _, e in events if e.kind == "run"]
    assert [(r.ok, r.command) for r in runs] == [(False, "pytest -q tests/test_config.py"),
                                                 (True, "pytest -q tests/test_config.py")]  # fmt: skip
    hook_keys = [gemini.to_input("AfterTool", payload(n))[1]["tool_use_id"]
                 for n in ("AfterTool-fail", "AfterTool-pass")]  # fmt: skip
    assert [r.call for r in runs] == hook_keys  # the hook's key is the transcript's
    assert [e.path for _, e in events if e.kind == "edit"] == [
        "/home/dev/shop-api/src/shop/config.py"
    ]
    assert len(kinds) == 7 and prog.sessions == [SID]  # a prompt, 3 replies, 3 calls
    state = SessionEpisodes(session=SID)
    for _, ev in events:  # a message appended again is one event
        feed(state, ev)
    assert len(state.seen) == 7
    sub = session_dir(tmp_path) / SID / "c9d8e7f6-0000-4000-8000-000000000001.jsonl"
    sub.parent.mkdir()
    meta = {
        "sessionId": "c9d8e7f6-0000-4000-8000-000000000001",
        "projectHash": "x",
        "kind": "subagent",
    }
    msg = {"id": "m1", "timestamp": "2026-08-20T10:20:00Z", "type": "gemini", "content": "done"}
    sub.write_text(json.dumps(meta) + "\n" + json.dumps(msg) + "\n")
    [turn] = read_turns(sub).turns
    assert turn.session == f"{SID}/agent-{meta['sessionId']}" and turn.parent_session == SID
    (events2, places2) = read_events(sub, FeedProgress())
    assert [s for s, _ in events2] == [turn.session]
    assert places2[turn.session]["cwd"] == "/home/dev/shop-api"


def test_session_files_on_this_machine(tmp_path):
    chats = session_dir(tmp_path)
    names = [
        "session-a.jsonl",
        "session-b.json",
        "session-c.json",
        "session-c.jsonl",
        "x/sub.jsonl",
    ]
    for name in names:
        (chats / name).parent.mkdir(exist_ok=True)
        (chats / name).write_text("{}")
    found = [p.relative_to(chats).as_posix() for p in gemini.session_files(tmp_path / ".gemini")]
    assert found == ["session-a.jsonl", "session-b.json", "session-c.jsonl", "x/sub.jsonl"]


# ------------------------------------------------------------------ hostile input
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=30),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
                    max_leaves=12)  # fmt: skip
SHELLISH = st.lists(st.sampled_from(["<untrusted_context>\n", "Output: ", "Exit Code: ", "1", "\n",
                                     "</untrusted_context>", "<hook_context>", "</hook_context>",
                                     "Output too large. Showing first ", "Error: ", "x", "(empty)"]),
                    max_size=12).map("".join)  # fmt: skip
FIELDS = st.sampled_from(["session_id", "transcript_path", "cwd", "source", "prompt", "tool_name",
                          "tool_input", "tool_response", "trigger", "reason"])  # fmt: skip
KEYS = {"hook_event_name", "session_id", "transcript_path", "cwd", "source", "prompt", "tool_name",
        "tool_input", "tool_response", "tool_use_id", "error", "is_interrupt", "trigger", "reason"}  # fmt: skip


@FUZZ
@given(event=st.sampled_from([*sorted(gemini.SPEC.events), "BeforeTool", "x"]),
       data=st.dictionaries(st.one_of(FIELDS, st.text(max_size=8)), JSON, max_size=8),
       shell=st.one_of(st.none(), SHELLISH), command=JSON)  # fmt: skip
def test_any_payload_translates_or_is_ignored(event, data, shell, command):
    if shell is not None:
        data = {**data, "tool_name": "run_shell_command", "tool_input": {"command": command},
                "tool_response": {"llmContent": shell, "error": data.get("reason")}}  # fmt: skip
    got = gemini.to_input(event, data)
    if got is None:
        return
    handler, inp = got
    assert handler in HANDLERS and set(inp) <= KEYS
    HookInput.model_validate(inp)
    json.dumps(inp)


CALL = st.fixed_dictionaries({"id": st.one_of(st.text(max_size=6), JSON),
                              "name": st.sampled_from(["run_shell_command", "replace", "write_file", "x"]),
                              "args": JSON, "status": st.sampled_from(["success", "error", "scheduled", 3]),
                              "result": st.one_of(JSON, SHELLISH.map(lambda s: [{"functionResponse": {
                                  "response": {"output": s}}}]))})  # fmt: skip
LINE = st.one_of(
    st.just({"sessionId": "s", "projectHash": "h"}),
    st.builds(lambda i, t, c, calls: {"id": i, "type": t, "content": c, "toolCalls": calls},
              st.sampled_from(["a", "b"]), st.sampled_from(["user", "gemini", "info", 3]),
              st.one_of(JSON, SHELLISH), st.lists(CALL, max_size=3)),
    st.builds(lambda v: {"$set": v}, JSON), st.builds(lambda v: {"$rewindTo": v}, JSON), JSON,
)  # fmt: skip


@FUZZ
@given(lines=st.lists(st.one_of(LINE.map(json.dumps), st.text(max_size=40)), max_size=8),
       cut=st.integers(0, 8))  # fmt: skip
def test_any_session_lines_are_read_or_passed_over(tmp_path_factory, lines, cut):
    path = tmp_path_factory.mktemp("g") / "session-x.jsonl"
    text = "".join(line.replace("\n", " ") + "\n" for line in lines)
    path.write_text(text, encoding="utf-8")
    res = read_turns(path, final=True)
    keys = [t.key for t in res.turns]
    assert len(keys) == len(set(keys))  # a message appended again adds nothing twice
    if res.format == "gemini" and res.checkpoints:  # resumed anywhere: the same turns
        cp = res.checkpoints[min(cut, len(res.checkpoints) - 1)]
        rest = read_turns(path, cp.offset, "gemini", pending=cp.pending, final=True)
        assert keys == [t.key for t in res.turns[: cp.turns] + rest.turns]
    read_events(path, FeedProgress(), final=True)
    last_turn(path)
    doc = path.parent / "chats" / "session-x.json"  # the same lines as an older build's document
    doc.parent.mkdir(exist_ok=True)
    messages = [m for m in map(parse_line, lines) if m is not None]
    doc.write_text(json.dumps({"sessionId": "s", "messages": messages}), encoding="utf-8")
    got = read_turns(doc)
    assert len(got.checkpoints) == 1 and len({t.key for t in got.turns}) == len(got.turns)


# ------------------------------------------------------------------ end to end
FAIL_ROOT = "/home/dev/shop-api"
LESSON = {"name": "PARSE_PORT_NONE", "entityType": "lesson",
          "observations": ["parse_port gets None when PORT is unset: return None before .strip()"],
          "errorPattern": {"type": "AttributeError", "message": "'NoneType' object has no attribute 'strip'",
                           "context": "pytest -q tests/test_config.py"},
          "metadata": {"severity": "high", "environment": {}, "frequency": 2, "successRate": 0.9},
          "verificationSteps": [{"command": "pytest -q tests/test_config.py", "expectedOutput": "passed",
                                 "successIndicators": ["passed"]}]}  # fmt: skip


def test_a_gemini_session_through_the_hook_routes(tmp_path):
    repo = tmp_path / "repo"
    (repo / "src" / "shop").mkdir(parents=True)
    (repo / "src" / "shop" / "config.py").write_text(
        "def parse_port(value):\n    return int(value)\n"
    )
    transcript = session_dir(tmp_path, str(repo)) / "session-2026-08-20T10-15-8f1c2d3e.jsonl"
    text = (FIX / "session.jsonl").read_text(encoding="utf-8").replace(FAIL_ROOT, str(repo))
    shift = time.time() - datetime.fromisoformat("2026-08-20T10:15:20.600+00:00").timestamp()

    def now(m: re.Match) -> str:  # the session as if it ran now (the prompt is matched by time)
        then = datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
        return f'"{datetime.fromtimestamp(then + shift, UTC).isoformat()}"'

    lines = re.sub(r'"(2026-08-20T[0-9:.]+Z)"', now, text).splitlines(keepends=True)
    base = {"session_id": SID, "transcript_path": str(transcript), "cwd": str(repo)}

    with hook_daemon(tmp_path, "s3cret") as (svc, client, http):
        client.ok("create_lesson", {"lesson": LESSON})

        def post(event: str, upto: int, **fields):
            part = transcript.with_suffix(".part")  # whole lines only, as Gemini CLI appends them
            part.write_text("".join(lines[:upto]), encoding="utf-8")
            os.replace(part, transcript)
            body = {"client": "gemini", "input": {**base, **fields, "hook_event_name": event},
                    "config": {"lesson_threshold": 0.05}}  # fmt: skip
            r = http.post(f"/hooks/{event}", json=body, headers={"Authorization": "Bearer s3cret"})
            assert r.status_code == 200, r.text
            out = r.json()["output"]
            return out["hookSpecificOutput"]["additionalContext"] if out else out

        # other sessions: the briefing, a failure, an unrelated prompt
        assert "PARSE_PORT_NONE" in post("SessionStart", 0, session_id="s1", source="startup")
        fail = {
            k: payload("AfterTool-fail")[k] for k in ("tool_name", "tool_input", "tool_response")
        }
        assert "PARSE_PORT_NONE" in post("AfterTool", 0, session_id="s2", **fail)
        assert post("BeforeAgent", 0, session_id="s3", prompt="draw a sunset in ascii art") is None
        # this one: the prompt recalls the lesson (before Gemini CLI writes the prompt), so its
        # failure does not show it again; the call is written only after its hook
        prompt = payload("BeforeAgent")["prompt"]
        assert "PARSE_PORT_NONE" in post("BeforeAgent", 3, prompt=prompt)
        assert post("AfterTool", 8, **fail) is None
        shell = {
            k: payload("AfterTool-pass")[k] for k in ("tool_name", "tool_input", "tool_response")
        }
        assert post("AfterTool", 18, **shell) is None
        assert post("AfterAgent", 23, prompt=prompt, prompt_response="ok") is None

        def learned():  # the seeded lesson and the one learned from fail, edit, pass
            return [r[0] for r in svc.store.reader.execute("SELECT error_type FROM lessons")]

        def exchanges():
            return [r[0] for r in svc.store.reader.execute(
                "SELECT content FROM records WHERE kind='turn' AND "
                "json_extract(metadata, '$.session') = ?", (SID,))]  # fmt: skip

        assert wait_for(lambda: len(learned()) == 2), learned()
        assert wait_for(lambda: any("run_shell_command" in c for c in exchanges())), exchanges()
        [exchange] = exchanges()
        assert exchange.startswith(f"Prompt: {prompt}") and "<hook_context>" not in exchange
        assert post("SessionEnd", len(lines), reason="exit") is None

        def read_to_the_end():  # the detector's reading of the whole file, after the session end
            raw = svc.store.meta(f"episodes.file:{transcript.resolve()}")
            return raw and json.loads(raw)["offset"] == transcript.stat().st_size

        assert wait_for(read_to_the_end)
        assert len(learned()) == 2  # the commands read again from the transcript: no new lesson
