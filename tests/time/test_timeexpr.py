"""Time expressions in a query: the windows they mean relative to a fixed "now"; any text, at
any time from the year 1 to 9999, reads as windows or nothing, in linear time."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.timeline.timeexpr import MONTHS, SEASONS, read
from retrieval.timeline.timeprior import stated_times

NOW = datetime(2024, 5, 15, 14, 30, tzinfo=UTC)  # a Wednesday


def d(s: str | None) -> datetime | None:
    return None if s is None else datetime.fromisoformat(s).replace(tzinfo=UTC)


# phrase -> [start, end) ("YYYY-MM-DD" or "YYYY-MM-DDTHH:MM"; None = open)
WINDOWS = [
    ("which error did we see yesterday?", "2024-05-14", "2024-05-15"),
    ("what did I do today", "2024-05-15", "2024-05-16"),
    ("the day before yesterday", "2024-05-13", "2024-05-14"),
    ("what did we decide last week?", "2024-05-06", "2024-05-13"),
    ("this week's standup", "2024-05-13", "2024-05-20"),
    ("the past week", "2024-05-08T14:30", "2024-05-15T14:30"),
    ("last weekend", "2024-05-11", "2024-05-13"),
    ("last month", "2024-04-01", "2024-05-01"),
    ("this month", "2024-05-01", "2024-06-01"),
    ("last year", "2023-01-01", "2024-01-01"),
    ("last quarter", "2024-01-01", "2024-04-01"),
    ("this sprint", "2024-05-01T14:30", "2024-05-15T14:30"),
    ("last sprint", "2024-04-17T14:30", "2024-05-01T14:30"),
    ("3 days ago", "2024-05-12", "2024-05-13"),
    ("ten days ago", "2024-05-05", "2024-05-06"),
    ("a week ago", "2024-05-05T02:30", "2024-05-12T02:30"),  # its centre ± half a week
    ("two months ago", "2024-02-29T12:06", "2024-03-30T22:39:36"),
    ("in the past 3 days", "2024-05-12T14:30", "2024-05-15T14:30"),
    ("last Saturday", "2024-05-11", "2024-05-12"),
    ("on Monday", "2024-05-13", "2024-05-14"),
    ("on Wednesday", "2024-05-08", "2024-05-09"),  # today's own weekday: a week ago
    ("in March", "2024-03-01", "2024-04-01"),
    ("in June", "2023-06-01", "2023-07-01"),  # the latest June not after now
    ("in May 2022", "2022-05-01", "2022-06-01"),
    ("March 2023", "2023-03-01", "2023-04-01"),
    ("early June", "2023-06-01", "2023-06-11"),
    ("late April", "2024-04-21", "2024-05-01"),
    ("the second week of April", "2024-04-08", "2024-04-15"),
    ("in 2022", "2022-01-01", "2023-01-01"),
    ("on 2023-11-02", "2023-11-02", "2023-11-03"),
    ("on 5 May 2022", "2022-05-05", "2022-05-06"),
    ("on May 3, 2023", "2023-05-03", "2023-05-04"),
    ("June 5th", "2023-06-05", "2023-06-06"),
    ("on Valentine's day", "2024-02-14", "2024-02-15"),
    ("at Christmas", "2023-12-25", "2023-12-26"),
    ("Maundy Thursday", "2024-03-28", "2024-03-29"),
    ("during the summer", "2023-06-01", "2023-09-01"),
    ("since March", "2024-03-01", None),
    ("after March", "2024-04-01", None),
    ("before 2023", None, "2023-01-01"),
    ("until April", None, "2024-05-01"),
    ("the week before 16 November 2023", "2023-11-09", "2023-11-16"),
    ("between August 11 and August 15 2023", "2023-08-11", "2023-08-16"),
]


@pytest.mark.parametrize(("phrase", "start", "end"), WINDOWS)
def test_phrase_means_window(phrase, start, end):
    got = read(phrase, NOW)
    assert [(w.start, w.end) for w in got.windows] == [(d(start), d(end))]
    assert not got.events


NOTHING = [
    "What time do I wake up on Tuesdays and Thursdays?",  # a habit, not a date
    "May I ask for a second opinion?",
    "We march on the capital",
    "the Turbocharged Tuesdays event",
    "my bike performs better during my Sunday group rides",  # a habit again
    "what should we do tomorrow?",  # the future holds no records
    "plans for next week",
    "How long has Caroline had her current group of friends for?",
    "What is 2024 in binary?",
]


@pytest.mark.parametrize("text", NOTHING)
def test_no_window(text):
    assert not read(text, NOW).windows


@pytest.mark.parametrize(
    ("text", "relation", "event"),
    [
        ("what was the plan before the migration?", "before", "the migration"),
        ("errors after the deploy of v2.3", "after", "the deploy of v2.3"),
        ("Which city was John in before traveling to Chicago?", "before", "traveling to chicago"),
        (
            "How many days since I started taking ukulele lessons when I",
            "after",
            "i started taking ukulele lessons",
        ),
    ],
)
def test_events(text, relation, event):
    got = read(text, NOW)
    assert [(e.relation, e.text) for e in got.events] == [(relation, event)]
    assert not got.windows


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("When did Caroline go to the support group?", True),
        ("How many days ago did I buy a smoker?", True),
        ("What year did John start surfing?", True),
        ("What did Caroline paint?", False),
        ("How long had I been using the rug when I moved?", False),
    ],
)
def test_asks_when(text, asks):
    assert read(text, NOW).asks_when is asks


def test_naive_now_is_utc():
    naive = datetime(2024, 5, 15, 14, 30)
    assert read("yesterday", naive).windows == read("yesterday", NOW).windows


def test_times_off_the_calendar_read_as_nothing():
    for text in ("the rock formed 5000000 years ago", "in 100000 years ago terms",
                 "some 4000000 days ago"):  # fmt: skip
        assert read(text, NOW).windows == []


def test_a_present_period_in_a_plan_names_no_past_window():
    assert read("What should I serve for dinner this weekend?", NOW).windows == []
    assert read("I'm going to call the vendor today", NOW).windows == []
    assert [w.phrase for w in read("What did I cook this weekend?", NOW).windows] == [
        "this weekend"
    ]
    assert [w.phrase for w in read("Which tests failed today?", NOW).windows] == ["today"]


# ---------------------------------------------------------------------------- hostile text
MONTH_WORDS = [*MONTHS, "jan", "sept", "dec.", "smarch", "mayy"]
PHRASES = [
    "yesterday", "today", "tonight", "this morning", "the day before yesterday", "last week",
    "this sprint", "the past", "last", "this", "past", "previous", "next", "week", "weekend",
    "month", "quarter", "year", "years", "days", "ago", "a few", "a couple of", "several",
    "early", "mid", "late", "beginning of", "end of", "the first week of", "last week of",
    "since", "after", "before", "until", "till", "prior to", "following", "between", "and",
    "in", "on", "of", "the", "during", "around", "by", "the year", "summer", "winter", "fall",
    "christmas", "easter", "good friday", "thanksgiving", "valentine's day", "new year's eve",
    "monday", "sunday", "tuesdays", "will", "going to", "when did", "how long ago", ",", ".",
]  # fmt: skip
YEAR = st.one_of(st.sampled_from([0, 1, 999, 1000, 9999, 10000, 99999]),
                 st.integers(0, 99999)).map(lambda y: f"{y:04d}")  # fmt: skip
ORDINAL = st.tuples(st.integers(0, 99), st.sampled_from(["", "st", "nd", "rd", "th"])).map(
    lambda t: f"{t[0]}{t[1]}"
)
NUMERIC_DATE = st.tuples(YEAR, st.integers(0, 99), st.integers(0, 99)).flatmap(
    lambda t: st.sampled_from("-/.").map(lambda s: f"{t[0]}{s}{t[1]}{s}{t[2]}")
)
# "in May 0000", "early June 99999", "since 31st March 0", "the summer of 0000"
DATE_PHRASE = st.tuples(
    st.sampled_from(["", "in ", "early ", "late ", "since ", "before ", "the first week of ",
                     "on ", "the "]),
    st.one_of(st.sampled_from(MONTH_WORDS), st.sampled_from(["summer of", "christmas"])),
    st.sampled_from(["", " 5th", " 31", " 0th", ","]),
    YEAR,
).map(lambda t: f"{t[0]}{t[1]}{t[2]} {t[3]}")  # fmt: skip
TOKEN = st.one_of(DATE_PHRASE, st.sampled_from(PHRASES), st.sampled_from(MONTH_WORDS), YEAR,
                  ORDINAL, NUMERIC_DATE, st.integers(0, 10**30).map(str))  # fmt: skip
DATE_LIKE = st.lists(TOKEN, min_size=1, max_size=14).map(" ".join)
ANY_NOW = st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59),
                       timezones=st.just(UTC))  # fmt: skip
FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])  # fmt: skip


def well_formed(got, started: float) -> None:
    assert time.perf_counter() - started < 0.5
    for w in got.windows:
        assert w.start is not None or w.end is not None
        if w.start is not None and w.end is not None:
            assert w.start < w.end, w
    for e in got.events:
        assert e.relation in ("before", "after") and e.text


@FUZZ
@given(text=DATE_LIKE, now=ANY_NOW)
def test_date_like_text_at_any_time_reads_as_windows_or_nothing(text, now):
    started = time.perf_counter()
    well_formed(read(text, now), started)


@FUZZ
@given(
    before=st.sampled_from(["", "in ", "early ", "late ", "since ", "before ", "until ", "mid-",
                            "the first week of ", "the last week of ", "during the "]),
    month=st.sampled_from([*MONTHS, *SEASONS]), day=st.sampled_from(["", " 5th", " 31,", ","]),
    year=YEAR, now=ANY_NOW,
)  # fmt: skip
def test_a_month_of_any_year_reads_as_its_window_or_nothing(before, month, day, year, now):
    started = time.perf_counter()
    well_formed(read(f"what happened {before}{month}{day} {year}?", now), started)


@FUZZ
@given(text=st.text(max_size=300), now=ANY_NOW)
def test_any_text_reads_as_windows_or_nothing(text, now):
    started = time.perf_counter()
    well_formed(read(text, now), started)


@FUZZ
@given(text=DATE_LIKE, written=ANY_NOW)
def test_the_times_a_stored_text_states_are_finite_numbers(text, written):
    assert all(math.isfinite(t) for t in stated_times(text, written))


@pytest.mark.parametrize(
    "text",
    ["in May 0000", "early June 0000", "since March 0000", "the first week of March 0000",
     "the summer of 0000", "on 5 May 0000", "0000-05-01", "May 99999", "the 0th of Smarch",
     "the year 99999999", "9" * 10_000 + " days ago"],
)  # fmt: skip
def test_a_date_off_the_calendar_is_no_window(text):
    assert read(text, NOW).windows == []
    assert read(text, datetime(1, 1, 1, tzinfo=UTC)).windows == []


def test_reading_is_linear_in_the_text():
    for text in ("today " * 10_000, "after the deploy " * 5_000, "since March " * 6_000,
                 "x" * 1_000_000):  # fmt: skip
        started = time.perf_counter()
        read(text, NOW)
        assert time.perf_counter() - started < 0.5, text[:20]


def test_a_window_inverted_by_between_is_not_merged():
    got = read("between August 2023 and March 2023", NOW)
    assert all(w.start < w.end for w in got.windows if w.start and w.end)
