"""Pattern's visibility table, through the MCP tools.

Agents A and B and A's sub-agent S (``PATTERN_SUBAGENT_TYPE=reviewer``,
``PATTERN_PARENT_AGENT_ID=A``) each write, in projects P1 and P2, one memory of every kind:
private longterm, private task, personal longterm, personal core, team and public. Then every
(agent, project) pair must see exactly the right ones through recall-context (with and without
``search``), recall and export-memories:

- private: the writer in that project only; a sub-agent also sees its parent's, in that project;
- personal (longterm and core): the writer, in every project; never a sub-agent of it;
- team: every agent of that project; public: everyone.

Identities come from the environment of each (in-process) server; all share one store.
"""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path

import pytest

from server.service.core.identity import derive_agent_id, derive_project_id, identity_from_env
from tests.mcp_util import (
    FakeClock,
    clocked_service,
    identity_env,
    in_process,
    runtime_on,
    visible_memories,
)

AGENTS = {"A": {}, "B": {}, "S": {"subagent": "reviewer", "parent": "A"}}
PROJECTS = ("P1", "P2")
KINDS = ("private", "tasks", "personal", "core", "team", "public")
VIEWERS = [(a, p) for a in AGENTS for p in PROJECTS]


def env_of(home: Path, agent: str, project: str, allowed: Path) -> dict[str, str]:
    extra = AGENTS[agent]
    # the sub-agent gets no agent id of its own: it is derived from its parent's
    return identity_env(home, project, None if extra else agent, allowed=allowed, **extra)


def content_of(label: str) -> str:
    """``zebra`` (the query) + the label + six words unique to the label, so no two memories
    look like near-duplicates to recall's de-duplication."""
    digest = hashlib.sha256(label.encode()).hexdigest()
    return "zebra " + label + " " + " ".join(f"w{digest[i : i + 6]}" for i in range(0, 36, 6))


def expected(viewer: str, project: str) -> set[str]:
    parent = AGENTS[viewer].get("parent")
    out = set()
    for writer in AGENTS:
        for p in PROJECTS:
            for kind in KINDS:
                if kind in ("private", "tasks"):
                    ok = p == project and writer in (viewer, parent)
                elif kind in ("personal", "core"):
                    ok = writer == viewer
                elif kind == "team":
                    ok = p == project
                else:
                    ok = True
                if ok:
                    out.add(f"{writer}_{p}_{kind}")
    return out


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def world(tmp_path_factory, request):
    """Every identity's memories, written once per backend through the MCP tools (with
    PostgreSQL, the rules run there and the reads come from the node's replica)."""
    url = None
    if request.param == "postgres":
        from tests.conftest import empty_pg_database

        url = empty_pg_database(request.getfixturevalue("_pg_databases"), "pm_test_visibility")
    root = tmp_path_factory.mktemp("visibility")
    home, allowed = root / "home", root / "exports"
    svc = clocked_service(home, FakeClock(), url)
    labels: dict[str, str] = {}  # memory id -> label
    for agent, project in VIEWERS:
        with in_process(runtime_on(svc, env_of(home, agent, project, allowed), root)) as c:
            for kind in KINDS:
                label = f"{agent}_{project}_{kind}"
                text = content_of(label)
                if kind == "private":
                    r = c.ok(
                        "remember", {"content": text, "scope": "private", "category": "longterm"}
                    )
                elif kind == "tasks":
                    r = c.ok("remember-task", {"content": text})
                elif kind == "personal":
                    r = c.ok("remember", {"content": text, "scope": "personal"})
                elif kind == "core":
                    r = c.ok("core-memory", {"content": text})
                elif kind == "team":
                    r = c.ok(
                        "remember", {"content": text, "scope": "team", "category": "decisions"}
                    )
                else:
                    r = c.ok(
                        "remember", {"content": text, "scope": "public", "category": "learnings"}
                    )
                labels[r["memoryId"]] = label
    assert len(labels) == len(VIEWERS) * len(KINDS)

    def connect(agent: str, project: str):
        return in_process(runtime_on(svc, env_of(home, agent, project, allowed), root))

    yield connect, labels, allowed
    svc.engine.close()


