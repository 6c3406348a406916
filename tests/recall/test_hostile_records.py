"""One stored text never silences recall: records nobody wrote for the ranker (a template's
"May 0000", a word of a thousand letters, control characters, a megabyte, a 10,000-digit
number, years beyond the calendar, emoji, odd metadata, dates at the calendar's ends) stored
beside an ordinary one; ``recall`` (a real MCP client session), the prompt hook (``POST
/hooks/UserPromptSubmit``, the route the hook client calls) and ``POST /hook-preview`` answer,
and an ordinary question still finds the ordinary record. Real SQLite and Chroma, the hash
embedder."""

from __future__ import annotations

import json
import logging
import math
from datetime import UTC, datetime

import pytest

from retrieval.records import Kind, Record, Scope
from tests.mcp_util import hook_daemon

SECRET = "local-secret"
NORMAL = "The deploys moved to Fridays after the incident review with the payments team."
ORDINARY = "when do the deploys happen after the incident review?"
# each names deploys, so each is a candidate of every question below
HOSTILE = {
    "year 0000": "Release notes template: deploys planned for May 0000 go to the release branch.",
    "year 0000, every form": "deploys: early June 0000, since March 0000, the first week of "
    "March 0000, in May 0000, 0000-05-01, 5 May 0000, the summer of 0000",
    "a run of y": "deploys log excerpt " + "y" * 1000 + "ed and " + "y" * 1000 + "ing",
    "control characters": "deploys " + "".join(chr(c) for c in range(1, 32)) * 30,
    "a 10k-digit number": "deploys build " + "9" * 10_000 + " days ago",
    "a huge year": "deploys in the year 99999999, on 5 May 99999, since 99999-01-01, "
    "31 February 2024, 9999999999 weeks ago",
    "no such month": "deploys on the 0th of Smarch, the 32nd of May, May 0th, 2024-00-00, "
    "2024-13-45, the 99th week of March",
    "relation words": "deploys " + "since after before until " * 400,
}
# too large for ``remember``: stored as an import or an indexed file would store them
LARGE = {
    "50k emoji": "deploys " + "\U0001f680" * 50_000,
    "a megabyte": "deploys "
    + " ".join(f"Word{i}yyy" for i in range(50_000))
    + " "
    + "QUJD" * 140_000,  # words, then one token of half a megabyte
}
EDGE = datetime(9999, 12, 31, 23, 0, tzinfo=UTC)
QUESTIONS = [
    "what changed about deploys last week",  # a window: the stated times of the candidates
    "deploys since March 0000",  # the year 0 in the query
    "when did the deploys move",  # asks when: which candidates state a time
    "what happened to deploys before the incident review",  # an event
    "how many deploys do we run now",  # the current state: recency
    ORDINARY,
]


def record(content: str, **kw) -> Record:
    return Record(project_id="proj", agent_id="agent-a", scope=Scope.team, category="decisions",
                  content=content, **kw)  # fmt: skip


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    with hook_daemon(root, SECRET) as (svc, client, http):
        normal = client.ok("remember", {"content": NORMAL, "scope": "team",
                                        "category": "decisions"})["memoryId"]  # fmt: skip
        for text in HOSTILE.values():
            client.ok("remember", {"content": text, "scope": "team", "category": "decisions"})
        screen, svc.engine.screen = svc.engine.screen, None  # the scan's cost on a megabyte
        svc.engine.add([record(t) for t in LARGE.values()])  # is its own benchmark's
        svc.engine.screen = screen
        svc.engine.add([
            record("deploys lesson with a success rate that is not a number", kind=Kind.lesson,
                   metadata={"successRate": float("nan"), "priority": float("inf")}),
            record("deploys lesson with a success rate past one", kind=Kind.lesson,
                   metadata={"successRate": 1e308}),
            record("deploys written at the end of the calendar, yesterday and last week",
                   created_at=EDGE, updated_at=EDGE),
            record("deploys written in the year 1, yesterday and in the summer",
                   created_at=datetime(1, 1, 1, tzinfo=UTC),
                   updated_at=datetime(1, 1, 1, tzinfo=UTC)),
            record("deploys exchange whose metadata dates are off the calendar",
                   kind=Kind.turn, metadata={"session": ["x"], "role": "exchange",
                                             "timestamp": "0000-05-01T00:00:00Z",
                                             "turn": {"a": 1}, "last_turn": "0000"}),
        ])  # fmt: skip
        broken = record("deploys record whose stored metadata is not an object")
        svc.engine.add([broken])
        with svc.store.transaction() as conn:  # as a damaged or foreign store holds it
            conn.execute("UPDATE records SET metadata='[1, 2]' WHERE id=?", (broken.id,))
        yield {"client": client, "http": http, "normal": normal, "broken": broken.id}


