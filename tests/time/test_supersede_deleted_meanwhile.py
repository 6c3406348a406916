"""A record deleted while ``supersede`` links it: no link row is left pointing at a record that
is gone (the older one would stay marked "updated by" a record nobody can read, and never be
offered as a candidate again), and the call says the record is gone."""

from __future__ import annotations

from datetime import timedelta

import pytest

from server.service.core.errors import NotFound
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from server.service.memories.memory import MemoryService
from server.service.updating import supersede
from tests.conftest import T0

A = Identity(project_id="proj", agent_id="agent-a")


class Clock:
    """Each call a day later; ``meanwhile`` runs once at the next call (between the checks of a
    link and its write, where another caller's delete can land)."""

    def __init__(self) -> None:
        self.now, self.meanwhile = T0, None

    def __call__(self):
        if (act := self.meanwhile) is not None:
            self.meanwhile = None
            act()
        self.now += timedelta(days=1)
        return self.now


@pytest.fixture
def svc(engine) -> MemoryService:
    return MemoryService(engine, clock=Clock())


def remember(svc, text):
    return svc.remember(A, MemoryInput(content=text, scope="team")).memoryId


def link_rows(svc) -> list[tuple[str, str]]:
    return svc.store.reader.execute("SELECT older_id, newer_id FROM record_links").fetchall()


@pytest.mark.parametrize("gone", ["older", "newer"])
def test_a_record_deleted_before_the_link_is_written_leaves_no_link(svc, gone):
    old = remember(svc, "lint with flake8")
    new = remember(svc, "lint with ruff")
    svc.clock.meanwhile = lambda: svc.forget(A, old if gone == "older" else new)
    with pytest.raises(NotFound):
        supersede.link(svc, A, old, new)
    assert link_rows(svc) == []
    kept = old if gone == "newer" else new
    assert svc.store.get([kept])[kept].updated_by is None


def test_a_write_whose_stated_older_memory_is_deleted_meanwhile_stores_nothing(svc):
    old = remember(svc, "lint with flake8")
    embed = svc.engine.embed

    def embed_after_a_delete(recs):  # the write embeds between its checks and its transaction
        svc.engine.embed = embed
        svc.forget(A, old)
        return embed(recs)

    svc.engine.embed = embed_after_a_delete
    with pytest.raises(NotFound):
        svc.remember(A, MemoryInput(content="lint with ruff", scope="team", supersedes=[old]))
    assert link_rows(svc) == []
    assert svc.store.reader.execute("SELECT count(*) FROM records").fetchone()[0] == 0
