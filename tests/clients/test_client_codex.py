"""Codex CLI: its hook payloads (``tests/fixtures/clients/codex``, SOURCES.md there) translated to
our handlers and our answers to its stdout JSON (pure functions), its hooks.json and config.toml
installed beside a user's own entries and removed byte for byte, its rollouts read as turns and
as the episode detector's events, hostile payloads and lines (Hypothesis, bounded), its plugin
package, and one thread of its events through the daemon's hook routes (a relevant memory for a
prompt, nothing for an unrelated one, the lesson for a failed command, fail -> edit -> pass
learned once, a bad input refused)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.learning.episode_events import FeedProgress, read_events
from ingest.learning.tool_events import tool_event
from ingest.sessions import transcripts_codex as tc
from ingest.sessions.transcripts import last_turn, read_turns, session_cwd
from server.hooks import install
from server.hooks.clients import codex
from server.hooks.clients import config_files as cf
from server.hooks.clients.spec import HANDLERS
from server.service.prompting.hook_events import HookInput, response_failure
from tests.mcp_util import hook_daemon, wait_for
from tests.transcript_util import grow

FIX = Path(__file__).parents[1] / "fixtures" / "clients" / "codex"
THREAD = "019a3c5e-7b21-7d40-9c2a-4f1e8d6b3a70"
ROLLOUT = FIX / f"rollout-2026-11-02T10-15-00-{THREAD}.jsonl"
ROOT = "/home/dev/shop"
BASE = {"session_id": THREAD, "cwd": ROOT,
        "transcript_path": f"/home/dev/.codex/sessions/2026/11/02/{ROLLOUT.name}"}  # fmt: skip
FUZZ = settings(max_examples=50, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
PROMPT = "The checkout tests fail against the database again, can you look?"
DONE = "Fixed: app/db.py resets the pool before reopening it; the three tests pass."


def payload(name: str) -> dict:
    return json.loads((FIX / "payloads" / f"{name}.json").read_text(encoding="utf-8"))


# ------------------------------------------------------------------ events in
def test_lifecycle_events_keep_their_fields():
    assert codex.to_input("SessionStart", payload("SessionStart")) == (
        "SessionStart", {**BASE, "source": "startup"})  # fmt: skip
    assert codex.to_input("UserPromptSubmit", payload("UserPromptSubmit")) == (
        "UserPromptSubmit", {**BASE, "prompt": PROMPT})  # fmt: skip
    assert codex.to_input("PreCompact", payload("PreCompact")) == (
        "PreCompact", {**BASE, "trigger": "auto"})  # fmt: skip
    assert codex.to_input("Stop", payload("Stop")) == ("Stop", BASE)
    assert codex.to_input("SessionEnd", payload("SessionEnd")) == (
        "SessionEnd", {**BASE, "reason": "other"})  # fmt: skip
    # a null transcript (an ephemeral thread) is left out, never guessed
    assert codex.to_input("Stop", {**payload("Stop"), "transcript_path": None})[1] == {
        "session_id": THREAD, "cwd": ROOT}  # fmt: skip


def test_a_failed_command_gets_the_failure_handler():
    handler, inp = codex.to_input("PostToolUse", payload("PostToolUse"))
    assert handler == "PostToolUseFailure"
    assert inp == {**BASE, "tool_name": codex.UNKNOWN_STATUS_TOOL,
                   "tool_input": {"command": "pytest -q tests/test_db.py"},
                   "tool_use_id": "call_pytest1",
                   "error": payload("PostToolUse")["tool_response"]}  # fmt: skip
    # lessons are shown; the live detector gets no run (the rollout gives its real status)
    assert tool_event(inp["tool_name"], inp["tool_input"], inp["error"], False, "x") is None
    HookInput(**inp)


def test_a_passing_command_is_left_to_the_rollout():
    handler, inp = codex.to_input("PostToolUse", payload("PostToolUse-passed"))
    assert handler == "PostToolUse" and inp["tool_name"] == codex.UNKNOWN_STATUS_TOOL
    assert response_failure(HookInput(**inp).tool_response) == (inp["tool_response"], False)
    # no exit status in the hook's input: no live event; the rollout's status is read instead
    assert tool_event(inp["tool_name"], inp["tool_input"], "", True, "x") is None


def test_a_status_line_decides_only_what_is_shown():
    def post(response):
        return codex.to_input("PostToolUse", {**payload("PostToolUse"), "tool_response": response})

    handler, inp = post("Exit code: 2\nWall time: 0.1 seconds\nOutput:\nboom\n")
    assert handler == "PostToolUseFailure" and inp["error"] == "boom\n"
    handler, inp = post("Chunk ID: a1\nWall time: 0.2 seconds\nProcess exited with code 0\n"
                        "Output:\nError: none of this matters\n")  # fmt: skip
    assert handler == "PostToolUseFailure"  # error words: lessons shown, nothing learned
    handler, inp = post("Chunk ID: a1\nWall time: 0.2 seconds\nProcess exited with code 0\n"
                        "Output:\n3 passed\n")  # fmt: skip
    assert handler == "PostToolUse" and inp["tool_response"] == "3 passed\n"
    assert post("Chunk ID: a1\nWall time: 10 seconds\nProcess running with session ID 4\n") is None
    early = json.dumps({"output": "3 failed", "metadata": {"exit_code": 1, "duration_seconds": 1}})
    assert post(early)[0] == "PostToolUseFailure"
    assert post([{"type": "input_text", "text": "Traceback (most recent call last):\nKeyError: 1"}])[
        0] == "PostToolUseFailure"  # fmt: skip
    for response in (
        "Exit code: 2\nOutput:\nboom\n",
        "3 passed\n",
        early,
        "Exit code: 0\nTraceback (most recent call last):\nAssertionError: x\n",
    ):
        _, inp = post(response)
        assert inp["tool_name"] == codex.UNKNOWN_STATUS_TOOL  # never a run for the detector


def test_other_tools_and_events_are_ignored():
    assert codex.to_input("PostToolUse", payload("PostToolUse-apply_patch")) is None
    assert codex.to_input("PostToolUse", {**payload("PostToolUse"), "tool_input": {}}) is None
    assert codex.to_input("PreToolUse", payload("PostToolUse")) is None
    assert codex.to_input("SubagentStop", payload("Stop")) is None
    assert {b.client_event for b in codex.BINDINGS} == codex.SPEC.events


# ------------------------------------------------------------------ answers out
def test_outputs_have_codex_shape():
    text = "<memory>\n- lesson POOL_CLOSED: reset the pool before reopening it\n</memory>"
    expected = json.loads((FIX / "output-UserPromptSubmit.json").read_text(encoding="utf-8"))
    assert codex.to_output("UserPromptSubmit", text) == expected
    for event in ("SessionStart", "PostToolUse"):
        out = codex.to_output(event, text)
        # codex-rs/hooks/src/schema.rs: hookSpecificOutput {hookEventName, additionalContext}
        assert set(out) == {"hookSpecificOutput"} and out["hookSpecificOutput"] == {
            "hookEventName": event, "additionalContext": text}  # fmt: skip
    for event in ("Stop", "PreCompact", "SessionEnd"):  # their output takes no such object
        assert codex.to_output(event, text) is None
    assert codex.to_output("UserPromptSubmit", "") is None


@FUZZ
@given(event=st.sampled_from(["SessionStart", "UserPromptSubmit", "PostToolUse", "PreCompact",
                              "Stop", "SessionEnd", "PreToolUse"]),
       data=st.dictionaries(st.sampled_from(["session_id", "cwd", "transcript_path", "prompt",
                                             "source", "tool_name", "tool_input", "tool_response",
                                             "tool_use_id", "trigger", "reason", "x"]),
                            st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=40)
                                         | st.just("Bash") | st.just("Exit code: 1\nOutput:\nx"),
                                         lambda c: st.lists(c, max_size=3)
                                         | st.dictionaries(st.just("command") | st.text(max_size=5), c,
                                                           max_size=3), max_leaves=8),
                            max_size=8))  # fmt: skip
def test_any_payload_translates_or_is_ignored(event, data):
    out = codex.to_input(event, data)
    if out is not None:
        handler, inp = out
        assert handler in HANDLERS
        HookInput(**inp)  # our input model takes it
        assert inp.get("tool_name") in (None, codex.UNKNOWN_STATUS_TOOL)  # no status guessed


# ------------------------------------------------------------------ install
USER_HOOKS = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
                        "PreToolUse": [{"matcher": "Bash", "hooks": [
                            {"type": "command", "command": "/usr/local/bin/guard", "timeout": 5}]}]}}  # fmt: skip
USER_TOML = """# my Codex settings
model = "gpt-5.1-codex"  # the default

