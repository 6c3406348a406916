"""Outcomes counted without being asked, end to end: ``python -S server/hooks/hookclient.py``
fed Claude Code's hook JSON against a real daemon (hash embedder), the session's transcript
written as the client writes it. A lesson the failure hook injected gets a success when the same
command passes after edits, a failure when the same error comes back after edits, and nothing
when only other commands run. The hooks return at once; the counting happens on the daemon's
worker."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from server.http.daemon import read_info
from tests.hooks.test_hooks import ID_ENV, LESSON, context_of, mcp, run_hook, wait_for
from tests.runtime.test_daemon import start_daemon, stop
from tests.transcript_util import TranscriptWriter, hook_input

ERR = ("Traceback (most recent call last):\n  File \"app/db.py\", line 12, in connect\n"
       "psycopg2.OperationalError: connection to server at localhost port 5432 failed: "
       "Connection refused")  # fmt: skip
INJECT_ALL = {"PATTERN_HOOK_LESSON_THRESHOLD": "0"}  # the hash embedder's cosines are small


@pytest.fixture(scope="module")
def daemon_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("outcomes")
    proc = start_daemon(home, env={"PATTERN_EMBEDDER": "hash", **ID_ENV})
    mcp(read_info(home), "create_lesson", {"lesson": LESSON})  # frequency 3, success rate 0.9
    yield home
    stop(proc)


def counts(home: Path) -> tuple[int, float]:
    conn = sqlite3.connect(f"file:{home / 'pattern.sqlite3'}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT frequency, success_rate FROM lessons WHERE name='PG_TIMEOUT'")
        return tuple(row.fetchone())
    finally:
        conn.close()


def seen(home: Path, session: str) -> int:
    """How many events the session's detector has read."""
    conn = sqlite3.connect(f"file:{home / 'pattern.sqlite3'}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key=?", (f"episodes.session:{session}",))
        found = row.fetchone()
        return json.loads(found[0])["seq"] if found else 0
    finally:
        conn.close()


class Session:
    """A Claude Code session: its transcript, and the hooks the client runs."""

    def __init__(self, home: Path, folder: Path, sid: str) -> None:
        self.home, self.sid = home, sid
        self.w = TranscriptWriter(folder / f"{sid}.jsonl", session=sid)
        self.w.user("the db tests fail")

    def bash(self, command: str, output: str, ok: bool) -> str:
        tid = self.w.tool("Bash", {"command": command}, output, is_error=not ok)
        if ok:
            inp = hook_input("PostToolUse", self.w.path, self.sid, tool_name="Bash",
                             tool_input={"command": command}, tool_use_id=tid,
                             tool_response={"stdout": output, "stderr": "", "interrupted": False})  # fmt: skip
            return run_hook(self.home, "PostToolUse", inp, **INJECT_ALL)[0]
        inp = hook_input("PostToolUseFailure", self.w.path, self.sid, tool_name="Bash",
                         tool_input={"command": command}, tool_use_id=tid, error=output)  # fmt: skip
        return run_hook(self.home, "PostToolUseFailure", inp, **INJECT_ALL)[0]

    def edit(self) -> None:
        self.w.tool("Edit", {"file_path": "/work/app/app/db.py", "old_string": "connect()",
                             "new_string": "wait_for_db(); connect()"}, "updated")  # fmt: skip


def test_success_after_a_pass(daemon_home, tmp_path):
    before = counts(daemon_home)
    s = Session(daemon_home, tmp_path, "out-pass")
    assert "PG_TIMEOUT" in context_of(s.bash("pytest tests/test_db.py", ERR, False),
                                      "PostToolUseFailure")  # fmt: skip
    s.edit()
    assert s.bash("python -m pytest tests/test_db.py -q", "3 passed in 0.4s", True) == ""
    assert wait_for(lambda: counts(daemon_home)[0] == before[0] + 1)
    freq, rate = counts(daemon_home)
    assert rate == pytest.approx((before[1] * before[0] + 1) / (before[0] + 1))


def test_failure_after_a_repeat(daemon_home, tmp_path):
    before = counts(daemon_home)
    s = Session(daemon_home, tmp_path, "out-repeat")
    assert "PG_TIMEOUT" in s.bash("pytest tests/test_db.py", ERR, False)
    s.edit()
    s.bash("pytest tests/test_db.py", ERR.replace("5432", "5433"), False)  # the same error again
    assert wait_for(lambda: counts(daemon_home)[0] == before[0] + 1)
    assert counts(daemon_home)[1] == pytest.approx(before[1] * before[0] / (before[0] + 1))


def test_nothing_on_unrelated_commands(daemon_home, tmp_path):
    before = counts(daemon_home)
    s = Session(daemon_home, tmp_path, "out-other")
    assert "PG_TIMEOUT" in s.bash("pytest tests/test_db.py", ERR, False)
    s.edit()
    s.bash("make docs", "built the docs", True)
    s.bash("pytest tests/test_ui.py", "2 passed in 0.1s", True)
    s.bash("npm run lint", "Exit code 1\nerror: 2 problems", False)
    assert wait_for(lambda: seen(daemon_home, "out-other") >= 6)  # every event was read
    assert counts(daemon_home) == before
