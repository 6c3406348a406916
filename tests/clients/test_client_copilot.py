"""GitHub Copilot CLI: its hook inputs (as Copilot CLI 1.0.102 sent them) translated to our
handlers, our answers in its output format, its hooks and MCP files installed and removed, its
session files read as turns and as the episode detector's events, hostile payloads and lines,
and one session through the daemon's hook routes (tests/fixtures/clients/copilot/SOURCES.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.learning.episode_events import FeedProgress, read_events
from ingest.learning.tool_events import tool_event
from ingest.sessions.transcripts import last_turn, read_turns, session_cwd
from ingest.sessions.transcripts_copilot import find_call, split_trailer, without_guidance
from server.hooks import install
from server.hooks.clients import copilot
from server.hooks.clients.spec import HANDLERS
from server.service.prompting.hook_events import HookInput, response_failure

FIX = Path(__file__).parents[1] / "fixtures" / "clients" / "copilot"
SID = "f857c138-d795-4185-a2ea-c980380573e5"
ROOT = "/home/user/repo"
FUZZ = settings(max_examples=50, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])  # fmt: skip


def payload(name: str) -> dict:
    return json.loads((FIX / "payloads" / f"{name}.json").read_text(encoding="utf-8"))


def session_lines() -> list[str]:
    return (FIX / "session" / "events.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)


def upto_hook(lines: list[str], hook: str, nth: int = 0) -> list[str]:
    """The file as it was when the ``nth`` hook of type ``hook`` started (the CLI records a
    ``hook.start`` for every tool, the ``view`` too, whose command the matcher then skips)."""
    seen = -1
    for i, line in enumerate(lines):
        e = json.loads(line)
        if e["type"] == "hook.start" and e["data"]["hookType"] == hook:
            seen += 1
            if seen == nth:
                return lines[: i + 1]
    raise AssertionError(hook)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """$COPILOT_HOME in a temporary folder; returns the session file's path there."""
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / ".copilot"))
    path = tmp_path / ".copilot" / "session-state" / SID / "events.jsonl"
    path.parent.mkdir(parents=True)
    return path


# ------------------------------------------------------------------ events in
def test_session_start_prompt_stop_end_and_compaction(home):
    base = {"session_id": SID, "cwd": ROOT, "transcript_path": str(home)}
    assert copilot.to_input("sessionStart", payload("sessionStart")) == (
        "SessionStart", {**base, "source": "startup"})  # "new" is our "startup"  # fmt: skip
    resumed = {**payload("sessionStart"), "source": "resume"}
    assert copilot.to_input("sessionStart", resumed)[1]["source"] == "resume"
    assert "source" not in copilot.to_input("sessionStart", {"source": "other"})[1]
    assert copilot.to_input("userPromptSubmitted", payload("userPromptSubmitted")) == (
        "UserPromptSubmit", {**base, "prompt": "The database check fails, please fix it"})  # fmt: skip
    named = {**base, "transcript_path": payload("agentStop")["transcriptPath"]}  # as sent
    assert copilot.to_input("agentStop", payload("agentStop")) == ("Stop", named)
    assert copilot.to_input("preCompact", payload("preCompact")) == (
        "PreCompact", {**named, "trigger": "manual"})  # fmt: skip
    assert copilot.to_input("sessionEnd", payload("sessionEnd")) == (
        "SessionEnd", {**base, "reason": "complete"})  # fmt: skip
    # a session id that cannot be a folder's name names no file
    odd = copilot.to_input("sessionEnd", {"sessionId": "../../etc", "reason": "abort"})[1]
    assert "transcript_path" not in odd and odd["session_id"] == "../../etc"


