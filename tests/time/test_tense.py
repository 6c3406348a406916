"""What a question asks of time: the current state (the newest statement answers it) or a
past event (the record of the event answers it, whatever came after)."""

from __future__ import annotations

import pytest

from retrieval.timeline.tense import asks_current

CURRENT = [
    "How many bikes do I currently own?",
    "What is the staging database?",
    "What's our deploy process?",
    "Where is the painting 'Ethereal Dreams' currently hanging?",
    "How often do I see my therapist?",
    "What time do I usually go to the gym?",
    "How many coins do I have in my collection?",
    "Do we still pin the numpy version?",
    "Which CI provider are we on these days?",
    "What was my previous frequent flyer status?",  # names a change
    "Where did I initially keep my old sneakers?",
    "Which laptop did I have originally?",
    "What framework did the dashboard use to be built on?",
    "Is the payments team no longer on call for checkout?",
]
PAST = [
    "What did Caroline paint last year?",
    "When did we migrate to Postgres?",
    "When is the release?",  # asks when: the event's date
    "Which deploy failed on Friday?",
    "What was the first error we saw after the upgrade?",
    "How many days ago did I buy the tent?",
    "Where was the team offsite?",
    "Which of Caroline's paintings won the prize?",  # a possessive is not a present verb
    "Tell me about the deploy",  # not a question about a state
    "What has Melanie painted?",  # the present perfect asks for a history
    "How many tournaments has Nate won?",
]


@pytest.mark.parametrize("question", CURRENT)
def test_questions_about_the_current_state(question):
    assert asks_current(question)


@pytest.mark.parametrize("question", PAST)
def test_questions_about_past_events(question):
    assert not asks_current(question)
