"""Every client end to end: its hook commands, as ``hooks install`` writes them into a project,
run through a shell with that client's recorded payloads on stdin (tests/fixtures/clients/
<client>/, SOURCES.md there; Claude Code: a real public transcript, tests/data/transcripts/
PROVENANCE.md, and hook inputs in its documented shape, tests/transcript_util.py), against one
real daemon (``pattern-memory daemon``, hash embedder). Payloads and transcripts are adjusted in
session ids, paths and times only (times moved to now: a prompt the prompt hook stored is the
transcript's prompt only when their times are within 30 s).

Per client, each in its own project: a team decision another agent wrote is injected for a prompt
(Cursor, whose prompt answer has no context field: at the session's start, and the prompt gets
its empty answer); an unrelated prompt gets nothing; a failed command gets the lesson; the
client's fail -> edit -> pass, hook events and transcript as the client writes them, becomes
exactly one learned lesson and one indexed exchange; a broken store or bad stdin exits 0 with
nothing printed (an empty stdin is read as ``{}``: the client's answer for nothing, which is
Cursor's ``{"continue": true}`` for a prompt)."""

from __future__ import annotations

import fcntl
import json
import os
import re
import sqlite3
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest

from benchmarks.hook_payloads import installed_hooks
from server.hooks.clients import CLIENTS
from server.http.daemon import read_info
from tests.mcp_util import wait_for
from tests.runtime.test_daemon import call, start_daemon, stop
from tests.transcript_util import hook_input

pytestmark = pytest.mark.slow  # one daemon and ~100 hook processes: its file goes first

FIXTURES = Path(__file__).parents[1] / "fixtures" / "clients"
CLAUDE_TRANSCRIPT = Path(__file__).parents[1] / "data" / "transcripts" / "drm-coverage-fix.jsonl"
AGENT, TEAMMATE = "dev-agent", "teammate"
HOOK_ENV = {"PATTERN_HOOK_THRESHOLD": "0.15",  # the hash embedder's cosines are small
            "PATTERN_HOOK_LESSON_THRESHOLD": "0.05"}  # fmt: skip
UNRELATED = "draw a sunset in ascii art"
# a client's answer when it has nothing to inject, where it is not "print nothing"
EMPTY = {("cursor", "beforeSubmitPrompt"): {"continue": True}}
CONTEXT = {"claude": ("hookSpecificOutput", "additionalContext"), "codex":
           ("hookSpecificOutput", "additionalContext"), "gemini": ("hookSpecificOutput",
           "additionalContext"), "cursor": ("additional_context",), "copilot": ("additionalContext",)}  # fmt: skip
ISO = re.compile(r'"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)(Z|[+-]\d\d:\d\d)"')


@dataclass
class Scenario:
    """One client's recorded session, adjusted to this test's folders and to now."""

    name: str
    repo: Path
    sid: str  # the fixture's session id
    start: tuple[str, dict]  # (client event, payload)
    prompt: tuple[str, dict]
    failure: tuple[str, dict]
    fix: list[tuple[str, dict, int]]  # (client event, payload, transcript lines written before)
    transcript: Path
    lines: list[str]
    memory: str  # a team decision relevant to the prompt; ``mark`` is in it
    mark: str
    lesson: dict  # a team lesson for the failure
    failed: str  # the failing command the learned lesson names
    quiet: list[tuple[str, dict]] = field(default_factory=list)  # no result: nothing to say
    env: dict = field(default_factory=dict)  # the daemon's, for this client

    @property
    def project(self) -> str:
        return f"acc-{self.name}"


def load(path: Path, swap: dict[str, str]) -> dict:
    text = path.read_text(encoding="utf-8")
    for a, b in swap.items():
        text = text.replace(a, b)
    return json.loads(text)


def to_now(text: str, anchor: str) -> str:
    """Every ISO time in ``text`` moved by one amount, so that ``anchor`` is now."""
    shift = time.time() - datetime.fromisoformat(anchor.replace("Z", "+00:00")).timestamp()

    def move(m: re.Match) -> str:
        then = datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(2) == "Z" else m.group(2)))
        moved = datetime.fromtimestamp(then.timestamp() + shift, UTC)
        return f'"{moved.isoformat(timespec="milliseconds").replace("+00:00", "Z")}"'

    return ISO.sub(move, text)


