"""The session indexer never stalls: a tool call waiting for its result holds nothing up and is
given up on after a bound; an unfinished last line is read once it is complete (also under
``final``), and a long one is not read again on every run; a transcript's lock lives only
while it is indexed."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest

from ingest.sessions import transcripts
from retrieval.records import Kind, RecordFilter
from server.service.core.identity import Identity
from server.service.indexing.sessions import SessionIndexer, dangling_seconds
from server.service.memories.memory import MemoryService
from tests import transcript_util
from tests.transcript_util import TranscriptWriter

WHO = Identity(project_id="proj", agent_id="agent-1")


@pytest.fixture
def live(monkeypatch):
    """Transcript entries stamped now (a live session), not in 2025."""
    monkeypatch.setattr(transcript_util, "T0", datetime.now(UTC) - timedelta(seconds=5))


def contents(svc) -> list[str]:
    f = RecordFilter(buckets=[WHO.bucket("private")], kinds=[Kind.turn])
    recs = svc.store.list(f, order="r.created_at ASC, r.rowid ASC")
    return [r.content for r in sorted(recs, key=lambda r: r.metadata["turn"])]


def test_an_open_tool_call_holds_nothing_up_and_joins_its_exchange_when_answered(
    engine, tmp_path, live
):
    ix = SessionIndexer(MemoryService(engine), dangling_s=3600)
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.user("run the migration")
    w.assistant("Running it now; it asks for permission first.")
    tid = w.tool_use_only("Bash", {"command": "alembic upgrade head"})  # a permission prompt
    report = ix.index_file(WHO, w.path, flush=True, max_batches=2)
    assert report.done and report.offset == report.size  # progress, never a spin
    assert (report.waiting, 3590 < report.retryIn <= 3600) == (1, True)
    assert contents(ix.svc) == [
        "Prompt: run the migration\nReply: Running it now; it asks for permission first."
    ]  # the turns before the open call are indexed
    again = ix.index_file(WHO, w.path, flush=True)  # nothing new: nothing written
    assert (again.added, again.updated, again.done) == (0, 0, True)
    w.tool_result(tid, "INFO  Running upgrade -> 4f2a, add index")
    w.assistant("Done: the index is in place.")
    report = ix.index_file(WHO, w.path, flush=True)
    assert report.done and report.waiting == 0 and report.updated == 1
    (text,) = contents(ix.svc)
    assert "Tools: Bash(command=alembic upgrade head)" in text and "Done: the index" in text


def test_a_dangling_call_is_given_up_after_the_bound_and_later_turns_go_on(engine, tmp_path, live):
    ix = SessionIndexer(MemoryService(engine), dangling_s=0.5)
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.user("deploy to staging")
    tid = w.tool_use_only("Bash", {"command": "make deploy"})  # the client was killed here
    first = ix.index_file(WHO, w.path, flush=True)
    assert first.waiting == 1 and first.retryIn <= 0.5
    assert contents(ix.svc) == ["Prompt: deploy to staging"]
    w.user("what happened to the deploy?")  # a resumed session goes on in the same file
    w.assistant("It never finished; I will look at the logs.")
    second = ix.index_file(WHO, w.path, flush=True)
    assert second.done and contents(ix.svc)[1:] == [
        "Prompt: what happened to the deploy?\nReply: It never finished; I will look at the logs."
    ]
    threading.Event().wait(0.6)
    third = ix.index_file(WHO, w.path, flush=True)  # the file did not change: the call is due
    assert third.waiting == 0 and third.retryIn is None
    assert "Tools: Bash(command=make deploy)" in "\n".join(contents(ix.svc))
    w.tool_result(tid, "deployed")  # a result after all: still named after its call
    ix.index_file(WHO, w.path, flush=True)
    assert "Bash(command=make deploy)" in contents(ix.svc)[-1]


def test_the_bound_comes_from_the_environment():
    assert dangling_seconds({}) == 600.0
    assert dangling_seconds({"PATTERN_SESSION_DANGLING_S": "90"}) == 90.0
    for bad in ("soon", "inf", "-1", "0", "nan"):
        assert dangling_seconds({"PATTERN_SESSION_DANGLING_S": bad}) == 600.0


def test_a_half_written_last_line_under_final_is_read_once_complete(engine, tmp_path):
    ix = SessionIndexer(MemoryService(engine))
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.user("first question")
    entry = json.dumps(w._entry("user", "second question")) + "\n"
    with open(w.path, "a") as fh:
        fh.write(entry[:40])  # the client is writing it
    report = ix.index_file(WHO, w.path, final=True)
    assert report.done and report.partial == 40 and report.offset + 40 == report.size
    with open(w.path, "a") as fh:
        fh.write(entry[40:])
    report = ix.index_file(WHO, w.path, final=True)
    assert report.done and report.offset == report.size and report.partial == 0
    assert contents(ix.svc) == ["Prompt: first question", "Prompt: second question"]


def test_a_long_unfinished_line_is_not_read_again_on_every_run(engine, tmp_path, monkeypatch):
    ix = SessionIndexer(MemoryService(engine))
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.user("paste the log")
    entry = json.dumps(w._entry("user", "log line\n" * 400_000)) + "\n"  # ~4 MB
    with open(w.path, "a") as fh:
        fh.write(entry[:-100])
    read = []

    class Counting:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def read(self, *a):
            out = self.fh.read(*a)
            read.append(len(out))
            return out

        def readline(self, *a):
            out = self.fh.readline(*a)
            read.append(len(out))
            return out

    monkeypatch.setattr(transcripts, "open", lambda *a, **k: Counting(open(*a, **k)), raising=False)
    report = ix.index_file(WHO, w.path, flush=True)
    assert report.done and report.partial == len(entry[:-100].encode()) and sum(read) > 4_000_000
    for final in (False, True):  # unchanged: the line is not read again, under final neither
        read.clear()
        report = ix.index_file(WHO, w.path, flush=True, final=final)
        assert report.done and report.partial > 4_000_000 and sum(read) < 100_000
    with open(w.path, "a") as fh:
        fh.write(entry[-100:])
    read.clear()
    report = ix.index_file(WHO, w.path, flush=True)
    assert report.offset == report.size and report.partial == 0
    assert any(c.startswith("Prompt: log line") for c in contents(ix.svc))  # the pasted log


def test_a_line_too_long_to_parse_is_skipped_without_holding_it(engine, tmp_path, monkeypatch):
    monkeypatch.setattr(transcripts, "MAX_LINE_BYTES", 10_000)
    ix = SessionIndexer(MemoryService(engine))
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.user("before")
    w.user("x" * 50_000)  # longer than the cap: a bad line
    with open(w.path, "a") as fh:
        fh.write("[" * 5_000 + "\n")  # nested beyond the JSON parser: a bad line too
    w.user("after")
    report = ix.index_file(WHO, w.path, flush=True)
    assert report.done and contents(ix.svc) == ["Prompt: before", "Prompt: after"]


def test_transcript_locks_live_only_while_a_run_holds_them(engine, tmp_path):
    ix = SessionIndexer(MemoryService(engine))
    for i in range(40):
        w = TranscriptWriter(tmp_path / f"s{i}.jsonl", session=f"s{i}")
        w.user(f"question {i}")
        ix.index_file(WHO, w.path, flush=True)
    assert ix._locks == {}  # one lock per transcript ever indexed, before
    held, release = threading.Event(), threading.Event()
    order = []
    real = ix.progress

    def progress(key):
        order.append(key)
        if len(order) == 1:
            held.set()
            release.wait(10)
        return real(key)

    ix.progress = progress
    path = tmp_path / "s0.jsonl"
    runs = [threading.Thread(target=ix.index_file, args=(WHO, path)) for _ in range(2)]
    runs[0].start()
    assert held.wait(10)
    runs[1].start()
    threading.Event().wait(0.2)
    assert len(order) == 1 and len(ix._locks) == 1  # the second run waits on the same lock
    release.set()
    for t in runs:
        t.join(10)
    assert len(order) == 2 and ix._locks == {}
