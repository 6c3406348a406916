"""TTL (recent/tasks expire after 24 h) with an injected clock, and the per-agent limits.

No sleeping: ``MemoryService(engine, clock=...)`` reads a clock the tests move by hand; the MCP
tests run the same service behind ``create_server(runtime=...)``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from retrieval.records import Kind, RecordFilter
from server.service.core import maintenance
from server.service.core.errors import InvalidInput, LimitExceeded, NotFound
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput, MemoryMetadata, RecallContextInput, RecallInput
from server.service.core.scopes import MAX_CONTENT_BYTES, MAX_CORE_PER_AGENT
from server.service.memories import bulk
from server.service.recalling import context, recall
from tests.mcp_util import (
    FakeClock,
    clocked_service,
    identity_env,
    in_process,
    runtime_on,
    visible_memories,
)

ME = Identity(project_id="proj", agent_id="agent-a")
pytestmark = pytest.mark.backends("sqlite", "postgres")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def svc(tmp_path, clock, store_url):
    service = clocked_service(tmp_path / "store", clock, store_url)
    yield service
    service.engine.close()


@pytest.fixture
def mcp(svc, tmp_path):
    """Agent A's MCP client over ``svc`` (same clock)."""
    env = identity_env(tmp_path / "store", ME.project_id, ME.agent_id, allowed=tmp_path / "exports")
    with in_process(runtime_on(svc, env, tmp_path)) as client:
        yield client


def context_ids(svc, who=ME, **kw) -> tuple[set[str], dict]:
    res = context.recall_context(svc, who, RecallContextInput(limit=200, **kw))
    ids = {m.id for group in (res.private, res.personal, res.team, res.public) for m in group}
    return ids, res.counts.model_dump()


def recall_ids(svc, query: str, who=ME) -> set[str]:
    return {i.id for i in recall.recall(svc, who, RecallInput(query=query, limit=50)).items}


def stored(svc, category: str | None = None) -> int:
    f = RecordFilter(kinds=[Kind.memory], categories=[category] if category else None,
                     include_expired=True)  # fmt: skip
    return svc.store.count(f)


# ---------------------------------------------------------------------------- TTL
def test_a_task_expires_after_24_hours_and_cleanup_removes_it(svc, clock):
    task = svc.remember_task(ME, "rotate the staging certificates")
    keep = svc.remember(ME, MemoryInput(content="staging certificates live in vault"))
    assert task.expiresAt == clock.now + timedelta(hours=24)
    assert context_ids(svc)[0] == {task.memoryId, keep.memoryId}
    assert task.memoryId in recall_ids(svc, "staging certificates")

    clock.advance(hours=23, minutes=59)
    assert task.memoryId in context_ids(svc)[0]

    clock.advance(hours=1, minutes=1)  # 25 h after it was written
    ids, counts = context_ids(svc)
    assert ids == {keep.memoryId}
    assert counts["expired"] == 1 and counts["private"] == 1
    assert recall_ids(svc, "staging certificates") == {keep.memoryId}
    assert context_ids(svc, search="rotate staging certificates")[0] == {keep.memoryId}
    assert stored(svc) == 2  # invisible, but still stored until cleanup

    res = maintenance.cleanup(svc, ME)
    assert (res.expired, res.deleted) == (1, 1)
    assert context_ids(svc)[1]["expired"] == 0
    assert stored(svc) == 1 and svc.store.get([task.memoryId]) == {}
    assert maintenance.cleanup(svc, ME).deleted == 0


def test_remember_learning_expires_too(svc, clock):
    learning = svc.remember_learning(ME, "pytest -x stops at the first failure")
    clock.advance(hours=25)
    assert context_ids(svc) == (
        set(),
        {"private": 0, "personal": 0, "team": 0, "public": 0, "expired": 1},
    )
    assert recall_ids(svc, "pytest first failure") == set()
    assert maintenance.cleanup(svc, ME, expire_only=True).expired == 1
    assert svc.store.get([learning.memoryId]) == {}


def test_commit_insight_before_expiry_makes_it_permanent(svc, clock):
    task = svc.remember_task(ME, "the flaky test is a race in the cache warmup")
    clock.advance(hours=12)
    res = svc.commit_insight(ME, task.memoryId)
    assert (res.previousCategory, res.category) == ("tasks", "longterm")
    clock.advance(hours=48)
    ids, counts = context_ids(svc)
    assert ids == {task.memoryId} and counts["expired"] == 0
    assert task.memoryId in recall_ids(svc, "flaky cache warmup race")
    assert maintenance.cleanup(svc, ME).deleted == 0
    rec = svc.store.get([task.memoryId])[task.memoryId]
    assert rec.expires_at is None and rec.category == "longterm" and rec.revision == 2
    assert rec.updated_at == clock.now - timedelta(hours=48)


def test_an_expired_memory_cannot_be_committed_or_shared(svc, clock):
    """Expired means gone: it cannot be brought back after the fact."""
    task = svc.remember_task(ME, "check the nightly backup job")
    clock.advance(hours=25)
    with pytest.raises(NotFound, match="expired"):
        svc.commit_insight(ME, task.memoryId)
    with pytest.raises(NotFound, match="expired"):
        svc.share_learning(ME, task.memoryId)
    assert context_ids(svc)[0] == set()
    rec = svc.store.get([task.memoryId])[task.memoryId]
    assert rec.category == "tasks" and rec.revision == 1


