"""The review inbox's lessons learned from sessions (``server/service/learning/lesson_review.py``,
``server/ui/review_views.py``): listed with their fix, accepted, edited, merged, rejected."""

from __future__ import annotations

import pytest

from graph.learned import LearnedLessons
from server.service.core.errors import InvalidInput
from server.service.learning import lesson_review
from tests.ui_util import UiHarness, csrf_of


def learned_lesson(name: str, digest: str, message: str, file: str) -> dict:
    return {
        "name": name, "entityType": "lesson",
        "observations": [f"Fixed: close the pool in {file}.", f"Fixed by changing {file}."],
        "errorPattern": {"type": "PoolError", "message": message, "context": "tests/test_db.py::test_pool"},
        "metadata": {"severity": "medium", "environment": {}, "frequency": 1, "successRate": 1.0},
        "verificationSteps": [{"command": "pytest tests/test_db.py", "expectedOutput": "3 passed",
                               "successIndicators": ["exit status 0"]}],
        "learned": {"source": "episode", "review": "pending", "session": f"sess-{name}",
                    "signature": {"digest": digest}, "episodes": [f"ep-{name}"],
                    "fix": {"explanation": f"Fixed: close the pool in {file}.", "files": [file],
                            "hunks": [{"path": file, "diff": "-    pool.open()\n+    pool.close()"}]},
                    "occurrences": 1, "alternatives": []},
    }  # fmt: skip


@pytest.fixture
def harness(tmp_path):
    h = UiHarness(tmp_path / "store")
    learned = LearnedLessons(h.rt.graphs.lessons)
    who = h.rt.identity
    for name, digest, file in (("POOL_A", "d1", "app/db.py"), ("POOL_B", "d2", "app/pool.py"),
                               ("POOL_C", "d3", "app/conn.py")):  # fmt: skip
        learned.learn(who, learned_lesson(name, digest, f"pool closed ({name})", file), "team")
    yield h
    h.close()


def test_the_inbox_lists_learned_lessons_and_decides_them(harness):
    h = harness
    owner = h.owner()
    page = owner.get("/ui/review").text
    assert "Lessons learned from sessions" in page
    for text in (
        "POOL_A",
        "Fixed: close the pool in app/db.py.",
        "+    pool.close()",
        "sess-POOL_B",
    ):
        assert text in page
    assert '<span class="badge"' in page and ">3</span>" in page
    token = csrf_of(owner)

    def post(**data):
        r = owner.post("/ui/review/lessons", data={"csrf": token, **data})
        assert r.status_code == 303, r.text
        return r.headers["location"]

    assert post(name="POOL_A", action="accept").endswith("msg=lesson-accepted")
    assert post(name="POOL_B", action="edit", observations="Close the pool\r\nthen reopen it")
    assert post(name="POOL_C", action="merge", target="POOL_A").endswith("msg=lesson-merged")
    gs, who = h.rt.graphs, h.rt.identity
    assert gs.lessons.get(who, "POOL_B").observations == ["Close the pool", "then reopen it"]
    a = gs.lessons.get(who, "POOL_A")
    assert a.model_extra["learned"]["alternatives"][0]["files"] == ["app/conn.py"]
    assert "Lessons learned from sessions" not in owner.get("/ui/review").text  # none pending
    assert lesson_review.decide(gs, who, "POOL_B", "reject", reason="a wrong fix") == "rejected"
    assert [lesson.name for lesson in gs.lessons.all_lessons(who.bucket("team"))] == ["POOL_A"]


def test_decisions_are_checked(harness):
    gs, who = harness.rt.graphs, harness.rt.identity
    with pytest.raises(InvalidInput):
        lesson_review.decide(gs, who, "POOL_A", "reject", reason="  ")
    with pytest.raises(InvalidInput):
        lesson_review.decide(gs, who, "POOL_A", "merge")
    with pytest.raises(InvalidInput):
        lesson_review.decide(gs, who, "POOL_A", "edit", observations=[""])
    with pytest.raises(InvalidInput):
        lesson_review.decide(gs, who, "POOL_A", "approve")
    assert lesson_review.count_pending(gs, who) == 3
