"""The lessons a failed command gets (``failure_lessons.lessons_for_failure``): one search of
the lessons nearest the failure, those whose relevance clears the threshold, most relevant
first, at most ``CANDIDATES``, none shown twice in a session. Real SQLite and Chroma, the
deterministic hashing embedder."""

from __future__ import annotations

import copy

import pytest

from graph.learned import LearnedLessons
from server.service.core.identity import Identity
from server.service.graphs.graph_services import graph_services
from server.service.learning import failure_lessons as fl
from server.service.memories.memory import MemoryService
from server.service.prompting import hook_context as hc
from server.service.prompting.ledger import Ledger
from tests.hooks.test_hooks import LESSON

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


# ---------------------------------------------------------------------------- learned lessons
HUNK = "+    pool.close()  # SENTINEL-HUNK"


def learned(name: str = "PG_LEARNED", review: str = "pending") -> dict:
    out = lesson(name, ERROR.split(": ", 1)[1])
    out["metadata"].update(frequency=1, successRate=1.0)
    out["learned"] = {
        "source": "episode", "review": review, "session": "s1",
        "signature": {"digest": f"digest-{name}"}, "episodes": [f"ep-{name}"],
        "fix": {"explanation": "Start the db first.", "files": ["app/db.py"],
                "hunks": [{"path": "app/db.py", "diff": HUNK}]},
        "occurrences": 1, "alternatives": [],
    }  # fmt: skip
    return out


def failure_text(svc, gs, **kw) -> str:
    loose = hc.HookConfig(lesson_threshold=0.0, prompt_tokens=20_000)
    return fl.lessons_for_failure(svc, WHO, gs.lessons, ERROR, "pytest", config=loose, **kw).text


def test_a_lesson_learned_once_is_injected_marked_without_its_diff_and_with_counts(services):
    svc, gs = services
    LearnedLessons(gs.lessons).learn(WHO, learned(), "team")
    text = failure_text(svc, gs)
    assert "PG_LEARNED" in text and "learned once, not reviewed" in text
    assert "worked 1 of 1 use" in text and "%" not in text
    assert "SENTINEL-HUNK" not in text and "diff app/db.py" not in text
    briefed = fl.useful_lessons(svc, WHO, gs.lessons)  # SessionStart shows it the same way
    assert len(briefed) == 1 and "learned once, not reviewed" in briefed[0][1]
    assert "SENTINEL-HUNK" not in briefed[0][1]
    # PATTERN_AUTO_LESSONS=review: not injected at all until a person accepts it
    assert failure_text(svc, gs, pending=False) == ""
    assert fl.useful_lessons(svc, WHO, gs.lessons, pending=False) == []


def test_a_learned_lesson_shows_its_diff_after_a_second_success(services):
    svc, gs = services
    LearnedLessons(gs.lessons).learn(WHO, learned(), "team")
    gs.lessons.update_lesson_success(WHO, "PG_LEARNED", True)
    text = failure_text(svc, gs)
    assert "SENTINEL-HUNK" in text and "worked 2 of 2 uses" in text
    assert "not reviewed yet" in text and "learned once" not in text


def test_a_learned_lesson_a_person_accepted_shows_its_diff(services):
    svc, gs = services
    LearnedLessons(gs.lessons).learn(WHO, learned(), "team")
    gs.lessons.update_lesson_success(WHO, "PG_LEARNED", False)  # one success, one failure
    assert "SENTINEL-HUNK" not in failure_text(svc, gs)
    LearnedLessons(gs.lessons).review(WHO, "PG_LEARNED", "accept", scope="team")
    text = failure_text(svc, gs)
    assert "SENTINEL-HUNK" in text and "accepted by a person" in text
    assert "worked 1 of 2 uses" in text


def test_every_lesson_says_how_often_it_worked_as_counts(services):
    svc, gs = services
    by_hand = lesson("PG_REFUSED", ERROR.split(": ", 1)[1])
    by_hand["metadata"].update(frequency=4, successRate=0.75)
    gs.lessons.create_lesson(WHO, by_hand)
    text = failure_text(svc, gs)
    assert "worked 3 of 4 uses" in text and "%" not in text and "learned" not in text


def test_the_prompt_hook_says_a_lesson_was_learned_once_and_review_mode_leaves_it_out(services):
    svc, gs = services
    LearnedLessons(gs.lessons).learn(WHO, learned(), "team")
    loose = hc.HookConfig(threshold=0.0, prompt_tokens=20_000)
    prompt = "postgres connection refused on port 5432"
    sel = hc.select_for_prompt(svc, WHO, prompt, config=loose)
    assert [p.record.entity_name for p in sel.picked] == ["PG_LEARNED"]
    assert "learned once, not reviewed" in sel.text and "SENTINEL-HUNK" not in sel.text
    quiet = hc.select_for_prompt(svc, WHO, prompt, config=loose, pending=False)
    assert quiet.picked == [] and "nobody accepted" in quiet.decisions[0].verdict


def test_hook_preview_leaves_out_what_review_mode_leaves_out(services):
    from server.service.prompting.hook_preview import preview

    svc, gs = services
    LearnedLessons(gs.lessons).learn(WHO, learned(), "team")
    loose = hc.HookConfig(threshold=0.0, prompt_tokens=20_000)
    prompt = "postgres connection refused on port 5432"
    shown = preview(svc, WHO, prompt, config=loose)
    assert len(shown.injected) == 1 and "learned once, not reviewed" in shown.text
    quiet = preview(svc, WHO, prompt, config=loose, pending=False)
    assert quiet.injected == [] and quiet.text == ""
    assert "nobody accepted" in quiet.candidates[0].verdict
