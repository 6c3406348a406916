"""A text cut to a length before its secrets are redacted: the cut never leaves the start of a
secret the redactor no longer recognises (a candidate's excerpt in a write's result and the
review inbox, the texts quoted to the client's model when it judges a pair)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.records import Record
from server.service.updating import candidates, update_judge

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
AWS = "AKIA" + "Q3EGRT7KLMNOPWXZ"


def record(text: str) -> Record:
    return Record(project_id="proj", agent_id="agent-a", content=text)


def shows_part(text: str, secret: str) -> bool:
    """Some start of ``secret`` of 6 characters or more is in ``text``."""
    return any(secret[:n] in text for n in range(6, len(secret) + 1))


@settings(max_examples=40, deadline=None)
@given(
    inside=st.integers(min_value=1, max_value=len(AWS) - 1),
    filler=st.sampled_from([" ", "\n", "word ", "x"]),
    secret=st.sampled_from([TOKEN, AWS]),
    chars=st.sampled_from([candidates.EXCERPT_CHARS, 200]),
)
def test_an_excerpt_cut_inside_a_secret_shows_none_of_it(inside, filler, secret, chars):
    pad = 4 * chars + 200 - inside - 1  # the text the excerpt reads ends inside the secret
    text = (filler * pad)[:pad] + " " + secret + " and more words after it"
    assert not shows_part(candidates.excerpt(record(text), chars), secret)


@settings(max_examples=40, deadline=None)
@given(
    pad=st.integers(min_value=update_judge.MAX_CHARS - 40, max_value=update_judge.MAX_CHARS - 2),
    secret=st.sampled_from([TOKEN, AWS]),
)
def test_the_judges_question_never_quotes_the_start_of_a_cut_secret(pad, secret):
    old = record("x" * pad + " " + secret + " is the deploy key of the payments queue")
    new = record("The payments queue now uses another key.")
    assert not shows_part(update_judge.question(old, new), secret)


def test_an_excerpt_that_fits_keeps_its_words():
    text = "The payments queue runs on RabbitMQ in the eu-west cluster."
    assert candidates.excerpt(record(text)) == text
    long = "word " * 400
    assert candidates.excerpt(record(long), 200).startswith("word word")
