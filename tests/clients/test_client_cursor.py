"""Cursor: its hook payloads (``tests/fixtures/clients/cursor``, SOURCES.md there) translated to
our handlers and our answers to its stdout JSON (pure functions), its hooks.json and mcp.json
installed beside a user's own entries and removed byte for byte, its transcripts read as turns
and as the episode detector's words, hostile payloads and lines (Hypothesis, bounded), and one
session of its events through the daemon's hook routes (a failed command gets its lesson; fail,
edit, pass becomes one learned lesson; stop indexes the transcript)."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.learning.episode_events import FeedProgress, read_events
from ingest.learning.tool_events import tool_event
from ingest.sessions.transcripts import read_turns
from ingest.sessions.transcripts_cursor import parse_stamp, prompt_of
from server.hooks import install
from server.hooks.clients import cursor
from server.hooks.clients.spec import HANDLERS
from server.hooks.hookclient import _trim
from server.service.prompting.hook_events import HookInput, response_failure
from tests.mcp_util import hook_daemon, wait_for
from tests.transcript_util import grow

FIX = Path(__file__).parents[1] / "fixtures" / "clients" / "cursor"
CONV = "5b0e6f3a-2c41-4d8e-9a57-1f3c9d2e7b10"
ROOT = "/home/dev/shop"
TRANSCRIPT = f"/home/dev/.cursor/projects/home-dev-shop/agent-transcripts/{CONV}/{CONV}.jsonl"
BASE = {"session_id": CONV, "transcript_path": TRANSCRIPT, "cwd": ROOT}
FUZZ = settings(max_examples=50, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip


def payload(event: str) -> dict:
    return json.loads((FIX / "payloads" / f"{event}.json").read_text(encoding="utf-8"))


# ------------------------------------------------------------------ events in
def test_session_start_and_prompt():
    assert cursor.to_input("sessionStart", payload("sessionStart")) == (
        "SessionStart",
        {"session_id": CONV, "cwd": ROOT},
    )  # transcript_path null: left out
    handler, inp = cursor.to_input("beforeSubmitPrompt", payload("beforeSubmitPrompt"))
    assert handler == "UserPromptSubmit" and inp == {**BASE, "prompt": payload(
        "beforeSubmitPrompt")["prompt"]}  # fmt: skip


def test_a_shell_result_reads_its_exit_status():
    handler, inp = cursor.to_input("postToolUse", payload("postToolUse"))
    assert handler == "PostToolUse" and inp == {
        **BASE, "tool_name": "Bash", "tool_input": {"command": "pytest -q tests/test_db.py"},
        "tool_use_id": "0d6a1f2e-7c3b-4e9a-b5d8-6f4c2a1e9b03",
        "tool_response": {"output": "3 passed in 0.41s\n", "exitCode": 0}}  # fmt: skip
    assert response_failure(HookInput(**inp).tool_response) == ("3 passed in 0.41s\n", False)
    failed = {**payload("postToolUse"), "tool_output": '{"stdout":"boom","exitCode":2}'}
    assert response_failure(cursor.to_input("postToolUse", failed)[1]["tool_response"]) == (
        "boom", True)  # fmt: skip
    # a long output reaches the daemon cut in its middle (the hook client's bound): no JSON
    # parser reads it, its exit status is still found at its end
    long = {**payload("postToolUse"),
            "tool_output": json.dumps({"output": "x" * 200_000, "exitCode": 3})}  # fmt: skip
    response = cursor.to_input("postToolUse", _trim(long))[1]["tool_response"]
    assert response["exitCode"] == 3 and response_failure(response)[1]


def test_a_failed_command_and_what_is_not_one():
    handler, inp = cursor.to_input("postToolUseFailure", payload("postToolUseFailure"))
    assert handler == "PostToolUseFailure"
    assert inp == {**BASE, "tool_name": "Bash", "tool_input": {"command": "pytest -q tests/test_db.py"},
                   "tool_use_id": "7b2e9c4d-1a3f-4c6b-9e8d-0f5a2b7c1d94",
                   "error": payload("postToolUseFailure")["error_message"],
                   "is_interrupt": False}  # fmt: skip
    refused = {**payload("postToolUseFailure"), "failure_type": "permission_denied"}
    assert cursor.to_input("postToolUseFailure", refused) is None
    for other in ({"tool_name": "Read", "tool_input": {"path": "x"}},
                  {"tool_input": "not an object"}, {"tool_input": {"command": 7}}):  # fmt: skip
        assert cursor.to_input("postToolUse", {**payload("postToolUse"), **other}) is None
    # the same command as afterShellExecution is not read (postToolUse carries it with its
    # status); unknown events neither
    assert cursor.to_input("afterShellExecution", payload("afterShellExecution")) is None
    assert cursor.to_input("afterAgentResponse", {"text": "hi"}) is None


def test_an_edit_is_the_detectors_edit_and_bounded():
    handler, inp = cursor.to_input("afterFileEdit", payload("afterFileEdit"))
    assert handler == "PostToolUse" and inp["tool_name"] == "MultiEdit"
    ev = tool_event(inp["tool_name"], inp["tool_input"], "", True)
    assert ev is not None and ev.kind == "edit" and ev.path == f"{ROOT}/app/db.py"
    assert '+PORT = int(os.environ.get("PGPORT", 5432))' in ev.hunk
    huge = {**payload("afterFileEdit"),
            "edits": [{"old_string": "a" * 70_000, "new_string": "b\n" * 40_000}] * 500}  # fmt: skip
    edits = cursor.to_input("afterFileEdit", huge)[1]["tool_input"]["edits"]
    assert len(edits) == cursor.MAX_EDITS
    assert all(len(v) <= cursor.EDIT_CHARS for e in edits for v in e.values())
    assert cursor.to_input("afterFileEdit", {"edits": []}) is None  # no file named


def test_compaction_stop_and_session_end():
    assert cursor.to_input("preCompact", payload("preCompact")) == (
        "PreCompact",
        {**BASE, "trigger": "auto"},
    )
    assert cursor.to_input("stop", payload("stop")) == ("Stop", BASE)
    assert cursor.to_input("sessionEnd", payload("sessionEnd")) == (
        "SessionEnd", {**BASE, "reason": "completed"})  # fmt: skip
    # no session_id (older builds): the conversation's id; no cwd: the first workspace root
    old = {"conversation_id": "c1", "workspace_roots": [7, "", "/w"], "transcript_path": None}
    assert cursor.to_input("stop", old) == ("Stop", {"session_id": "c1", "cwd": "/w"})


# ------------------------------------------------------------------ answers out
def test_answers_are_what_cursor_reads():
    for event in ("sessionStart", "postToolUse", "postToolUseFailure"):
        assert cursor.to_output(event, "LESSON") == {"additional_context": "LESSON"}
        assert cursor.to_output(event, "") == {}
    assert cursor.to_output("beforeSubmitPrompt", "") == {"continue": True}
    assert cursor.to_output("beforeSubmitPrompt", "ignored") == {"continue": True}
    for event in ("afterFileEdit", "preCompact", "stop", "sessionEnd"):
        assert cursor.to_output(event, "") == {}  # never a followup_message: no loop
    assert cursor.to_output("afterShellExecution", "") is None


def test_bindings():
    spec = cursor.SPEC
    assert {b.handler for b in spec.bindings} <= set(HANDLERS)
    assert {b.client_event: b.matcher for b in spec.bindings if b.matcher} == {
        "postToolUse": "Shell", "postToolUseFailure": "Shell"}  # fmt: skip
    assert spec.lost and all(cursor.to_output(e, "") is not None for e in spec.events)


# ------------------------------------------------------------------ install
def test_install_beside_the_users_hooks_then_uninstall_byte_for_byte(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    project = tmp_path / "repo"
    hooks_file, mcp_file = project / ".cursor" / "hooks.json", project / ".cursor" / "mcp.json"
    mine = {"command": ".cursor/hooks/format.sh"}
    hooks_file.parent.mkdir(parents=True)
    hooks_text = json.dumps({"version": 1, "hooks": {"afterFileEdit": [mine],
                             "beforeShellExecution": [{"command": "./guard.sh", "matcher": "rm"}]}},
                            indent=4)  # fmt: skip
    mcp_text = '{"mcpServers": {"other": {"command": "npx", "args": ["other"]}}}\n'
    hooks_file.write_text(hooks_text, encoding="utf-8")
    mcp_file.write_text(mcp_text, encoding="utf-8")

    install.install("project", project, client="cursor")
    doc = json.loads(hooks_file.read_text())
    assert (
        doc["version"] == 1 and doc["hooks"]["beforeShellExecution"][0]["command"] == "./guard.sh"
    )
    assert doc["hooks"]["afterFileEdit"][0] == mine  # the user's first, ours after
    ours = doc["hooks"]["postToolUse"][0]
    assert ours["matcher"] == "Shell" and ours["timeout"] == cursor.TIMEOUT_S
    assert ours["command"].endswith("hookclient.py --client cursor postToolUse")
    assert set(doc["hooks"]) == {"beforeShellExecution", *cursor.SPEC.events}
    servers = json.loads(mcp_file.read_text())["mcpServers"]
    assert set(servers) == {"other", "pattern-memory"}

    before = (hooks_file.read_bytes(), mcp_file.read_bytes())
    again = install.install("project", project, client="cursor")
    assert (hooks_file.read_bytes(), mcp_file.read_bytes()) == before
    assert any("already" in line for line in again)
    assert "postToolUse" in " ".join(install.status(project, "cursor"))

    install.uninstall("project", project, client="cursor")
    assert hooks_file.read_text(encoding="utf-8") == hooks_text
    assert mcp_file.read_text(encoding="utf-8") == mcp_text


def test_user_scope_creates_then_removes_its_files(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    install.install("user", tmp_path, client="cursor")
    hooks_file = home / ".cursor" / "hooks.json"
    assert json.loads(hooks_file.read_text())["version"] == 1
    assert "pattern-memory" in json.loads((home / ".cursor" / "mcp.json").read_text())["mcpServers"]
    assert cursor.detect()
    install.uninstall("user", tmp_path, client="cursor")
    assert not hooks_file.exists() and not (home / ".cursor" / "mcp.json").exists()


# ------------------------------------------------------------------ transcripts
def test_the_transcript_as_turns():
    res = read_turns(FIX / "transcript.jsonl", flush=True)
    assert res.format == "cursor" and res.bad_lines == 0
    got = [(t.role, t.text) for t in res.turns]
    assert got == [
        ("user", "The checkout tests fail against the database again, can you look?"),
        ("assistant", "I'll run the database tests first."),
        ("tool", "Shell(command=pytest -q tests/test_db.py) → no result recorded"),
        ("assistant", "The app connects to port 5433; the database listens on 5432."),
        ("tool", "StrReplace(path=/home/dev/shop/app/db.py) → no result recorded"),
        ("tool", "Shell(command=pytest -q tests/test_db.py) → no result recorded"),
        (
            "assistant",
            "Fixed: app/db.py now reads PGPORT and defaults to 5432; the three tests pass.",
        ),
    ]
    assert {t.session for t in res.turns} == {"transcript"}
    assert res.turns[0].timestamp == "2026-09-29T02:29:00-04:00"
    # read in two parts from the checkpoint: the same turns, the same keys
    cut = res.checkpoints[2]
    rest = read_turns(FIX / "transcript.jsonl", cut.offset, res.format, flush=True)
    assert [t.key for t in res.turns[cut.turns :]] == [t.key for t in rest.turns]


def test_the_transcript_for_the_detector_and_a_subagents_name(tmp_path):
    prog = FeedProgress()
    events, _ = read_events(FIX / "transcript.jsonl", prog, final=True)
    assert prog.format == "cursor"
    assert [e.kind for _, e in events] == ["prompt", "say", "say", "say"]  # runs: the hooks'
    sub = tmp_path / CONV / "subagents" / "explore-1.jsonl"
    sub.parent.mkdir(parents=True)
    shutil.copy(FIX / "transcript.jsonl", sub)
    turns = read_turns(sub, flush=True).turns
    assert {(t.session, t.parent_session) for t in turns} == {(f"{CONV}/agent-explore-1", CONV)}


def test_prompt_tags_and_times():
    assert prompt_of("<user_query>\nfix it\n</user_query>") == ("fix it", None)
    assert prompt_of("plain text") == ("plain text", None)
    assert prompt_of("<timestamp>Friday, Jul 31, 2026, 11:12 PM (UTC+5:30)</timestamp>\nhi")[1] == (
        "2026-07-31T23:12:00+05:30")  # fmt: skip
    for bad in ("", "Friday", "Friday, Jul 31, 2026, 11:12 PM (UTC+99)", "x (UTC" + "9" * 90 + ")"):
        assert parse_stamp(bad) is None


# ------------------------------------------------------------------ hostile input
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                   st.text(max_size=30), st.sampled_from(["Shell", "\ud800", "9" * 400, "{"]))  # fmt: skip
JSON = st.recursive(SCALAR, lambda c: st.lists(c, max_size=4)
                    | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=20)  # fmt: skip
FIELDS = st.sampled_from(["session_id", "conversation_id", "workspace_roots", "cwd", "prompt",
                          "tool_name", "tool_input", "tool_output", "tool_use_id",
                          "error_message", "failure_type", "is_interrupt", "file_path", "edits",
                          "transcript_path", "trigger", "reason"])  # fmt: skip
PAYLOAD = st.dictionaries(st.one_of(FIELDS, st.text(max_size=8)), JSON, max_size=8)
KEYS = {"session_id", "transcript_path", "cwd", "prompt", "tool_name", "tool_input",
        "tool_response", "tool_use_id", "error", "is_interrupt", "trigger", "reason"}  # fmt: skip


@FUZZ
@given(event=st.sampled_from([*sorted(cursor.SPEC.events), "afterShellExecution", "x"]),
       data=PAYLOAD, shell=st.booleans())  # fmt: skip
def test_any_payload_translates_or_is_ignored(event, data, shell):
    if shell:
        data = {**data, "tool_name": "Shell", "tool_input": {"command": data.get("prompt")}}
    got = cursor.to_input(event, data)
    if got is None:
        return
    handler, inp = got
    assert handler in HANDLERS and set(inp) <= KEYS
    HookInput.model_validate(inp)  # the daemon's model takes it
    json.dumps(inp)


LINE = st.one_of(
    st.builds(lambda role, content: {"role": role, "message": {"content": content}},
              st.sampled_from(["user", "assistant", "tool", 3]), JSON),
    st.builds(lambda blocks: {"role": "assistant", "message": {"content": blocks}},
              st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "tool_use"]),
                                              "text": JSON, "name": JSON, "input": JSON, "id": JSON}),
                       max_size=3)),
    st.just({"type": "turn_ended", "status": "success"}), JSON,
)  # fmt: skip


@FUZZ
@given(lines=st.lists(st.one_of(LINE.map(json.dumps), st.text(max_size=40)), max_size=8),
       cut=st.integers(0, 40))  # fmt: skip
def test_any_transcript_lines_are_read_or_passed_over(tmp_path_factory, lines, cut):
    path = tmp_path_factory.mktemp("t") / "c.jsonl"
    first = json.dumps({"role": "user", "message": {"content": "start"}})
    path.write_text("\n".join([first, *lines])[: len(first) + 1 + cut * 40] + "\n", encoding="utf-8",
                    errors="surrogatepass")  # fmt: skip
    res = read_turns(path, final=True)
    assert {t.role for t in res.turns} <= {"user", "assistant", "tool"}
    read_events(path, FeedProgress(), final=True)


# ------------------------------------------------------------------ through the daemon
FAIL = """Traceback (most recent call last):
  File "{root}/app/db.py", line 12, in connect
    return Pool(port=port).open()
