"""End to end through MCP: the knowledge-graph tools on a graph of 240 entities.

In-process ``mcp.Client`` over ``create_server(runtime=…)``: real SQLite + Chroma in tmp_path,
the deterministic hashing embedder (natural-language queries that share words with the
answer); one slow test uses the real model for queries that share no word with the answer.
"""

from __future__ import annotations

import json

import pytest

from retrieval.engine import Engine
from server.service.memories.memory import MemoryService
from tests.mcp_util import hash_store_client, identity_env, in_process, runtime_on

GRAPH_TOOLS = {
    "create_entities": {"entities"}, "create_relations": {"relations"},
    "add_observations": {"observations"}, "delete_entities": {"entityNames"},
    "delete_observations": {"deletions"}, "delete_relations": {"relations"},
    "read_graph": set(), "search_nodes": {"query"}, "open_nodes": {"names"},
    "create_lesson": {"lesson"}, "find_similar_errors": {"errorPattern"},
    "update_lesson_success": {"lessonName", "success"}, "get_lesson_recommendations": {"context"},
}  # fmt: skip

CITIES = ["Lisbon", "Osaka", "Nairobi", "Lima", "Oslo", "Hanoi", "Quito", "Tunis", "Perth", "Cork"]
LANGS = ["Go", "Rust", "Kotlin", "Elixir", "Scala", "Haskell", "OCaml", "Clojure", "Zig", "Nim"]
DBS = ["Postgres", "Cassandra", "Redis", "MongoDB", "ClickHouse", "DynamoDB"]

# entities whose facts answer the natural-language queries below
KNOWN = [
    {"name": "Maria_Garcia", "entityType": "person",
     "observations": ["Translates the release notes into Japanese", "Joined in 2021"]},
    {"name": "billing-service", "entityType": "service",
     "observations": ["Charges customer credit cards every month through Stripe", "Written in Go"]},
    {"name": "Project_Aurora", "entityType": "project",
     "observations": ["Migrates the data warehouse from Oracle to Snowflake", "Deadline is March"]},
    {"name": "Kubernetes_Cluster", "entityType": "infrastructure", "observations": []},
    {"name": "Acme_Corp", "entityType": "organization",
     "observations": ["Customer since 2019", "Pays invoices late"]},
]  # fmt: skip
QUERIES = [  # (query, expected top entity): none is a substring of any observation
    ("who translates our release notes to Japanese", "Maria_Garcia"),
    ("which service charges credit cards", "billing-service"),
    ("moving the warehouse off Oracle", "Project_Aurora"),
    ("kubernetes cluster", "Kubernetes_Cluster"),  # no observation: found by its name
    ("customer that pays its invoices late", "Acme_Corp"),
]


def filler_entities() -> list[dict]:
    out = []
    for i in range(80):
        out.append({"name": f"Person_{i:03d}", "entityType": "person", "observations": [
            f"Lives in {CITIES[i % 10]}", f"Programs mostly in {LANGS[(i * 3) % 10]}",
            f"Has worked here for {i % 12 + 1} years"]})  # fmt: skip
    for i in range(80):
        out.append({"name": f"svc-{i:03d}", "entityType": "service", "observations": [
            f"Written in {LANGS[i % 10]}", f"Stores its state in {DBS[i % 6]}",
            f"Deployed in the {CITIES[(i * 7) % 10]} region"]})  # fmt: skip
    for i in range(75):
        out.append({"name": f"Team_{i:03d}", "entityType": "team", "observations": [
            f"Meets every {['Monday', 'Tuesday', 'Thursday'][i % 3]}", f"Has {i % 9 + 3} members"]})  # fmt: skip
    return out


def filler_relations() -> list[dict]:
    rels = []
    for i in range(80):
        rels.append(
            {"from": f"Person_{i:03d}", "to": f"Team_{i % 75:03d}", "relationType": "member_of"}
        )
        rels.append({"from": f"Team_{i % 75:03d}", "to": f"svc-{i:03d}", "relationType": "owns"})
        rels.append(
            {"from": f"svc-{i:03d}", "to": f"svc-{(i + 1) % 80:03d}", "relationType": "calls"}
        )
    rels += [
        {"from": "Maria_Garcia", "to": "Team_001", "relationType": "member_of"},
        {"from": "Maria_Garcia", "to": "Project_Aurora", "relationType": "works_on"},
        {"from": "Team_001", "to": "billing-service", "relationType": "owns"},
        {"from": "billing-service", "to": "Acme_Corp", "relationType": "bills"},
        {"from": "Project_Aurora", "to": "Kubernetes_Cluster", "relationType": "runs_on"},
    ]
    return rels


