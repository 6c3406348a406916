"""Citations through a real MCP client session (the official client, in process): the write
tools accept them, recall / recall-context / find_similar_errors carry the status, the
`changes` tool shows `citations` events only to who may see the record, and verify-memories
lists, confirms, updates and forgets."""

from __future__ import annotations

import pytest

from tests.mcp_util import FakeClock, clocked_service, identity_env, in_process, runtime_on
from tests.recall.test_citations import MOD, write

LESSON = {
    "name": "GAMMA_OFF_BY_ONE", "entityType": "lesson", "observations": ["gamma fixed"],
    "errorPattern": {"type": "AssertionError", "message": "gamma off by one", "context": "t"},
    "metadata": {"severity": "low", "environment": {}, "frequency": 1, "successRate": 1.0},
    "verificationSteps": [],
}  # fmt: skip


@pytest.fixture
def world(tmp_path):
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    write(proj / "pkg" / "mod.py", MOD)
    svc = clocked_service(tmp_path / "home", FakeClock())
    rt_a = runtime_on(svc, identity_env(tmp_path / "home", "p1", "a1"), proj)
    rt_b = runtime_on(svc, identity_env(tmp_path / "home", "p1", "b1"), proj)
    a, b = in_process(rt_a), in_process(rt_b)
    yield proj, a, b, tmp_path
    a.close()
    b.close()
    svc.citations.close()
    svc.engine.close()


def test_tools_carry_citations_end_to_end(world):
    proj, a, b, tmp_path = world
    cite = {"path": "pkg/mod.py", "startLine": 8, "endLine": 10}
    mine = a.ok("remember", {"content": "beta doubles its input", "citations": [cite]})
    assert [(c["path"], c["status"]) for c in mine["citations"]] == [("pkg/mod.py", "fresh")]
    team = a.ok("remember", {"content": "gamma subtracts one, see pkg/mod.py:13-14",
                             "scope": "team"})  # fmt: skip
    assert [c["startLine"] for c in team["citations"]] == [13]
    a.ok("create_entities", {"entities": [{"name": "Mod", "entityType": "module"}]})
    a.ok("add_observations", {"observations": [
        {"entityName": "Mod", "contents": ["alpha adds one"],
         "citations": [{"path": "pkg/mod.py", "startLine": 4, "endLine": 5}]}]})  # fmt: skip
    made = a.ok("create_lesson", {"lesson": LESSON, "citations": [
        {"path": "pkg/mod.py", "startLine": 13, "endLine": 14}]})  # fmt: skip
    assert made["citations"][0]["status"] == "fresh"
    heads = {n: c.ok("changes", {})["next_cursor"] for n, c in (("a", a), ("b", b))}

    write(proj / "pkg" / "mod.py", MOD.replace("y * 2", "y * 3").replace("z - 1", "z - 2"))
    res = a.ok("recall", {"query": "beta doubles gamma subtracts alpha", "limit": 10})
    got = {i["id"]: [c["status"] for c in i["citations"]] for i in res["items"]}
    assert got[mine["memoryId"]] == ["changed"] and got[team["memoryId"]] == ["changed"]
    assert "cited code changed since this was written (pkg/mod.py:8-10)" in res["text"]
    ctx = a.ok("recall-context", {})
    assert [c["status"] for c in ctx["private"][0]["citations"]] == ["changed"]
    lessons = a.ok("find_similar_errors", {"errorPattern": {"message": "gamma off by one"}})
    assert [c["status"] for c in lessons["lessons"][0]["citations"]] == ["changed"]

    # events: a sees both of its records; b (same project) only the team one
    seen_a = a.ok("changes", {"cursor": heads["a"]})["changes"]
    assert {(c["op"], c["record_id"]) for c in seen_a} >= {
        ("citations", mine["memoryId"]),
        ("citations", team["memoryId"]),
    }
    seen_b = b.ok("changes", {"cursor": heads["b"]})["changes"]
    ids_b = {c["record_id"] for c in seen_b if c["op"] == "citations"}
    assert team["memoryId"] in ids_b and mine["memoryId"] not in ids_b
    ev = next(c for c in seen_b if c["record_id"] == team["memoryId"])
    assert [s["status"] for s in ev["citations"]] == ["changed"]

    # verify-memories: list with diffs, then confirm / update / forget
    listed = a.ok("verify-memories", {})
    stale = {m["id"]: m for m in listed["memories"]}
    assert {mine["memoryId"], team["memoryId"]} <= set(stale)
    assert "+    total = y * 3" in stale[mine["memoryId"]]["diffs"][0]["diff"]
    assert b.ok("verify-memories", {})["memories"] == []  # not b's memories
    assert "access_denied" in b.error(
        "verify-memories", {"action": "confirm", "memoryId": team["memoryId"]}
    )
    conf = a.ok("verify-memories", {"action": "confirm", "memoryId": mine["memoryId"]})
    assert conf["memories"][0]["citations"][0]["status"] == "fresh"
    upd = a.ok("verify-memories", {"action": "update", "memoryId": team["memoryId"],
                                   "content": "gamma subtracts two", "expectedRevision": 1})  # fmt: skip
    assert upd["revision"] == 2
    assert a.ok("verify-memories", {"action": "forget", "memoryId": team["memoryId"]})["deleted"]
    left = {m["id"] for m in a.ok("verify-memories", {})["memories"]}
    assert mine["memoryId"] not in left and team["memoryId"] not in left


