"""What a lesson has earned, as it is shown (``graph/lesson_trust.py``), and the readers of
stored flags (``graph/withheld.py``, ``server/service/recalling/withheld.py``), with any stored shape:
a ``learned`` block is whatever a caller of ``create_lesson`` sent, a record's metadata and a
flag's reason whatever a store holds. None of them raises; none shows a diff a fix has not
earned; counts are counts."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from graph import lesson_trust as lt
from graph.lesson_models import Lesson
from graph.withheld import checked, flag_of, withheld_note
from server.service.core.identity import Identity
from server.service.graphs.graph_services import graph_services
from server.service.memories.memory import MemoryService
from server.service.recalling.withheld import brief
from tests.hooks.test_hooks import LESSON

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),  # fmt: skip
    max_leaves=12,
)
FIXES = st.fixed_dictionaries(
    {"hunks": st.lists(st.fixed_dictionaries({"path": st.text(max_size=5),
                                              "diff": st.just("+SENTINEL")}), max_size=3)},
    optional={"files": JSON, "count": JSON},
)  # fmt: skip
BLOCKS = st.fixed_dictionaries(
    {},
    optional={"review": st.sampled_from(["pending", "accepted", "rejected"]) | JSON,
              "fix": FIXES | JSON, "alternatives": st.lists(FIXES | JSON, max_size=3) | JSON},
)  # fmt: skip


def lesson_with(block, rate: float, frequency: int) -> Lesson:
    doc = {**json.loads(json.dumps(LESSON)), "learned": block}
    doc["metadata"] = {**doc["metadata"], "successRate": rate, "frequency": frequency}
    return Lesson.model_validate(doc)


@settings(max_examples=60, deadline=None)
@given(BLOCKS, st.floats(0, 1), st.integers(0, 10**6))
def test_a_learned_block_of_any_shape_never_shows_an_unearned_diff(block, rate, frequency):
    lesson = lesson_with(block, rate, frequency)
    shown = lt.shown_block(lesson)
    note = lt.note(lesson)
    hunks = lt.shown_hunks(lesson)
    assert isinstance(note, str) and isinstance(shown, dict)
    if not lt.confirmed(lesson):
        assert hunks == [] and note.startswith(lt.LEARNED_ONCE)
        fix = shown.get("fix")
        assert not (isinstance(fix, dict) and fix.get("hunks"))
    if block.get("review") != "accepted":
        for alt in shown.get("alternatives") if isinstance(shown.get("alternatives"), list) else []:
            count = alt.get("count") if isinstance(alt, dict) else None
            if isinstance(alt, dict) and not (isinstance(count, int | float) and count >= 2):
                assert not alt.get("hunks")


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 10**6), st.data())
def test_uses_are_counts_of_a_running_mean(n, data):
    k = data.draw(st.integers(0, n))
    assert lt.uses(k / n, n) == f"worked {k} of {n} {'use' if n == 1 else 'uses'}"


@settings(max_examples=60, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False), st.integers(-5, 10**9))
def test_uses_of_any_stored_numbers_is_one_line(rate, frequency):
    text = lt.uses(rate, frequency)
    assert text and "\n" not in text


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300) | JSON.map(json.dumps) | JSON)
def test_a_flag_is_read_from_any_stored_metadata(metadata):
    reason = flag_of(metadata)
    assert reason is None or isinstance(reason, str)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=400))
def test_a_brief_reason_quotes_nothing_and_is_one_line(reason):
    out = brief(reason)
    assert out is None or ("“" not in out and "\n" not in out and len(out) <= 201)
    assert brief(f"override, action: “{reason}”") == "override, action"


def test_a_name_check_that_fails_leaves_the_name_out():
    def broken(text: str) -> str | None:
        raise RecursionError("deep")

    assert checked(broken, "billing-service").startswith("not scanned")
    assert checked(None, "billing-service") is None
    assert withheld_note({"entity": 0}) == ""
    assert "2 entities, 1 relation" in withheld_note({"entity": 2, "relation": 1})


def test_a_lesson_row_that_cannot_be_read_is_left_out_and_the_query_answers(engine):
    svc = MemoryService(engine)
    gs = graph_services(svc)
    who = Identity(project_id="proj", agent_id="agent-1")
    gs.lessons.create_lesson(who, LESSON)
    gs.lessons.create_lesson(who, {**LESSON, "name": "PG_BROKEN"})
    with svc.store.transaction() as conn:
        conn.execute("UPDATE lessons SET environment='{not json' WHERE name='PG_BROKEN'")
    query = {"type": "OperationalError", "message": "connection refused port 5432"}
    res = gs.lessons.find_similar_errors(who, query)
    assert [m.name for m in res.lessons] == ["PG_TIMEOUT"]
