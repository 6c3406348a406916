"""A reply that never ends is cut: ``read_turns`` holds a reply up to ``REPLY_CUT_CHARS``, then
gives it as a turn at once (its start, marked ``cut``) and passes over the rest until the reply
ends, every line meanwhile a checkpoint. So ``max_bytes`` / ``max_seconds`` bound every read of
a transcript of megabytes of assistant lines (Claude Code, Cursor, Copilot CLI): a read stops
near its bound, the next one goes on from there, and nothing is held or read twice.

One transcript per format, written once for the file (about 2.5 MB: a prompt, 1 200 assistant
lines of 2 000 characters, the next prompt)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from ingest.sessions.transcript_base import MAX_TURN_CHARS, REPLY_CUT_CHARS
from ingest.sessions.transcripts import last_turn, read_turns

LINES, SIZE = 1200, 2000
BOUND = 256 * 1024


def _claude(role: str, i: int, text: str) -> dict:
    content = text if role == "user" else [{"type": "text", "text": text}]
    return {"type": role, "sessionId": "s1", "uuid": f"{role[0]}{i}",
            "message": {"role": role, "content": content}}  # fmt: skip


def _cursor(role: str, i: int, text: str) -> dict:
    text = f"<user_query>{text}</user_query>" if role == "user" else text
    return {"role": role, "message": {"content": [{"type": "text", "text": text}]}}


def _copilot(role: str, i: int, text: str) -> dict:
    return {"type": f"{role}.message", "id": f"{role}-{i}", "data": {"content": text},
            "timestamp": "2026-01-01T00:00:00Z"}  # fmt: skip


START = {"claude-code": [], "cursor": [],
         "copilot": [{"type": "session.start",
                      "data": {"sessionId": "s1", "context": {"cwd": "/tmp"}}}]}  # fmt: skip
LINE = {"claude-code": _claude, "cursor": _cursor, "copilot": _copilot}


def _lines(fmt: str, n: int, size: int) -> list[dict]:
    """A prompt, ``n`` assistant lines of ``size`` characters, the next prompt."""
    line = LINE[fmt]
    return [*START[fmt], line("user", 0, "hi"),
            *(line("assistant", i, f"{i} " + "x" * size) for i in range(n)),
            line("user", 1, "next prompt")]  # fmt: skip


FORMATS = ("claude-code", "cursor", "copilot")


def _write(path: Path, fmt: str, n: int = LINES, size: int = SIZE) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in _lines(fmt, n, size)))
    return path


def _name(tmp: Path, fmt: str) -> Path:
    return {"claude-code": tmp / "claude" / "s1.jsonl", "cursor": tmp / "cursor" / "conv-1.jsonl",
            "copilot": tmp / "copilot" / "s1" / "events.jsonl"}[fmt]  # fmt: skip


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("replies")
    return {fmt: _write(_name(tmp, fmt), fmt) for fmt in FORMATS}


def _said(turns) -> list[tuple[str, str]]:
    return [(t.role, t.text[:20]) for t in turns]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_read_of_a_reply_that_goes_on_stops_near_its_bound(big, fmt):
    path = big[fmt]
    read_turns(path, 0, fmt, max_bytes=1)  # its parser imported, its first line read (Copilot)
    tracemalloc.start()
    try:
        res = read_turns(path, 0, fmt, max_bytes=BOUND, max_seconds=None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    end = res.checkpoints[-1].offset
    assert BOUND <= end <= BOUND + 2 * (SIZE + 200)  # stopped at the first checkpoint after
    assert res.checkpoints[-1].pending.get("cut") is True  # in the reply's rest
    assert peak < 4 * BOUND  # the reply is not held (the file is 10 times larger)
    assert _said(res.turns) == [("user", "hi"), ("assistant", "0 " + "x" * 18)]
    reply = res.turns[-1].text
    assert len(reply) <= MAX_TURN_CHARS + 60 and "… [cut: " in reply
    assert reply.endswith("+ more characters not stored]")


@pytest.mark.parametrize("fmt", FORMATS)
def test_reading_on_moves_on_and_gives_what_one_read_gives(big, fmt):
    path = big[fmt]
    whole = read_turns(path, 0, fmt, max_bytes=None, max_seconds=None)
    turns, offset, pending, reads = [], 0, None, 0
    size = path.stat().st_size
    while offset < size:
        res = read_turns(path, offset, fmt, max_bytes=BOUND, pending=pending)
        cp = res.checkpoints[-1]
        assert cp.offset > offset and cp.offset - offset <= BOUND + 2 * (SIZE + 200)
        turns += res.turns[: cp.turns]
        offset, pending, reads = cp.offset, cp.pending, reads + 1
    assert reads <= size // BOUND + 1
    assert not pending  # the reply ended at the next prompt: nothing passed over any more
    assert [(t.role, t.key, t.text) for t in turns] == [
        (t.role, t.key, t.text) for t in whole.turns]  # fmt: skip
    assert [t.role for t in turns] == ["user", "assistant", "user"]
    assert turns[-1].text == "next prompt"


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_long_reply_within_the_bound_is_clipped_as_before_and_the_next_is_read(tmp_path, fmt):
    below = _lines(fmt, REPLY_CUT_CHARS // 2100, 2000)  # a reply just below the bound
    past = _lines(fmt, 30, 2000)[-31:]  # then one past it, then a short one; each + a prompt
    short = _lines(fmt, 1, 50)[-2:]
    path = _name(tmp_path, fmt)
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in [*below, *past, *short]))
    res = read_turns(path, 0, fmt, final=True, max_seconds=None)
    replies = [t.text for t in res.turns if t.role == "assistant"]
    assert len(replies) == 3
    assert replies[0].endswith("more characters not stored]") and "[cut: " not in replies[0]
    assert "[cut: " in replies[1]
    assert replies[2].startswith("0 xxx") and len(replies[2]) == 52  # whole
    assert [t.text for t in res.turns if t.role == "user"][-1] == "next prompt"


def test_a_single_line_past_the_bound_is_cut_and_still_the_last_turn(tmp_path):
    path = _write(tmp_path / "s1.jsonl", "claude-code", 1, REPLY_CUT_CHARS + 10)
    path.write_text("\n".join(path.read_text().splitlines()[:2]) + "\n")  # no next prompt
    res = read_turns(path, 0, max_seconds=None)
    assert [t.role for t in res.turns] == ["user", "assistant"] and "[cut: " in res.turns[1].text
    assert res.checkpoints[-1].offset == path.stat().st_size
    assert res.checkpoints[-1].pending == {"cut": True}
    assert last_turn(path).startswith("0 xxx")
    res = read_turns(path, res.checkpoints[-1].offset, pending={"cut": True}, flush=True)
    assert res.turns == [] and res.checkpoints[-1].pending == {}  # the client said it ended


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_read_past_its_time_stops_in_the_reply_too(big, fmt):
    """Every read out of time stops at its first checkpoint: one line once the reply is cut,
    never the whole reply."""
    offset, pending = 0, None
    for _ in range(5):
        res = read_turns(big[fmt], offset, fmt, pending=pending, max_seconds=0.0)
        cp = res.checkpoints[-1]
        assert offset < cp.offset <= offset + REPLY_CUT_CHARS + 4 * (SIZE + 200)
        offset, pending = cp.offset, cp.pending
    assert pending == {"cut": True}