def post(world, path: str, body: dict) -> dict:
    r = world["http"].post(path, json=body, headers={"Authorization": f"Bearer {SECRET}"})
    assert r.status_code == 200, (path, r.status_code, r.text[:500])
    return r.json()


@pytest.mark.parametrize("query", QUESTIONS)
def test_recall_answers_every_question_over_hostile_records(world, query):
    res = world["client"].call("recall", {"query": query, "limit": 20})
    assert not res.is_error, res
    items = res.data["items"]
    assert items and all(math.isfinite(i["score"]) for i in items)
    assert all(i["explanation"]["gate"] is None or math.isfinite(i["explanation"]["gate"])
               for i in items)  # fmt: skip
    assert json.dumps(res.data, allow_nan=False)  # no NaN reaches the client


def test_an_ordinary_question_still_finds_the_ordinary_record(world):
    res = world["client"].ok("recall", {"query": ORDINARY, "limit": 5})
    assert res["items"][0]["id"] == world["normal"], [i["content"][:60] for i in res["items"]]
    assert NORMAL in res["text"]
    hook = post(world, "/hooks/UserPromptSubmit",
                {"input": {"prompt": ORDINARY, "session_id": "ordinary"}})  # fmt: skip
    assert world["normal"] in hook["injected"]
    assert NORMAL in hook["output"]["hookSpecificOutput"]["additionalContext"]


@pytest.mark.parametrize("query", QUESTIONS)
def test_the_prompt_hook_and_its_preview_answer(world, query):
    ans = post(world, "/hooks/UserPromptSubmit",
               {"input": {"prompt": query, "session_id": f"s-{query}"}})  # fmt: skip
    assert "prompt recall" in ans["note"]
    preview = post(world, "/hook-preview", {"prompt": query})
    assert preview["candidates"]
    assert all(math.isfinite(c["relevance"]) for c in preview["candidates"])


def test_a_record_whose_stored_metadata_is_not_an_object_is_read_without_it(world):
    res = world["client"].ok("recall", {"query": "record whose stored metadata is not an object"})
    hit = next(i for i in res["items"] if i["id"] == world["broken"])
    assert hit["content"].startswith("deploys record whose stored metadata")


def test_a_lesson_success_rate_that_is_not_a_finite_number_earns_no_boost(world):
    res = world["client"].ok("recall", {"query": "deploys lesson with a success rate",
                                        "kinds": ["lesson"]})  # fmt: skip
    boosts = {i["content"][:60]: i["explanation"]["boosts"] for i in res["items"]}
    nan = boosts["deploys lesson with a success rate that is not a number"]
    assert "success_rate" not in nan and "priority" not in nan
    assert boosts["deploys lesson with a success rate past one"]["success_rate"] == 0.05


def test_a_record_dated_at_the_end_of_the_calendar_earns_no_recency(world):
    res = world["client"].ok("recall", {"query": "deploys written at the end of the calendar"})
    hit = next(i for i in res["items"] if i["content"].startswith("deploys written at the end"))
    assert "recency" not in hit["explanation"]["boosts"]


def test_texts_that_are_not_text_get_one_clear_error(world):
    err = world["client"].error("remember", {"content": "deploys \ud800 lone", "scope": "team"})
    assert "lone surrogate U+D800 at character 8" in err


def test_a_prompt_holding_a_lone_surrogate_gets_an_answer(world):
    body = '{"input": {"prompt": "deploys \\ud800 last week", "session_id": "sur"}}'
    r = world["http"].post("/hooks/UserPromptSubmit", content=body.encode(),
                           headers={"Authorization": f"Bearer {SECRET}"})  # fmt: skip
    assert r.status_code in (200, 400), r.text
    if r.status_code == 400:
        assert r.json()["error"] == "invalid_input"


def test_no_feature_was_dropped_for_the_hostile_texts(world, caplog):
    """The texts above are read, not skipped: no feature failed on them."""
    from retrieval.ranking.guard import dropped_counts

    before = dropped_counts()
    with caplog.at_level(logging.WARNING, logger="retrieval.ranking.guard"):
        for q in QUESTIONS:
            world["client"].ok("recall", {"query": q})
    assert dropped_counts() == before, caplog.text
