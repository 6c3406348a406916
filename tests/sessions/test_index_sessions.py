"""``pattern-memory index-sessions``: Claude Code's transcript folder and generic JSONL, through
the daemon it starts, incremental across runs; and the hook path's lean imports."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from server.hooks.install import CLIENT
from server.http.daemon import read_info
from server.service.core.ids import derive_agent_id, derive_project_id
from tests.fake_daemon import FakeDaemon, http_answer
from tests.transcript_util import TranscriptWriter


def run_cli(env, *args) -> dict:
    proc = subprocess.run([sys.executable, "-m", "server.cli", "index-sessions", *args], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(proc.stdout.strip().splitlines()[-1])


def buckets_and_sessions(home: Path) -> list[tuple]:
    conn = sqlite3.connect(f"file:{home / 'pattern.sqlite3'}?mode=ro", uri=True)
    try:
        return conn.execute(
            "SELECT bucket, json_extract(metadata,'$.session'), count(*) FROM records "
            "WHERE kind='turn' GROUP BY 1, 2 ORDER BY 2"
        ).fetchall()
    finally:
        conn.close()


def test_index_sessions_default_folder_incremental_and_generic(tmp_path):
    home, claude = tmp_path / "store", tmp_path / "claude"
    env = {**os.environ, "PATTERN_HOME": str(home), "PATTERN_EMBEDDER": "hash",
           "CLAUDE_CONFIG_DIR": str(claude)}  # fmt: skip
    for k in ("PATTERN_PROJECT_ID", "PATTERN_AGENT_ID", "LOOMINAL_PROJECT_ID", "LOOMINAL_AGENT_ID"):
        env.pop(k, None)
    web = str(tmp_path / "webapp")
    a = TranscriptWriter(claude / "projects" / "-webapp" / "s-a.jsonl", session="s-a", cwd=web)
    a.user("why is the login slow")
    a.assistant("The session lookup scans the whole table; add an index on sessions.token.")
    side = TranscriptWriter(claude / "projects" / "-webapp" / "s-a" / "subagents" / "agent-q.jsonl",
                            session="s-a", cwd=web, sidechain_agent="q")  # fmt: skip
    side.user("find the sessions query")
    cli = str(tmp_path / "cli")
    b = TranscriptWriter(claude / "projects" / "-cli" / "s-b.jsonl", session="s-b", cwd=cli)
    b.user("add a --verbose flag")
    try:
        first = run_cli(env)
        assert first["files"] == 3 and first["added"] == 3  # one exchange per transcript
        rows = buckets_and_sessions(home)
        web_bucket = f"private/{derive_project_id(web)}/{derive_agent_id(web)}"
        cli_bucket = f"private/{derive_project_id(cli)}/{derive_agent_id(cli)}"
        assert rows == [(web_bucket, "s-a", 1), (web_bucket, "s-a/agent-q", 1),
                        (cli_bucket, "s-b", 1)]  # fmt: skip
        assert run_cli(env)["added"] == 0  # nothing new
        a.user("and the logout?")
        again = run_cli(env)
        assert (again["added"], again["updated"]) == (1, 0)  # a new exchange; the last one closed
        generic = tmp_path / "chat.jsonl"
        generic.write_text(json.dumps({"session": "g", "role": "user", "content": "hello",
                                       "timestamp": "2024-01-01T00:00:00Z"}) + "\n")  # fmt: skip
        assert run_cli(env, str(generic))["added"] == 1
        assert run_cli(env, str(generic))["added"] == 0
    finally:
        info = read_info(home)
        if info:
            os.kill(info["pid"], signal.SIGTERM)
            end = time.monotonic() + 60
            while read_info(home) and time.monotonic() < end:
                time.sleep(0.1)


def test_the_hook_path_imports_nothing_heavy(tmp_path):
    """``python -S hookclient.py`` and ``pattern-memory hook``: no model, chromadb, numpy,
    pydantic or MCP SDK (measured with -X importtime). The store's lock is held and its
    daemon.json names a closed port, so the hook runs its whole path and gives up at once."""
    import fcntl
    import socket

    heavy = ("mcp", "chromadb", "numpy", "pydantic", "torch", "onnxruntime", "retrieval.engine",
             "sentence_transformers", "uvicorn", "starlette", "http.client")  # fmt: skip
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "daemon.json").write_text(json.dumps({"host": "127.0.0.1", "port": port,
                                                      "secret": "x", "pid": 1}))  # fmt: skip
    lock = os.open(tmp_path / "daemon.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    env = {**os.environ, "PATTERN_HOME": str(tmp_path), "PATTERN_HOOK_DEADLINE": "0.3"}
    try:
        for cmd in ([sys.executable, "-S", "-X", "importtime", str(CLIENT), "Stop"],
                    [sys.executable, "-X", "importtime", "-m", "server.cli", "hook", "Stop"]):  # fmt: skip
            proc = subprocess.run(cmd, input=b"{}", capture_output=True, env=env, timeout=60)
            assert proc.returncode == 0 and proc.stdout == b""
            modules = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines()
                       if line.startswith("import time:")}  # fmt: skip
            assert "server.service.core.ids" in modules  # the trace covers the client's imports
            lean = heavy + (("pathlib", "urllib") if "-S" in cmd else ())
            for name in lean:
                assert not any(m == name or m.startswith(name + ".") for m in modules), (cmd, name)
    finally:
        os.close(lock)


def test_default_home_matches_platformdirs():
    from server.service.core.config import default_home
    from server.service.core.ids import default_home as stdlib_home

    assert Path(stdlib_home(os.environ)) == default_home()


def test_index_sessions_watch_follows_a_growing_transcript(tmp_path):
    home = tmp_path / "store"
    env = {**os.environ, "PATTERN_HOME": str(home), "PATTERN_EMBEDDER": "hash",
           "PATTERN_PROJECT_ID": "w", "PATTERN_AGENT_ID": "w1"}  # fmt: skip
    w = TranscriptWriter(tmp_path / "t" / "live.jsonl", session="live")
    w.user("first question")
    proc = subprocess.Popen([sys.executable, "-m", "server.cli", "index-sessions", "--watch",
                             "--interval", "0.3", "--quiet", str(tmp_path / "t")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip

    def count() -> int:
        try:
            return sum(n for _, _, n in buckets_and_sessions(home))
        except sqlite3.Error:
            return 0

    try:
        end = time.monotonic() + 120
        while count() < 1 and time.monotonic() < end:
            time.sleep(0.2)
        assert count() == 1
        w.assistant("first answer")
        w.user("second question")  # closes the first exchange, opens the second
        while count() < 2 and time.monotonic() < end:
            time.sleep(0.2)
        assert count() == 2
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        info = read_info(home)
        if info:
            os.kill(info["pid"], signal.SIGTERM)
            stop_by = time.monotonic() + 60
            while read_info(home) and time.monotonic() < stop_by:
                time.sleep(0.1)


def exchanges_of(home: Path, session: str) -> list[str]:
    try:
        conn = sqlite3.connect(f"file:{home / 'pattern.sqlite3'}?mode=ro", uri=True)
    except sqlite3.Error:
        return []
    try:
        return [c for (c,) in conn.execute(
            "SELECT content FROM records WHERE kind='turn' AND json_extract(metadata,'$.session')=?"
            " ORDER BY json_extract(metadata,'$.turn')", (session,))]  # fmt: skip
    except sqlite3.Error:
        return []
    finally:
        conn.close()


def test_an_unanswered_tool_call_never_stalls_index_sessions(tmp_path, monkeypatch):
    """A transcript whose last call waits for its result (a permission prompt, or index-sessions
    itself running in the client's shell tool): a run indexes the turns before it and ends;
    --watch keeps indexing the other transcripts and gives the call up after the bound."""
    from datetime import UTC, datetime

    from tests import transcript_util

    monkeypatch.setattr(transcript_util, "T0", datetime.now(UTC))  # a live session
    home, folder = tmp_path / "store", tmp_path / "t"
    env = {**os.environ, "PATTERN_HOME": str(home), "PATTERN_EMBEDDER": "hash",
           "PATTERN_PROJECT_ID": "w", "PATTERN_AGENT_ID": "w1",
           "PATTERN_SESSION_DANGLING_S": "4"}  # fmt: skip
    a = TranscriptWriter(folder / "a-open.jsonl", session="a")
    a.user("index my sessions")
    a.assistant("Running the indexer in the shell.")
    a.tool_use_only("Bash", {"command": "pattern-memory index-sessions"})
    b = TranscriptWriter(folder / "b-live.jsonl", session="b")
    b.user("first question")
    watch = None
    try:
        proc = subprocess.run([sys.executable, "-m", "server.cli", "index-sessions", str(folder)],
                              env=env, capture_output=True, text=True, timeout=90)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout.strip().splitlines()[-1])["files"] == 2
        assert "1 tool call(s) waiting for a result" in proc.stdout
        assert exchanges_of(home, "a") == [
            "Prompt: index my sessions\nReply: Running the indexer in the shell."
        ]
        watch = subprocess.Popen([sys.executable, "-m", "server.cli", "index-sessions", "--watch",
                                  "--interval", "0.3", "--quiet", str(folder)], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
        b.assistant("first answer")
        b.user("second question")
        end = time.monotonic() + 60
        while len(exchanges_of(home, "b")) < 2 and time.monotonic() < end:
            time.sleep(0.2)
        assert exchanges_of(home, "b") == ["Prompt: first question\nReply: first answer",
                                           "Prompt: second question"]  # fmt: skip
        while "Tools:" not in "".join(exchanges_of(home, "a")) and time.monotonic() < end:
            time.sleep(0.2)  # the file does not change: --watch comes back when the call is due
        (text,) = exchanges_of(home, "a")
        assert "Tools: Bash(command=pattern-memory index-sessions)" in text
    finally:
        if watch is not None:
            watch.terminate()
            watch.wait(timeout=30)
        info = read_info(home)
        if info:
            os.kill(info["pid"], signal.SIGTERM)
            stop_by = time.monotonic() + 60
            while read_info(home) and time.monotonic() < stop_by:
                time.sleep(0.1)


def test_stdlib_ids_match_the_service_identity(tmp_path):
    """The hook client's identity (server/service/core/ids.py, os.path only) is the service's."""
    from urllib.parse import quote

    from server.hooks.hookclient import percent_encode
    from server.service.core.identity import identity_from_env

    repo = tmp_path / "My Repo (ü)"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    for env in ({}, {"PATTERN_PROJECT_ID": "p"}, {"PATTERN_SUBAGENT_TYPE": "Explore"}):
        who = identity_from_env(env, repo / "src")
        from server.service.core.ids import identity_fields, project_root

        assert identity_fields(env, str(repo / "src")) == who.model_dump(exclude={"root"})
        assert project_root(str(repo / "src")) == who.root == str(repo)
    assert percent_encode(str(repo)) == quote(str(repo))


def test_a_hook_answered_by_its_daemon_imports_no_enum_and_no_regular_expressions(tmp_path):
    """The path every prompt takes (a daemon answers): ``socket``, ``signal`` and ``json`` are
    read through their C modules, so none of the enums and patterns those packages build at
    import (most of a hook process's own processor time) are made."""
    answer = (
        b'{"output": {"hookSpecificOutput": {"additionalContext": "caf\\u00e9 \\ud83d\\ude00"}}}'
    )
    daemon = FakeDaemon(response=http_answer(200, answer))
    (tmp_path / "daemon.json").write_text(json.dumps({"host": "127.0.0.1", "port": daemon.port,
                                                      "secret": "x", "pid": 1}))  # fmt: skip
    env = {**os.environ, "PATTERN_HOME": str(tmp_path), "PATTERN_PROJECT_ID": "p",
           "PATTERN_AGENT_ID": "a"}  # fmt: skip
    prompt = {"session_id": "s", "prompt": "naïve \u2603 \"quoted\"", "cwd": str(tmp_path),
              "n": [1, 2.5, None, True, 10**30]}  # fmt: skip
    try:
        proc = subprocess.run([sys.executable, "-S", "-X", "importtime", str(CLIENT),
                               "UserPromptSubmit"], input=json.dumps(prompt).encode(),
                              capture_output=True, env=env, timeout=60)  # fmt: skip
    finally:
        daemon.close()
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == json.loads(answer)["output"]
    assert json.loads(daemon.bodies[0])["input"] == prompt  # what the daemon reads is what was sent
    modules = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines()
               if line.startswith("import time:")}  # fmt: skip
    assert "server.service.core.ids" in modules
    for name in ("json", "re", "enum", "socket", "signal", "typing", "collections"):
        assert name not in modules, name


def test_the_hook_clients_json_is_the_json_packages():
    from server.http.daemonfiles import json_dumps, json_loads

    values = [{}, [], "", "a\u00e9\u2603\U0001f600\x00\n\"\\", 0, -1, 10**40, 1.5, -0.0, 1e308,
              float("inf"), float("-inf"), True, False, None,
              {"k": [1, {"x": None}], "é": "ü", "": [[]]}]  # fmt: skip
    for v in values:
        text = json.dumps(v)
        assert json_dumps(v) == text
        back = json_loads(text)
        assert back == v or (back != back and v != v)
        assert json_loads(text.encode()) == json.loads(text.encode())
        assert json_loads(f" \n\t{text}\r\n ") == json.loads(f" \n\t{text}\r\n ")
    assert json_loads(b"\xef\xbb\xbf[1]") == [1]  # a BOM: as json reads it
    assert json_loads('"\\ud83d\\ude00"') == "\U0001f600"
    assert json_loads("NaN") != json_loads("NaN")
    for bad in ("", " ", "[1,]", "{'a': 1}", "[1] 2", "tru", '"unterminated', "[" * 5):
        with pytest.raises(ValueError):
            json_loads(bad)
        with pytest.raises(ValueError):
            json.loads(bad)
    with pytest.raises(TypeError):
        json_dumps({"x": object()})