def another(payload: dict, sid: str, base: Path) -> dict:
    """The payload as another session's: its session ids, and a transcript not written yet."""
    out = dict(payload)
    for key in ("session_id", "conversation_id", "sessionId"):
        if key in out:
            out[key] = sid
    for key in ("transcript_path", "transcriptPath"):
        if out.get(key):
            out[key] = str(base / "none" / f"{sid}.jsonl")
    return out


# ------------------------------------------------------------------ the clients' sessions
def claude(base: Path) -> Scenario:
    """A real Claude Code session (v2.1.12): ``just check`` fails on coverage, the agent edits
    the test, ``just check`` passes. Hook inputs as the hooks reference documents them."""
    repo, sid = base / "repo", "7410237a-83b9-4f2b-8ec7-9c501411b187"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_math_utils.py").write_text("def test_add_numbers():\n    assert True\n")
    transcript = base / ".claude" / "projects" / "-repo" / f"{sid}.jsonl"
    text = CLAUDE_TRANSCRIPT.read_text(encoding="utf-8").replace("/tmp/tmp8fga7k7q", str(repo))
    lines = to_now(text, "2026-01-20T09:29:56.549Z").splitlines(keepends=True)
    entries = [json.loads(x) for x in lines]

    def content(i: int):  # line i's first block (1-based, as PROVENANCE.md counts)
        return entries[i - 1]["message"]["content"][0]

    def inp(event: str, **fields) -> dict:
        return hook_input(event, transcript, sid, str(repo), **fields)

    fail, passed = content(24), content(34)
    bash = {"tool_name": "Bash", "tool_input": fail["input"], "tool_use_id": fail["id"]}
    return Scenario(
        "claude", repo, sid,
        ("SessionStart", inp("SessionStart", source="startup")),
        ("UserPromptSubmit", inp("UserPromptSubmit", prompt=entries[1]["message"]["content"])),
        ("PostToolUseFailure", inp("PostToolUseFailure", **bash, error=content(25)["content"],
                                   is_interrupt=False)),
        [("SessionStart", inp("SessionStart", source="startup"), 1),
         ("UserPromptSubmit", inp("UserPromptSubmit", prompt=entries[1]["message"]["content"]), 1),
         ("PostToolUseFailure", inp("PostToolUseFailure", **bash, error=content(25)["content"],
                                    is_interrupt=False), 24),
         ("PostToolUse", inp("PostToolUse", tool_name="Bash", tool_input=passed["input"],
                             tool_use_id=passed["id"], tool_response={
                                 "stdout": content(35)["content"], "stderr": "",
                                 "interrupted": False, "isImage": False}), 34),
         ("Stop", inp("Stop", stop_hook_active=False), len(lines)),
         ("PreCompact", inp("PreCompact", trigger="manual", custom_instructions=""), len(lines)),
         ("SessionEnd", inp("SessionEnd", reason="other"), len(lines))],
        transcript, lines,
        "Decision: just check runs the quality checks, pytest with a 100% coverage floor; when "
        "it fails, fix the tests and never lower the floor.", "100% coverage floor",
        {"name": "COVERAGE_FLOOR", "entityType": "lesson",
         "observations": ["A test that never calls the function covers nothing: call it"],
         "errorPattern": {"type": "CoverageFailure", "message": "Coverage failure: total of 50 "
                          "is less than fail-under=100", "context": "python -m pytest tests/ --cov=src"},
         "metadata": {"severity": "high", "environment": {}, "frequency": 2, "successRate": 0.9},
         "verificationSteps": [{"command": "just check", "expectedOutput": "100% reached",
                                "successIndicators": ["reached"]}]},
        "python -m pytest tests/ --cov=src",
    )  # fmt: skip


POOL = {"name": "POOL_CLOSED", "entityType": "lesson",
        "observations": ["Reset the pool before reopening it: pool.reset() then open()"],
        "errorPattern": {"type": "PoolError", "message": "pool on port 5432 closed",
                         "context": "pytest tests/test_db.py"},
        "metadata": {"severity": "high", "environment": {}, "frequency": 2, "successRate": 0.9},
        "verificationSteps": [{"command": "pytest tests/test_db.py", "expectedOutput": "passed",
                               "successIndicators": ["passed"]}]}  # fmt: skip