def test_tool_errors_are_clear(world):
    proj, a, _b, tmp_path = world
    outside = write(tmp_path / "elsewhere.py", "x = 1\n")
    err = a.error("remember", {"content": "x", "citations": [{"path": str(outside)}]})
    assert "[access_denied]" in err and "outside the allowed directories" in err
    err = a.error("remember", {"content": "x", "citations": [{"path": "pkg/mod.py", "endLine": 2}]})
    assert "endLine needs startLine" in err
    err = a.error("remember", {"content": "x", "citations": [{"path": "pkg/nope.py"}]})
    assert "[not_found]" in err and "no such file" in err
    mid = a.ok("remember", {"content": "plain"})["memoryId"]
    res = a.ok("update-memory", {"memoryId": mid, "citations": [{"path": "pkg/mod.py"}]})
    assert [c["path"] for c in res["citations"]] == ["pkg/mod.py"]
    assert "needs a memoryId" in a.error("verify-memories", {"action": "confirm"})


def test_through_the_daemon_a_bridged_caller_cites_and_a_remote_agent_cannot(
    tmp_path, tmp_path_factory
):
    """Over HTTP: a bridged caller's citations resolve in its own project folder (sent in the
    envelope); a remote agent (a token, no folder here) gets a clear error for an explicit
    citation, and its recall shows the status the local checks found, without reading files."""
    import json

    from server.http.auth import TokenStore, envelope_headers
    from server.service.core.identity import Identity
    from tests.runtime.test_daemon import bearer, call, start_daemon, stop

    proj = tmp_path_factory.mktemp("proj-cite")
    write(proj / "pkg" / "mod.py", MOD)
    home = tmp_path / "home"
    proc = start_daemon(home)
    try:
        info = json.loads((home / "daemon.json").read_text())
        who = Identity(project_id="pb", agent_id="agent-b", root=str(proj))
        local = envelope_headers(who, info["secret"])
        status, body = call(info, local, "remember", {
            "content": "beta doubles its input", "scope": "team",
            "citations": [{"path": "pkg/mod.py", "startLine": 8, "endLine": 10}]})  # fmt: skip
        assert status == 200 and not body["result"]["isError"], body
        assert body["result"]["structuredContent"]["citations"][0]["status"] == "fresh"

        token = TokenStore(home).create("remote-agent", "pb")
        status, body = call(info, bearer(token, "pb"), "remember", {
            "content": "x", "citations": [{"path": "pkg/mod.py"}]})  # fmt: skip
        assert body["result"]["isError"]
        assert "no project folder" in body["result"]["content"][0]["text"]

        write(proj / "pkg" / "mod.py", MOD.replace("y * 2", "y * 9"))
        status, body = call(info, bearer(token, "pb"), "recall", {"query": "beta doubles"})
        (item,) = body["result"]["structuredContent"]["items"]
        assert item["citations"][0]["status"] == "fresh"  # the remote agent reads no file
        status, body = call(info, local, "recall", {"query": "beta doubles"})
        assert (
            body["result"]["structuredContent"]["items"][0]["citations"][0]["status"] == "changed"
        )
        status, body = call(info, bearer(token, "pb"), "recall", {"query": "beta doubles"})
        assert (
            body["result"]["structuredContent"]["items"][0]["citations"][0]["status"] == "changed"
        )
    finally:
        stop(proc)
