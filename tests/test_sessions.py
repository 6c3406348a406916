"""The session indexer: kind=turn records, incremental runs, rewrites, crash-resume, secrets."""

from __future__ import annotations

import pytest

from retrieval.records import Kind, RecordFilter
from server.service import sessions as sessions_mod
from server.service.identity import Identity
from server.service.memory import MemoryService
from server.service.secrets import SecretPolicy
from server.service.sessions import SessionIndexer
from tests.transcript_util import TranscriptWriter

WHO = Identity(project_id="proj", agent_id="agent-1")


@pytest.fixture
def indexer(engine):
    return SessionIndexer(MemoryService(engine))


def turns_of(svc, who=WHO):
    f = RecordFilter(buckets=[who.bucket("private")], kinds=[Kind.turn])
    recs = svc.store.list(f, order="r.created_at ASC, r.rowid ASC")
    return sorted(recs, key=lambda r: (r.metadata["session"], r.metadata["turn"]))


def conversation(w: TranscriptWriter, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        w.user(f"question number {i} about the cache layer")
        w.assistant(f"answer number {i}: use a TTL of {i} minutes")


def test_turn_records_fields_context_and_scope(indexer, tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl", session="s1", cwd="/repo", branch="dev")
    w.user("Where is the retry logic?")
    w.assistant("In net/retry.py, with exponential backoff.")
    w.tool("Bash", {"command": "pytest tests/test_retry.py"}, "FAILED test_backoff\nAssertionError: 3 != 4", is_error=True)  # fmt: skip
    report = indexer.index_file(WHO, w.path, flush=True)
    assert report.added == 3 and report.done
    recs = turns_of(indexer.svc)
    assert [r.metadata["role"] for r in recs] == ["user", "assistant", "tool"]
    first = recs[0]
    assert first.kind is Kind.turn and first.scope.value == "private" and first.category == "turn"
    assert first.bucket == WHO.bucket("private")
    m = first.metadata
    assert m["session"] == "s1" and m["turn"] == 0 and m["transcript"] == str(w.path.resolve())
    assert (
        m["gitBranch"] == "dev"
        and m["cwd"] == "/repo"
        and m["timestamp"].startswith("2025-03-04T09:30")
    )
    assert first.content == "Where is the retry logic?"
    assert first.context.startswith("[4 March 2025 09:30] user\n")
    assert "assistant: In net/retry.py" in first.context  # the next turn
    assert "user: Where is the retry logic?" in recs[2].context  # two turns back
    assert "AssertionError: 3 != 4" in recs[2].content
    assert first.created_at.isoformat().startswith("2025-03-04T09:30")


def test_incremental_runs_add_only_new_turns_and_complete_the_last_context(indexer, tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    conversation(w, 2)
    assert indexer.index_file(WHO, w.path, flush=True).added == 4
    last = turns_of(indexer.svc)[-1]
    assert "question number 2" not in last.context
    again = indexer.index_file(WHO, w.path, flush=True)  # nothing new: nothing added
    assert (again.added, again.updated, again.existing) == (0, 0, 0)
    conversation(w, 1, start=2)
    report = indexer.index_file(WHO, w.path, flush=True)
    assert (report.added, report.updated) == (2, 1)
    recs = turns_of(indexer.svc)
    assert [r.metadata["turn"] for r in recs] == list(range(6))
    updated = next(r for r in recs if r.id == last.id)
    assert "question number 2" in updated.context and updated.revision == 2
    assert len({r.id for r in recs}) == 6


def test_rewritten_or_truncated_transcript_is_read_again_without_duplicates(indexer, tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    conversation(w, 3)
    indexer.index_file(WHO, w.path, flush=True)
    lines = w.path.read_text().splitlines(keepends=True)
    w.path.write_text("".join(lines[:3]))  # truncated
    report = indexer.index_file(WHO, w.path, flush=True)
    assert report.restarted and report.added == 0 and report.existing == 3
    w.path.write_text("".join(lines))  # back to the full text, appended again
    conversation(w, 1, start=3)
    report = indexer.index_file(WHO, w.path, flush=True)
    assert not report.restarted  # the line at the offset is the same again
    recs = turns_of(indexer.svc)
    assert len(recs) == 8 and len({r.id for r in recs}) == 8


def test_crash_mid_file_resumes_where_it_stopped(engine, tmp_path, monkeypatch):
    monkeypatch.setattr(sessions_mod, "BATCH_BYTES", 2000)  # several transactions per file
    w = TranscriptWriter(tmp_path / "s.jsonl")
    conversation(w, 30)
    svc = MemoryService(engine)
    indexer = SessionIndexer(svc)
    calls = {"n": 0}
    real_apply = engine.apply

    def crashing(*a, **kw):
        calls["n"] += 1
        if calls["n"] == 4:
            raise RuntimeError("power cut")
        return real_apply(*a, **kw)

    monkeypatch.setattr(engine, "apply", crashing)
    with pytest.raises(RuntimeError):
        indexer.index_file(WHO, w.path, flush=True)
    stored = turns_of(svc)
    assert 0 < len(stored) < 60  # three batches committed, the fourth rolled back
    offset = indexer.progress(str(w.path.resolve())).offset
    assert 0 < offset < w.path.stat().st_size
    monkeypatch.setattr(engine, "apply", real_apply)
    report = SessionIndexer(svc).index_file(WHO, w.path, flush=True)  # a fresh process
    assert report.existing == 0 and report.added == 60 - len(stored)
    recs = turns_of(svc)
    assert [r.metadata["turn"] for r in recs] == list(range(60))
    # the same records as one uninterrupted run
    other = tmp_path / "other"
    from retrieval.embedder import HashEmbedder
    from retrieval.engine import Engine

    clean_engine = Engine(other, HashEmbedder())
    try:
        clean = MemoryService(clean_engine)
        SessionIndexer(clean).index_file(WHO, w.path, flush=True)
        assert [(r.id, r.content, r.context) for r in turns_of(clean)] == [
            (r.id, r.content, r.context) for r in recs
        ]
    finally:
        clean_engine.close()


def test_secret_policy_applies_to_turns(engine, tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.user("the staging key is AKIAQ3ZXMPL7ZK2M4PQR keep it")
    w.assistant("Noted, I will not repeat it.")
    blocked = SessionIndexer(MemoryService(engine, secret_policy=SecretPolicy.block))
    report = blocked.index_file(WHO, w.path, flush=True)
    assert report.withheld == 1 and report.added == 1
    assert all("AKIA" not in r.content + r.context for r in turns_of(blocked.svc))


def test_secret_policy_redacts_turns_and_their_neighbours_context(engine, tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.user("the staging key is AKIAQ3ZXMPL7ZK2M4PQR keep it")
    w.assistant("Noted.")
    idx = SessionIndexer(MemoryService(engine, secret_policy=SecretPolicy.redact))
    idx.index_file(WHO, w.path, flush=True)
    recs = turns_of(idx.svc)
    assert len(recs) == 2 and "[REDACTED:" in recs[0].content
    assert all("AKIAQ3ZXMPL7ZK2M4PQR" not in r.content + r.context for r in recs)


def test_sidechain_turns_keep_their_parent(indexer, tmp_path):
    main = TranscriptWriter(tmp_path / "p" / "s9.jsonl", session="s9")
    main.user("delegate the search")
    side = TranscriptWriter(tmp_path / "p" / "s9" / "subagents" / "agent-x.jsonl", session="s9",
                            sidechain_agent="x")  # fmt: skip
    side.user("search for loaders")
    indexer.index_file(WHO, main.path, flush=True)
    indexer.index_file(WHO, side.path, flush=True)
    recs = turns_of(indexer.svc)
    sub = [r for r in recs if r.metadata.get("parentSession") == "s9"]
    assert len(sub) == 1 and sub[0].metadata["session"] == "s9/agent-x"


def test_generic_jsonl_sessions(indexer, tmp_path):
    import json

    p = tmp_path / "g.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in [
        {"session": "a", "role": "user", "content": "hi", "timestamp": "2024-01-01T00:00:00Z"},
        {"session": "b", "role": "user", "content": "other", "timestamp": "2024-01-01T00:00:01Z"},
        {"session": "a", "role": "assistant", "content": "hello", "timestamp": "2024-01-01T00:00:02Z"},
    ]))  # fmt: skip
    indexer.index_file(WHO, p)
    recs = turns_of(indexer.svc)
    assert [(r.metadata["session"], r.metadata["turn"]) for r in recs] == [
        ("a", 0),
        ("a", 1),
        ("b", 0),
    ]
    assert "assistant: hello" in recs[0].context and "other" not in recs[0].context
    assert indexer.index_file(WHO, p).added == 0