def test_a_failed_command_reads_its_exit_status_and_its_call(home):
    lines = session_lines()
    home.write_text("".join(upto_hook(lines, "postToolUse", 0)), encoding="utf-8")
    handler, inp = copilot.to_input("postToolUse", payload("postToolUse-bash-failed"))
    assert handler == "PostToolUse"
    assert inp["tool_name"] == "Bash" and inp["tool_use_id"] == "call_0"
    assert inp["tool_input"] == {"command": "python3 check_db.py"}
    output, failed = response_failure(HookInput(**inp).tool_response)
    assert failed and inp["tool_response"]["exit_code"] == 1
    assert output.endswith("app.db.PoolError: pool on port 5432 closed\n(exit code 1)")
    assert "<shellId" not in output
    # the live run event and the file's own are one call (the detector keeps it once)
    [(_, from_file)] = [x for x in read_events(home, FeedProgress(), final=True)[0]
                        if x[1].kind == "run"] or [(None, None)]  # fmt: skip
    assert from_file is None  # its result is written after the hook: not in the file yet
    home.write_text("".join(lines), encoding="utf-8")
    runs = [e for _, e in read_events(home, FeedProgress(), final=True)[0] if e.kind == "run"]
    assert [(e.call, e.ok) for e in runs] == [("call_0", False), ("call_3", True)]
    # no session file (another $COPILOT_HOME): Copilot's own name, no id; lessons still found
    home.unlink()
    _, inp = copilot.to_input("postToolUse", payload("postToolUse-bash-failed"))
    assert inp["tool_name"] == "bash" and "tool_use_id" not in inp
    assert tool_event(inp["tool_name"], inp["tool_input"], "", False) is None


def test_a_passed_command_and_an_edit(home):
    lines = session_lines()
    home.write_text("".join(upto_hook(lines, "postToolUse", 3)), encoding="utf-8")
    _, ran = copilot.to_input("postToolUse", payload("postToolUse-bash-passed"))
    assert ran["tool_use_id"] == "call_3" and response_failure(ran["tool_response"])[1] is False
    home.write_text("".join(upto_hook(lines, "postToolUse", 2)), encoding="utf-8")
    handler, inp = copilot.to_input("postToolUse", payload("postToolUse-edit"))
    assert handler == "PostToolUse" and inp["tool_name"] == "Edit"
    assert inp["tool_use_id"] == "call_2" and inp["tool_response"]["success"] is True
    ev = tool_event(inp["tool_name"], inp["tool_input"], "", True, inp["tool_use_id"])
    assert ev is not None and ev.kind == "edit" and ev.path == f"{ROOT}/app/db.py"
    assert '+    return f"pool:{port}"' in ev.hunk
    home.unlink()  # an edit the file does not show: the file's reading will carry it
    assert copilot.to_input("postToolUse", payload("postToolUse-edit")) is None


def test_what_is_not_a_command_result(home):
    base = payload("postToolUse-bash-failed")
    for other in ({"toolName": "view", "toolArgs": {"path": "x"}}, {"toolArgs": "not json"},
                  {"toolArgs": {"command": 7}}, {"toolArgs": None}, {"toolName": None},
                  {"toolResult": {"resultType": "denied", "textResultForLlm": "denied"}}):  # fmt: skip
        assert copilot.to_input("postToolUse", {**base, **other}) is None, other
    # toolArgs as the JSON text the older page shows
    text = {**base, "toolArgs": json.dumps(base["toolArgs"])}
    assert copilot.to_input("postToolUse", text)[1]["tool_input"] == {
        "command": "python3 check_db.py"
    }
    # a failed edit is no command; a failed shell call is the failure handler's
    assert copilot.to_input("postToolUseFailure", payload("postToolUseFailure-edit")) is None
    shell = {**payload("postToolUseFailure-edit"), "toolName": "bash",
             "toolArgs": {"command": "make test"}, "error": "command timed out"}  # fmt: skip
    handler, inp = copilot.to_input("postToolUseFailure", shell)
    assert handler == "PostToolUseFailure" and inp["tool_input"] == {"command": "make test"}
    assert inp["error"] == "command timed out" and inp["tool_name"] == "bash"
    for event in ("preToolUse", "errorOccurred", "notification", "SessionStart", "x"):
        assert copilot.to_input(event, payload("sessionStart")) is None


