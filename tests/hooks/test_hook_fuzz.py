"""The hook client exits 0, within its deadline plus start-up, whatever it is given: a fuzz
test (fixed seed) runs ``python -S server/hooks/hookclient.py EVENT`` as the client does, under random
environments (console encodings such as cp1252 and ascii, locales, deadlines such as ``inf``,
``nan`` and garbage, bad settings and identities), stdin bytes (empty, binary, huge, truncated
or deeply nested JSON, non-ASCII text) and daemons: missing, a stale address, hung, crashing
(closing, resetting, garbage, half or malformed HTTP answers) and answering with non-ASCII
text. The store's lock is held by the test, so no real daemon is ever started. On the
daemon's side, its hook route answers any body (random JSON in the client's shape, random
bytes, deep nesting, lone surrogates, huge numbers) over a real store, or refuses it with one
clear error; a body past its bound is refused unread."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.hooks.install import CLIENT
from server.service.prompting.hook_events import EVENTS as HOOK_EVENTS
from tests.fake_daemon import FakeDaemon, hold_home, http_answer

SEED = 20_261_204
CASES = 36
START_S = 1.5  # interpreter start-up and the slack of several runs at once on a busy machine
CONTEXT = "Référence: naïve café ☃ 日本語 — “quoted” \U0001f600"
OUTPUT = {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": CONTEXT}}

CRASHES = [
    b"",  # close at once
    None,  # reset (SO_LINGER 0)
    b"\x00\xffnot http at all\r\n\r\n",
    b"HTTP/1.1 20",
    b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nnot json",
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n[1,2]",
    b'HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n{"output": 3}',
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n{"out',
    b'HTTP/1.1 200 OK\r\nContent-Length: 30\r\n\r\n{"output": {"a": "\xff\xfe"}}',
]
ANSWER = http_answer(200, json.dumps({"output": OUTPUT}, ensure_ascii=False).encode(),
                     headers=b"Content-Type: application/json\r\n")  # fmt: skip


def deadline_asked(raw: str | None) -> float:
    """The deadline a run may take: a positive finite number of seconds (at most 60), else
    the default 1.5."""
    try:
        value = float(raw) if raw else 1.5
    except ValueError:
        return 1.5
    return min(value, 60.0) if 0 < value < float("inf") else 1.5


def stdin_bytes(rng: random.Random) -> bytes:
    prompt = {"session_id": "fz", "transcript_path": None, "cwd": "/work/app",
              "hook_event_name": "UserPromptSubmit", "prompt": "deploy the café ☃ service"}  # fmt: skip
    whole = json.dumps(prompt).encode()
    kind = rng.choice(["empty", "binary", "huge", "huge_fields", "truncated", "valid", "list",
                       "nested", "bad_cwd", "surrogate", "latin1"])  # fmt: skip
    if kind == "empty":
        return b""
    if kind == "binary":
        return rng.randbytes(rng.randint(1, 4096))
    if kind == "huge":
        return rng.randbytes(3_000_000)
    if kind == "huge_fields":
        return json.dumps({**prompt, "prompt": "ü" * 2_000_000, "x": ["y"] * 50_000}).encode()
    if kind == "truncated":
        return whole[: rng.randint(1, len(whole) - 1)]
    if kind == "list":
        return b"[1, 2, 3]"
    if kind == "nested":
        return b"[" * 100_000
    if kind == "bad_cwd":
        return json.dumps({**prompt, "cwd": rng.choice([42, "/no/such/dir", "", None])}).encode()
    if kind == "surrogate":
        return whole.replace(b"/work/app", b"/work/\\udc80\\ud800")
    if kind == "latin1":
        return json.dumps(prompt, ensure_ascii=False).encode("latin-1", "replace")
    return whole


ENV_CHOICES = {
    "PYTHONIOENCODING": [
        None,
        "utf-8",
        "cp1252",
        "ascii",
        "latin-1",
        "ascii:strict",
        "utf-16",
        "cp437",
        "utf-8:surrogateescape",
    ],
    "LC_ALL": [None, "C", "POSIX", "C.UTF-8", "xx_XX.nonsense"],
    "PYTHONUTF8": [None, "0", "1"],
    "PATTERN_HOOK_THRESHOLD": [None, "nan", "inf", "x", "1e999", "-3"],
    "PATTERN_HOOK_MAX_ITEMS": [None, "1e3", "9" * 5000, "-1"],
    "PATTERN_PROJECT_ID": [None, "ü-proj", "a b/c", "x" * 300],
    "PATTERN_AGENT_ID": [None, "agent ☃", "\t"],
}
SHORT = [None, "inf", "-inf", "nan", "0", "-1", "1e309", "garbage", "", " 0.4 ", "0.3", "1e-9",
         "0.05", "0.2"]  # fmt: skip
ANY = [*SHORT, "99999", "5"]  # only where the daemon answers or fails at once
EVENTS = ["UserPromptSubmit", "SessionStart", "", "Stop", "../../x", "ünïcode", "-h", None]


@pytest.fixture(scope="module")
def homes(tmp_path_factory):
    """A store folder per daemon kind, each one's lock held (no daemon is ever started)."""
    root = tmp_path_factory.mktemp("fuzz")
    fakes = {m: FakeDaemon(m, ANSWER, CRASHES, SEED + i)
             for i, m in enumerate(("answer", "crash", "hung"))}  # fmt: skip
    out, locks = {}, []
    for kind in ("missing", "stale", *fakes):
        port = fakes[kind].port if kind in fakes else None
        if kind == "stale":
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]  # closed again: nothing listens there
        locks.append(hold_home(root / kind, port))
        out[kind] = root / kind
    not_a_dir = root / "file"
    not_a_dir.write_text("a file, not a folder")
    out["unusable"] = not_a_dir / "home"  # nothing can be created there: no spawn either
    yield out
    for fd in locks:
        os.close(fd)
    for f in fakes.values():
        f.close()