app.db.PoolError: pool on port 5432 closed at 0x7f3a5432"""
LESSON = {"name": "POOL_CLOSED", "entityType": "lesson",
          "observations": ["Reset the pool before reopening it: pool.reset() then open()"],
          "errorPattern": {"type": "PoolError", "message": "pool on port 5432 closed",
                           "context": "pytest tests/test_db.py"},
          "metadata": {"severity": "high", "environment": {}, "frequency": 2, "successRate": 0.9},
          "verificationSteps": [{"command": "pytest tests/test_db.py", "expectedOutput": "passed",
                                 "successIndicators": ["passed"]}]}  # fmt: skip


def test_a_cursor_session_through_the_hook_routes(tmp_path):
    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    (repo / "app" / "db.py").write_text("def connect(port):\n    pool = Pool(port=port)\n")
    transcript = tmp_path / "t" / CONV / f"{CONV}.jsonl"
    transcript.parent.mkdir(parents=True)
    # the prompt stamped now, as Cursor writes it (to the minute): the prompt the hook stored
    # is then the transcript's
    now = datetime.now(UTC).strftime("%A, %b %d, %Y, %I:%M %p (UTC+0)")
    text = (FIX / "transcript.jsonl").read_text(encoding="utf-8")
    lines = text.replace("Tuesday, Sep 29, 2026, 2:29 AM (UTC-4)", now).splitlines(keepends=True)
    base = {"conversation_id": CONV, "session_id": CONV, "workspace_roots": [str(repo)],
            "transcript_path": str(transcript), "cursor_version": "2026.10.01"}  # fmt: skip

    with hook_daemon(tmp_path, "s3cret") as (svc, client, http):
        client.ok("create_lesson", {"lesson": LESSON})

        def post(event: str, upto: int, **fields):
            grow(transcript, lines, upto)
            body = {"client": "cursor", "input": {**base, **fields, "hook_event_name": event},
                    "config": {"lesson_threshold": 0.05}}  # fmt: skip
            r = http.post(f"/hooks/{event}", json=body, headers={"Authorization": "Bearer s3cret"})
            assert r.status_code == 200, r.text
            return r.json()["output"]

        # the briefing of one conversation shows the lesson (once per conversation: a failure in
        # that one would not show it again); the failure of another gets it
        brief = post("sessionStart", 0, session_id="c0", conversation_id="c0")
        assert "POOL_CLOSED" in brief["additional_context"]
        prompt = payload("beforeSubmitPrompt")["prompt"]  # stored at once, completed in place
        assert post("beforeSubmitPrompt", 1, prompt=prompt) == {"continue": True}
        shell = {"tool_name": "Shell", "cwd": str(repo)}
        out = post("postToolUseFailure", 3, **shell, tool_input={"command": "pytest tests/test_db.py"},
                   tool_use_id="t1", error_message=FAIL.format(root=repo), failure_type="error",
                   is_interrupt=False)  # fmt: skip
        assert "POOL_CLOSED" in out["additional_context"]
        assert post("afterFileEdit", 4, file_path=str(repo / "app" / "db.py"), edits=[
            {"old_string": "    return Pool(port=port).open()\n",
             "new_string": "    pool = Pool(port=port)\n    pool.reset()\n    return pool.open()\n"}]) == {}  # fmt: skip
        ok = json.dumps({"output": "= 3 passed in 0.21s =", "exitCode": 0})
        assert post("postToolUse", 5, **shell, tool_input={"command": "python -m pytest tests/test_db.py -q"},
                    tool_use_id="t2", tool_output=ok) == {}  # fmt: skip
        assert post("stop", 7, status="completed", loop_count=0) == {}

        def learned():  # the seeded lesson and the one learned from fail, edit, pass
            return [r[0] for r in svc.store.reader.execute("SELECT error_type FROM lessons")]

        def exchanges():
            return [r[0] for r in svc.store.reader.execute(
                "SELECT content FROM records WHERE kind='turn' AND "
                "json_extract(metadata, '$.session') = ?", (CONV,))]  # fmt: skip

        assert wait_for(lambda: len(learned()) == 2), learned()
        assert sorted(learned()) == ["PoolError", "app.db.PoolError"]
        assert wait_for(lambda: any("Tools: Shell" in c for c in exchanges())), exchanges()
        [exchange] = exchanges()
        assert exchange.startswith(f"Prompt: {prompt}")