DB_DECISION = ("Decision: when the checkout tests fail against the database, start it first: "
               "docker compose up db")  # fmt: skip


def codex(base: Path) -> Scenario:
    fix = FIXTURES / "codex"
    sid = "019a3c5e-7b21-7d40-9c2a-4f1e8d6b3a70"
    repo, (rollout_src,) = base / "repo", fix.glob("rollout-*.jsonl")
    (repo / "app").mkdir(parents=True)
    (repo / "app" / "db.py").write_text("def connect(port):\n    pool = Pool(port=port)\n")
    rollout = base / "sessions" / "2026" / "11" / "02" / rollout_src.name
    text = rollout_src.read_text(encoding="utf-8").replace("/home/dev/shop", str(repo))
    lines = to_now(text, "2026-11-02T10:15:04.011Z").splitlines(keepends=True)
    swap = {f"/home/dev/.codex/sessions/2026/11/02/{rollout.name}": str(rollout),
            "/home/dev/shop": str(repo)}  # fmt: skip

    def p(name: str) -> dict:
        return load(fix / "payloads" / f"{name}.json", swap)

    return Scenario(
        "codex", repo, sid, ("SessionStart", p("SessionStart")),
        ("UserPromptSubmit", p("UserPromptSubmit")), ("PostToolUse", p("PostToolUse")),
        [("SessionStart", p("SessionStart"), 1), ("UserPromptSubmit", p("UserPromptSubmit"), 6),
         ("PostToolUse", p("PostToolUse"), 10), ("PostToolUse", p("PostToolUse-passed"), 19),
         ("Stop", p("Stop"), 23), ("PreCompact", p("PreCompact"), 23),
         ("SessionEnd", p("SessionEnd"), len(lines))],
        rollout, lines, DB_DECISION, "docker compose up db", POOL, "pytest -q tests/test_db.py",
    )  # fmt: skip


def gemini(base: Path) -> Scenario:
    fix, root = FIXTURES / "gemini", "/home/dev/shop-api"
    sid = "8f1c2d3e-5b6a-4c7d-9e0f-1a2b3c4d5e6f"
    repo = base / "repo"
    (repo / "src" / "shop").mkdir(parents=True)
    (repo / "src" / "shop" / "config.py").write_text(
        "def parse_port(value):\n    return int(value)\n"
    )
    chats = base / ".gemini" / "tmp" / "shop-api" / "chats"
    chats.mkdir(parents=True)
    (chats.parent / ".project_root").write_text(str(repo), encoding="utf-8")
    transcript = chats / "session-2026-08-20T10-15-8f1c2d3e.jsonl"
    anchor = "2026-08-20T10:15:20.600Z"  # the prompt's
    text = (fix / "session.jsonl").read_text(encoding="utf-8").replace(root, str(repo))
    lines = to_now(text, anchor).splitlines(keepends=True)
    swap = {
        f"/home/dev/.gemini/tmp/shop-api/chats/{transcript.name}": str(transcript),
        root: str(repo),
    }

    def p(name: str) -> dict:
        data = load(fix / "hooks" / f"{name}.json", swap)
        return json.loads(to_now(json.dumps(data), anchor))

    return Scenario(
        "gemini", repo, sid, ("SessionStart", p("SessionStart")), ("BeforeAgent", p("BeforeAgent")),
        ("AfterTool", p("AfterTool-fail")),
        [("SessionStart", p("SessionStart"), 1), ("BeforeAgent", p("BeforeAgent"), 3),
         ("AfterTool", p("AfterTool-fail"), 8), ("AfterTool", p("AfterTool-pass"), 18),
         ("AfterAgent", p("AfterAgent"), 23), ("PreCompress", p("PreCompress"), len(lines)),
         ("SessionEnd", p("SessionEnd"), len(lines))],
        transcript, lines,
        "Decision: parse_port must take a missing PORT value (None) and fall back to 8080, never "
        "fail with AttributeError in the config tests.", "fall back to 8080",
        {"name": "PARSE_PORT_NONE", "entityType": "lesson",
         "observations": ["parse_port gets None when PORT is unset: return None before .strip()"],
         "errorPattern": {"type": "AttributeError", "message": "'NoneType' object has no "
                          "attribute 'strip'", "context": "pytest -q tests/test_config.py"},
         "metadata": {"severity": "high", "environment": {}, "frequency": 2, "successRate": 0.9},
         "verificationSteps": [{"command": "pytest -q tests/test_config.py", "expectedOutput":
                                "passed", "successIndicators": ["passed"]}]},
        "pytest -q tests/test_config.py", [("AfterTool", p("AfterTool-cancelled"))],
    )  # fmt: skip


