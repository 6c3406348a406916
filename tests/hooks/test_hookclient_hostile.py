"""The hook client on the ``_json`` C parts (``server.http.daemonfiles.json_loads`` /
``json_dumps``), against the ``json`` package and as the client runs it (``python -S``, a
real subprocess): hostile stdin and hostile daemon answers (malformed, huge, deeply nested,
non-UTF-8, NaN, lone surrogates) end in exit 0, the client's empty answer or exactly what
``json.dumps`` would print, and never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from server.hooks.install import CLIENT
from server.http.daemonfiles import json_dumps, json_loads
from tests.fake_daemon import FakeDaemon, hold_home, http_answer

HOSTILE = [
    b"", b"   ", b"{", b'{"a":', b"[1,]", b"tru", b"true false", b'{"a":1} x', b"\t{}\n ",
    b"\xff\xfe{}", b"\xef\xbb\xbf{}", "{}".encode("utf-16"), b"\x80abc", b'"\xed\xa0\x80"',
    b'"\\ud800"', b'{"a":NaN,"b":-Infinity}', b"nan", b"1e999", b"-0", b"1" * 5000, b'"\x01"',
    b'{"a":1,"a":2}', b"[" * 100_000, b"[" * 900 + b"]" * 900, b'{"\\u0000":0}', b"{}\x0c",
    "\u00a0{}".encode(), b'"' + b"\\" * 3, b'["' + b"\xc3\xa9" * 200_000 + b'"]',
]  # fmt: skip


def _outcome(fn, arg):
    try:
        return "ok", fn(arg)
    except BaseException as exc:  # noqa: BLE001 - compared below
        return "err", exc


@pytest.mark.parametrize("data", HOSTILE, ids=range(len(HOSTILE)))
def test_json_loads_agrees_with_the_json_package(data):
    want, got = _outcome(json.loads, data), _outcome(json_loads, data)
    if want[0] == "ok":
        assert got[0] == "ok", got
        assert json.dumps(got[1], sort_keys=True) == json.dumps(want[1], sort_keys=True)
    else:
        # the same kind of failure (a UTF-16 BOM before bytes that are no UTF-16 is the one
        # place the messages differ: both are ValueError)
        assert got[0] == "err" and isinstance(got[1], ValueError) == isinstance(want[1], ValueError)
        assert isinstance(got[1], RecursionError) == isinstance(want[1], RecursionError)


def _deep(n: int) -> list:
    out: list = []
    cur = out
    for _ in range(n):
        cur.append([])
        cur = cur[0]
    return out


@pytest.mark.parametrize("obj", [
    float("nan"), {"a": float("inf")}, "\ud800", {"k": "é☃\U0001f600\x00"},
    {1: 2, None: 3, False: 4, 1.5: 5}, {"x": [1, 2.5, -0.0, 10**30, 1e-300]}, _deep(50),
], ids=range(7))  # fmt: skip
def test_json_dumps_agrees_with_the_json_package(obj):
    assert json_dumps(obj) == json.dumps(obj)


def test_json_dumps_fails_as_the_json_package_does():
    circular: list = []
    circular.append(circular)
    for obj, exc in [(circular, ValueError), ({"a": object()}, TypeError),
                     (_deep(100_000), RecursionError)]:  # fmt: skip
        with pytest.raises(exc):
            json_dumps(obj)
        with pytest.raises(exc):
            json.dumps(obj)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """A fake daemon whose answer each test sets (:func:`set_answer`)."""
    d = FakeDaemon()
    d.home = tmp_path_factory.mktemp("hookhome")
    fd = hold_home(d.home, d.port)  # held: no real daemon is ever started
    yield d
    d.close()
    os.close(fd)


def set_answer(daemon: FakeDaemon, status: int, body: bytes) -> None:
    daemon.response = http_answer(status, body, reason=b"X")


def _hook(home: Path, stdin: bytes) -> tuple[subprocess.CompletedProcess, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATTERN_", "PYTHON"))}
    env.update(PATTERN_HOME=str(home), PATTERN_HOOK_DEADLINE="3")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-S", str(CLIENT), "UserPromptSubmit"], input=stdin,
                          env=env, capture_output=True, timeout=30)  # fmt: skip
    return proc, time.monotonic() - t0


PROMPT = json.dumps({"session_id": "s", "cwd": "/tmp", "hook_event_name": "UserPromptSubmit",
                     "prompt": "deploy"}).encode()  # fmt: skip
ANSWERS = [
    (200, b"{"), (200, b"[" * 100_000), (200, b"\xff\xfe\x80"), (200, b"not json"),
    (200, b'{"output": {"additionalContext": NaN}}'),
    (200, b'{"output": {"additionalContext": "\\ud800 lone"}}'),
    (200, b'{"output": {"additionalContext": "' + "é".encode() * 3_000_000 + b'"}}'),
    (200, b'{"output": ' + b"[" * 900 + b"]" * 900 + b"}"),
    (200, b'{"output": null}'), (200, b"[1, 2]"),
    (403, b'{"error": {"code": "x", "message": "' + b"[" * 50_000 + b'"}}'), (500, b"[" * 100_000),
]  # fmt: skip


@pytest.mark.parametrize(("status", "body"), ANSWERS, ids=range(len(ANSWERS)))
def test_the_client_survives_any_daemon_answer(daemon, status, body):
    set_answer(daemon, status, body)
    proc, took = _hook(daemon.home, PROMPT)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert took < 15
    try:
        answer = json.loads(body) if status == 200 else None
    except (ValueError, RecursionError):
        answer = None
    out = answer.get("output") if isinstance(answer, dict) else None
    want = b"" if out is None else (json.dumps(out) + "\n").encode()
    assert proc.stdout == want


@pytest.mark.parametrize("stdin", [b"[" * 100_000, b"\xff\xfe\x80", b'{"cwd": NaN}',
                                   b'{"cwd": "\\ud800", "prompt": "\\udfff"}',
                                   b"{" + b" " * 5_000_000, b"\x00" * 64],
                         ids=range(6))  # fmt: skip
def test_the_client_survives_hostile_stdin(daemon, stdin):
    set_answer(daemon, 200, b'{"output": {"ok": 1}}')
    proc, took = _hook(daemon.home, stdin)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert took < 15
    assert proc.stdout in (b"", b'{"ok": 1}\n')