def make_case(rng: random.Random, homes: dict[str, Path]) -> dict:
    kind = rng.choice(list(homes))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATTERN_", "PYTHON", "LC_"))}
    env["PATTERN_HOME"] = str(homes[kind])
    for name, values in ENV_CHOICES.items():
        value = rng.choice(values)
        if value is not None:
            env[name] = value
    slow = kind in ("missing", "stale", "hung")  # the whole deadline is waited out
    deadline = rng.choice(SHORT if slow else ANY)
    if deadline is not None:
        env["PATTERN_HOOK_DEADLINE"] = deadline
    if rng.random() < 0.2:
        env.pop("HOME", None)
    event = rng.choice(EVENTS)
    return {"kind": kind, "env": env, "event": event, "stdin": stdin_bytes(rng),
            "deadline": deadline_asked(deadline)}  # fmt: skip


def run_case(case: dict) -> tuple[dict, subprocess.CompletedProcess, float]:
    cmd = [sys.executable, "-S", str(CLIENT)] + (
        [case["event"]] if case["event"] is not None else []
    )
    t0 = time.monotonic()
    proc = subprocess.run(cmd, input=case["stdin"], capture_output=True, env=case["env"],
                          timeout=case["deadline"] + 30)  # fmt: skip
    return case, proc, time.monotonic() - t0


def anchors(homes: dict[str, Path]) -> list[dict]:
    """Cases every run has: a non-ASCII answer on a cp1252, an ascii and a utf-16 console, and
    the deadlines ``inf``, ``nan`` and garbage against a daemon that answers or hangs."""
    valid = json.dumps({"session_id": "fz", "cwd": "/work/app", "prompt": "deploy"}).encode()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PATTERN_", "PYTHON"))}
    out = []
    for kind, extra in [("answer", {"PYTHONIOENCODING": "cp1252"}),
                        ("answer", {"PYTHONIOENCODING": "ascii"}),
                        ("answer", {"PYTHONIOENCODING": "utf-16", "LC_ALL": "C"}),
                        ("answer", {"PATTERN_HOOK_DEADLINE": "inf"}),
                        ("answer", {"PATTERN_HOOK_DEADLINE": "garbage"}),
                        ("hung", {"PATTERN_HOOK_DEADLINE": "nan"}),
                        ("hung", {"PATTERN_HOOK_DEADLINE": "0.2"})]:  # fmt: skip
        env = {**base, "PATTERN_HOME": str(homes[kind]), **extra}
        out.append({"kind": kind, "env": env, "event": "UserPromptSubmit", "stdin": valid,
                    "deadline": deadline_asked(extra.get("PATTERN_HOOK_DEADLINE")),
                    "answers": kind == "answer"})  # fmt: skip
    return out


def test_the_hook_client_exits_0_in_time_on_anything(homes):
    rng = random.Random(SEED)
    cases = anchors(homes) + [make_case(rng, homes) for _ in range(CASES)]
    kinds = {c["kind"] for c in cases}
    assert kinds == set(homes), kinds  # every kind of daemon is met
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(run_case, cases))
    for case, proc, took in results:
        what = (case["kind"], case["event"], {k: v[:40] for k, v in case["env"].items()
                if k.startswith(("PATTERN_HOOK", "PYTHON", "LC_"))}, case["stdin"][:60])  # fmt: skip
        assert proc.returncode == 0, (what, proc.stderr.decode(errors="replace")[-2000:])
        assert b"Traceback" not in proc.stderr, (what, proc.stderr.decode(errors="replace"))
        assert took < case["deadline"] + START_S, (what, took)
        if proc.stdout or case.get("answers"):  # UTF-8 JSON, whatever the console's encoding
            assert case["kind"] == "answer", what
            assert json.loads(proc.stdout.decode("utf-8")) == OUTPUT, what


