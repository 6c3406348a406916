"""The time prior in the ranking: records from the window a query names come first among
equally relevant ones; a prior, not a filter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from retrieval.records import Record, RecordFilter, Scope
from retrieval.timeexpr import Window
from retrieval.timeprior import membership

NOW = datetime(2024, 5, 15, 12, 0, tzinfo=UTC)  # a Wednesday


def rec(text: str, days_ago: float) -> Record:
    when = NOW - timedelta(days=days_ago)
    return Record(project_id="p", agent_id="a", scope=Scope.team, content=text,
                  created_at=when, updated_at=when)  # fmt: skip


def ids(engine, query: str, k: int = 3, now=NOW) -> list[str]:
    hits = engine.search(query, RecordFilter(now=now), k, mode="lexical")
    return [h.record.content for h in hits]


def test_membership_is_soft_outside_the_window():
    w = Window(datetime(2024, 5, 6, tzinfo=UTC), datetime(2024, 5, 13, tzinfo=UTC), "last week")
    t = np.array([datetime(2024, 5, d, tzinfo=UTC).timestamp() for d in (8, 13, 14, 16, 20)])
    m = membership(t, w)
    assert m[0] == 1.0 and 0 < m[2] < m[1] <= 1.0 and m[3] < m[2] and m[4] == 0.0


def test_last_week_weighs_last_weeks_record(engine):
    engine.add([rec("we decided to use the blue logo", 30),
                rec("we decided to use the green logo", 8),  # last week (Mon 6 - Sun 12 May)
                rec("we decided to use the red logo", 1)])  # fmt: skip
    assert ids(engine, "which logo did we decide on last week?")[0].endswith("green logo")
    assert ids(engine, "which logo did we decide on in April?")[0].endswith("blue logo")
    # the same question asked a month later reads "last week" anew
    later = NOW + timedelta(days=28)
    assert ids(engine, "which logo did we decide on last week?", now=later)[0] != (
        "we decided to use the green logo"
    )


def test_a_prior_not_a_filter(engine):
    engine.add([rec("the deploy failed with a timeout in the payment service", 40),
                rec("lunch was pizza", 1)])  # fmt: skip
    got = ids(engine, "which deploy error did we see yesterday in the payment service?")
    assert got[0].startswith("the deploy failed")  # relevance still wins


def test_when_questions_prefer_records_that_state_a_time(engine):
    engine.add([rec("Caroline went to the support group and loved it", 10),
                rec("Caroline went to the support group yesterday", 10)])  # fmt: skip
    got = engine.search("When did Caroline go to the support group?", RecordFilter(now=NOW), 2,
                        mode="lexical")  # fmt: skip
    assert got[0].record.content.endswith("yesterday")
    assert got[0].explanation.boosts["states_time"] > 0


def test_event_side(engine):
    engine.add([rec("the database migration to Postgres is done", 20),
                rec("the release plan: ship the search page", 30),
                rec("the release plan: ship the billing page", 10)])  # fmt: skip

    def plans(query: str) -> list[str]:
        return [t for t in ids(engine, query) if t.startswith("the release plan")]

    assert plans("what was the release plan before the migration?")[0].endswith("search page")
    assert plans("what was the release plan after the migration?")[0].endswith("billing page")