@pytest.fixture
def client(tmp_path):
    with hash_store_client(tmp_path) as c:
        yield c


@pytest.fixture
def big_graph(client):
    entities = filler_entities() + KNOWN
    assert len(entities) >= 200
    for i in range(0, len(entities), 100):
        out = client.ok("create_entities", {"entities": entities[i : i + 100]})
        assert len(out["created"]) == len(entities[i : i + 100])
    out = client.ok("create_relations", {"relations": filler_relations()})
    assert out["skipped"] == 0
    return entities


def test_tools_have_the_seed_names_and_arguments(client):
    tools = {t.name: t for t in client.list_tools()}
    for name, args in GRAPH_TOOLS.items():
        assert name in tools, name
        props = set(tools[name].input_schema.get("properties", {}))
        assert args <= props, (name, props)
        assert set(tools[name].input_schema.get("required", [])) == args, name
        assert len(tools[name].description or "") > 60  # written for the agent


def test_natural_language_search_over_240_entities(client, big_graph):
    for query, expected in QUERIES:
        res = client.ok("search_nodes", {"query": query, "limit": 5})
        names = [e["name"] for e in res["entities"]]
        assert names[0] == expected, (query, names)
        top = res["entities"][0]
        assert top["observations"] == next(
            e["observations"] for e in KNOWN if e["name"] == expected
        )
    # relations among the hits only (both ends returned)
    res = client.ok(
        "search_nodes", {"query": "Maria translates notes; Aurora warehouse migration", "limit": 3}
    )
    names = {e["name"] for e in res["entities"]}
    assert {"Maria_Garcia", "Project_Aurora"} <= names
    assert {"from": "Maria_Garcia", "to": "Project_Aurora", "relationType": "works_on"} in res[
        "relations"
    ]
    assert all(r["from"] in names and r["to"] in names for r in res["relations"])
    # types are searchable too
    res = client.ok("search_nodes", {"query": "organization", "limit": 3})
    assert res["entities"][0]["name"] == "Acme_Corp"


