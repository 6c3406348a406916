"""End to end: ``pattern-memory serve`` as a subprocess, driven over stdio by the official MCP
client (hashing embedder, temporary store).

One server process (agent A) serves the whole module; the cross-agent test starts its own
process for agent B on another store after A's writer is closed (one process per store).
Every tool is called at least once; every error path returns ``is_error`` with a clear
message and a follow-up read shows that nothing changed.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from server.service.core.runtime import Runtime
from tests.mcp_util import (
    PATTERN_TOOLS,
    SyncClient,
    identity_env,
    in_process,
    serve_params,
    visible_memories,
    write_json,
)

PROJECT = "proj-e2e"
AGENT = "agent-a"


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    root = tmp_path_factory.mktemp("stdio")
    home, allowed, outside = root / "home", root / "allowed", root / "outside"
    allowed.mkdir()
    outside.mkdir()
    client = SyncClient(serve_params(identity_env(home, PROJECT, AGENT, allowed=allowed), root))
    try:
        yield SimpleNamespace(client=client, home=home, allowed=allowed, outside=outside)
    finally:
        client.close()


@pytest.fixture
def mcp(srv) -> SyncClient:
    return srv.client


def state(mcp: SyncClient) -> tuple[dict, dict]:
    """What a read sees: every visible memory (id -> fields) and the counts."""
    mems = {
        mid: (m["content"], m["scope"], m["category"], m["updatedAt"], m["revision"])
        for mid, m in visible_memories(mcp).items()
    }
    return mems, mcp.ok("recall-context", {"limit": 1})["counts"]


# ---------------------------------------------------------------------------- discovery
def test_lists_the_15_tools_each_with_input_and_output_schema(mcp):
    tools = {t.name: t for t in mcp.list_tools()}
    assert PATTERN_TOOLS <= set(tools), PATTERN_TOOLS - set(tools)
    for name in PATTERN_TOOLS:
        tool = tools[name]
        assert tool.description, name
        assert tool.input_schema["type"] == "object", name
        assert "ctx" not in tool.input_schema.get("properties", {}), name
        assert tool.output_schema is not None and tool.output_schema["type"] == "object", name
        assert tool.output_schema["properties"], name
    required = {
        "remember": ["content"], "forget": ["memoryId"], "commit-insight": ["memoryId"],
        "import-memories": ["inputPath"], "remember-bulk": ["memories"],
        "forget-bulk": ["memoryIds"], "recall": ["query"], "recall-context": [],
    }  # fmt: skip
    for name, req in required.items():
        assert sorted(tools[name].input_schema.get("required", [])) == req, name
    scope = tools["remember"].input_schema["properties"]["scope"]
    assert set(json.dumps(scope).split('"')) >= {"private", "personal", "team", "public"}
    assert "memoryId" in tools["remember"].output_schema["properties"]


def test_pattern_health_reports_identity_and_store(mcp, srv):
    h = mcp.ok("pattern_health")
    assert h["status"] in ("ok", "degraded")
    assert (h["projectId"], h["agentId"], h["subagent"]) == (PROJECT, AGENT, False)
    assert Path(h["store"]) == srv.home
    assert h["ranking"] in ("hybrid", "lexical")
    assert h["lexicalPostings"] == "empty"  # a small store ranks with FTS5
    # and scans its stored vectors exactly: no vector index yet
    assert h["vectorSearch"] == ("exact" if h["ranking"] == "hybrid" else None)
    assert h["embeddingBackend"] in (None, "onnx", "torch")


# ---------------------------------------------------------------------------- every tool
def test_remember_then_recall_context_with_filters(mcp):
    r = mcp.ok("remember", {
        "content": "The billing API uses REST with JSON responses",
        "scope": "private", "category": "longterm",
        "metadata": {"tags": ["api", "billing"], "priority": 1, "source": "e2e"},
    })  # fmt: skip
    assert (r["scope"], r["category"], r["expiresAt"]) == ("private", "longterm", None)
    ctx = mcp.ok("recall-context", {"tags": ["api", "billing"], "maxPriority": 1})
    assert [m["id"] for m in ctx["private"]] == [r["memoryId"]]
    mem = ctx["private"][0]
    assert mem["metadata"]["tags"] == ["api", "billing"] and mem["metadata"]["source"] == "e2e"
    assert (mem["agentId"], mem["projectId"]) == (AGENT, PROJECT)
    assert "billing API uses REST" in ctx["summary"]
    assert ctx["counts"]["private"] == 1
    # a tag the memory lacks filters it out (AND)
    assert mcp.ok("recall-context", {"tags": ["api", "nope"]})["private"] == []


def test_remember_task_and_learning_expire_in_24_hours(mcp):
    before = datetime.now(UTC)
    task = mcp.ok("remember-task", {"content": "Fix the authentication bug in login.ts"})
    learn = mcp.ok("remember-learning", {"content": "The database uses PostgreSQL with pgvector"})
    assert (task["scope"], task["category"]) == ("private", "tasks")
    assert (learn["scope"], learn["category"]) == ("private", "recent")
    for r in (task, learn):
        expires = datetime.fromisoformat(r["expiresAt"])
        assert (
            before + timedelta(hours=23, minutes=59)
            < expires
            < before + timedelta(hours=24, minutes=5)
        )
    mems = visible_memories(mcp, categories=["tasks", "recent"])
    assert {task["memoryId"], learn["memoryId"]} <= set(mems)


def test_commit_insight_makes_a_task_permanent_with_new_content(mcp):
    mid = mcp.ok("remember-task", {"content": "try the sharded cache layout"})["memoryId"]
    res = mcp.ok(
        "commit-insight", {"memoryId": mid, "newContent": "The sharded cache layout halves p95"}
    )
    assert (res["memoryId"], res["previousCategory"], res["category"]) == (mid, "tasks", "longterm")
    mem = visible_memories(mcp)[mid]
    assert mem["category"] == "longterm" and mem["expiresAt"] is None and mem["revision"] == 2
    assert mem["content"] == "The sharded cache layout halves p95"
    text = mcp.error("commit-insight", {"memoryId": mid})  # already permanent
    assert "already permanent" in text


def test_core_memory_needs_force_to_forget(mcp):
    mid = mcp.ok(
        "core-memory", {"content": "I am a coding assistant that prioritizes test coverage"}
    )["memoryId"]
    assert visible_memories(mcp)[mid]["scope"] == "personal"
    before = state(mcp)
    text = mcp.error("forget", {"memoryId": mid})
    assert "[core_protected]" in text and "force=true" in text
    assert state(mcp) == before
    assert mcp.ok("forget", {"memoryId": mid, "force": True}) == {"deleted": True, "memoryId": mid}
    assert mid not in visible_memories(mcp)
    assert "[not_found]" in mcp.error("forget", {"memoryId": mid, "force": True})


def test_share_learning_moves_a_private_memory_to_the_team(mcp):
    mid = mcp.ok("remember-learning", {"content": "Flaky test: the port 8080 is taken on CI"})[
        "memoryId"
    ]
    res = mcp.ok("share-learning", {"memoryId": mid, "category": "learnings"})
    assert res["originalId"] == mid and res["originalKept"] is False
    mems = visible_memories(mcp)
    assert mid not in mems
    shared = mems[res["memoryId"]]
    assert (shared["scope"], shared["category"]) == ("team", "learnings")
    assert shared["content"] == "Flaky test: the port 8080 is taken on CI"
    kept = mcp.ok("remember", {"content": "keep me too: staging uses blue-green deploys"})[
        "memoryId"
    ]
    res2 = mcp.ok(
        "share-learning", {"memoryId": kept, "category": "decisions", "keepOriginal": True}
    )
    mems = visible_memories(mcp)
    assert kept in mems and mems[res2["memoryId"]]["category"] == "decisions"


def test_recall_finds_the_relevant_memory_and_packs_it(mcp):
    mid = mcp.ok("remember", {
        "content": "Kubernetes ingress timeouts are configured in values-prod.yaml",
        "scope": "team", "category": "architecture",
    })["memoryId"]  # fmt: skip
    res = mcp.ok("recall", {"query": "where are the ingress timeouts configured", "budget": 300})
    assert res["items"] and res["items"][0]["id"] == mid
    assert "values-prod.yaml" in res["text"] and res["used"] <= 300
    assert res["items"][0]["explanation"]["lexical_rank"] == 1
    none = mcp.ok("recall", {"query": "ingress timeouts", "scopes": ["public"]})
    assert mid not in [i["id"] for i in none["items"]]


def test_remember_bulk_and_forget_bulk(mcp):
    res = mcp.ok("remember-bulk", {"memories": [
        {"content": "bulk one: the queue is RabbitMQ", "category": "longterm"},
        {"content": "bulk two: we chose Postgres", "scope": "team", "category": "decisions",
         "metadata": {"tags": ["important"], "priority": 1}},
        {"content": "bulk three: I write small commits", "scope": "personal", "category": "core"},
    ]})  # fmt: skip
    assert (res["stored"], res["failed"], res["errors"]) == (3, 0, [])
    ids = res["memoryIds"]
    mems = visible_memories(mcp)
    assert [mems[i]["scope"] for i in ids] == ["private", "team", "personal"]
    gone = mcp.ok("forget-bulk", {"memoryIds": ids})  # the core one needs force
    assert (gone["deleted"], gone["failed"]) == (2, 1)
    assert ids[2] in gone["errors"][0] and "core" in gone["errors"][0]
    assert set(visible_memories(mcp)) & set(ids) == {ids[2]}
    assert mcp.ok("forget-bulk", {"memoryIds": [ids[2]], "force": True})["deleted"] == 1


def test_export_then_import_round_trip_and_duplicates(mcp, srv):
    mid = mcp.ok("remember", {"content": "export me: the on-call rota lives in PagerDuty",
                              "metadata": {"tags": ["ops"]}})["memoryId"]  # fmt: skip
    exp = mcp.ok("export-memories", {"outputPath": "backup.json", "scope": "private"})
    path = Path(exp["filepath"])
    assert path == srv.allowed / "backup.json" and path.stat().st_size == exp["bytes"]
    doc = json.loads(path.read_text())
    assert doc["count"] == exp["exported"] == len(doc["memories"]) >= 1
    assert {m["scope"] for m in doc["memories"]} == {"private"}
    assert mid in {m["id"] for m in doc["memories"]}
    # importing into the same store: every id exists already
    before = state(mcp)
    dup = mcp.ok("import-memories", {"inputPath": str(path)})
    assert (dup["imported"], dup["skipped"]) == (0, exp["exported"])
    assert any(mid in e and "already exists" in e for e in dup["errors"])
    assert state(mcp) == before
    # overwriteExisting replaces
    for m in doc["memories"]:
        if m["id"] == mid:
            m["content"] = "export me: the on-call rota moved to Opsgenie"
    write_json(path, doc)
    over = mcp.ok("import-memories", {"inputPath": str(path), "overwriteExisting": True})
    assert over["imported"] == exp["exported"] and over["errors"] == []
    assert visible_memories(mcp)[mid]["content"] == "export me: the on-call rota moved to Opsgenie"


def test_cleanup_removes_an_imported_expired_memory(mcp, srv):
    now = datetime.now(UTC)
    stale = {
        "id": "00000000-0000-4000-8000-0000000000e1", "agentId": "someone", "projectId": "old",
        "scope": "private", "category": "tasks", "content": "an old task that expired yesterday",
        "metadata": {}, "createdAt": (now - timedelta(days=3)).isoformat(),
        "updatedAt": (now - timedelta(days=3)).isoformat(),
        "expiresAt": (now - timedelta(days=2)).isoformat(),
    }  # fmt: skip
    path = write_json(srv.allowed / "stale.json", {"version": 1, "memories": [stale]})
    assert mcp.ok("import-memories", {"inputPath": str(path)})["imported"] == 1
    ctx = mcp.ok("recall-context", {"limit": 200})
    assert ctx["counts"]["expired"] == 1
    assert stale["id"] not in visible_memories(mcp)
    res = mcp.ok("cleanup", {"expireOnly": True})
    assert (res["expired"], res["deleted"]) == (1, 1)
    assert mcp.ok("recall-context", {"limit": 1})["counts"]["expired"] == 0
    exp = mcp.ok("export-memories", {"outputPath": "after-cleanup.json", "includeExpired": True})
    assert stale["id"] not in {
        m["id"] for m in json.loads(Path(exp["filepath"]).read_text())["memories"]
    }
    assert mcp.ok("cleanup")["deleted"] == 0


# ---------------------------------------------------------------------------- error paths
def test_invalid_scope_category_pair_is_an_error_and_stores_nothing(mcp):
    before = state(mcp)
    text = mcp.error("remember", {"content": "who am I", "scope": "team", "category": "core"})
    assert "[invalid_input]" in text and "category 'core' is not allowed in scope 'team'" in text
    assert "decisions, architecture, learnings" in text
    text = mcp.error("remember", {"content": "x", "scope": "galaxy"})
    assert "scope" in text
    assert state(mcp) == before


def test_oversized_content_is_an_error_and_stores_nothing(mcp):
    before = state(mcp)
    text = mcp.error("remember", {"content": "x" * (32 * 1024 + 1)})
    assert "[invalid_input]" in text and "32769 bytes" in text and "32 KB" in text
    assert "32 KB" in mcp.error("remember-task", {"content": "é" * (16 * 1024 + 1)})
    assert state(mcp) == before


def test_importing_a_malformed_file_is_an_error_and_imports_nothing(mcp, srv):
    bad = srv.allowed / "malformed.json"
    bad.write_text('{"version": 1, "memories": [ {"id": "x", ', encoding="utf-8")
    before = state(mcp)
    text = mcp.error("import-memories", {"inputPath": str(bad)})
    assert "[invalid_input]" in text and "not a valid JSON export" in text
    missing = mcp.error("import-memories", {"inputPath": str(srv.allowed / "nope.json")})
    assert "file not found" in missing
    assert state(mcp) == before


def test_paths_outside_the_allowed_directories_are_refused(mcp, srv):
    target = srv.outside / "leak.json"
    before = state(mcp)
    text = mcp.error("export-memories", {"outputPath": str(target)})
    assert "[access_denied]" in text and "outside the allowed directories" in text
    assert not target.exists()
    text = mcp.error("export-memories", {"outputPath": "../outside/leak.json"})
    assert "outside the allowed directories" in text and not target.exists()
    # a valid export file, but outside: refused, nothing imported
    good = mcp.ok("export-memories", {"outputPath": "valid.json"})
    target.write_bytes(Path(good["filepath"]).read_bytes())
    text = mcp.error("import-memories", {"inputPath": str(target), "overwriteExisting": True})
    assert "[access_denied]" in text and str(srv.allowed) in text
    assert state(mcp) == before


def test_deleting_another_agents_team_memory_is_refused(tmp_path):
    """Agent A writes a team memory and exits; agent B's own server process on the same store
    cannot delete it (forget or forget-bulk), and can still read it afterwards."""
    home = tmp_path / "home"
    # seeded in process without an embedder (no Chroma import); B's server indexes it at start
    rt = Runtime.start(
        identity_env(home, "shared", "agent-a", embedder="none"), tmp_path, background=False
    )
    try:
        with in_process(rt) as a:
            mid = a.ok("remember", {"content": "We deploy on Tuesdays only", "scope": "team",
                                    "category": "decisions"})["memoryId"]  # fmt: skip
            pub = a.ok("remember", {"content": "Public: the style guide is PEP 8", "scope": "public",
                                    "category": "learnings"})["memoryId"]  # fmt: skip
    finally:
        rt.close()
    with SyncClient(serve_params(identity_env(home, "shared", "agent-b"), tmp_path)) as b:
        assert b.ok("pattern_health")["agentId"] == "agent-b"
        before = state(b)
        assert before[0][mid][1:3] == ("team", "decisions") and pub in before[0]
        text = b.error("forget", {"memoryId": mid})
        assert "[access_denied]" in text and "agent-a" in text
        assert "[access_denied]" in b.error("forget", {"memoryId": pub, "force": True})
        res = b.ok("forget-bulk", {"memoryIds": [mid, pub], "force": True})
        assert (res["deleted"], res["failed"]) == (0, 2)
        assert all("only the agent that created" in e for e in res["errors"])
        assert "[access_denied]" in b.error("share-learning", {"memoryId": mid})
        assert state(b) == before