def test_shell_trailer_and_hook_guidance():
    assert split_trailer("ok\n<shellId: 3 completed with exit code 0>") == ("ok", 0)
    assert split_trailer("<shellId: 0 completed with exit code 127>\n") == ("", 127)
    for text in ("no trailer", "x\n<shellId: 1 completed with exit code -1>",
                 "x\n<shellId: 1 completed with exit code ٣>", "<shellId: 1 still running>",
                 "x\n<shellId: 1 completed with exit code 99999999999>", ""):  # fmt: skip
        assert split_trailer(text) == (text, None)
    added = 'out\n\nTool "bash" succeeded. Additional guidance from postToolUse hooks:\nLESSON'
    assert without_guidance(added) == "out"
    assert without_guidance('say\n\nTool "x" ran') == 'say\n\nTool "x" ran'


# ------------------------------------------------------------------ answers out
def test_answers_are_what_copilot_reads():
    recorded = json.loads((FIX / "outputs.json").read_text(encoding="utf-8"))
    for event, seen in recorded.items():
        text = seen["stdout"]["additionalContext"]
        assert copilot.to_output(event, text) == seen["stdout"]
        assert copilot.to_output(event, "") is None
    for event in ("preCompact", "agentStop", "sessionEnd"):
        assert copilot.to_output(event, "LESSON") is None  # agentStop output would loop


def test_bindings():
    spec = copilot.SPEC
    assert {b.handler for b in spec.bindings} == set(HANDLERS)
    assert {b.client_event: b.matcher for b in spec.bindings if b.matcher} == {
        "postToolUse": "bash|powershell|edit|create"}  # fmt: skip
    assert spec.lost and spec.title == "GitHub Copilot CLI"


# ------------------------------------------------------------------ install
def test_install_beside_the_users_hooks_then_uninstall_byte_for_byte(tmp_path, monkeypatch):
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / ".copilot"))
    project = tmp_path / "repo"
    hooks_dir = project / ".github" / "hooks"
    hooks_dir.mkdir(parents=True)
    theirs = hooks_dir / "audit.json"
    theirs_text = json.dumps({"version": 1, "hooks": {"preToolUse": [
        {"type": "command", "bash": "./audit.sh", "timeoutSec": 5}]}}, indent=2)  # fmt: skip
    theirs.write_text(theirs_text, encoding="utf-8")
    mcp_file = project / ".github" / "mcp.json"
    mcp_text = (
        '{\n    "mcpServers": {"other": {"type": "local", "command": "npx", "args": ["o"]}}\n}\n'
    )
    mcp_file.write_text(mcp_text, encoding="utf-8")

    install.install("project", project, client="copilot")
    ours_file = hooks_dir / "pattern-memory.json"
    doc = json.loads(ours_file.read_text())
    assert doc["version"] == 1 and set(doc["hooks"]) == copilot.SPEC.events
    hook = doc["hooks"]["postToolUse"][0]
    assert hook["type"] == "command" and hook["timeoutSec"] == copilot.TIMEOUT_S
    assert hook["matcher"] == copilot.TOOL_MATCHER
    assert hook["bash"].endswith("hookclient.py --client copilot postToolUse")
    servers = json.loads(mcp_file.read_text())["mcpServers"]
    assert set(servers) == {"other", "pattern-memory"}
    assert servers["pattern-memory"]["type"] == "local" and servers["pattern-memory"]["tools"] == [
        "*"
    ]
    assert theirs.read_text(encoding="utf-8") == theirs_text
    assert not (project / ".mcp.json").exists()  # Claude Code's file: not ours

    before = (ours_file.read_bytes(), mcp_file.read_bytes())
    again = install.install("project", project, client="copilot")
    assert (ours_file.read_bytes(), mcp_file.read_bytes()) == before
    assert any("already" in line for line in again)
    assert "postToolUse" in " ".join(install.status(project, "copilot"))

    install.uninstall("project", project, client="copilot")
    assert not ours_file.exists()
    assert mcp_file.read_text(encoding="utf-8") == mcp_text
    assert theirs.read_text(encoding="utf-8") == theirs_text
    # a hand-made entry of ours in a user's file: only ours goes
    ours_file.write_text(json.dumps({"version": 1, "hooks": {"sessionEnd": [
        {"type": "command", "bash": "./bye.sh"}, json.loads(json.dumps(hook))]}}))  # fmt: skip
    install.uninstall("project", project, client="copilot")
    assert json.loads(ours_file.read_text())["hooks"] == {"sessionEnd": [
        {"type": "command", "bash": "./bye.sh"}]}  # fmt: skip