# ---------------------------------------------------------------------------- the daemon's side
# What the client forwards from its stdin reaches the daemon's hook route: any JSON body, any
# bytes, any event, through the real route and handlers over a real store.
SECRET = "fuzz-secret"
SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=60),
    st.sampled_from(["May 0000", "y" * 1000 + "ed", "9" * 5000, "\ud800", "\x00\x01",
                     "\U0001f680" * 2000, "what changed last week?", "yes, do that",
                     "/work/none/t.jsonl", "Bash", "Edit", "pytest -q"]),
)  # fmt: skip
JSON = st.recursive(SCALAR, lambda c: st.lists(c, max_size=4)
                    | st.dictionaries(st.text(max_size=10), c, max_size=4), max_leaves=15)  # fmt: skip
HOOK_INPUT = st.fixed_dictionaries({}, optional={
    key: JSON for key in ("session_id", "prompt", "transcript_path", "cwd", "hook_event_name",
                          "source", "tool_name", "tool_input", "tool_response", "tool_use_id",
                          "error", "is_interrupt", "trigger", "reason", "x")
})  # fmt: skip
CONFIG = st.fixed_dictionaries({}, optional={
    "threshold": st.floats(), "max_items": st.integers(), "prompt_tokens": st.integers(),
    "briefing_tokens": JSON, "lesson_threshold": JSON,
})  # fmt: skip
BODY = st.one_of(
    st.fixed_dictionaries({}, optional={"input": st.one_of(HOOK_INPUT, JSON),
                                        "config": st.one_of(CONFIG, JSON)})
    .map(lambda d: json.dumps(d).encode("utf-8", "surrogatepass")),
    st.binary(max_size=300),
    st.sampled_from([b"[" * 100_000, b'{"input": ' + b"[" * 50_000 + b"}", b"[1, 2]", b'"x"',
                     b"null", b"{", b'{"input": {"prompt": ' + b"9" * 10_000 + b"}}",
                     b'{"input": {"prompt": "\\ud800 deploys last week"}}', b"\xff\xfe"]),
)  # fmt: skip


@pytest.fixture(scope="module")
def daemon_routes(tmp_path_factory):
    from tests.mcp_util import hook_daemon

    root = tmp_path_factory.mktemp("routes")
    with hook_daemon(root, SECRET, raise_server_exceptions=False) as (_, client, http):
        for text in ("Deploys go out on Fridays from the release branch.",
                     "Planned for May 0000: the template's placeholder date.",
                     "Log: " + "y" * 1000 + "ed"):  # fmt: skip
            client.ok("remember", {"content": text, "scope": "team"})
        yield http


@settings(max_examples=50, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])  # fmt: skip
@given(event=st.sampled_from([*HOOK_EVENTS, "Nope"]), body=BODY)
def test_the_daemon_answers_any_hook_input_or_refuses_it_in_one_line(daemon_routes, event, body):
    started = time.monotonic()
    r = daemon_routes.post(f"/hooks/{event}", content=body,
                           headers={"Authorization": f"Bearer {SECRET}"})  # fmt: skip
    assert time.monotonic() - started < 5.0
    assert r.status_code in (200, 400, 404), (r.status_code, r.text[:300])
    answer = r.json()
    if r.status_code != 200:  # one clear error: its code and what was expected
        assert answer["error"] in ("invalid_input", "not_found") and answer["message"]


def test_a_body_past_the_bound_is_refused_unread(daemon_routes):
    from server.hooks.routes import MAX_BODY_BYTES

    big = b'{"input": {"prompt": "' + b"a" * (MAX_BODY_BYTES + 1) + b'"}}'
    r = daemon_routes.post("/hooks/UserPromptSubmit", content=big,
                           headers={"Authorization": f"Bearer {SECRET}"})  # fmt: skip
    assert r.status_code == 413 and "at most" in r.json()["message"]


def test_the_client_refuses_an_input_past_its_bound_before_calling_anyone(tmp_path):
    from server.hooks import hookclient

    big = b'{"prompt": "' + b"a" * hookclient.MAX_STDIN + b'"}'
    with pytest.raises(hookclient.HookError, match="at most"):
        hookclient.run("UserPromptSubmit", big, {}, tmp_path / "nowhere", time.monotonic() + 5)
    assert not (tmp_path / "nowhere").exists()  # no daemon was started for it
