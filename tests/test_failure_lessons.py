"""The lessons a failed command gets (``failure_lessons.lessons_for_failure``): one search of
the lessons nearest the failure, those whose relevance clears the threshold, most relevant
first, at most ``CANDIDATES``, none shown twice in a session. Real SQLite and Chroma, the
deterministic hashing embedder."""

from __future__ import annotations

import copy

import pytest

from server.service import failure_lessons as fl
from server.service import hook_context as hc
from server.service.graph_services import graph_services
from server.service.identity import Identity
from server.service.ledger import Ledger
from server.service.memory import MemoryService
from tests.test_hooks import LESSON

WHO = Identity(project_id="proj", agent_id="agent-1")
ERROR = "OperationalError: connection to server at localhost port 5432 failed: Connection refused"


def lesson(name: str, message: str) -> dict:
    out = copy.deepcopy(LESSON)
    out["name"] = name
    out["errorPattern"]["message"] = message
    return out


@pytest.fixture
def services(engine):
    svc = MemoryService(engine)
    return svc, graph_services(svc)


def test_the_most_relevant_lessons_first_and_at_most_the_candidates(services):
    svc, gs = services
    gs.lessons.create_lesson(WHO, lesson("PG_REFUSED", ERROR.split(": ", 1)[1]))
    gs.lessons.create_lesson(WHO, lesson("PG_OTHER", "connection to server failed"))
    for i in range(fl.CANDIDATES + 2):
        gs.lessons.create_lesson(WHO, lesson(f"UNRELATED_{i}", f"disk quota {i} exceeded on /var"))
    everything = hc.HookConfig(lesson_threshold=0.0, prompt_tokens=20_000)
    sel = fl.lessons_for_failure(svc, WHO, gs.lessons, ERROR, "pytest", config=everything)
    assert sel.candidates == fl.CANDIDATES
    names = [p.record.entity_name for p in sel.picked]
    assert names[:2] == ["PG_REFUSED", "PG_OTHER"]
    assert [p.relevance for p in sel.picked] == sorted(
        (p.relevance for p in sel.picked), reverse=True
    )
    assert "PG_REFUSED: OperationalError" in sel.text and "pg_isready" in sel.text


def test_below_the_threshold_nothing_and_a_session_never_sees_one_twice(services):
    svc, gs = services
    gs.lessons.create_lesson(WHO, lesson("PG_REFUSED", ERROR.split(": ", 1)[1]))
    strict = hc.HookConfig(lesson_threshold=2.0)
    assert fl.lessons_for_failure(svc, WHO, gs.lessons, ERROR, "pytest", config=strict).picked == []
    ledger = Ledger(svc, "session-1")
    loose = hc.HookConfig(lesson_threshold=0.0)
    first = fl.lessons_for_failure(
        svc, WHO, gs.lessons, ERROR, "pytest", config=loose, ledger=ledger
    )
    assert [p.record.entity_name for p in first.picked] == ["PG_REFUSED"]
    ledger.add([p.record.id for p in first.picked])
    again = fl.lessons_for_failure(
        svc, WHO, gs.lessons, ERROR, "pytest", config=loose, ledger=ledger
    )
    assert again.picked == [] and again.text == ""