def test_user_scope_creates_then_removes_its_files(tmp_path, monkeypatch):
    home = tmp_path / ".copilot"
    monkeypatch.setenv("COPILOT_HOME", str(home))
    install.install("user", tmp_path, client="copilot")
    hooks_file = home / "hooks" / "pattern-memory.json"
    assert json.loads(hooks_file.read_text())["version"] == 1
    assert "pattern-memory" in json.loads((home / "mcp-config.json").read_text())["mcpServers"]
    assert copilot.detect()
    install.uninstall("user", tmp_path, client="copilot")
    assert not hooks_file.exists() and not (home / "mcp-config.json").exists()


# ------------------------------------------------------------------ session files
def test_the_session_file_as_turns(tmp_path):
    path = FIX / "session" / "events.jsonl"
    res = read_turns(path, flush=True)
    assert res.format == "copilot" and res.bad_lines == 0
    got = [(t.role, t.text.splitlines()[0]) for t in res.turns]
    assert got == [
        ("user", "The database check fails, please fix it"),
        ("tool", "Bash(command=python3 check_db.py) → error:"),
        ("tool", "view(path=/home/user/repo/app/db.py) → ok: class PoolError(Exception): (4 lines, "
                 "109 characters)"),
        ("tool", "Edit(file_path=/home/user/repo/app/db.py) → ok: File /home/user/repo/app/db.py "
                 "updated with changes."),
        ("tool", "Bash(command=python3 check_db.py) → ok: connected"),
        ("assistant", "Fixed: `connect` no longer raises PoolError; the check prints `connected`."),
    ]  # fmt: skip
    assert "app.db.PoolError: pool on port 5432 closed" in res.turns[1].text
    assert all("MARKER" not in t.text for t in res.turns)  # what our hooks added is not kept
    assert {(t.session, t.cwd, t.git_branch) for t in res.turns} == {(SID, ROOT, "master")}
    assert session_cwd(path) == ROOT and last_turn(path).startswith("Fixed: `connect`")
    # read in two parts from a checkpoint with a call waiting: the same turns, the same keys
    cut = next(cp for cp in res.checkpoints if cp.pending)
    rest = read_turns(path, cut.offset, res.format, flush=True, pending=cut.pending)
    assert [t.key for t in res.turns[cut.turns :]] == [t.key for t in rest.turns]


def test_the_session_file_for_the_detector_and_a_subagents_calls(tmp_path):
    prog = FeedProgress()
    events, places = read_events(FIX / "session" / "events.jsonl", prog, final=True)
    assert prog.format == "copilot" and prog.pending == {}
    assert [(e.kind, e.call) for _, e in events] == [
        ("prompt", ""),
        ("run", "call_0"),
        ("edit", "call_2"),
        ("run", "call_3"),
        ("say", ""),
    ]
    assert places == {SID: {"cwd": ROOT, "branch": "master"}}
    # a sub-agent's events: its own session; the hook cannot name its call
    path = tmp_path / SID / "events.jsonl"
    path.parent.mkdir()
    lines = [json.loads(x) for x in session_lines()]
    for e in lines[1:]:
        e["agentId"] = "explore-1"
    path.write_text("".join(json.dumps(e) + "\n" for e in lines), encoding="utf-8")
    assert {t.session for t in read_turns(path, flush=True).turns} == {f"{SID}/agent-explore-1"}
    start = next(e for e in lines if e["type"] == "tool.execution_start")
    cut = lines[: lines.index(start) + 1]
    path.write_text("".join(json.dumps(e) + "\n" for e in cut), encoding="utf-8")
    assert find_call(path, "bash", start["data"]["arguments"]) is None


