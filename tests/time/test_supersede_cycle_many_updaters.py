"""``supersede`` never closes a cycle, however many records already update the newer one (the
cycle check stopped after 200 records seen, before looking at the one it was looking for: a
record updated by 200 others could be made to update its own updater, and then both read as
outdated)."""

from __future__ import annotations

import uuid

import pytest

from retrieval.timeline import links
from server.service.core.errors import InvalidInput
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from server.service.memories.memory import MemoryService
from server.service.updating import supersede
from tests.conftest import T0

A = Identity(project_id="proj", agent_id="agent-a")


@pytest.fixture
def svc(engine) -> MemoryService:
    return MemoryService(engine, clock=lambda: T0)


def remember(svc, text):
    return svc.remember(A, MemoryInput(content=text, scope="team")).memoryId


@pytest.mark.parametrize("updaters", [3, links.MAX_CHAIN * 4 + 1, 1000])
def test_a_link_back_to_an_updater_is_refused_whatever_else_updates_it(svc, updaters):
    old = remember(svc, "the build runs on Jenkins")
    new = remember(svc, "the build runs on GitHub Actions")
    supersede.link(svc, A, old, new)  # new updates old
    bucket = svc.store.get([old])[old].bucket
    with svc.store.transaction() as conn:  # as many supersede calls naming ``old`` would
        for _ in range(updaters):
            links.write(conn, old, str(uuid.uuid4()), bucket, "stated", A.agent_id)
    with pytest.raises(InvalidInput, match="cycle"):
        supersede.link(svc, A, new, old)  # old would update new: a cycle
    assert links.active(svc.store.reader, new, old) is None
