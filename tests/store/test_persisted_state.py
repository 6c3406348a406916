"""Nothing unscreened is persisted beside the records: the session indexer's progress rows (tool
calls waiting for their results, calls given up on, the open exchange's first turn) pass the
secret policy like the records themselves, and the hook client's log holds no user content."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from retrieval.records import Kind, RecordFilter
from server.service.core.identity import Identity
from server.service.indexing.sessions import SessionIndexer
from server.service.memories.memory import MemoryService
from server.service.trust.secret_scan.secrets import SecretPolicy
from tests import transcript_util
from tests.transcript_util import TranscriptWriter

WHO = Identity(project_id="proj", agent_id="agent-1")
TOKEN = "ghp_" + "Zq7Xw2Lk9Vb4Nm1Pr8Ts3Yc6Hd0Jf5Ga2UeR"  # the shape of a GitHub token


@pytest.fixture
def live(monkeypatch):
    """Transcript entries stamped now (a live session), not in 2025."""
    monkeypatch.setattr(transcript_util, "T0", datetime.now(UTC) - timedelta(seconds=5))


def meta_rows(engine) -> str:
    """Every value of the store's ``meta`` table, one string."""
    return "\n".join(v for (v,) in engine.store.reader.execute("SELECT value FROM meta"))


def turns(svc) -> list[str]:
    f = RecordFilter(buckets=[WHO.bucket("private")], kinds=[Kind.turn])
    return [r.content for r in svc.store.list(f)]


@pytest.mark.parametrize("policy", [SecretPolicy.redact, SecretPolicy.block])
def test_a_waiting_tool_call_keeps_no_secret_in_the_progress_row(engine, tmp_path, live, policy):
    ix = SessionIndexer(MemoryService(engine, secret_policy=policy), dangling_s=3600)
    # under block a record whose cwd holds a secret is refused whole: redact shows that field
    cwd = f"/work/{TOKEN}" if policy is SecretPolicy.redact else "/work/app"
    w = TranscriptWriter(tmp_path / "s.jsonl", cwd=cwd)
    w.user("push the release branch")
    tid = w.tool_use_only("Bash", {"command": f"GITHUB_TOKEN={TOKEN} git push origin release"})
    report = ix.index_file(WHO, w.path, flush=True)
    assert report.waiting == 1
    assert TOKEN not in meta_rows(engine)  # while the call waits
    ix.dangling_s = 0.0
    threading.Event().wait(0.01)
    report = ix.index_file(WHO, w.path, flush=True)
    assert report.waiting == 0  # given up: kept among the last given-up calls
    assert TOKEN not in meta_rows(engine)
    w.tool_result(tid, "Everything up-to-date")  # a late result still names its tool
    ix.index_file(WHO, w.path, flush=True)
    assert TOKEN not in meta_rows(engine)
    stored = "\n".join(turns(ix.svc))
    assert TOKEN not in stored and "Bash(command=" in stored
    if policy is SecretPolicy.redact:
        assert "[REDACTED:github_token]" in stored