@pytest.mark.parametrize(("viewer", "project"), VIEWERS, ids=[f"{a}@{p}" for a, p in VIEWERS])
def test_each_identity_sees_exactly_its_memories(world, viewer, project):
    connect, labels, allowed = world
    want = expected(viewer, project)
    with connect(viewer, project) as c:
        # recall-context: grouped by scope, nothing else
        mems = visible_memories(c)
        assert {labels[i] for i in mems} == want
        for mid, m in mems.items():
            kind = labels[mid].rsplit("_", 1)[1]
            assert m["scope"] == {"tasks": "private", "core": "personal"}.get(kind, kind)
        ctx = c.ok("recall-context", {"limit": 200})
        counts = {s: ctx["counts"][s] for s in ("private", "personal", "team", "public")}
        assert counts == {s: len(ctx[s]) for s in counts} and ctx["counts"]["expired"] == 0
        for label in want:  # the summary only mentions visible memories
            assert label in ctx["summary"] or len(ctx["summary"]) > 3500
        for label in set(labels.values()) - want:
            assert label not in ctx["summary"]
        # recall-context ranked by a search
        found = c.ok("recall-context", {"limit": 200, "search": "zebra"})
        assert {
            labels[m["id"]] for s in ("private", "personal", "team", "public") for m in found[s]
        } == want
        # recall: every kind of retrieval sees the same set
        res = c.ok("recall", {"query": "zebra", "limit": 100, "budget": 20000})
        assert {labels[i["id"]] for i in res["items"]} == want
        assert res["dropped_duplicates"] == 0
        # export-memories
        exp = c.ok(
            "export-memories", {"outputPath": f"{viewer}-{project}.json", "includeExpired": True}
        )
        doc = json.loads(Path(exp["filepath"]).read_text())
        assert {labels[m["id"]] for m in doc["memories"]} == want
        assert exp["exported"] == len(want)


def test_agent_a_across_projects(world):
    connect, labels, _ = world
    with connect("A", "P2") as c:
        seen = {labels[i] for i in visible_memories(c)}
    # own personal memories (longterm and core) follow A into P2; its P1 private ones do not
    assert {"A_P1_personal", "A_P1_core", "A_P2_private", "A_P2_tasks"} <= seen
    assert not {"A_P1_private", "A_P1_tasks", "A_P1_team", "B_P1_team"} & seen
    assert {"B_P2_team", "S_P2_team", "B_P1_public", "S_P1_public"} <= seen
    assert not any(lbl.startswith(("B_", "S_")) and lbl.split("_")[2] in
                   ("private", "tasks", "personal", "core") for lbl in seen)  # fmt: skip


def test_b_sees_none_of_a_private_or_personal(world):
    connect, labels, _ = world
    for project in PROJECTS:
        with connect("B", project) as c:
            seen = {labels[i] for i in visible_memories(c)}
            assert not [
                s for s in seen if s.startswith("A_") and not s.endswith(("team", "public"))
            ]
            # an invisible memory looks missing, even by id
            a_private = next(i for i, lbl in labels.items() if lbl == f"A_{project}_private")
            assert "[not_found]" in c.error("forget", {"memoryId": a_private})
            assert "[not_found]" in c.error("commit-insight", {"memoryId": a_private})


def test_sub_agent_reads_parent_private_but_never_core(world):
    connect, labels, _ = world
    with connect("S", "P1") as c:
        h = c.ok("pattern_health")
        assert (h["agentId"], h["subagent"]) == ("A.reviewer", True)
        seen = {labels[i] for i in visible_memories(c)}
        assert {"A_P1_private", "A_P1_tasks", "S_P1_private", "S_P2_core"} <= seen
        assert (
            not {"A_P1_core", "A_P2_core", "A_P1_personal", "A_P2_personal", "A_P2_private"} & seen
        )
        # asking for core explicitly returns only its own
        core = c.ok("recall-context", {"categories": ["core"], "limit": 200})
        assert {labels[m["id"]] for m in core["personal"]} == {"S_P1_core", "S_P2_core"}
        hits = c.ok("recall", {"query": "zebra A_P1_core", "categories": ["core"]})
        assert {labels[i["id"]] for i in hits["items"]} == {"S_P1_core", "S_P2_core"}
        # reading is not owning: the parent's private memories stay the parent's
        a_private = next(i for i, lbl in labels.items() if lbl == "A_P1_private")
        a_task = next(i for i, lbl in labels.items() if lbl == "A_P1_tasks")
        a_core = next(i for i, lbl in labels.items() if lbl == "A_P1_core")
        assert "[access_denied]" in c.error("forget", {"memoryId": a_private})
        assert "[access_denied]" in c.error("commit-insight", {"memoryId": a_task})
        assert "[access_denied]" in c.error("share-learning", {"memoryId": a_private})
        assert "[not_found]" in c.error("forget", {"memoryId": a_core, "force": True})
        assert {labels[i] for i in visible_memories(c)} == seen


# ---------------------------------------------------------------------------- identity
def test_identity_is_derived_deterministically_from_the_working_directory(tmp_path, monkeypatch):
    repo = tmp_path / "My Repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src" / "pkg").mkdir(parents=True)
    other = tmp_path / "other"
    other.mkdir()
    first = identity_from_env({}, repo)
    assert first == identity_from_env({}, repo)  # a restarted agent keeps its ids
    assert first == identity_from_env({}, repo / "src" / "pkg")  # the git root decides
    assert first.project_id == derive_project_id(repo) and first.project_id.startswith("my-repo-")
    assert first.agent_id == derive_agent_id(repo) and first.agent_id.startswith("agent-")
    assert first.parent_agent_id is None and not first.is_subagent
    elsewhere = identity_from_env({}, other)
    assert elsewhere.project_id != first.project_id and elsewhere.agent_id != first.agent_id
    # host + path: the same folder on another host is another agent of the same project
    monkeypatch.setattr(socket, "gethostname", lambda: "some-other-host")
    moved = identity_from_env({}, repo)
    assert moved.project_id == first.project_id and moved.agent_id != first.agent_id