def cursor(base: Path) -> Scenario:
    fix, sid = FIXTURES / "cursor", "5b0e6f3a-2c41-4d8e-9a57-1f3c9d2e7b10"
    repo = base / "repo"
    (repo / "app").mkdir(parents=True)
    (repo / "app" / "db.py").write_text("import os\n\nPORT = 5433\n")
    transcript = base / "agent-transcripts" / sid / f"{sid}.jsonl"
    stamp = datetime.now(UTC).strftime("%A, %b %d, %Y, %I:%M %p (UTC+0)")  # Cursor's, to the minute
    text = (fix / "transcript.jsonl").read_text(encoding="utf-8")
    lines = text.replace("Tuesday, Sep 29, 2026, 2:29 AM (UTC-4)", stamp).replace(
        "/home/dev/shop", str(repo)).splitlines(keepends=True)  # fmt: skip
    swap = {f"/home/dev/.cursor/projects/home-dev-shop/agent-transcripts/{sid}/{sid}.jsonl":
            str(transcript), "/home/dev/shop": str(repo)}  # fmt: skip

    def p(name: str) -> dict:
        return load(fix / "payloads" / f"{name}.json", swap)

    return Scenario(
        "cursor", repo, sid, ("sessionStart", p("sessionStart")),
        ("beforeSubmitPrompt", p("beforeSubmitPrompt")), ("postToolUseFailure", p("postToolUseFailure")),
        [("sessionStart", p("sessionStart"), 0), ("beforeSubmitPrompt", p("beforeSubmitPrompt"), 1),
         ("postToolUseFailure", p("postToolUseFailure"), 3), ("afterFileEdit", p("afterFileEdit"), 4),
         ("postToolUse", p("postToolUse"), 5), ("stop", p("stop"), len(lines)),
         ("preCompact", p("preCompact"), len(lines)), ("sessionEnd", p("sessionEnd"), len(lines))],
        transcript, lines, DB_DECISION, "docker compose up db",
        {"name": "PG_REFUSED", "entityType": "lesson",
         "observations": ["Start the database before the tests: docker compose up -d db"],
         "errorPattern": {"type": "OperationalError", "message": "connection to server at "
                          "localhost port 5432 failed: Connection refused",
                          "context": "pytest -q tests/test_db.py"},
         "metadata": {"severity": "high", "environment": {}, "frequency": 2, "successRate": 0.9},
         "verificationSteps": [{"command": "pg_isready -h localhost", "expectedOutput":
                                "accepting connections", "successIndicators": ["accepting"]}]},
        "pytest -q tests/test_db.py",
    )  # fmt: skip


