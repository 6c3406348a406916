"""An entity's observations are an add-wins set: concurrent adds keep both, and a delete made
from revision R removes only observations its writer saw (added at or before R)."""

from __future__ import annotations

import pytest

from graph.entities import GraphService
from retrieval.embedding.embedder import HashEmbedder
from retrieval.storage.buckets import bucket_of
from tests.race_util import race

pytestmark = pytest.mark.backends("sqlite", "postgres")


class Who:
    def __init__(self, agent: str) -> None:
        self.project_id, self.agent_id = "proj", agent

    def bucket(self, scope: str) -> str:
        return bucket_of(scope, self.project_id, self.agent_id)


ALICE, BOB = Who("alice"), Who("bob")


@pytest.fixture
def graph(open_engine):
    g = GraphService(open_engine(HashEmbedder()))
    g.create_entities(ALICE, [{"name": "Build", "entityType": "system", "observations": ["X"]}])
    return g


def node(g: GraphService) -> dict:
    return g.open_nodes(ALICE, ["Build"]).entities[0].model_dump()


def test_revisions_go_up_with_each_change(graph):
    assert node(graph)["revision"] == 0
    out = graph.add_observations(BOB, [{"entityName": "Build", "contents": ["Y"]}])
    assert out.results[0].revision == 1 and node(graph)["revision"] == 1
    graph.delete_observations(BOB, [{"entityName": "Build", "observations": ["Y"]}])
    assert node(graph) == {"name": "Build", "entityType": "system", "observations": ["X"],
                           "revision": 2}  # fmt: skip


def test_add_add_keeps_both(graph):
    adds = [(ALICE, "A1"), (BOB, "B1")]
    out = race(2, lambda i: graph.add_observations(
        adds[i][0], [{"entityName": "Build", "contents": [adds[i][1]]}]))  # fmt: skip
    assert not [r for r in out if isinstance(r, Exception)], out
    assert sorted(node(graph)["observations"]) == ["A1", "B1", "X"]
    assert node(graph)["revision"] == 2


def test_a_delete_removes_only_what_its_writer_saw(graph):
    seen = node(graph)["revision"]  # Bob reads: ["X"]
    graph.add_observations(ALICE, [{"entityName": "Build", "contents": ["Y"]}])  # unseen by Bob
    res = graph.delete_observations(
        BOB, [{"entityName": "Build", "observations": ["X", "Y"], "expectedRevision": seen}]
    )
    assert res.deleted == 1
    assert [k.model_dump() for k in res.kept] == [
        {"entityName": "Build", "observations": ["Y"], "expectedRevision": None}
    ]
    assert node(graph)["observations"] == ["Y"]


def test_an_add_of_an_existing_observation_wins_over_an_older_delete(graph):
    seen = node(graph)["revision"]
    out = graph.add_observations(ALICE, [{"entityName": "Build", "contents": ["X"]}])
    assert out.results[0].addedObservations == []  # already there: re-asserted, not added
    res = graph.delete_observations(
        BOB, [{"entityName": "Build", "observations": ["X"], "expectedRevision": seen}]
    )
    assert res.deleted == 0 and res.kept[0].observations == ["X"]
    assert node(graph)["observations"] == ["X"]
    # a delete from a read that saw the re-assertion removes it
    res = graph.delete_observations(
        BOB, [{"entityName": "Build", "observations": ["X"],
               "expectedRevision": node(graph)["revision"]}],
    )  # fmt: skip
    assert res.deleted == 1 and node(graph)["observations"] == []


def test_without_expected_revision_every_match_is_deleted(graph):
    graph.add_observations(ALICE, [{"entityName": "Build", "contents": ["Y"]}])
    res = graph.delete_observations(BOB, [{"entityName": "Build", "observations": ["X", "Y"]}])
    assert res.deleted == 2 and res.kept == []


def test_a_write_planned_before_another_commit_plans_again(graph):
    """The revision read is checked inside the transaction: an add committed between a delete's
    read and its write makes the delete plan again, and the unseen add survives."""
    seen = node(graph)["revision"]
    real_apply = graph.engine.apply
    done = []

    def apply(*args, **kw):
        if not done:  # another writer commits between this write's plan and its transaction
            done.append(1)
            graph.engine.apply = real_apply
            graph.add_observations(ALICE, [{"entityName": "Build", "contents": ["X"]}])
            graph.engine.apply = apply
        return real_apply(*args, **kw)

    graph.engine.apply = apply
    res = graph.delete_observations(
        BOB, [{"entityName": "Build", "observations": ["X"], "expectedRevision": seen}]
    )
    graph.engine.apply = real_apply
    assert res.deleted == 0 and node(graph)["observations"] == ["X"]


def recreate(g: GraphService, observations: list[str]) -> None:
    g.delete_entities(ALICE, ["Build"])
    g.create_entities(
        ALICE, [{"name": "Build", "entityType": "system", "observations": observations}]
    )


def test_a_revision_read_before_a_re_create_removes_nothing_added_after(graph):
    """A name deleted and created again continues its revisions: a delete made from a read of
    the old entity removes nothing the new one was given, at creation or since."""
    graph.add_observations(ALICE, [{"entityName": "Build", "contents": ["Y"]}])
    seen = node(graph)["revision"]  # Bob reads the old entity: ["X", "Y"]
    recreate(graph, ["X"])
    graph.add_observations(ALICE, [{"entityName": "Build", "contents": ["Y", "Z"]}])
    res = graph.delete_observations(
        BOB, [{"entityName": "Build", "observations": ["X", "Y", "Z"], "expectedRevision": seen}]
    )
    assert res.deleted == 0 and sorted(res.kept[0].observations) == ["X", "Y", "Z"]
    assert node(graph)["observations"] == ["X", "Y", "Z"]


def test_a_names_revisions_never_repeat_across_delete_and_re_create(graph):
    seen = [node(graph)["revision"]]
    for i in range(3):
        out = graph.add_observations(ALICE, [{"entityName": "Build", "contents": [f"A{i}"]}])
        seen.append(out.results[0].revision)
        recreate(graph, [f"C{i}"] if i % 2 else [])
        seen.append(node(graph)["revision"])
    assert seen == sorted(set(seen)), seen  # strictly increasing
    # a delete from the current read still removes what it saw
    res = graph.delete_observations(
        BOB, [{"entityName": "Build", "observations": ["C1"], "expectedRevision": seen[-1]}]
    )
    assert res.deleted == 0  # C1 belonged to an earlier incarnation: gone with it
    graph.add_observations(ALICE, [{"entityName": "Build", "contents": ["D"]}])
    res = graph.delete_observations(
        BOB, [{"entityName": "Build", "observations": ["D"],
               "expectedRevision": node(graph)["revision"]}],
    )  # fmt: skip
    assert res.deleted == 1 and node(graph)["observations"] == []