def test_read_graph_paginates_everything_exactly_once(client, big_graph):
    seen, rels, cursor, pages = [], [], None, 0
    while True:
        page = client.ok("read_graph", {"limit": 50, **({"cursor": cursor} if cursor else {})})
        pages += 1
        assert len(page["entities"]) <= 50
        seen += [e["name"] for e in page["entities"]]
        rels += [(r["from"], r["to"], r["relationType"]) for r in page["relations"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert pages == 5 and page["totalEntities"] == len(big_graph) == len(seen) == len(set(seen))
    assert seen == [e["name"] for e in big_graph]  # creation order
    expected = {(r["from"], r["to"], r["relationType"]) for r in filler_relations()}
    assert len(rels) == len(set(rels)) == page["totalRelations"] and set(rels) == expected
    assert "[invalid_input]" in client.error("read_graph", {"cursor": "not-a-cursor"})


def test_delete_entities_cascades_to_relations_and_observations(client, big_graph):
    before = client.ok("read_graph", {"limit": 1})["totalRelations"]
    degree = sum("Maria_Garcia" in (r["from"], r["to"]) for r in filler_relations())
    assert degree == 2
    client.ok("delete_entities", {"entityNames": ["Maria_Garcia", "Nobody_At_All"]})
    after = client.ok("read_graph", {"limit": 1})["totalRelations"]
    assert after == before - degree
    assert client.ok("open_nodes", {"names": ["Maria_Garcia"]}) == {"entities": [], "relations": []}
    res = client.ok("search_nodes", {"query": "translates release notes Japanese"})
    assert "Maria_Garcia" not in [e["name"] for e in res["entities"]]
    # her observation records are gone from every retrieval path (recall searches all kinds)
    recalled = client.ok(
        "recall", {"query": "translates the release notes into Japanese", "kinds": ["observation"]}
    )
    assert "Japanese" not in recalled.get("text", "")
    # the graph still accepts her name again, with no leftovers
    client.ok(
        "create_entities",
        {"entities": [{"name": "Maria_Garcia", "entityType": "person", "observations": []}]},
    )
    assert client.ok("open_nodes", {"names": ["Maria_Garcia"]})["entities"][0]["observations"] == []


def test_open_nodes_skips_missing_names_and_returns_relations_among_them(client, big_graph):
    res = client.ok(
        "open_nodes", {"names": ["billing-service", "Does_Not_Exist", "Acme_Corp", "Team_001"]}
    )
    assert [e["name"] for e in res["entities"]] == ["billing-service", "Acme_Corp", "Team_001"]
    rels = {(r["from"], r["to"], r["relationType"]) for r in res["relations"]}
    assert rels == {
        ("billing-service", "Acme_Corp", "bills"),
        ("Team_001", "billing-service", "owns"),
    }


def test_add_observations_to_a_missing_entity_fails_and_writes_nothing(client, big_graph):
    err = client.error("add_observations", {"observations": [
        {"entityName": "Acme_Corp", "contents": ["Renewed the contract"]},
        {"entityName": "Ghost_Entity", "contents": ["boo"]},
    ]})  # fmt: skip
    assert "[not_found]" in err and "Ghost_Entity" in err and "create_entities" in err
    acme = client.ok("open_nodes", {"names": ["Acme_Corp"]})["entities"][0]
    assert "Renewed the contract" not in acme["observations"]  # all or nothing
    out = client.ok("add_observations", {"observations": [
        {"entityName": "Acme_Corp", "contents": ["Renewed the contract", "Pays invoices late"]}]})  # fmt: skip
    assert out["results"] == [
        {"entityName": "Acme_Corp", "addedObservations": ["Renewed the contract"], "revision": 1}
    ]
    res = client.ok("search_nodes", {"query": "contract renewal"})
    assert res["entities"][0]["name"] == "Acme_Corp"


def test_duplicates_missing_endpoints_and_silent_deletes(client, big_graph):
    out = client.ok("create_entities", {"entities": [
        {"name": "Acme_Corp", "entityType": "organization", "observations": ["ignored"]},
        {"name": "New_One", "entityType": "thing", "observations": ["fresh"]}]})  # fmt: skip
    assert [e["name"] for e in out["created"]] == ["New_One"] and out["skipped"] == ["Acme_Corp"]
    assert (
        "ignored"
        not in client.ok("open_nodes", {"names": ["Acme_Corp"]})["entities"][0]["observations"]
    )
    rel = {"from": "New_One", "to": "Acme_Corp", "relationType": "supplies"}
    assert client.ok("create_relations", {"relations": [rel, rel]})["created"] == [rel]
    assert client.ok("create_relations", {"relations": [rel]})["skipped"] == 1
    err = client.error("create_relations", {"relations": [
        {"from": "New_One", "to": "Team_002", "relationType": "helps"},
        {"from": "New_One", "to": "Phantom", "relationType": "haunts"}]})  # fmt: skip
    assert "[not_found]" in err and "Phantom" in err
    assert (
        client.ok("open_nodes", {"names": ["New_One", "Team_002"]})["relations"] == []
    )  # nothing written
    assert (
        client.ok(
            "delete_relations", {"relations": [rel, {"from": "x", "to": "y", "relationType": "z"}]}
        )["deleted"]
        == 1
    )
    out = client.ok("delete_observations", {"deletions": [
        {"entityName": "New_One", "observations": ["fresh", "never there"]},
        {"entityName": "Nobody", "observations": ["x"]}]})  # fmt: skip
    assert out["deleted"] == 1
    assert client.ok("open_nodes", {"names": ["New_One"]})["entities"][0]["observations"] == []


def test_lesson_tools_end_to_end(client):
    lesson = {
        "name": "PG_TIMEOUT", "entityType": "lesson",
        "observations": ["The database container starts slower than the app"],
        "errorPattern": {"type": "TimeoutError", "message": "connection to postgres timed out",
                         "context": "docker compose up"},
        "metadata": {"severity": "medium", "environment": {"os": "linux"}, "frequency": 1, "successRate": 1.0},
        "verificationSteps": [{"command": "docker compose up", "expectedOutput": "ready",
                               "successIndicators": ["database system is ready"]}],
    }  # fmt: skip
    made = client.ok("create_lesson", {"lesson": lesson})["lesson"]
    assert made["metadata"]["createdAt"] and made["metadata"]["updatedAt"]
    bad = {**lesson, "name": "BAD", "metadata": {**lesson["metadata"], "severity": "apocalyptic"}}
    assert "severity" in client.error("create_lesson", {"lesson": bad})
    found = client.ok("find_similar_errors", {"errorPattern": {"type": "TimeoutError",
                      "message": "postgres connection timeout", "context": "compose"}})  # fmt: skip
    assert found["lessons"][0]["name"] == "PG_TIMEOUT"
    assert found["lessons"][0]["verificationSteps"][0]["command"] == "docker compose up"
    upd = client.ok("update_lesson_success", {"lessonName": "PG_TIMEOUT", "success": False})
    assert upd["frequency"] == 2 and upd["successRate"] == 0.5
    rec = client.ok(
        "get_lesson_recommendations", {"context": "starting the stack with docker compose"}
    )
    assert (
        rec["lessons"][0]["name"] == "PG_TIMEOUT"
        and rec["lessons"][0]["metadata"]["successRate"] == 0.5
    )
    assert "[not_found]" in client.error(
        "update_lesson_success", {"lessonName": "nope", "success": True}
    )
    node = client.ok("open_nodes", {"names": ["PG_TIMEOUT"]})["entities"][0]
    assert node["entityType"] == "lesson"


def test_lesson_tools_show_counts_and_a_learned_diff_only_once_earned(client):
    learned = {
        "name": "POOL_LEAK", "entityType": "lesson", "observations": ["Close the pool."],
        "errorPattern": {"type": "PoolError", "message": "pool exhausted", "context": "pytest"},
        "metadata": {"severity": "low", "environment": {}, "frequency": 1, "successRate": 1.0},
        "verificationSteps": [],
        "learned": {"source": "episode", "review": "accepted", "reviewedBy": "a person",
                    "fix": {"files": ["app/db.py"],
                            "hunks": [{"path": "app/db.py", "diff": "+pool.close()"}]}},
    }  # fmt: skip
    client.ok("create_lesson", {"lesson": learned})
    query = {"errorPattern": {"type": "PoolError", "message": "pool exhausted"}}
    (match,) = client.ok("find_similar_errors", query)["lessons"]
    # a review state given to create_lesson is not taken: the lesson starts unreviewed
    assert match["learned"]["review"] == "pending" and "reviewedBy" not in match["learned"]
    assert match["trust"].startswith("learned once, not reviewed")
    assert match["learned"]["fix"]["hunks"] == [] and match["learned"]["hunksWithheld"] == 1
    assert match["uses"] == "worked 1 of 1 use"
    (change,) = [c for c in client.ok("changes", {"cursor": 0})["changes"] if c["kind"] == "lesson"]
    shown = change["record"]["metadata"]["details"]["extra"]["lesson"]["learned"]
    assert shown["fix"]["hunks"] == [] and "pool.close" not in json.dumps(change)
    client.ok("update_lesson_success", {"lessonName": "POOL_LEAK", "success": True})
    (match,) = client.ok("get_lesson_recommendations", {"context": "pool exhausted"})["lessons"]
    assert match["learned"]["fix"]["hunks"] == [{"path": "app/db.py", "diff": "+pool.close()"}]
    assert match["uses"] == "worked 2 of 2 uses" and "hunksWithheld" not in match["learned"]
    assert match["trust"] == "learned from sessions (fail, edit, pass), not reviewed yet"


@pytest.mark.slow
def test_search_nodes_by_meaning_with_the_real_model(tmp_path, real_embedder):
    """Queries that share no word with the answer: only the embedding can find them."""
    svc = MemoryService(Engine(tmp_path / "store", real_embedder))
    rt = runtime_on(svc, identity_env(tmp_path / "store", "proj", "agent-a"), tmp_path)
    entities = [
        {"name": "Dr_Okafor", "entityType": "person", "observations": ["Performs heart surgery at the city hospital"]},
        {"name": "Lena", "entityType": "person", "observations": ["Bakes sourdough bread every weekend"]},
        {"name": "Tom", "entityType": "person", "observations": ["Repairs vintage motorcycles in his garage"]},
        {"name": "Ines", "entityType": "person", "observations": ["Teaches violin to children"]},
        {"name": "Raj", "entityType": "person", "observations": ["Trades stocks and bonds for a hedge fund"]},
    ] + [
        {"name": f"Filler_{i}", "entityType": "thing", "observations": [f"Item number {i} in the catalogue"]}
        for i in range(40)
    ]  # fmt: skip
    with in_process(rt) as c:
        c.ok("create_entities", {"entities": entities})
        for query, expected in [
            ("cardiac surgeon", "Dr_Okafor"),
            ("who is a musician", "Ines"),
            ("someone who works in finance", "Raj"),
            ("fixes old bikes", "Tom"),
        ]:
            names = [
                e["name"] for e in c.ok("search_nodes", {"query": query, "limit": 3})["entities"]
            ]
            assert names[0] == expected, (query, names)
    svc.engine.close()