def copilot(base: Path) -> Scenario:
    """``$COPILOT_HOME`` is ``base/.copilot`` for the daemon: Copilot's hooks name no call id,
    the daemon finds the call in the session file there."""
    fix, sid = FIXTURES / "copilot", "f857c138-d795-4185-a2ea-c980380573e5"
    repo, home = base / "repo", base / ".copilot"
    (repo / "app").mkdir(parents=True)
    (repo / "app" / "db.py").write_text('def connect(port):\n    return f"pool:{port}"\n')
    transcript = home / "session-state" / sid / "events.jsonl"
    transcript.parent.mkdir(parents=True)
    swap = {"/home/user/repo": str(repo), "/home/user/.copilot": str(home)}
    text = (fix / "session" / "events.jsonl").read_text(encoding="utf-8")
    for a, b in swap.items():
        text = text.replace(a, b)
    lines = to_now(text, "2026-12-06T21:06:10.726Z").splitlines(keepends=True)

    def upto(hook: str, nth: int = 0) -> int:  # the file when the nth such hook started
        starts = [i for i, x in enumerate(lines) if '"type":"hook.start"' in x
                  and f'"hookType":"{hook}"' in x]  # fmt: skip
        return starts[nth] + 1

    def p(name: str) -> dict:
        data = load(fix / "payloads" / f"{name}.json", swap)
        return {**data, "timestamp": int(time.time() * 1000)}

    return Scenario(
        "copilot", repo, sid, ("sessionStart", p("sessionStart")),
        ("userPromptSubmitted", p("userPromptSubmitted")), ("postToolUse", p("postToolUse-bash-failed")),
        [("sessionStart", p("sessionStart"), upto("sessionStart")),
         ("userPromptSubmitted", p("userPromptSubmitted"), upto("userPromptSubmitted")),
         ("postToolUse", p("postToolUse-bash-failed"), upto("postToolUse", 0)),
         ("postToolUse", p("postToolUse-edit"), upto("postToolUse", 2)),
         ("postToolUse", p("postToolUse-bash-passed"), upto("postToolUse", 3)),
         ("agentStop", p("agentStop"), upto("agentStop")), ("preCompact", p("preCompact"), len(lines)),
         ("sessionEnd", p("sessionEnd"), len(lines))],
        transcript, lines,
        "Decision: when the database check fails, look at the pool in app/db.py first; the "
        "check must print connected.", "must print connected",
        {**POOL, "errorPattern": {**POOL["errorPattern"], "context": "python3 check_db.py"}},
        "python3 check_db.py", [("postToolUseFailure", p("postToolUseFailure-edit"))],
        env={"COPILOT_HOME": str(home)},
    )  # fmt: skip


BUILDERS: dict[str, Callable[[Path], Scenario]] = {
    "claude": claude, "codex": codex, "gemini": gemini, "cursor": cursor, "copilot": copilot}  # fmt: skip
NAMES = list(BUILDERS)  # every client: claude, codex, gemini, cursor, copilot


# ------------------------------------------------------------------ one daemon for all
@dataclass
class World:
    home: Path
    base: Path
    scenarios: dict[str, Scenario]
    commands: dict[str, dict[str, tuple[str, str | None]]]  # client -> event -> (command, matcher)


