"""The graph service below MCP: storage layout, scopes, atomicity (hashing embedder)."""

from __future__ import annotations

import pytest

from graph.common import MAX_BATCH
from graph.entities import GraphService
from graph.search import search_nodes
from retrieval.embedding.embedder import HashEmbedder
from retrieval.errors import InvalidInput, NotFound
from retrieval.records import Kind, RecordFilter, Scope
from retrieval.storage.buckets import bucket_of


class Who:
    def __init__(self, project: str = "proj", agent: str = "agent") -> None:
        self.project_id, self.agent_id = project, agent

    def bucket(self, scope: str) -> str:
        return bucket_of(scope, self.project_id, self.agent_id)


pytestmark = pytest.mark.backends("sqlite", "postgres")


@pytest.fixture
def graph(open_engine):
    return GraphService(open_engine(HashEmbedder()))


def test_observations_are_embedded_records_of_the_team_bucket(graph):
    who = Who()
    graph.create_entities(
        who, [{"name": "CategoryPlot", "entityType": "class", "observations": ["Draws bars"]}]
    )
    recs = graph.store.list(RecordFilter(kinds=[Kind.observation]))
    assert len(recs) == 1
    rec = recs[0]
    assert (rec.scope, rec.bucket, rec.entity_name, rec.category) == (
        Scope.team,
        "team/proj",
        "CategoryPlot",
        "observation",
    )
    assert (
        "CategoryPlot (class)" in rec.context and "category plot" in rec.context
    )  # name, type, parts
    assert graph.store.integrity_check() == []
    # hybrid search sees name, type and observation through the record
    hits = graph.engine.search("category plot class", RecordFilter(kinds=[Kind.observation]))
    assert hits and hits[0].record.id == rec.id


def test_one_graph_per_scope_and_project(graph):
    alice, bob, other = Who("proj", "alice"), Who("proj", "bob"), Who("elsewhere", "carol")
    graph.create_entities(
        alice, [{"name": "Shared", "entityType": "note", "observations": ["team fact"]}]
    )
    graph.create_entities(
        alice, [{"name": "Secret", "entityType": "note", "observations": ["mine"]}], scope="private"
    )
    assert [e.name for e in graph.read_graph(bob).entities] == [
        "Shared"
    ]  # same project, team graph
    assert graph.read_graph(other).entities == []
    assert graph.read_graph(bob, scope="private").entities == []
    assert [e.name for e in graph.read_graph(alice, scope="private").entities] == ["Secret"]
    # bob may extend the team graph (it is shared like the official single-file graph)
    graph.add_observations(bob, [{"entityName": "Shared", "contents": ["bob adds"]}])
    assert graph.open_nodes(alice, ["Shared"]).entities[0].observations == ["team fact", "bob adds"]
    assert search_nodes(graph, other, "team fact").entities == []
    with pytest.raises(InvalidInput):
        graph.read_graph(alice, scope="galaxy")


def test_a_failed_write_leaves_nothing_behind(graph, monkeypatch):
    who = Who()
    graph.create_entities(who, [{"name": "A", "entityType": "t", "observations": []}])

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(graph, "insert_entity", boom)
    with pytest.raises(RuntimeError):
        graph.create_entities(who, [{"name": "B", "entityType": "t", "observations": ["b1", "b2"]}])
    monkeypatch.undo()
    assert [e.name for e in graph.read_graph(who).entities] == ["A"]
    assert graph.store.count(RecordFilter(kinds=[Kind.observation])) == 0  # records rolled back too
    assert graph.store.integrity_check() == []


def test_validation_errors_are_clear(graph):
    who = Who()
    with pytest.raises(InvalidInput, match="create_lesson"):
        graph.create_entities(who, [{"name": "L", "entityType": "lesson", "observations": []}])
    with pytest.raises(InvalidInput, match="32 KB"):
        graph.create_entities(
            who, [{"name": "Big", "entityType": "t", "observations": ["x" * 40_000]}]
        )
    with pytest.raises(InvalidInput, match="non-empty"):
        graph.create_entities(who, [{"name": "Empty", "entityType": "t", "observations": ["  "]}])
    with pytest.raises(NotFound, match="'Nope'"):
        graph.add_observations(who, [{"entityName": "Nope", "contents": ["x"]}])
    assert graph.read_graph(who).totalEntities == 0
    with pytest.raises(InvalidInput, match="limit"):
        graph.read_graph(who, limit=0)
    with pytest.raises(InvalidInput):
        search_nodes(graph, who, "   ")


def test_every_graph_write_bounds_its_batch(graph):
    who = Who()
    over = MAX_BATCH + 1
    relation = {"from": "A", "to": "B", "relationType": "uses"}
    entities = [{"name": f"E{i}", "entityType": "t", "observations": []} for i in range(over)]
    calls = [
        ("entities", lambda: graph.create_entities(who, entities)),
        ("relations", lambda: graph.create_relations(who, [relation] * over)),
        ("relations", lambda: graph.delete_relations(who, [relation] * over)),
        ("observation groups", lambda: graph.add_observations(
            who, [{"entityName": "A", "contents": ["x"]}] * over)),
        ("deletion groups", lambda: graph.delete_observations(
            who, [{"entityName": "A", "observations": ["x"]}] * over)),
    ]  # fmt: skip
    for what, call in calls:
        with pytest.raises(InvalidInput, match=f"at most {MAX_BATCH} {what} per call"):
            call()
    assert graph.read_graph(who).totalEntities == 0


def test_secret_screening_is_applied_to_observations(open_engine):
    def screen(text):
        if "hunter2" in text:
            return text.replace("hunter2", "[REDACTED:password]"), ["looks like a password"]
        return text, []

    graph = GraphService(open_engine(HashEmbedder()), screen=screen)
    who = Who()
    out = graph.create_entities(
        who, [{"name": "Db", "entityType": "service", "observations": ["password hunter2"]}]
    )
    assert out.warnings and out.created[0].observations == ["password [REDACTED:password]"]
    assert graph.open_nodes(who, ["Db"]).entities[0].observations == [
        "password [REDACTED:password]"
    ]