def test_ttl_through_the_mcp_tools(mcp, clock):
    task = mcp.ok("remember-task", {"content": "renew the TLS certificate of api.example.org"})
    insight = mcp.ok("remember-task", {"content": "use certbot renew --deploy-hook for the api"})
    assert task["memoryId"] in visible_memories(mcp)
    mcp.ok("commit-insight", {"memoryId": insight["memoryId"]})
    clock.advance(hours=25)
    assert set(visible_memories(mcp)) == {insight["memoryId"]}
    assert mcp.ok("recall-context", {"limit": 1})["counts"]["expired"] == 1
    hits = mcp.ok("recall", {"query": "renew the TLS certificate"})["items"]
    assert [h["id"] for h in hits] == [insight["memoryId"]]
    assert mcp.ok("cleanup")["expired"] == 1
    assert mcp.ok("recall-context", {"limit": 1})["counts"]["expired"] == 0
    assert "[not_found]" in mcp.error("forget", {"memoryId": task["memoryId"]})


# ---------------------------------------------------------------------------- limits
def core(text: str) -> dict:
    return {"content": text, "scope": "personal", "category": "core"}


def test_the_101st_core_memory_is_refused_and_nothing_is_written(svc):
    ids = [svc.core_memory(ME, f"core belief number {i}").memoryId for i in range(10)]
    res = bulk.remember_bulk(svc, ME, [core(f"core belief number {i}") for i in range(10, 100)])
    assert res.stored == 90 and res.errors == []  # exactly up to the limit
    ids += res.memoryIds
    assert len(set(ids)) == MAX_CORE_PER_AGENT == stored(svc, "core") == 100
    with pytest.raises(LimitExceeded, match=r"core: 100 memories already, limit 100") as err:
        svc.core_memory(ME, "one core belief too many")
    assert err.value.data == {"category": "core", "limit": 100}
    assert stored(svc, "core") == 100
    assert all(r.content != "one core belief too many" for r in svc.store.list(RecordFilter()))
    # the limit is per agent, and other categories are not affected
    other = Identity(project_id="proj", agent_id="agent-b")
    svc.core_memory(other, "agent b has its own 100")
    svc.remember(ME, MemoryInput(content="a longterm memory still fits", scope="personal"))
    # forgetting one (with force) makes room again
    svc.forget(ME, ids[0], force=True)
    svc.core_memory(ME, "room again")
    assert stored(svc, "core") == 101  # 100 of A + 1 of B


def test_the_core_limit_through_mcp_and_bulk(mcp, svc):
    bulk.remember_bulk(
        svc, ME, [core(f"identity statement {i}") for i in range(MAX_CORE_PER_AGENT - 1)]
    )
    res = mcp.ok("remember-bulk", {"memories": [
        {"content": "core ninety-nine", "scope": "personal", "category": "core"},
        {"content": "core one hundred and one", "scope": "personal", "category": "core"},
        {"content": "a longterm note", "category": "longterm"},
    ]})  # fmt: skip
    assert (res["stored"], res["failed"]) == (2, 1)
    assert any("limit 100" in e for e in res["errors"])
    assert stored(svc, "core") == 100
    text = mcp.error("core-memory", {"content": "over the limit"})
    assert "[limit_exceeded]" in text and "core" in text and "force=true" in text
    assert stored(svc, "core") == 100


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"tags": [f"t{i}" for i in range(11)]}, "at most 10 tags"),
        ({"tags": ["x" * 51]}, "at most 50 characters"),
        ({"priority": 4}, "priority must be 1, 2 or 3"),
        ({"priority": 0}, "priority must be 1, 2 or 3"),
    ],
    ids=["11-tags", "51-char-tag", "priority-4", "priority-0"],
)
def test_metadata_limits_are_enforced(svc, mcp, metadata, message):
    with pytest.raises(InvalidInput, match=message):
        svc.remember(ME, MemoryInput(content="some note", metadata=MemoryMetadata(**metadata)))
    text = mcp.error("remember", {"content": "some note", "metadata": metadata})
    assert "[invalid_input]" in text and message in text
    assert stored(svc) == 0


def test_metadata_at_the_limits_is_accepted(svc):
    tags = [f"{i:02d}" + "x" * 48 for i in range(10)]
    r = svc.remember(ME, MemoryInput(content="n", metadata=MemoryMetadata(tags=tags, priority=3)))
    rec = svc.store.get([r.memoryId])[r.memoryId]
    assert rec.tags == tags and rec.priority == 3


def test_content_size_limit_is_32_kb(svc):
    svc.remember(ME, MemoryInput(content="a" * MAX_CONTENT_BYTES))
    with pytest.raises(InvalidInput, match="32769 bytes"):
        svc.remember(ME, MemoryInput(content="a" * (MAX_CONTENT_BYTES + 1)))
    with pytest.raises(InvalidInput, match="non-empty"):
        svc.remember(ME, MemoryInput(content="   "))
    assert stored(svc) == 1