[features]
# plugins on
plugins = true

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]

[profiles.fast]
model = "gpt-5.1-codex-mini"
"""


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "codex-home"
    h.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(h))
    monkeypatch.setattr(codex, "flag_key", lambda: "hooks")
    return h


def test_install_beside_a_users_files_and_back_byte_for_byte(home, tmp_path):
    hooks_text = json.dumps(USER_HOOKS, indent=4) + "\n"
    (home / "hooks.json").write_text(hooks_text, encoding="utf-8")
    (home / "config.toml").write_text(USER_TOML, encoding="utf-8")
    lines = install.install("user", tmp_path, client="codex")
    assert any("/hooks" in ln for ln in lines)  # the trust note
    hooks = json.loads((home / "hooks.json").read_text(encoding="utf-8"))
    assert hooks["hooks"]["Stop"][0] == USER_HOOKS["hooks"]["Stop"][0]  # the user's first, kept
    assert hooks["hooks"]["PreToolUse"] == USER_HOOKS["hooks"]["PreToolUse"]
    ours = hooks["hooks"]["PostToolUse"][0]
    assert ours["matcher"] == "Bash" and ours["hooks"][0]["timeout"] == 10
    assert ours["hooks"][0]["command"].endswith("hookclient.py --client codex PostToolUse")
    assert hooks["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] == 3
    assert set(hooks) == {"hooks"}  # Codex refuses any other top-level key
    text = (home / "config.toml").read_text(encoding="utf-8")
    data = cf.toml_data(text)
    assert data["features"] == {"hooks": True, "plugins": True}
    assert data["mcp_servers"]["docs"]["command"] == "npx"
    assert data["mcp_servers"]["pattern-memory"] == cf.server_entry()
    assert data["profiles"]["fast"]["model"] == "gpt-5.1-codex-mini"
    assert text.startswith(USER_TOML.split("[features]")[0])  # comments and order kept
    before = {p.name: p.read_bytes() for p in home.iterdir()}
    install.install("user", tmp_path, client="codex")  # a second run changes nothing
    assert {p.name: p.read_bytes() for p in home.iterdir() if ".bak-" not in p.name} == {
        k: v for k, v in before.items() if ".bak-" not in k}  # fmt: skip
    status = install.status(tmp_path, client="codex")
    assert any("PostToolUse" in s and "user" in s for s in status)
    install.uninstall("user", tmp_path, client="codex")
    assert (home / "hooks.json").read_text(encoding="utf-8") == hooks_text
    assert (home / "config.toml").read_text(encoding="utf-8") == USER_TOML


def test_project_files_created_and_removed(home, tmp_path):
    project = tmp_path / "repo"
    project.mkdir()
    install.install("project", project, client="codex")
    text = (project / ".codex" / "config.toml").read_text(encoding="utf-8")
    assert cf.toml_data(text) == {"features": {"hooks": True},
                                  "mcp_servers": {"pattern-memory": cf.server_entry()}}  # fmt: skip
    assert codex._flag_present(text) == ["hooks"] and codex._server_present(text)
    # removed in either order, each its own lines
    assert cf.toml_data(codex._without_server(text)) == {"features": {"hooks": True}}
    assert "mcp_servers" in cf.toml_data(codex._without_flag(text))
    install.uninstall("project", project, client="codex")
    assert not (project / ".codex" / "config.toml").exists()
    assert not (project / ".codex" / "hooks.json").exists()
    assert not list(home.iterdir())  # the user scope untouched


def test_a_users_own_flag_and_server_stand(home, tmp_path):
    mine = '[features]\nhooks = false\n\n[mcp_servers.pattern-memory]\ncommand = "pm"\n'
    (home / "config.toml").write_text(mine, encoding="utf-8")
    install.install("user", tmp_path, client="codex")
    assert (home / "config.toml").read_text(encoding="utf-8") == mine
    assert codex._server_present(mine) == ["pattern-memory"] and codex._flag_present(mine) == []
    install.uninstall("user", tmp_path, client="codex")
    assert (home / "config.toml").read_text(encoding="utf-8") == mine


def test_the_flags_name_follows_the_codex_on_path(monkeypatch):
    import subprocess

    class Done:
        def __init__(self, out):
            self.stdout = out

    monkeypatch.setattr(codex.shutil, "which", lambda name: "/usr/bin/codex")
    for version, key in (("codex-cli 0.129.0\n", "codex_hooks"), ("codex-cli 0.152.1\n", "hooks")):
        monkeypatch.setattr(subprocess, "run", lambda *a, v=version, **k: Done(v))
        codex.flag_key.cache_clear()
        assert codex.flag_key() == key
    monkeypatch.setattr(codex.shutil, "which", lambda name: None)
    codex.flag_key.cache_clear()
    assert codex.flag_key() == "hooks"
    codex.flag_key.cache_clear()


def test_detect_reads_codex_home(tmp_path, monkeypatch):
    monkeypatch.setattr(codex.shutil, "which", lambda name: None)
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "none"))
    assert not codex.detect()
    monkeypatch.setenv("CODEX_HOME", str(tmp_path))
    assert codex.detect()


# ------------------------------------------------------------------ rollouts
def test_a_rollout_read_as_turns():
    res = read_turns(ROLLOUT, flush=True, final=True)
    assert res.format == "codex" and res.bad_lines == 0
    turns = [(t.role, t.text.split("\n")[0]) for t in res.turns]
    assert turns == [
        ("user", PROMPT),  # AGENTS.md, environment context and developer text are no prompts
        ("assistant", "I'll run the database tests first."),
        ("tool", "Bash(command=pytest -q tests/test_db.py) → error:"),
        ("assistant", "The pool is reopened after it was closed; it has to be reset first."),
        ("tool", "apply_patch(files=app/db.py) → ok: Success. Updated the following files: (2 lines, 50 characters)"),
        ("tool", "Bash(command=python -m pytest -q tests/test_db.py) → ok: ... (2 lines, 19 characters)"),
        ("assistant", DONE),
    ]  # fmt: skip
    assert "PoolError: pool on port 5432 closed" in res.turns[2].text
    assert {(t.session, t.cwd, t.git_branch) for t in res.turns} == {(THREAD, ROOT, "main")}
    assert res.turns[2].key == "tool:call_pytest1" and res.turns[0].timestamp.startswith("2026-11")
    assert session_cwd(ROLLOUT) == ROOT and last_turn(ROLLOUT) == DONE


def test_a_rollout_read_in_parts_gives_the_same_turns():
    whole = read_turns(ROLLOUT, flush=True, final=True).turns
    fmt, offset, pending, got = None, 0, None, []
    for _ in range(100):
        res = read_turns(ROLLOUT, offset, fmt, flush=True, max_bytes=600, pending=pending)
        cp = res.checkpoints[-1] if res.checkpoints else None
        if cp is None or cp.offset == offset:
            break
        got += res.turns[: cp.turns]
        fmt, offset, pending = res.format, cp.offset, cp.pending
    assert [(t.key, t.text, t.session) for t in got] == [(t.key, t.text, t.session) for t in whole]


def test_a_rollout_read_as_the_detectors_events():
    events, places = read_events(ROLLOUT, FeedProgress(), final=True)
    got = [(ev.kind, ev.call, ev.ok, ev.command or ev.path) for _, ev in events]
    assert got == [
        ("prompt", "", True, ""), ("say", "", True, ""),
        ("run", "call_pytest1", False, "pytest -q tests/test_db.py"), ("say", "", True, ""),
        ("edit", "call_patch1", True, f"{ROOT}/app/db.py"),
        # still running after its first output: its end comes from the write_stdin poll
        ("run", "call_pytest2", True, "python -m pytest -q tests/test_db.py"), ("say", "", True, ""),
    ]  # fmt: skip
    assert "+    pool.reset()" in events[4][1].hunk and "PoolError" in events[2][1].output
    assert {s for s, _ in events} == {THREAD} and places[THREAD] == {"cwd": ROOT, "branch": "main"}


def test_output_and_patch_readers():
    assert tc.exec_result("Exit code: 3\nWall time: 1 seconds\nTotal output lines: 1\nOutput:\nno\n") == (
        3, None, "no\n")  # fmt: skip
    assert tc.exec_result("plain words\nExit code: 1") == (None, None, "plain words\nExit code: 1")
    assert tc.exec_result('{"output": "x"}') == (None, None, '{"output": "x"}')
    assert tc.patch_files("*** Begin Patch\n*** Add File: a.py\n+x\n*** Update File: b.py\n"
                          "*** Move to: c.py\n@@\n-y\n+z\n*** Delete File: d.py\n*** End Patch") == [
        ("a.py", "+x"), ("c.py", "-y\n+z"), ("d.py", "(deleted)")]  # fmt: skip
    assert tc.contextual("<user_shell_command>\nls\n</user_shell_command>")
    assert tc.contextual('<hook_prompt hook_run_id="1">go on</hook_prompt>')
    assert not tc.contextual("<b>bold</b> is what I asked for") and not tc.contextual("fix <it>")
    assert tc.call_of({"type": "function_call", "name": "shell", "call_id": "c",
                       "arguments": '{"command": ["bash", "-lc", "make test"]}'}) == (
        "Bash", {"command": "make test"})  # fmt: skip
    assert tc.call_of({"type": "local_shell_call", "call_id": "c",
                       "action": {"type": "exec", "command": ["ls", "-a b"]}}) == (
        "Bash", {"command": "ls '-a b'"})  # fmt: skip
    assert tc.call_of({"type": "function_call", "name": "shell", "call_id": "c",
                       "arguments": '{"command": ["apply_patch", "*** Begin Patch"]}'})[0] == "apply_patch"  # fmt: skip


_VALUE = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=30),
                      lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
                      max_leaves=10)  # fmt: skip
_PAYLOAD = st.fixed_dictionaries(
    {}, optional={"type": st.sampled_from(["message", "function_call", "function_call_output",
                                          "custom_tool_call", "custom_tool_call_output",
                                          "local_shell_call", "reasoning", "x"]) | _VALUE,
                  "role": st.sampled_from(["user", "assistant", "developer", 5]),
                  "content": _VALUE, "call_id": st.sampled_from(["c1", "c2", 7]),
                  "name": st.sampled_from(["exec_command", "write_stdin", "apply_patch", "shell", "x"]),
                  "arguments": st.sampled_from(['{"cmd": "pytest"}', '{"session_id": 3}', "[", '{"command": 1}']),
                  "output": _VALUE | st.sampled_from(["Process running with session ID 3\n",
                                                     "Exit code: 1\nOutput:\nTraceback", "x"]),
                  "input": st.text(max_size=60) | st.just("*** Begin Patch\n*** Add File: a\n+x\n"),
                  "action": _VALUE, "id": _VALUE, "cwd": _VALUE, "git": _VALUE})  # fmt: skip
_LINE = st.one_of(
    st.builds(lambda t, p, ts: json.dumps({"timestamp": ts, "type": t, "payload": p}),
              st.sampled_from(sorted(tc.ROLLOUT_TYPES)) | _VALUE, _PAYLOAD, _VALUE),
    st.text(max_size=40), st.just('{"type": "response_item", "payload": 5}'),
    st.just("[" * 5000), st.just('{"type": "session_meta"'),
)  # fmt: skip


@FUZZ
@given(lines=st.lists(_LINE, max_size=12))
def test_hostile_rollouts_never_fail_a_reader(lines, tmp_path_factory):
    path = tmp_path_factory.mktemp("r") / f"rollout-x-{THREAD}.jsonl"
    meta = json.dumps({"type": "session_meta", "payload": {"id": THREAD, "cwd": ROOT}})
    path.write_text("\n".join([meta, *lines]) + "\n", encoding="utf-8")
    res = read_turns(path, flush=True, final=True, dangling_s=0.0)
    assert all(t.role in ("user", "assistant", "tool") and len(t.text) < 9000 for t in res.turns)
    prog = FeedProgress()
    read_events(path, prog, final=True, dangling_s=3600.0)
    assert len(prog.pending) <= 64
    last_turn(path)
    session_cwd(path)


# ------------------------------------------------------------------ the plugin package
PKG = Path(__file__).parents[2] / "packaging" / "codex"


@pytest.mark.skipif(not PKG.is_dir(), reason="no Codex plugin package")
def test_the_plugin_package_is_what_codex_reads():
    repo = Path(__file__).parents[2]
    market = json.loads(
        (repo / ".agents" / "plugins" / "marketplace.json").read_text(encoding="utf-8")
    )
    entry = next(p for p in market["plugins"] if p["name"] == "pattern-memory")
    source = entry["source"]["path"] if isinstance(entry["source"], dict) else entry["source"]
    assert source.startswith("./") and (repo / source).resolve() == PKG.resolve()
    manifest = json.loads((PKG / ".codex-plugin" / "plugin.json").read_text(encoding="utf-8"))
    assert manifest["name"] == "pattern-memory" == entry["name"]
    for key in ("hooks", "mcpServers"):  # paths must be ./-relative, inside the package
        assert manifest[key].startswith("./") and (PKG / manifest[key]).is_file()
    hooks = json.loads((PKG / manifest["hooks"]).read_text(encoding="utf-8"))
    assert set(hooks) == {"hooks"} and set(hooks["hooks"]) == codex.SPEC.events
    for event, groups in hooks["hooks"].items():
        for hook in groups[0]["hooks"]:
            assert hook["type"] == "command" and f"--client codex {event}" in hook["command"]
    servers = json.loads((PKG / manifest["mcpServers"]).read_text(encoding="utf-8"))["mcpServers"]
    # a relative cwd is the plugin's folder (codex-rs/core-plugins/src/loader.rs)
    assert servers["pattern-memory"] == {"command": "sh", "args": ["run.sh", "serve"], "cwd": ".",
                                         "startup_timeout_sec": 600}  # fmt: skip


def _run(plugin: Path, env: dict, stdin: bytes = b"{not json") -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(plugin / "run.sh"), "hook", "--client", "codex", "Stop"],
                          input=stdin, capture_output=True, timeout=20,
                          env={"PATH": os.environ["PATH"], **env})  # fmt: skip


@pytest.mark.skipif(not PKG.is_dir(), reason="no Codex plugin package")
def test_the_plugins_hooks_cold_and_warm(tmp_path):
    """Installed as Codex installs it (the folder copied into its cache), the hook finds this
    repository through a local marketplace's entry in config.toml; before the environment
    exists it prints nothing and exits 0 at once, after it the hook client runs."""
    repo = Path(__file__).parents[2]
    home = tmp_path / "codex"
    plugin = home / "plugins" / "cache" / "pm-market" / "pattern-memory" / "0.1.0"
    shutil.copytree(PKG, plugin)
    (home / "config.toml").write_text(
        f'[marketplaces.pm-market]\nsource_type = "local"\nsource = "{repo}"  # here\n'
    )
    env = {"HOME": str(tmp_path), "PATTERN_HOME": str(tmp_path / "store")}
    start = time.monotonic()
    cold = _run(plugin, env)
    assert (cold.returncode, cold.stdout, cold.stderr) == (0, b"", b"")
    assert time.monotonic() - start < 5 and not (tmp_path / "store").exists()
    venv = home / "plugins" / "data" / "pattern-memory-pm-market" / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    warm = _run(plugin, env)  # the hook client ran: bad stdin is one line of its log
    assert (warm.returncode, warm.stdout) == (0, b"")
    assert "Stop" in (tmp_path / "store" / "hooks.log").read_text(encoding="utf-8")
    lost = _run(plugin, {**env, "CODEX_HOME": str(tmp_path / "elsewhere")})
    assert (lost.returncode, lost.stdout) == (0, b"")  # no repository found: still nothing


# ------------------------------------------------------------------ through the daemon
LESSON = {"name": "POOL_CLOSED", "entityType": "lesson",
          "observations": ["Reset the pool before reopening it: pool.reset() then open()"],
          "errorPattern": {"type": "PoolError", "message": "pool on port 5432 closed",
                           "context": "pytest tests/test_db.py"},
          "metadata": {"severity": "high", "environment": {}, "frequency": 2, "successRate": 0.9},
          "verificationSteps": [{"command": "pytest tests/test_db.py", "expectedOutput": "passed",
                                 "successIndicators": ["passed"]}]}  # fmt: skip


def _moved_to_now(text: str) -> str:
    """The rollout with every ``"timestamp"`` shifted by one offset: its first a minute ago."""
    import re
    from datetime import UTC, datetime, timedelta

    stamps = re.findall(r'"timestamp":"([0-9T:.-]+)Z"', text)
    first = datetime.fromisoformat(stamps[0])
    shift = datetime.now(UTC).replace(tzinfo=None) - timedelta(minutes=1) - first

    def moved(m: re.Match) -> str:
        when = datetime.fromisoformat(m.group(1)) + shift
        return f'"timestamp":"{when.isoformat(timespec="milliseconds")}Z"'

    return re.sub(r'"timestamp":"([0-9T:.-]+)Z"', moved, text)


def test_a_codex_thread_through_the_hook_routes(tmp_path):
    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    (repo / "app" / "db.py").write_text("def connect(port):\n    pool = Pool(port=port)\n")
    rollout = tmp_path / "sessions" / "2026" / "11" / "02" / ROLLOUT.name
    rollout.parent.mkdir(parents=True)
    # written now: the rollout's times moved so that its first is a minute ago (a call older
    # than PATTERN_SESSION_DANGLING_S would be given up on; keeping the fixture's minutes in
    # the current hour put the calls up to 59 minutes back, failing at some times of the day)
    text = ROLLOUT.read_text(encoding="utf-8").replace(ROOT, str(repo))
    lines = _moved_to_now(text).splitlines(keepends=True)
    base = {"session_id": THREAD, "transcript_path": str(rollout), "cwd": str(repo),
            "model": "gpt-5.1-codex", "permission_mode": "default"}  # fmt: skip

    with hook_daemon(tmp_path, "s3cret") as (svc, client, http):
        client.ok("create_lesson", {"lesson": LESSON})
        client.ok("remember", {"content": "When the checkout tests fail against the database, "
                                          "start it first: docker compose up db", "scope": "team"})  # fmt: skip

        def post(event: str, upto: int, status: int = 200, **fields):
            grow(rollout, lines, upto)
            body = {"client": "codex", "input": {**base, **fields, "hook_event_name": event},
                    "config": {"lesson_threshold": 0.05, "threshold": 0.15}}  # fmt: skip
            r = http.post(f"/hooks/{event}", json=body, headers={"Authorization": "Bearer s3cret"})
            assert r.status_code == status, r.text
            return r.json().get("output")

        brief = post("SessionStart", 1, session_id="t0", source="startup")
        assert "POOL_CLOSED" in brief["hookSpecificOutput"]["additionalContext"]
        assert post("UserPromptSubmit", 4, session_id="t1",
                    prompt="What is the capital of France?") is None  # fmt: skip
        out = post("UserPromptSubmit", 6, prompt=PROMPT)
        assert "docker compose up db" in out["hookSpecificOutput"]["additionalContext"]
        fail = payload("PostToolUse")["tool_response"].replace(ROOT, str(repo))
        out = post("PostToolUse", 10, tool_name="Bash", tool_use_id="call_pytest1",
                   tool_input={"command": "pytest -q tests/test_db.py"}, tool_response=fail)  # fmt: skip
        assert out["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
        assert "POOL_CLOSED" in out["hookSpecificOutput"]["additionalContext"]
        assert post("PostToolUse", 19, tool_name="Bash", tool_use_id="call_pytest2",
                    tool_input={"command": "python -m pytest -q tests/test_db.py"},
                    tool_response="3 passed in 0.44s\n") is None  # fmt: skip
        assert post("Stop", len(lines), stop_hook_active=False) is None
        bad = http.post("/hooks/Stop", json={"client": "codex", "input": ["not", "an", "object"]},
                        headers={"Authorization": "Bearer s3cret"})  # fmt: skip
        assert bad.status_code == 400  # the hook client logs it and prints nothing

        def learned():
            return svc.store.reader.execute("SELECT count(*) FROM lessons").fetchone()[0] == 2

        def indexed():
            return svc.store.reader.execute(
                "SELECT count(*) FROM records WHERE kind='turn'").fetchone()[0] > 0  # fmt: skip

        assert wait_for(learned) and wait_for(indexed)
        time.sleep(0.2)
        assert svc.store.reader.execute("SELECT count(*) FROM lessons").fetchone()[0] == 2