def mcp(info: dict, project: str, tool: str, args: dict) -> dict:
    status, body = call(info, {"Authorization": f"Bearer {info['secret']}", "X-Pattern-Project":
                               project, "X-Pattern-Agent": TEAMMATE}, tool, args)  # fmt: skip
    assert status == 200 and not body["result"]["isError"], body
    return body["result"]["structuredContent"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("clients")
    scenarios = {n: BUILDERS[n](base / n) for n in NAMES}
    commands = {n: installed_hooks(n, base / n / "repo") for n in NAMES}
    env = {"PATTERN_EMBEDDER": "hash", "PATTERN_PROJECT_ID": "acc-owner"}
    for sc in scenarios.values():
        env.update(sc.env)
    home = base / "store"
    proc = start_daemon(home, env=env)
    try:
        info = read_info(home)
        for sc in scenarios.values():  # written by a teammate, before any session below
            mcp(info, sc.project, "remember", {"content": sc.memory, "scope": "team",
                                               "category": "decisions"})  # fmt: skip
            mcp(info, sc.project, "create_lesson", {"lesson": sc.lesson})
        yield World(home, base, scenarios, commands)
    finally:
        stop(proc)


def hook_env(sc: Scenario, home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PATTERN_", "LOOMINAL_", "CLAUDE_", "CURSOR_", "COPILOT_"))}  # fmt: skip
    return {**env, "PATTERN_HOME": str(home), "PATTERN_PROJECT_ID": sc.project,
            "PATTERN_AGENT_ID": AGENT, **HOOK_ENV, **extra}  # fmt: skip


def log_lines(home: Path) -> int:
    log = home / "hooks.log"
    return log.read_text(encoding="utf-8").count("\n") if log.is_file() else 0


def run(world: World, sc: Scenario, event: str, stdin: dict | bytes, home: Path | None = None,
        logged: int = 0, **env: str) -> str:  # fmt: skip
    """The installed hook command for ``event``, through a shell as the client runs it; it
    must exit 0, write nothing to stderr and ``logged`` lines to the store's hooks.log (a hook
    that failed prints nothing too). Returns its stdout."""
    before = log_lines(world.home)
    command, matcher = world.commands[sc.name][event]
    if matcher and isinstance(stdin, dict):
        tool = stdin.get("tool_name") or stdin.get("toolName")
        assert tool is None or re.search(matcher, tool), (matcher, tool)  # the client calls it
    data = stdin if isinstance(stdin, bytes) else json.dumps(stdin).encode()
    proc = subprocess.run(["sh", "-c", command], input=data, capture_output=True, timeout=30,
                          env=hook_env(sc, home or world.home, **env), cwd=sc.repo)  # fmt: skip
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    assert log_lines(world.home) - before == logged, (world.home / "hooks.log").read_text()
    return proc.stdout.decode()


def context_of(sc: Scenario, event: str, out: str) -> str:
    doc = json.loads(out)
    path = CONTEXT[sc.name]
    assert set(doc) == {path[0]}, doc
    for key in path:
        doc = doc[key]
    return doc


def empty(sc: Scenario, event: str) -> str:
    answer = EMPTY.get((sc.name, event))
    return "" if answer is None else json.dumps(answer) + "\n"


def db(world: World, sql: str, *args) -> list[tuple]:
    conn = sqlite3.connect(f"file:{world.home / 'pattern.sqlite3'}?mode=ro", uri=True)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


# ------------------------------------------------------------------ the acceptance, per client
@pytest.mark.parametrize("name", NAMES)
def test_a_team_memory_is_injected_for_a_prompt_in_another_session(world, name):
    sc = world.scenarios[name]
    (event, data), spec = sc.prompt, CLIENTS[name]
    shows = spec.to_output(event, "x") != spec.to_output(event, "")
    assert shows == ((name, event) not in EMPTY)
    session = another(data, f"{sc.sid}-a", world.base)
    if shows:
        assert sc.mark in context_of(sc, event, run(world, sc, event, session))
        return
    # no context field on the prompt: the decision reaches the session at its start
    start_event, start = sc.start
    brief = run(world, sc, start_event, another(start, f"{sc.sid}-a", world.base))
    assert sc.mark in context_of(sc, start_event, brief)
    assert run(world, sc, event, session) == empty(sc, event)


@pytest.mark.parametrize("name", NAMES)
def test_an_unrelated_prompt_injects_nothing(world, name):
    sc = world.scenarios[name]
    event, data = sc.prompt
    out = run(world, sc, event, {**another(data, f"{sc.sid}-b", world.base), "prompt": UNRELATED})
    assert out == empty(sc, event)


@pytest.mark.parametrize("name", NAMES)
def test_a_failed_command_gets_the_lesson(world, name):
    sc = world.scenarios[name]
    event, data = sc.failure
    out = run(world, sc, event, another(data, f"{sc.sid}-c", world.base))
    assert sc.lesson["name"] in context_of(sc, event, out)
    for event, data in sc.quiet:  # a cancelled command, a failed edit: no lesson
        assert run(world, sc, event, another(data, f"{sc.sid}-c", world.base)) == empty(sc, event)


@pytest.mark.parametrize("name", NAMES)
def test_fail_edit_pass_in_the_clients_transcript_is_one_learned_lesson(world, name):
    sc = world.scenarios[name]
    sc.transcript.parent.mkdir(parents=True, exist_ok=True)
    bucket = f"team/{sc.project}"

    def learned() -> list[dict]:
        rows = db(world, "SELECT extra FROM lessons WHERE bucket=?", bucket)
        blocks = [json.loads(extra).get("lesson", {}).get("learned") for (extra,) in rows]
        return [b for b in blocks if b and b.get("source") == "episode"]

    def exchanges() -> list[str]:
        return [r[0] for r in db(world, "SELECT content FROM records WHERE kind='turn' AND "
                                 "json_extract(metadata, '$.session') = ?", sc.sid)]  # fmt: skip

    written = 0
    for i, (event, data, upto) in enumerate(sc.fix):
        if i == len(sc.fix) - 1:  # the session's end, once the turn was learned
            assert wait_for(lambda: len(learned()) == 1), learned()
        with open(sc.transcript, "a", encoding="utf-8") as fh:  # appended, as clients write
            fh.write("".join(sc.lines[written:upto]))
        written = max(written, upto)
        out = run(world, sc, event, data)
        assert out == "" or isinstance(json.loads(out), dict), out
    [lesson] = learned()
    assert lesson["session"] == sc.sid and lesson["failedCommand"].startswith(sc.failed)
    prompt = sc.prompt[1]["prompt"]
    assert wait_for(
        lambda: len(exchanges()) == 1 and exchanges()[0].startswith(f"Prompt: {prompt}")
    ), exchanges()

    def read_to_the_end() -> bool:  # the detector read the whole file once more at the end
        rows = db(
            world, "SELECT value FROM meta WHERE key=?", f"episodes.file:{sc.transcript.resolve()}"
        )
        return bool(rows) and json.loads(rows[0][0])["offset"] == sc.transcript.stat().st_size

    assert wait_for(read_to_the_end)
    assert len(learned()) == 1 and len(exchanges()) == 1


@pytest.mark.parametrize("name", NAMES)
def test_bad_stdin_exits_0_and_prints_nothing(world, name):
    sc = world.scenarios[name]
    event = sc.prompt[0]
    for stdin in (b"{not json", b'["a", "JSON", "list"]'):
        assert run(world, sc, event, stdin, logged=1) == "", stdin  # one line, in its log
    # nothing at all is read as {}: no prompt, so the client's answer for nothing (Cursor reads
    # an empty stdout as a failed hook)
    assert run(world, sc, event, b"") == empty(sc, event)


@pytest.mark.parametrize("name", NAMES)
def test_a_broken_store_exits_0_and_prints_nothing(world, name, tmp_path):
    sc = world.scenarios[name]
    event, data = sc.prompt
    data = another(data, f"{sc.sid}-e", world.base)
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    assert run(world, sc, event, data, home=a_file) == ""  # PATTERN_HOME is a file
    shaped = tmp_path / "shaped"
    shaped.mkdir()
    (shaped / "daemon.json").write_text('{"host": 7, "port": "x", "secret": null}')
    assert run(world, sc, event, data, home=shaped) == ""
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "daemon.json").write_bytes(b"\x00\xffnot json{")
    lock = os.open(garbage / "daemon.lock", os.O_RDWR | os.O_CREAT)
    try:  # a daemon holds the store (none is started), its daemon.json is unreadable
        fcntl.flock(lock, fcntl.LOCK_EX)
        t0 = time.monotonic()
        assert run(world, sc, event, data, home=garbage, PATTERN_HOOK_DEADLINE="0.3") == ""
        assert time.monotonic() - t0 < 2.0
    finally:
        os.close(lock)
    assert not (garbage / "daemon.log").exists()  # no daemon was started there


@pytest.mark.parametrize("name", NAMES)
def test_the_latency_benchmark_drives_every_installed_event(name, tmp_path, monkeypatch):
    """benchmarks/hooks.py --client: a payload for every event we install, each one the client's
    spec reads as the benchmark's daemon does (its environment, Copilot's session file)."""
    from benchmarks import hook_payloads

    work = tmp_path / "work"
    commands = hook_payloads.installed_commands(name, tmp_path / "project")
    samples = hook_payloads.samples(name, work, tmp_path)
    for key, value in hook_payloads.daemon_env(work).items():
        monkeypatch.setenv(key, value)
    spec = CLIENTS[name]
    assert set(commands) == {s.event for s in samples} == set(spec.events)
    read = []
    for s in samples:
        if name == "copilot":
            hook_payloads.copilot_session(work, "s1", s.upto)
        if spec.to_input(s.event, s.for_session("s1", "hi")):
            read.append(s.label)
    ignored = {"copilot": ["postToolUseFailure (edit)"]}.get(name, [])  # a failed edit: no command
    assert [s.label for s in samples if s.label not in read] == ignored
