"""remember-bulk and forget-bulk through the MCP tools (in process, one shared store)."""

from __future__ import annotations

import pytest

from retrieval.errors import InvalidInput
from retrieval.records import RecordFilter
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from server.service.memories import bulk
from tests.mcp_util import FakeClock, clocked_service, identity_env, in_process, runtime_on

A = Identity(project_id="proj", agent_id="agent-a")
B = Identity(project_id="proj", agent_id="agent-b")


pytestmark = pytest.mark.backends("sqlite", "postgres")


@pytest.fixture
def svc(tmp_path, store_url):
    service = clocked_service(tmp_path / "store", FakeClock(), store_url)
    yield service
    service.engine.close()


@pytest.fixture
def mcp(svc, tmp_path):
    """Agent A's MCP client."""
    env = identity_env(tmp_path / "store", A.project_id, A.agent_id)
    with in_process(runtime_on(svc, env, tmp_path)) as client:
        yield client


def contents(svc) -> set[str]:
    return {r.content for r in svc.store.list(RecordFilter(include_expired=True))}


GOOD = [
    {"content": "bulk: the queue is RabbitMQ", "category": "longterm"},
    {"content": "bulk: we chose Postgres", "scope": "team", "category": "decisions",
     "metadata": {"tags": ["db"], "priority": 1}},
    {"content": "bulk: I write small commits", "scope": "personal", "category": "core"},
]  # fmt: skip
BAD_PAIR = {"content": "bulk: a team core memory", "scope": "team", "category": "core"}
TOO_BIG = {"content": "y" * (32 * 1024 + 1)}


# ---------------------------------------------------------------------------- remember-bulk
def test_validate_true_with_one_bad_item_stores_nothing_and_names_its_index(mcp, svc):
    text = mcp.error("remember-bulk", {"memories": [GOOD[0], BAD_PAIR, GOOD[1]]})
    assert "[invalid_input]" in text and "nothing was stored" in text
    assert "validation failed for 1 of 3" in text
    assert "[1] category 'core' is not allowed in scope 'team'" in text
    assert contents(svc) == set()
    # every bad item is reported, each with its index
    text = mcp.error("remember-bulk", {"memories": [TOO_BIG, GOOD[0], BAD_PAIR], "validate": True})
    assert "[0] content is 32769 bytes" in text and "[2] category 'core'" in text
    assert contents(svc) == set()


def test_validate_false_stores_the_good_ones_and_reports_the_bad(mcp, svc):
    res = mcp.ok("remember-bulk", {"memories": [GOOD[0], BAD_PAIR, GOOD[1], TOO_BIG, GOOD[2]],
                                   "validate": False})  # fmt: skip
    assert (res["stored"], res["failed"]) == (3, 2)
    assert len(res["memoryIds"]) == 3
    assert [e[:3] for e in res["errors"]] == ["[1]", "[3]"]
    assert "not allowed in scope 'team'" in res["errors"][0] and "32 KB" in res["errors"][1]
    assert contents(svc) == {g["content"] for g in GOOD}
    stored = svc.store.get(res["memoryIds"])
    assert [(stored[i].scope.value, stored[i].category) for i in res["memoryIds"]] == [
        ("private", "longterm"), ("team", "decisions"), ("personal", "core")]  # fmt: skip
    assert stored[res["memoryIds"][1]].metadata == {"tags": ["db"], "priority": 1}


def test_validate_false_stop_on_error_keeps_what_came_before(mcp, svc):
    res = mcp.ok("remember-bulk", {"memories": [GOOD[0], BAD_PAIR, GOOD[1]],
                                   "validate": False, "stopOnError": True})  # fmt: skip
    assert (res["stored"], res["failed"]) == (1, 2)
    assert res["errors"][0].startswith("[1] ")
    assert contents(svc) == {GOOD[0]["content"]}


def test_items_that_break_the_input_schema_reject_the_call(mcp, svc):
    text = mcp.error("remember-bulk", {"memories": [GOOD[0], {"content": "x", "scope": "galaxy"}],
                                       "validate": False})  # fmt: skip
    assert "memories.1.scope" in text and "galaxy" in text
    assert contents(svc) == set()


def test_bulk_size_limit(svc):
    with pytest.raises(InvalidInput, match="at most 1000 memories"):
        bulk.remember_bulk(svc, A, [{"content": "x"}] * 1001)
    with pytest.raises(InvalidInput, match="at most 1000 ids"):
        bulk.forget_bulk(svc, A, ["x"] * 1001)
    assert contents(svc) == set()


# ---------------------------------------------------------------------------- forget-bulk
@pytest.fixture
def mixed(svc):
    """A's own private, team and core memories; B's team and private memories."""

    def put(who, content, scope="private", category=None):
        return svc.remember(
            who, MemoryInput(content=content, scope=scope, category=category)
        ).memoryId

    return {
        "own": put(A, "A private note"),
        "own_team": put(A, "A team decision", "team", "decisions"),
        "core": svc.core_memory(A, "A is careful").memoryId,
        "foreign_team": put(B, "B team decision", "team", "decisions"),
        "foreign_private": put(B, "B private note"),
        "missing": "00000000-0000-4000-8000-000000000404",
    }


def test_forget_bulk_with_own_foreign_core_and_missing_ids(mcp, svc, mixed):
    ids = [
        mixed[k] for k in ("own", "foreign_team", "core", "missing", "own_team", "foreign_private")
    ]
    res = mcp.ok("forget-bulk", {"memoryIds": [*ids, mixed["own"]]})  # a repeated id counts once
    assert (res["deleted"], res["failed"]) == (2, 4)
    errors = dict(e.split(": ", 1) for e in res["errors"])
    assert list(errors) == [
        mixed["foreign_team"],
        mixed["core"],
        mixed["missing"],
        mixed["foreign_private"],
    ]
    assert (
        "only the agent that created" in errors[mixed["foreign_team"]]
        and "agent-b" in errors[mixed["foreign_team"]]
    )
    assert "core memory" in errors[mixed["core"]] and "force=true" in errors[mixed["core"]]
    assert "not found" in errors[mixed["missing"]]
    assert "not found" in errors[mixed["foreign_private"]]  # invisible looks missing
    assert contents(svc) == {"A is careful", "B team decision", "B private note"}
    # with force the core memory goes; B's memory still cannot
    res = mcp.ok(
        "forget-bulk", {"memoryIds": [mixed["core"], mixed["foreign_team"]], "force": True}
    )
    assert (res["deleted"], res["failed"]) == (1, 1)
    assert contents(svc) == {"B team decision", "B private note"}


def test_forget_bulk_stop_on_error(mcp, svc, mixed):
    ids = [mixed["own"], mixed["foreign_team"], mixed["own_team"]]
    res = mcp.ok("forget-bulk", {"memoryIds": ids, "stopOnError": True})
    assert (res["deleted"], res["failed"]) == (1, 1)
    assert res["errors"][0].startswith(mixed["foreign_team"])
    assert "A private note" not in contents(svc)
    assert {"A team decision", "B team decision"} <= contents(svc)


def test_forget_bulk_of_nothing_but_errors_deletes_nothing(mcp, svc, mixed):
    before = contents(svc)
    res = mcp.ok(
        "forget-bulk", {"memoryIds": [mixed["foreign_team"], mixed["missing"], mixed["core"]]}
    )
    assert (res["deleted"], res["failed"]) == (0, 3)
    assert contents(svc) == before