# ------------------------------------------------------------------ hostile input
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                   st.text(max_size=30), st.sampled_from(["bash", "edit", "\ud800", "9" * 400,
                                                          "{", "../x", "a\x00b"]))  # fmt: skip
JSON = st.recursive(SCALAR, lambda c: st.lists(c, max_size=4)
                    | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=20)  # fmt: skip
FIELDS = st.sampled_from(["sessionId", "timestamp", "cwd", "source", "prompt", "toolName",
                          "toolArgs", "toolResult", "error", "transcriptPath", "trigger",
                          "reason", "initialPrompt"])  # fmt: skip
PAYLOAD = st.dictionaries(st.one_of(FIELDS, st.text(max_size=8)), JSON, max_size=8)
KEYS = {"session_id", "transcript_path", "cwd", "source", "prompt", "tool_name", "tool_input",
        "tool_response", "tool_use_id", "error", "trigger", "reason"}  # fmt: skip


@FUZZ
@given(event=st.sampled_from([*sorted(copilot.SPEC.events), "preToolUse", "x"]), data=PAYLOAD,
       shell=st.sampled_from(["", "bash", "edit", "create"]),
       result=st.one_of(JSON, st.fixed_dictionaries({"resultType": JSON, "textResultForLlm": JSON})))  # fmt: skip
def test_any_payload_translates_or_is_ignored(home, event, data, shell, result):
    home.write_text("".join(session_lines()), encoding="utf-8")
    if shell:
        data = {**data, "sessionId": SID, "toolName": shell, "toolResult": result,
                "toolArgs": {"command": data.get("prompt"), "path": data.get("cwd")}}  # fmt: skip
    got = copilot.to_input(event, data)
    if got is None:
        return
    handler, inp = got
    assert handler in HANDLERS and set(inp) <= KEYS
    HookInput.model_validate(inp)  # the daemon's model takes it
    json.dumps(inp)


EVENT = st.builds(
    lambda kind, data, agent: {"type": kind, "data": data, "id": "e", "timestamp": "t",
                               **({"agentId": agent} if agent else {})},
    st.sampled_from(["user.message", "assistant.message", "tool.execution_start",
                     "tool.execution_complete", "session.start", "hook.end", "x.y"]),
    st.one_of(st.dictionaries(st.sampled_from(["content", "toolCallId", "toolName", "arguments",
                                               "success", "result", "error", "shellExecution",
                                               "context", "sessionId"]), JSON, max_size=6),
              st.fixed_dictionaries({"toolCallId": st.sampled_from(["c1", "c2"]),
                                     "toolName": st.sampled_from(["bash", "edit", "create"]),
                                     "arguments": JSON, "success": JSON, "result": JSON})),
    st.one_of(st.none(), JSON),
)  # fmt: skip


@FUZZ
@given(lines=st.lists(st.one_of(EVENT.map(json.dumps), st.text(max_size=40)), max_size=8),
       cut=st.integers(0, 40))  # fmt: skip
def test_any_session_lines_are_read_or_passed_over(tmp_path_factory, lines, cut):
    path = tmp_path_factory.mktemp("t") / SID / "events.jsonl"
    path.parent.mkdir()
    first = session_lines()[0].rstrip("\n")
    text = "\n".join([first, *lines])[: len(first) + 1 + cut * 40] + "\n"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    res = read_turns(path, final=True)
    assert res.format == "copilot" and {t.role for t in res.turns} <= {"user", "assistant", "tool"}
    read_events(path, FeedProgress(), final=True)
    find_call(path, "bash", {"command": "x"})
    last_turn(path)


