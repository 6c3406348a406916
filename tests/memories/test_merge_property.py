"""Property: agents editing one memory and one entity from random stale revisions never lose an
acknowledged edit.

Each step is one agent's write made from a revision it read earlier (0-3 revisions behind the
stored one): insert a unique word into the text at a random place, add a unique tag, remove a tag
it added itself, add a unique observation, or delete an observation it added itself (with the
entity revision it read). Afterwards every acknowledged word is in the text exactly once and no
unacknowledged one is; every acknowledged tag and observation is present unless its own writer
removed it later.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from graph.entities import GraphService
from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from server.service.core.errors import Conflict, InvalidInput
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from server.service.memories.memory import MemoryService

AGENT = Identity(project_id="p", agent_id="owner")  # a memory is edited by its creator's sessions
TEXT = "the build uses make. tests run with pytest. deploys go out on fridays after review."

step = st.tuples(
    st.sampled_from(["word", "word", "tag", "untag", "obs", "unobs"]),
    st.integers(0, 3),  # how many revisions behind the stored one the writer read
    st.integers(0, 40),  # where (word position) / which own item
)


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    engine = Engine(tmp_path_factory.mktemp("prop") / "store", HashEmbedder())
    yield MemoryService(engine), GraphService(engine)
    engine.close()


def stale(svc: MemoryService, mid: str, back: int) -> tuple[int, str, list[str]]:
    """A revision ``back`` behind the stored one, as the store still holds it."""
    now = svc.store.get_one(mid)
    rev = max(1, now.revision - back)
    row = svc.store.reader.execute(
        "SELECT content, metadata FROM record_revisions WHERE record_id=? AND revision=?",
        (mid, rev),
    ).fetchone()
    if row is None:  # never updated yet: the history starts with the first update
        return now.revision, now.content, now.tags
    return rev, row[0], json.loads(row[1]).get("tags", [])


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(step, min_size=4, max_size=24))
def test_no_acknowledged_edit_is_lost(services, steps):
    svc, graph = services
    mid = svc.remember(AGENT, MemoryInput(content=TEXT)).memoryId
    entity = f"E{mid[-12:]}"  # the random end of the id: one entity per example
    graph.create_entities(AGENT, [{"name": entity, "entityType": "t", "observations": []}])
    words, tags, obs = set(), {}, {}  # acknowledged: token; tag -> live?; observation -> live?
    seen_entity = [0]  # entity revisions read earlier (the stale reads a deleter works from)
    for i, (kind, back, where) in enumerate(steps):
        token = f"w{i}x"
        try:
            if kind == "word":
                rev, base, _ = stale(svc, mid, back)
                parts = base.split(" ")
                parts.insert(where % (len(parts) + 1), token)
                svc.update_memory(AGENT, mid, content=" ".join(parts), expected_revision=rev)
                words.add(token)
            elif kind == "tag":
                rev, _, base_tags = stale(svc, mid, back)
                svc.update_memory(AGENT, mid, metadata={"tags": [*base_tags, token]},
                                  expected_revision=rev)  # fmt: skip
                tags[token] = True
            elif kind == "untag":
                rev, _, base_tags = stale(svc, mid, back)
                mine = [t for t in base_tags if t in tags]  # only a tag this test's writer added
                if not mine:
                    continue
                drop = mine[where % len(mine)]
                svc.update_memory(AGENT, mid, metadata={"tags": [t for t in base_tags if t != drop]},
                                  expected_revision=rev)  # fmt: skip
                tags[drop] = False
            elif kind == "obs":
                out = graph.add_observations(AGENT, [{"entityName": entity, "contents": [token]}])
                obs[token] = True
                seen_entity.append(out.results[0].revision)
            else:
                live = [o for o, alive in obs.items() if alive]
                if not live:
                    continue
                drop = live[where % len(live)]
                read = seen_entity[max(0, len(seen_entity) - 1 - back)]
                res = graph.delete_observations(AGENT, [{"entityName": entity,
                                                         "observations": [drop],
                                                         "expectedRevision": read}])  # fmt: skip
                obs[drop] = res.deleted == 0  # kept when added after the revision read
        except (Conflict, InvalidInput) as exc:  # not acknowledged (overlap, or the tag limit)
            event(f"refused {kind}: {exc.data.get('reason', exc.code)}")
            continue
        event(f"acknowledged {kind}")
    final = svc.store.get_one(mid)
    text_tokens = [w for w in final.content.split() if w.startswith("w") and w.endswith("x")]
    assert sorted(text_tokens) == sorted(words)  # each acknowledged word once, nothing else
    assert {t for t, alive in tags.items() if alive} <= set(final.tags)
    assert not {t for t, alive in tags.items() if not alive} & set(final.tags)
    have = set(graph.open_nodes(AGENT, [entity]).entities[0].observations)
    assert have == {o for o, alive in obs.items() if alive}
