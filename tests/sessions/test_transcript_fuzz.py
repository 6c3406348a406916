"""The transcript readers on any file: random JSONL entries in both formats, random bytes,
invalid UTF-8, lone surrogates, deep nesting, numbers of thousands of digits, dates off the
calendar, lines longer than the readers' bound. Every reader (the session indexer's turns, the
episode detector's events, the last turn, a tool's result, the session's folder, a LoCoMo
turn's context) returns within its bounds in size and time and never raises."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.learning import episode_events
from ingest.learning.episode_events import FeedProgress, read_events
from ingest.sessions import transcripts
from ingest.sessions.transcript_base import MAX_TURN_CHARS
from ingest.sessions.transcripts import last_turn, read_turns, session_cwd, tool_result_text
from ingest.sessions.turns import turn_context

FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
LINE_BOUND = 4096  # the readers' line bound, made small for the test

SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=40),
    st.sampled_from(["\ud800", "a\udfffb", "9" * 5000, "2024-05-01T10:00:00Z",
                     "9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00", "0000-01-01",
                     "Traceback (most recent call last)", "x" * 3000]),
)  # fmt: skip
JSON = st.recursive(SCALAR, lambda c: st.lists(c, max_size=4)
                    | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=12)  # fmt: skip
NAME = st.one_of(st.sampled_from(["Bash", "Edit", "Write", "MultiEdit", "Read", "Task", "x"]), JSON)
BLOCK = st.fixed_dictionaries(
    {"type": st.one_of(st.sampled_from(["text", "tool_use", "tool_result", "thinking"]), JSON)},
    optional={"text": JSON, "id": st.one_of(st.sampled_from(["t1", "t2"]), JSON), "name": NAME,
              "input": st.one_of(st.fixed_dictionaries({}, optional={
                  "command": JSON, "file_path": JSON, "old_string": JSON, "new_string": JSON,
                  "content": JSON, "edits": JSON}), JSON),
              "tool_use_id": st.one_of(st.sampled_from(["t1", "t2"]), JSON), "content": JSON,
              "is_error": JSON},
)  # fmt: skip
CLAUDE = st.fixed_dictionaries(
    {"type": st.one_of(st.sampled_from(["user", "assistant", "summary"]), JSON)},
    optional={"message": st.one_of(st.fixed_dictionaries({"content": st.one_of(
                  st.text(max_size=80), st.lists(BLOCK, max_size=4), JSON)}), JSON),
              "uuid": JSON, "sessionId": JSON, "timestamp": SCALAR, "cwd": JSON,
              "gitBranch": JSON, "isSidechain": JSON, "agentId": JSON, "isMeta": JSON},
)  # fmt: skip
GENERIC = st.fixed_dictionaries(
    {"role": st.one_of(st.sampled_from(["user", "assistant", "tool"]), JSON), "content": JSON},
    optional={"session": JSON, "timestamp": SCALAR, "tool": NAME, "input": JSON, "id": JSON,
              "exit_code": JSON, "is_error": JSON, "cwd": JSON, "parentSession": JSON},
)  # fmt: skip


def _dumps(value, ascii_only: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


LINE = st.one_of(
    st.tuples(st.one_of(CLAUDE, GENERIC), st.booleans()).map(lambda t: _dumps(*t)),
    st.binary(max_size=200),
    st.integers(1, 200_000).map(lambda n: b"[" * n),
    st.integers(1, 3000).map(lambda n: b'{"a":' * n + b"1" + b"}" * n),
    st.integers(LINE_BOUND - 10, 3 * LINE_BOUND).map(lambda n: b'{"role":"user","content":"'
                                                      + b"a" * n + b'"}'),
    st.sampled_from([b"", b"\xff\xfe\xfd", b'{"role": "user", "content": "\xc3\x28"}',
                     b'{"n": ' + b"9" * 10_000 + b"}", b'{"role":"user","content":"hi \\ud800"}',
                     b'"just a string"', b"null", b"{}"]),
)  # fmt: skip
FILE = st.tuples(st.lists(LINE, max_size=12), st.booleans()).map(
    lambda t: b"\n".join(t[0]) + (b"\n" if t[1] else b"")
)


def _file(data: bytes) -> Path:
    fd, name = tempfile.mkstemp(suffix=".jsonl")
    with open(fd, "wb") as fh:
        fh.write(data)
    return Path(name)


@pytest.fixture(autouse=True)
def _small_line_bound():
    with mock.patch.object(transcripts, "MAX_LINE_BYTES", LINE_BOUND), \
         mock.patch.object(transcripts, "SCAN_CHUNK", 1024), \
         mock.patch.object(episode_events, "MAX_LINE_BYTES", LINE_BOUND):  # fmt: skip
        yield


def _text_ok(text: str | None) -> None:
    if text is not None:
        assert isinstance(text, str)
        text.encode("utf-8")  # storable: no lone surrogate


@FUZZ
@given(data=FILE, final=st.booleans(), flush=st.booleans(),
       max_bytes=st.one_of(st.none(), st.integers(1, 5000)))  # fmt: skip
def test_the_session_indexer_reads_any_file_within_its_bounds(data, final, flush, max_bytes):
    path = _file(data)
    try:
        started = time.perf_counter()
        res = read_turns(path, flush=flush, final=final, max_bytes=max_bytes, dangling_s=60.0,
                         now=time.time())  # fmt: skip
        assert time.perf_counter() - started < 2.0
        for t in res.turns:
            _text_ok(t.text)
            assert len(t.text) <= MAX_TURN_CHARS + 60
            for value in (t.session, t.key, t.timestamp, t.cwd, t.git_branch, t.parent_session):
                assert value is None or isinstance(value, str)
                _text_ok(value)
            t.record_id()
        offsets = [c.offset for c in res.checkpoints]
        assert offsets == sorted(offsets) and all(o <= len(data) for o in offsets)
        for c in res.checkpoints:
            assert c.turns <= len(res.turns)
            assert len(json.dumps(c.pending)) < 200_000
        if res.checkpoints:  # reading on from the last checkpoint goes on, never back
            cp = res.checkpoints[-1]
            more = read_turns(path, cp.offset, res.format, flush=flush, final=final,
                              pending=cp.pending, dangling_s=60.0)  # fmt: skip
            assert all(c.offset >= cp.offset for c in more.checkpoints)
    finally:
        path.unlink()


@FUZZ
@given(data=FILE, final=st.booleans())
def test_the_episode_reader_reads_any_file_within_its_bounds(data, final):
    path = _file(data)
    try:
        prog = FeedProgress()
        started = time.perf_counter()
        for _ in range(20):  # in parts, as the feed reads, to the end of the complete lines
            before = prog.offset
            events, places = read_events(path, prog, final=final, max_bytes=2000)
            for _session, ev in events:
                ev.model_dump_json()
            if prog.offset == before:
                break
        assert time.perf_counter() - started < 2.0
        assert prog.offset <= len(data)
        complete = data.rfind(b"\n") + 1
        assert prog.offset >= complete  # no line, however long or bad, stops the reading
        assert len(prog.pending) <= episode_events.MAX_PENDING
        assert len(prog.model_dump_json()) < 1_000_000
        json.loads(prog.model_dump_json())
    finally:
        path.unlink()


@FUZZ
@given(data=FILE, call=st.one_of(st.sampled_from(["t1", "t2"]), st.text(max_size=10)))
def test_the_hooks_lookups_read_any_file_within_their_bounds(data, call):
    path = _file(data)
    try:
        started = time.perf_counter()
        _text_ok(last_turn(path))
        _text_ok(tool_result_text(path, call))
        cwd = session_cwd(path)
        assert cwd is None or isinstance(cwd, str)
        assert time.perf_counter() - started < 2.0
    finally:
        path.unlink()


def test_the_session_folder_is_looked_up_in_the_files_start_only(tmp_path):
    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as fh:
        fh.write(b"x" * (transcripts.CWD_SCAN_BYTES + 10))
        fh.write(b'\n{"cwd": "/late"}\n')
    assert session_cwd(path) is None
    path.write_bytes(b'{"x": 1}\n{"cwd": "/repo"}\n' + b"y" * 10_000)
    assert session_cwd(path) == "/repo"


def test_a_line_longer_than_the_bound_is_skipped_by_the_episode_reader(tmp_path):
    path = tmp_path / "long.jsonl"
    long = b'{"role": "user", "content": "' + b"a" * (3 * LINE_BOUND) + b'"}\n'
    path.write_bytes(long + b'{"role": "user", "content": "after"}\n')
    prog = FeedProgress()
    events, _ = read_events(path, prog)
    assert prog.offset == path.stat().st_size
    assert [ev.text for _, ev in events] == ["after"]


TURN = st.dictionaries(st.sampled_from(["speaker", "text", "blip_caption", "x"]), JSON, max_size=4)


@FUZZ
@given(turns=st.lists(TURN, min_size=1, max_size=6), date=st.text(max_size=20),
       spec=st.one_of(st.text(max_size=30), st.sampled_from(["date,caption,prev2,next1",
                                                             "prev" + "9" * 5000, "speaker"])))  # fmt: skip
def test_a_turns_context_is_read_from_any_turns(turns, date, spec):
    for i in range(len(turns)):
        assert isinstance(turn_context(turns, i, date, spec), str)


def test_a_read_past_its_time_stops_at_a_checkpoint_and_the_next_goes_on(tmp_path):
    path = tmp_path / "t.jsonl"
    lines = [json.dumps({"role": "user", "content": f"message {i}"}) for i in range(5)]
    path.write_text("\n".join(lines) + "\n")
    first = read_turns(path, max_seconds=0.0)
    assert len(first.turns) == 1 and first.checkpoints[-1].turns == 1
    rest = read_turns(path, first.checkpoints[-1].offset, first.format)
    assert [t.text for t in rest.turns] == [f"message {i}" for i in range(1, 5)]
    prog = FeedProgress()
    with mock.patch.object(episode_events, "MAX_READ_SECONDS", 0.0):
        assert read_events(path, prog) == ([], {})  # out of time before the first line
    events, _ = read_events(path, prog)
    assert [ev.text for _, ev in events] == [f"message {i}" for i in range(5)]