# ------------------------------------------------------------------ through the daemon
LESSON = {"name": "POOL_CLOSED", "entityType": "lesson",
          "observations": ["Return the pool handle instead of raising when the port is closed"],
          "errorPattern": {"type": "PoolError", "message": "pool on port 5432 closed",
                           "context": "python3 check_db.py"},
          "metadata": {"severity": "high", "environment": {}, "frequency": 2, "successRate": 0.9},
          "verificationSteps": [{"command": "python3 check_db.py", "expectedOutput": "connected",
                                 "successIndicators": ["connected"]}]}  # fmt: skip


def test_a_copilot_session_through_the_hook_routes(tmp_path, home):
    from tests.mcp_util import hook_daemon, wait_for

    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    (repo / "app" / "db.py").write_text('def connect(port):\n    return f"pool:{port}"\n')
    here = {ROOT: str(repo), "/home/user/.copilot": str(home.parents[2])}

    def local(text: str) -> str:
        for a, b in here.items():
            text = text.replace(a, b)
        return text

    # the file's times are now's: a prompt the hook stored is the file's when within 30 s of it
    stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    lines = [
        json.dumps({**json.loads(local(x)), "timestamp": stamp}) + "\n" for x in session_lines()
    ]

    with hook_daemon(tmp_path, "s3cret") as (svc, client, http):
        client.ok("create_lesson", {"lesson": LESSON})

        def post(event: str, name: str, upto: tuple[str, int] | None, **fields):
            if upto is not None:
                home.write_text("".join(upto_hook(lines, *upto)), encoding="utf-8")
            data = {**json.loads(local(json.dumps(payload(name)))), **fields}
            body = {"client": "copilot", "input": data, "config": {"lesson_threshold": 0.05}}
            r = http.post(f"/hooks/{event}", json=body, headers={"Authorization": "Bearer s3cret"})
            assert r.status_code == 200, r.text
            return r.json()["output"]

        # another session's briefing shows the lesson; this session's failure gets it
        brief = post("sessionStart", "sessionStart", None, sessionId="other-session")
        assert "POOL_CLOSED" in brief["additionalContext"]
        assert (
            post("userPromptSubmitted", "userPromptSubmitted", ("userPromptSubmitted", 0)) is None
        )
        out = post("postToolUse", "postToolUse-bash-failed", ("postToolUse", 0))
        assert set(out) == {"additionalContext"} and "POOL_CLOSED" in out["additionalContext"]
        assert post("postToolUse", "postToolUse-edit", ("postToolUse", 2)) is None
        assert post("postToolUse", "postToolUse-bash-passed", ("postToolUse", 3)) is None
        assert post("agentStop", "agentStop", ("agentStop", 0)) is None

        def learned():  # the seeded lesson and the one learned from fail, edit, pass
            return [r[0] for r in svc.store.reader.execute("SELECT error_type FROM lessons")]

        def exchanges():
            return [r[0] for r in svc.store.reader.execute(
                "SELECT content FROM records WHERE kind='turn' AND "
                "json_extract(metadata, '$.session') = ?", (SID,))]  # fmt: skip

        assert wait_for(lambda: len(learned()) == 2), learned()
        assert sorted(learned()) == ["PoolError", "app.db.PoolError"]
        assert wait_for(lambda: any("Tools: Bash" in c for c in exchanges())), exchanges()
        [exchange] = exchanges()
        assert exchange.startswith("Prompt: The database check fails, please fix it")
        home.write_text("".join(lines), encoding="utf-8")
        assert post("sessionEnd", "sessionEnd", None) is None


def test_index_sessions_finds_the_session_files(home):
    from server.hooks.session_client import default_paths

    home.write_text("".join(session_lines()), encoding="utf-8")
    assert copilot.session_files() == [home] and home in default_paths()
