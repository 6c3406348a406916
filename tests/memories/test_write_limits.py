"""The per-project limit on shared memories: enforced inside the write transaction, and counted
from the partial index of shared memories (never a scan of every record)."""

from __future__ import annotations

import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.records import Kind, RecordFilter
from server.service.core import scopes
from server.service.core.errors import LimitExceeded
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from server.service.memories.memory import MemoryService
from server.service.memories.writes import SHARED_COUNT

ME = Identity(project_id="proj", agent_id="agent-a")
PEER = Identity(project_id="proj", agent_id="agent-b")
ELSEWHERE = Identity(project_id="other", agent_id="agent-c")


@pytest.fixture
def svc(tmp_path, store_url):
    service = MemoryService(Engine(tmp_path / "store", HashEmbedder(), store_url=store_url))
    yield service
    service.engine.close()


def remember(svc, who: Identity, text: str, scope: str, category: str = "decisions"):
    return svc.remember(who, MemoryInput(content=text, scope=scope, category=category))


def test_a_projects_shared_memories_stop_at_the_limit(svc, monkeypatch):
    monkeypatch.setattr(scopes, "MAX_SHARED_PER_PROJECT", 3)
    remember(svc, ME, "the build uses make", "team")
    remember(svc, PEER, "the api is versioned by date", "public")
    remember(svc, ME, "a private note on the cache", "private", "longterm")  # not shared
    remember(svc, PEER, "releases go out on tuesdays", "team")
    with pytest.raises(LimitExceeded) as err:
        remember(svc, ME, "one shared memory too many", "public")
    assert err.value.data["limit"] == 3
    assert "project proj has 3 shared memories" in str(err.value)
    remember(svc, ELSEWHERE, "another project has its own count", "team")
    remember(svc, ME, "private memories are not counted", "private", "longterm")
    shared = RecordFilter(buckets=[ME.bucket("team"), ME.bucket("public")], kinds=[Kind.memory])
    assert svc.engine.store.count(shared) == 3  # the refused write left nothing behind


def test_the_shared_count_reads_the_partial_index(tmp_path):
    engine = Engine(tmp_path / "store", HashEmbedder())
    try:
        plan = engine.store.reader.execute(f"EXPLAIN QUERY PLAN {SHARED_COUNT}", ("proj",))
        detail = " ".join(row[3] for row in plan.fetchall())
        assert "records_shared" in detail and "SCAN records" not in detail, detail
    finally:
        engine.close()
