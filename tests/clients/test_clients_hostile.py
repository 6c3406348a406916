"""Codex CLI and Gemini CLI readers against hostile or unlucky input (review 43b), each case
failing on the code before it:

- Codex: a Bash hook result's status is the command's own text (``Exit code: 0`` printed by a
  failing check): the hook feeds the detector no run, the rollout's status decides (no fix
  learned from two failures); a pasted ``<template>…</template>`` prompt is the user's, only
  Codex's own markers are its context;
- Gemini: a trailing ``Error: …`` line of a command that exited 0 is its output; a ``gemini -p``
  prompt behind a prepended ``<hook_context>`` is kept; a message appended again with 256 calls
  gives no turn twice (reader and detector windows); a torn read of a legacy session document
  does not hide it for good; the extension's hook starts no daemon it cannot run;
- a named pipe at a default session path never blocks ``index-sessions``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ingest.learning.episode_events import FeedProgress, read_events
from ingest.learning.episodes import MAX_SEEN, Event, SessionEpisodes, feed
from ingest.sessions.gemini_parts import MAX_CALLS, prompt_text, shell_result
from ingest.sessions.transcripts import read_turns
from ingest.sessions.transcripts_codex import message_text, turn_of
from ingest.sessions.transcripts_gemini import GeminiTurns, call_event
from server.hooks.clients import codex, gemini
from server.hooks.session_client import default_paths, expand
from server.service.indexing.sessions import transcript_cwd
from tests.mcp_util import hook_daemon, wait_for

ROOT = Path(__file__).resolve().parents[2]
THREAD = "019a3c5e-7b21-7d40-9c2a-4f1e8d6b3a70"
FAIL_OUT = ('Traceback (most recent call last):\n  File "tests/check.py", line 3, in <module>\n'
            "    assert connect(5432).ok\nAssertionError: pool on port 5432 closed\n")  # fmt: skip


# ------------------------------------------------------------------ Codex: hook statuses
@pytest.mark.parametrize("response", [
    "Exit code: 0\n" + FAIL_OUT,  # a failing check that logs a sub-step's status first
    "Process exited with code 0\nOutput:\nall good\n",
    "3 passed in 0.4s\n",
    "Exit code: 1\nOutput:\nError: nothing wrong, the log says so\n",
])  # fmt: skip
def test_a_codex_hook_result_is_never_a_run_with_a_status(response):
    data = {
        "session_id": THREAD,
        "cwd": "/r",
        "tool_name": "Bash",
        "tool_use_id": "call_2",
        "tool_input": {"command": "python tests/check.py"},
        "tool_response": response,
    }
    handler, inp = codex.to_input("PostToolUse", data)
    assert inp["tool_name"] == codex.UNKNOWN_STATUS_TOOL
    assert not isinstance(inp.get("tool_response"), dict)  # no exit_code made up
    if response.startswith("Exit code: 0\nTraceback"):
        assert handler == "PostToolUseFailure"  # error-looking: lessons shown (display only)


def test_shown_lessons_wait_for_the_rollouts_run():
    st = SessionEpisodes(session="s", cwd="/r")
    feed(st, Event(kind="shown", call="c1", injected=["L1"]))
    assert st.seq == 0 and "c1" not in st.seen and st.shown == {"c1": ["L1"]}
    feed(
        st,
        Event(
            kind="run",
            call="c1",
            command="pytest -q tests/test_db.py",
            ok=False,
            output="FAILED tests/test_db.py::test_x - KeyError: 1\n1 failed in 0.1s",
        ),
    )
    assert st.shown == {} and [o.lesson for o in st.outcomes] == ["L1"]


def _line(kind: str, payload: dict, ts: str) -> str:
    return json.dumps({"timestamp": ts, "type": kind, "payload": payload}) + "\n"


def test_a_printed_status_line_learns_no_fix(tmp_path):
    """The hook runs before Codex records the call's output; the rollout's real status (1) must
    decide: two failures of the same check are no fix."""
    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "app" / "db.py").write_text("def connect(port):\n    return Pool(port).open()\n")
    (repo / "tests" / "check.py").write_text(
        "from app.db import connect\n\nassert connect(5432).ok\n"
    )
    rollout = tmp_path / "sessions" / f"rollout-2026-11-02T10-15-00-{THREAD}.jsonl"
    rollout.parent.mkdir(parents=True)
    ts = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    cmd = "python tests/check.py"
    head = "Chunk ID: a\nWall time: 0.1 seconds\nProcess exited with code 1\nOutput:\n"
    patch = (
        "*** Begin Patch\n*** Update File: app/db.py\n@@\n-    return Pool(port).open()\n"
        "+    pool = Pool(port)\n+    pool.reset()\n+    return pool.open()\n*** End Patch\n"
    )
    lines = [
        _line("session_meta", {"id": THREAD, "cwd": str(repo)}, ts),
        _line("response_item", {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "the db check fails, fix it"}]}, ts),
        _line("response_item", {"type": "function_call", "name": "exec_command",
                                "arguments": json.dumps({"cmd": cmd}), "call_id": "call_1"}, ts),
        _line("response_item", {"type": "function_call_output", "call_id": "call_1",
                                "output": head + FAIL_OUT}, ts),
        _line("response_item", {"type": "custom_tool_call", "status": "completed",
                                "call_id": "call_p", "name": "apply_patch", "input": patch}, ts),
        _line("response_item", {"type": "custom_tool_call_output", "call_id": "call_p",
                                "output": "Exit code: 0\nOutput:\nSuccess.\nM app/db.py\n"}, ts),
        _line("response_item", {"type": "function_call", "name": "exec_command",
                                "arguments": json.dumps({"cmd": cmd}), "call_id": "call_2"}, ts),
        _line("response_item", {"type": "function_call_output", "call_id": "call_2",
                                "output": head + "Exit code: 0\n" + FAIL_OUT}, ts),
        _line("response_item", {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "Fixed: app/db.py resets the pool."}]}, ts),
    ]  # fmt: skip
    base = {"session_id": THREAD, "transcript_path": str(rollout), "cwd": str(repo)}
    with hook_daemon(tmp_path, "s3cret") as (svc, client, http):

        def post(event, upto, **fields):
            rollout.write_text("".join(lines[:upto]), encoding="utf-8")
            body = {"client": "codex", "input": {**base, **fields, "hook_event_name": event}}
            r = http.post(f"/hooks/{event}", json=body, headers={"Authorization": "Bearer s3cret"})
            assert r.status_code == 200, r.text

        post(
            "PostToolUse",
            3,
            tool_name="Bash",
            tool_use_id="call_1",
            tool_input={"command": cmd},
            tool_response=FAIL_OUT,
        )
        post(
            "PostToolUse",
            7,
            tool_name="Bash",
            tool_use_id="call_2",
            tool_input={"command": cmd},
            tool_response="Exit code: 0\n" + FAIL_OUT,
        )
        post("SessionEnd", len(lines), reason="other")

        def read_all():  # the detector read the rollout to its end (call_2's real status)
            row = svc.store.meta("episodes.session:" + THREAD)
            return (
                bool(row)
                and not json.loads(row).get("open")
                and any(f.get("call") == "call_2" for f in json.loads(row).get("failures", []))
            )

        assert wait_for(read_all)
        time.sleep(0.3)
        rows = svc.store.reader.execute("SELECT name FROM lessons").fetchall()
        assert [tuple(r) for r in rows] == [], "a check that failed twice was learned as a fix"


# ------------------------------------------------------------------ Codex: its own context
@pytest.mark.parametrize("text", [
    '<template>\n  <div v-if="user">{{ user.name }}</div>\n</template>',
    "<Button onClick={save}>Save</Button>",
    "<error>TypeError: cannot read properties of undefined</error>",
])  # fmt: skip
def test_a_pasted_element_is_the_users_prompt(text):
    payload = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    assert message_text(payload) == ("user", text)
    assert turn_of({"type": "response_item", "payload": payload}) == ("user", text)


@pytest.mark.parametrize("text", [
    "<environment_context>\n  <cwd>/r</cwd>\n</environment_context>",
    "# AGENTS.md instructions for /r\n\n<INSTRUCTIONS>\nbody\n</INSTRUCTIONS>",
    "<SUBAGENT_NOTIFICATION>{}</subagent_notification>",
    "<turn_aborted>\nThe user interrupted.\n</turn_aborted>",
    '<hook_prompt hook_run_id="r1">Retry with tests.</hook_prompt>',
    "<external_ci_status>\ngreen\n</external_ci_status>",
])  # fmt: skip
def test_codex_context_is_still_left_out(text):
    payload = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    assert message_text(payload) == ("user", "")


# ------------------------------------------------------------------ Gemini: shell results
OUTPUT = "deploy finished\nError: none (retried once)"
LLM = "<untrusted_context>\nOutput: " + OUTPUT + "\nProcess Group PGID: 4242\n</untrusted_context>"


def test_a_passing_command_ending_in_an_error_line_is_no_failure():
    assert not shell_result(LLM).failed
    data = {
        "session_id": "s",
        "cwd": "/r",
        "tool_name": "run_shell_command",
        "tool_input": {"command": "tail -n 2 deploy.log"},
        "tool_response": {"llmContent": LLM, "returnDisplay": OUTPUT},
    }
    assert gemini.to_input("AfterTool", data)[0] == "PostToolUse"
    call = {"id": "run_shell_command_1", "name": "run_shell_command", "status": "success",
            "args": {"command": "tail -n 2 deploy.log"},
            "result": [{"functionResponse": {"id": "run_shell_command_1", "name": "run_shell_command",
                                             "response": {"output": LLM}}}]}  # fmt: skip
    ev = call_event(call)
    assert ev is not None and ev.ok
    # Gemini CLI's own error: then the line is its field
    spawn = LLM.replace("Error: none (retried once)", "Error: spawn sh ENOENT")
    failed = {
        **data,
        "tool_response": {"llmContent": spawn, "error": {"message": "spawn sh ENOENT"}},
    }
    assert gemini.to_input("AfterTool", failed)[0] == "PostToolUseFailure"
    ev = call_event(
        {
            **call,
            "status": "error",
            "result": [
                {
                    "functionResponse": {
                        "id": "run_shell_command_1",
                        "name": "run_shell_command",
                        "response": {"output": spawn},
                    }
                }
            ],
        }
    )
    assert ev is not None and not ev.ok


# ------------------------------------------------------------------ Gemini: headless prompts
def test_a_prompt_after_a_prepended_hook_context_is_kept(tmp_path):
    msg = {
        "id": "u1",
        "timestamp": "2026-08-20T10:15:20.600Z",
        "type": "user",
        "content": [
            {
                "text": "<hook_context>Reference material recalled from memory ...\n"
                "- run tests with pytest -q</hook_context>\n\n"
                "the config tests fail with AttributeError on parse_port, fix it"
            }
        ],
    }
    assert prompt_text(msg) == "the config tests fail with AttributeError on parse_port, fix it"
    turns = GeminiTurns(tmp_path / "chats" / "session-x.jsonl").feed(msg)
    assert [(t.role, t.text) for t in turns] == [("user", prompt_text(msg))]
    # a hook's context alone, or unclosed, is still no prompt
    assert prompt_text({**msg, "content": [{"text": "<hook_context>ctx</hook_context>"}]}) is None
    assert prompt_text({**msg, "content": [{"text": "<hook_context>ctx and more"}]}) is None


# ------------------------------------------------------------------ Gemini: seen windows
def test_a_message_appended_again_gives_no_turn_twice(tmp_path):
    chats = tmp_path / "tmp" / "shop" / "chats"
    chats.mkdir(parents=True)
    path = chats / "session-2026-08-20T10-15-8f1c2d3e.jsonl"
    calls = [{"id": f"run_shell_command_{i}", "name": "run_shell_command", "status": "success",
              "args": {"command": f"cat m{i}.py"}, "timestamp": "2026-08-20T10:15:30.000Z",
              "result": [{"functionResponse": {"id": f"run_shell_command_{i}",
                                               "name": "run_shell_command",
                                               "response": {"output": f"Output: {i}"}}}]}
             for i in range(MAX_CALLS)]  # fmt: skip
    meta = {
        "sessionId": "8f1c2d3e-5b6a-4c7d-9e0f-1a2b3c4d5e6f",
        "projectHash": "ab" * 32,
        "startTime": "2026-08-20T10:15:01.900Z",
        "lastUpdated": "2026-08-20T10:15:01.900Z",
    }
    msg = {
        "id": "g1",
        "timestamp": "2026-08-20T10:15:28.300Z",
        "type": "gemini",
        "content": "I'll read every module.",
        "toolCalls": calls,
    }
    lines = [json.dumps(meta)] + [json.dumps({**msg, "tokens": {"total": t}}) for t in range(5)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    keys = [t.key for t in read_turns(path, 0, flush=True).turns]
    assert len(keys) == len(set(keys)) == MAX_CALLS + 1
    # the detector: each run once (its window holds a whole message's keys)
    assert MAX_SEEN >= 2 * (MAX_CALLS + 2)
    events, _ = read_events(path, FeedProgress(), final=True)
    st = SessionEpisodes(session="s", cwd="/r")
    for _, ev in events:
        feed(st, ev)
    assert st.seq == MAX_CALLS + 1


# ------------------------------------------------------------------ Gemini: legacy documents
def _doc(n: int, updated: str) -> str:
    msgs = []
    for i in range(n):
        msgs.append({"id": f"u{i}", "timestamp": "2026-08-20T10:15:20.600Z", "type": "user",
                     "content": [{"text": f"question {i}: why does the parser reject input {i}? "
                                          + "x" * 400}]})  # fmt: skip
        msgs.append(
            {
                "id": f"g{i}",
                "timestamp": "2026-08-20T10:15:28.300Z",
                "type": "gemini",
                "content": f"Answer {i}: the parser needs a guard. " + "y" * 400,
            }
        )
    return json.dumps({"sessionId": "8f1c2d3e-5b6a-4c7d-9e0f-1a2b3c4d5e6f", "projectHash": "ab" * 32,
                       "startTime": "2026-08-20T10:15:01.900Z", "lastUpdated": updated,
                       "messages": msgs}, indent=2)  # fmt: skip


def test_a_torn_read_does_not_hide_a_legacy_document(tmp_path):
    from ingest.sessions.transcripts import valid_offset

    chats = tmp_path / "tmp" / "shop" / "chats"
    chats.mkdir(parents=True)
    path = chats / "session-2026-08-20T10-15-8f1c2d3e.json"
    full = _doc(300, "2026-08-20T10:20:00.000Z")
    assert len(full) > 4 * 65536
    path.write_text(full[: len(full) // 2], encoding="utf-8")  # read mid-rewrite
    torn = read_turns(path, 0)
    assert torn.bad_lines == 1 and torn.checkpoints == [] and torn.turns == []
    path.write_text(full, encoding="utf-8")  # the rewrite completes
    whole = read_turns(path, 0)
    assert len(whole.turns) == 600
    cp = whole.checkpoints[-1]
    assert valid_offset(path, cp.offset, cp.line_hash, cp.line_len)
    assert read_turns(path, cp.offset).turns == []  # unchanged: nothing new
    # rewritten in place, its 64 KB before the old end the same: no longer the document read
    path.write_text(full.replace("10:20:00", "10:25:00") + " " * 10, encoding="utf-8")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert not valid_offset(path, cp.offset, cp.line_hash, cp.line_len)


# ------------------------------------------------------------------ Gemini: the extension's hook
@pytest.mark.skipif(os.name == "nt" or not shutil.which("sh"), reason="the hook runs in sh")
def test_the_extension_hook_never_starts_a_daemon(tmp_path):
    """No daemon: the hook, run by a python3 without the project's packages (the base
    interpreter), prints nothing and exits 0 at once, and starts nothing (PATTERN_HOOK_SPAWN=0):
    it used to start a daemon that could not import its packages and wait its whole deadline."""
    cmd = gemini.extension_hooks()["hooks"]["BeforeAgent"][0]["hooks"][0]["command"]
    assert cmd.startswith("PATTERN_HOOK_SPAWN=0 ")
    base = getattr(sys, "_base_executable", sys.executable)
    if subprocess.run([base, "-c", "import starlette"], capture_output=True).returncode == 0:
        pytest.skip("the base interpreter has the project's packages")
    bare = tmp_path / "bin"
    bare.mkdir()
    os.symlink(base, bare / "python3")
    home = tmp_path / "store"
    env = {"PATH": f"{bare}:/usr/bin:/bin", "HOME": str(tmp_path), "PATTERN_HOME": str(home)}
    stdin = json.dumps({"session_id": "s1", "cwd": str(tmp_path), "hook_event_name": "BeforeAgent",
                        "prompt": "why does the build fail?"}).encode()  # fmt: skip
    start = time.monotonic()
    run = subprocess.run(["sh", "-c", cmd.replace("${extensionPath}", str(ROOT))], input=stdin,
                         capture_output=True, env=env, timeout=30)  # fmt: skip
    took = time.monotonic() - start
    assert (run.returncode, run.stdout, run.stderr) == (0, b"", b"")
    assert took < 1.2, f"the hook waited {took:.2f} s (the deadline is 1.5 s)"
    assert not (home / "daemon.log").exists(), "the hook started a daemon"


# ------------------------------------------------------------------ named pipes
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
def test_a_named_pipe_at_a_session_path_blocks_nothing(tmp_path, monkeypatch):
    codex_home = tmp_path / "codex"
    gemini_home = tmp_path / "gemini-home"
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    monkeypatch.setenv("GEMINI_CLI_HOME", str(gemini_home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "copilot"))
    day = codex_home / "sessions" / "2026" / "11" / "02"
    day.mkdir(parents=True)
    chats = gemini_home / ".gemini" / "tmp" / "shop" / "chats"
    chats.mkdir(parents=True)
    fifos = [day / f"rollout-2026-11-02T10-15-00-{THREAD}.jsonl",
             chats / "session-2026-08-20T10-15-8f1c2d3e.jsonl",
             chats / "session-2026-08-20T11-15-9f1c2d3e.json"]  # fmt: skip
    for f in fifos:
        os.mkfifo(f)
    real = day / "rollout-2026-11-02T11-15-00-019a3c5e-7b21-7d40-9c2a-4f1e8d6b3a71.jsonl"
    real.write_text(json.dumps({"type": "session_meta", "payload": {"cwd": "/r"}}) + "\n")
    assert default_paths() == [real] and codex.rollouts() == [real]
    assert gemini.session_files() == [] and expand([str(day)]) == [real.resolve()]
    done = threading.Event()
    found: list = []
    t = threading.Thread(target=lambda: (found.extend(transcript_cwd(f) for f in fifos),
                                         done.set()), daemon=True)  # fmt: skip
    t.start()
    finished = done.wait(3.0)
    if not finished:  # unblock the stuck open so the thread ends
        for f in fifos:
            os.close(os.open(f, os.O_WRONLY | os.O_NONBLOCK))
        t.join(2)
    assert finished, "transcript_cwd blocked on a named pipe"
    assert found == [None, None, None] and transcript_cwd(real) == "/r"
