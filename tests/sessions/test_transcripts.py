"""Reading transcripts as turns: Claude Code and generic JSONL, checkpoints, abbreviations."""

from __future__ import annotations

import json

from ingest.sessions.transcript_base import error_excerpt
from ingest.sessions.transcripts import (
    last_turn,
    read_turns,
    session_cwd,
    tool_result_text,
    valid_offset,
)
from ingest.sessions.turns import turn_context
from tests.transcript_util import TranscriptWriter


def test_claude_code_turns_roles_and_fields(tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl", session="abc", cwd="/repo", branch="feat")
    w.user("Please run the tests")
    w.assistant("Running them now.")
    w.tool("Bash", {"command": "pytest -q", "description": "tests"}, "3 passed in 0.2s")
    w.assistant("All three pass.")
    res = read_turns(w.path, flush=True)
    assert [t.role for t in res.turns] == ["user", "assistant", "tool", "assistant"]
    assert res.turns[0].text == "Please run the tests"
    assert res.turns[2].text.startswith("Bash(command=pytest -q) → ok: 3 passed")
    t = res.turns[0]
    assert (t.session, t.cwd, t.git_branch, t.parent_session) == ("abc", "/repo", "feat", None)
    assert t.timestamp.endswith("Z")
    assert res.checkpoints[-1].offset == w.path.stat().st_size
    assert res.checkpoints[-1].turns == 4


def test_reply_held_back_until_flush_and_pending_tool_call(tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.user("fix it")
    w.assistant("Looking.")
    res = read_turns(w.path)  # the reply may go on: not committed yet
    assert res.checkpoints[-1].turns == 1
    tid = w.tool_use_only("Read", {"file_path": "/repo/a.py"})
    res = read_turns(w.path, flush=True)  # a call waits for its result: it holds nothing up
    cp = res.checkpoints[-1]
    assert cp.turns == 2 and cp.offset == w.path.stat().st_size
    assert list(cp.pending["calls"]) == [tid]  # carried in the checkpoint, without its input
    w.tool_result(tid, "x = 1\ny = 2\n")
    res = read_turns(w.path, flush=True)
    assert [t.role for t in res.turns[: res.checkpoints[-1].turns]] == ["user", "assistant", "tool"]
    assert "(2 lines" in res.turns[2].text
    rest = read_turns(w.path, cp.offset, flush=True, pending=cp.pending)  # from the checkpoint
    assert [t.text for t in rest.turns] == [res.turns[2].text]
    assert rest.turns[0].text.startswith("Read(file_path=/repo/a.py) → ok")


def test_final_records_calls_without_results(tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.user("deploy")
    w.tool_use_only("Bash", {"command": "make deploy"})
    res = read_turns(w.path, final=True)
    turns = res.turns[: res.checkpoints[-1].turns]
    assert turns[-1].text == "Bash(command=make deploy) → no result recorded"


def test_failed_tool_output_is_abbreviated_to_its_error(tmp_path):
    out = "\n".join([f"line {i}" for i in range(500)] + [
        "Traceback (most recent call last):", '  File "app.py", line 3, in <module>',
        "    main()", "KeyError: 'user_id'"])  # fmt: skip
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.tool("Bash", {"command": "python app.py"}, out, is_error=True)
    text = read_turns(w.path, flush=True).turns[0].text
    assert "KeyError: 'user_id'" in text and "line 10" not in text
    assert len(text) < 1000
    assert error_excerpt("all good\n3 passed") is None
    assert "exit code 2" in error_excerpt("building\nmake: *** [all] exit code 2")


def test_big_success_output_is_not_stored_whole(tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.tool("Read", {"file_path": "/r/big.py"}, "\n".join(f"x{i} = {i}" for i in range(5000)))
    text = read_turns(w.path, flush=True).turns[0].text
    assert text.startswith("Read(file_path=/r/big.py) → ok: x0 = 0 (5000 lines") and len(text) < 300


def test_sidechain_keeps_parent_session(tmp_path):
    w = TranscriptWriter(tmp_path / "sess-9" / "subagents" / "agent-a1.jsonl", session="sess-9",
                         sidechain_agent="a1")  # fmt: skip
    w.user("Search for the config loader")
    w.assistant("Found it in config.py")
    turns = read_turns(w.path, flush=True).turns
    assert {t.session for t in turns} == {"sess-9/agent-a1"}
    assert {t.parent_session for t in turns} == {"sess-9"}


def test_meta_and_compaction_entries_are_skipped(tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.write({**w._entry("user", "Caveat: the messages below were generated"), "isMeta": True})
    w.user("This session is being continued from a previous conversation that ran out of context.")
    w.user("<command-name>/clear</command-name>")
    w.write({"type": "summary", "summary": "old", "leafUuid": "x"})
    w.write({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}})
    w.user("real question")
    turns = read_turns(w.path, flush=True).turns
    assert [t.text for t in turns] == ["real question"]


def test_generic_jsonl(tmp_path):
    p = tmp_path / "chat.jsonl"
    rows = [{"session": "g1", "role": "user", "content": "hello there", "timestamp": "2024-05-01T10:00:00Z"},
            {"session": "g1", "role": "assistant", "content": "hi!", "timestamp": "2024-05-01T10:00:05Z"},
            {"session": "g2", "role": "system", "content": "ignored"},
            {"session": "g2", "role": "user", "content": "other session"}]  # fmt: skip
    p.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n")
    res = read_turns(p)
    assert res.format == "generic"
    assert [(t.session, t.role, t.text) for t in res.turns] == [
        ("g1", "user", "hello there"), ("g1", "assistant", "hi!"), ("g2", "user", "other session")]  # fmt: skip
    assert res.bad_lines == 1
    assert len({t.key for t in res.turns}) == 3


def test_partial_last_line_is_not_consumed(tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.user("first")
    whole = w.path.stat().st_size
    with open(w.path, "a") as fh:
        fh.write('{"type": "user", "message": {"content": "half')
    res = read_turns(w.path, flush=True)
    assert res.checkpoints[-1].offset == whole and len(res.turns) == 1


def test_valid_offset_detects_rewrite(tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.user("one")
    w.user("two")
    cp = read_turns(w.path, flush=True).checkpoints[-1]
    assert valid_offset(w.path, cp.offset, cp.line_hash, cp.line_len)
    text = w.path.read_text()
    w.path.write_text(text.replace("two", "TWO"))
    assert not valid_offset(w.path, cp.offset, cp.line_hash, cp.line_len)
    w.path.write_text(text[:10])
    assert not valid_offset(w.path, cp.offset, cp.line_hash, cp.line_len)


def test_last_turn_session_cwd_and_tool_result_lookup(tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl", cwd="/home/u/proj")
    w.user("Should we cache the tokens?")
    tid = w.tool("Bash", {"command": "ls"}, "a\nb")
    w.assistant("I suggest a 5-minute TTL cache in auth/tokens.py.")
    assert last_turn(w.path) == "I suggest a 5-minute TTL cache in auth/tokens.py."
    assert session_cwd(w.path) == "/home/u/proj"
    assert tool_result_text(w.path, tid) == "a\nb"


def test_turn_context_with_speaker():
    turns = [{"speaker": "user", "text": "a"}, {"speaker": "assistant", "text": "b"},
             {"speaker": "user", "text": "c"}]  # fmt: skip
    assert turn_context(turns, 1, "4 March 2025 09:30", "date,speaker,prev2,next1") == (
        "[4 March 2025 09:30] assistant\nuser: a\nuser: c"
    )
    assert turn_context(turns, 2, "", "speaker,prev2,next1") == "user\nuser: a\nassistant: b"