def test_identity_environment_variables_and_loominal_aliases(tmp_path):
    env = {"LOOMINAL_PROJECT_ID": "loom-proj", "LOOMINAL_AGENT_ID": "loom-agent"}
    who = identity_from_env(env, tmp_path)
    assert (who.project_id, who.agent_id) == ("loom-proj", "loom-agent")
    both = {**env, "PATTERN_PROJECT_ID": "pat-proj", "PATTERN_AGENT_ID": "pat-agent"}
    assert identity_from_env(both, tmp_path).model_dump()["agent_id"] == "pat-agent"
    assert identity_from_env(both, tmp_path).project_id == "pat-proj"
    blank = {"PATTERN_PROJECT_ID": "  ", "PATTERN_AGENT_ID": "", **env}
    assert identity_from_env(blank, tmp_path).agent_id == "loom-agent"
    sub = identity_from_env(
        {
            "LOOMINAL_SUBAGENT_TYPE": "Code Reviewer",
            "PATTERN_PARENT_AGENT_ID": "A",
            "PATTERN_PROJECT_ID": "p",
        },
        tmp_path,
    )
    assert (sub.agent_id, sub.parent_agent_id, sub.subagent_type) == (
        "A.code-reviewer",
        "A",
        "Code Reviewer",
    )
    assert sub.is_subagent
    assert sub.visible_buckets() == ["private/p/A.code-reviewer", "private/p/A",
                                     "personal/A.code-reviewer", "team/p", "public"]  # fmt: skip
    # a sub-agent started with only its parent's agent id derives its own from it
    same = identity_from_env(
        {"PATTERN_SUBAGENT_TYPE": "reviewer", "PATTERN_AGENT_ID": "A"}, tmp_path
    )
    assert (same.agent_id, same.parent_agent_id) == ("A.reviewer", "A")
    # without a sub-agent type, a parent id alone does not make a sub-agent
    plain = identity_from_env({"PATTERN_AGENT_ID": "X", "PATTERN_PARENT_AGENT_ID": "A"}, tmp_path)
    assert plain.parent_agent_id is None and plain.visible_buckets(["private"]) == [
        f"private/{plain.project_id}/X"
    ]


def test_pattern_health_counts_only_what_the_caller_sees(world):
    connect, labels, _ = world
    for viewer, project in VIEWERS:
        with connect(viewer, project) as c:
            h = c.ok("pattern_health", {})
        assert h["view"] == "caller" and h["pendingVectorWrites"] == 0
        assert h["records"] == {"memory": len(expected(viewer, project))}, (viewer, project)
    assert len(labels) == 36  # what the whole store holds


def test_pending_vector_writes_are_the_callers_and_stats_is_store_wide(tmp_path):
    """Outbox rows left for two projects (as after a crash before Chroma caught up): each
    caller's pattern_health counts its own; ``health(store_wide=True)`` and the local
    ``pattern-memory stats`` count the whole store."""
    import os
    import subprocess
    import sys

    from server.service.core.maintenance import health

    home = tmp_path / "home"
    svc = clocked_service(home, FakeClock())
    ids = {}
    for project in PROJECTS:
        rt = runtime_on(svc, identity_env(home, project, "A"), tmp_path)
        with in_process(rt) as c:
            note = {"content": f"team note of {project}", "scope": "team", "category": "decisions"}
            ids[project] = c.ok("remember", note)["memoryId"]
    with svc.store.transaction() as conn:
        for project, rid in ids.items():
            conn.execute(
                "INSERT INTO vector_outbox(record_id, op, bucket) VALUES (?, 'upsert', ?)",
                (rid, f"team/{project}"),
            )
    with in_process(runtime_on(svc, identity_env(home, "P1", "B"), tmp_path)) as c:
        h = c.ok("pattern_health", {})
    assert (h["records"], h["pendingVectorWrites"]) == ({"memory": 1}, 1)
    who = runtime_on(svc, identity_env(home, "P1", "B"), tmp_path).identity
    wide = health(svc, who, store_wide=True)
    assert (wide.view, wide.records, wide.pendingVectorWrites) == ("store", {"memory": 2}, 2)
    svc.engine.close()
    env = {**os.environ, **identity_env(home, "P1", "B")}
    out = subprocess.run([sys.executable, "-m", "server.cli", "stats"], env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    stats = json.loads(out.stdout)
    assert stats["view"] == "store" and stats["records"] == {"memory": 2}
