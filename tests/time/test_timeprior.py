"""The time prior in the ranking: records from the window a query names come first among
equally relevant ones; a prior, not a filter."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from retrieval.records import Record, RecordFilter, Scope
from retrieval.timeline.timeexpr import Window
from retrieval.timeline.timeprior import membership, recent_gain

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
    hits = engine.search("which logo did we decide on last week?", RecordFilter(now=later), 3,
                         mode="lexical")  # fmt: skip
    assert hits and all("time" not in h.explanation.boosts for h in hits)


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


DAY = 86400.0


def test_recent_gain_among_near_candidates():
    scores = np.array([0.90, 0.85, 0.50, 0.88, 0.86])
    t = np.array([10.0, 30.0, 99.0, 20.0, np.nan]) * DAY
    g = recent_gain(scores, t, depth=4, margin=0.1, weight=0.2)
    # the near ones (0.90, 0.88, 0.86 without a date, 0.85): min-max of their dates, in
    # shares of the best score
    assert g.tolist() == pytest.approx([0.0, 0.18, 0.0, 0.09, 0.0])
    # dates an hour apart are nearly one time: the newer gains an hour's share of a day
    hour = recent_gain(scores[:2], np.array([0.0, 3600.0]), depth=2, margin=0.1, weight=0.2)
    assert hour.tolist() == pytest.approx([0.0, 0.18 / 24])
    assert recent_gain(scores, t, depth=1, margin=1, weight=0.2).tolist() == [0.0] * 5
    same = recent_gain(scores, np.full(5, 7.0), depth=5, margin=1, weight=0.2)
    assert not same.any()  # records written at one time: nothing to prefer
    assert not recent_gain(scores, t, depth=5, margin=1, weight=0.0).any()


FILLER = ["lunch was pizza", "the build takes four minutes", "Alice reviews the docs",
          "the logo is blue", "we use ruff for linting", "the API returns JSON"]  # fmt: skip


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_current_state_questions_prefer_the_newer_statement(engine, mode):
    engine.add([rec(t, 50) for t in FILLER])
    engine.add([rec("the staging database is on the db-3 host", 40),
                rec("the staging database is on the db-7 host", 2)])  # fmt: skip

    def top(question: str):
        return engine.search(question, RecordFilter(now=NOW), 2, mode=mode)

    got = top("which host is the staging database on?")
    assert got[0].record.content.endswith("db-7 host")
    assert "recent" in got[0].explanation.boosts
    # a question about a past event, or one that asks when, is left alone
    for asked in ("which host did the staging database run on?",
                  "when did the staging database run on a db host?"):  # fmt: skip
        assert all("recent" not in h.explanation.boosts for h in top(asked))


def test_recency_does_not_outweigh_relevance(engine):
    engine.add([rec(t, 50) for t in FILLER])
    engine.add([rec("the staging database runs on the db-3 host with nightly backups", 40),
                rec("lunch on the staging floor", 1)])  # fmt: skip
    for mode in ("lexical", "hybrid"):
        got = engine.search("which host is the staging database on?", RecordFilter(now=NOW), 2,
                            mode=mode)  # fmt: skip
        assert got[0].record.content.startswith("the staging database runs")


def test_the_times_a_record_speaks_of_date_it(engine):
    """Written on 16 November, "last Friday" is 10 November: the window "on 10 November"
    weighs that record, not the one written that week about another day."""

    def said(text: str, written: datetime) -> Record:
        return Record(project_id="p", agent_id="a", scope=Scope.team, content=text,
                      created_at=written, updated_at=written)  # fmt: skip

    engine.add([rec(t, 50) for t in FILLER])
    engine.add([said("I visited the Leeds castle last Monday",
                     datetime(2023, 11, 12, 9, 0, tzinfo=UTC)),
                said("I visited the Dover castle last Friday",
                     datetime(2023, 11, 16, 15, 0, tzinfo=UTC))])  # fmt: skip
    asked = "which castle did I visit on 10 November 2023?"

    def hits(stated: bool):
        engine.ranker.config = replace(engine.ranker.config, stated_times=stated)
        return engine.search(asked, RecordFilter(now=NOW), 2, mode="lexical")

    got = hits(True)  # the two are equally relevant: the date decides
    assert "Dover" in got[0].record.content and got[0].explanation.boosts["time"] > 0
    # by their own dates neither is from that day
    assert all("time" not in h.explanation.boosts for h in hits(False))


def test_a_pasted_report_names_no_window(engine):
    engine.add([rec(t, 50) for t in FILLER])
    engine.add([rec("the broker crashed with an OutOfMemoryError in the journal", 1)])
    report = " ".join(["The broker crashed yesterday with an OutOfMemoryError."] * 30)
    hits = engine.search(report, RecordFilter(now=NOW), 3)
    assert hits and all("time" not in h.explanation.boosts for h in hits)


def test_a_date_the_clock_has_not_reached_earns_no_recency(engine):
    """A record dated years ahead (a wrong clock, a foreign store's placeholder) is not the
    newest statement: its date counts as unknown; a day ahead (another machine's clock) still
    counts."""
    ahead = datetime(9999, 12, 31, 23, 0, tzinfo=UTC)
    engine.add([rec(t, 50) for t in FILLER])
    engine.add([Record(project_id="p", agent_id="a", scope=Scope.team,
                       content="the staging database is on the db-9 host",
                       created_at=ahead, updated_at=ahead),
                rec("the staging database is on the db-3 host", 40),
                rec("the staging database is on the db-7 host", 2)])  # fmt: skip
    got = engine.search("which host is the staging database on?", RecordFilter(now=NOW), 3,
                        mode="lexical")  # fmt: skip
    assert got[0].record.content.endswith("db-7 host"), [h.record.content for h in got]
    future = next(h for h in got if h.record.content.endswith("db-9 host"))
    assert "recent" not in future.explanation.boosts


def test_a_record_a_few_hours_ahead_is_still_the_newest(engine):
    engine.add([rec(t, 50) for t in FILLER])
    engine.add([rec("the staging database is on the db-3 host", 40),
                rec("the staging database is on the db-7 host", -0.2)])  # fmt: skip
    got = engine.search("which host is the staging database on?", RecordFilter(now=NOW), 2,
                        mode="lexical")  # fmt: skip
    assert got[0].record.content.endswith("db-7 host")
    assert "recent" in got[0].explanation.boosts
