"""The prompt gate on any (prompt, record) pair: Porter step 1 on any word (long runs of ``y``
included) is the definition's, computed in one pass and bounded; the words a record holds are
found exactly as stemming all of them would; the gate's features and relevance are finite
numbers in range for any text and any cosine (NaN and infinities included)."""

from __future__ import annotations

import math
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.fulltext.stemmer import MAX_WORD, consonants, measure, stem
from retrieval.records import Record, Scope
from server.service.prompting import gate
from server.service.prompting.vocabulary import MAX_CHARS, Terms, held, stems

FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])  # fmt: skip


def consonant_by_definition(word: str, i: int) -> bool:
    """Porter's definition as written (recursive on ``y``): the oracle, for short words."""
    ch = word[i]
    if ch in "aeiou":
        return False
    if ch == "y":
        return i == 0 or not consonant_by_definition(word, i - 1)
    return True


LETTERS = st.text(alphabet="aeiouybcdlnprsty", min_size=1, max_size=MAX_WORD)
SUFFIXED = st.tuples(LETTERS, st.sampled_from(["", "s", "es", "ies", "ed", "eed", "ing", "y"])).map(
    "".join
)
Y_RUNS = st.tuples(st.text(alphabet="abcy", max_size=5), st.integers(1, 3000),
                   st.sampled_from(["ed", "ing", "s", "y", ""])).map(
    lambda t: t[0] + "y" * t[1] + t[2])  # fmt: skip


@FUZZ
@given(word=LETTERS)
def test_consonants_are_porters_definition(word):
    assert consonants(word) == [consonant_by_definition(word, i) for i in range(len(word))]


@FUZZ
@given(word=st.one_of(SUFFIXED, Y_RUNS, st.text(max_size=200)))
def test_any_word_stems_in_bounded_time_to_at_most_one_letter_more(word):
    started = time.perf_counter()
    out = stem(word)
    assert time.perf_counter() - started < 0.05
    assert isinstance(out, str) and len(out) <= len(word) + 1
    if len(word) > MAX_WORD or not (word.isascii() and word.isalpha()):
        assert out == word
    else:  # every letter but the stem's last begins the word
        assert word.startswith(out[:-1])


@pytest.mark.parametrize("n", [1000, 10_000, 100_000])
def test_a_run_of_y_is_no_recursion(n):
    for word in ("y" * n + "ed", "a" + "y" * n + "ing", "y" * n):
        assert stem(word) == word  # longer than a word: left as it is
        assert measure("y" * min(n, MAX_WORD)) >= 0


WORD = st.one_of(SUFFIXED, st.sampled_from(["Retries", "payment", "NullPointerException",
                                            "HTTPServer", "the", "Redis", "x", "ab", "xyz"]),
                 st.text(alphabet="abcXYZ_019 ", max_size=20))  # fmt: skip
TEXT = st.lists(WORD, max_size=40).map(" ".join)


@FUZZ
@given(text=TEXT, prompt=TEXT)
def test_the_words_a_record_holds_are_those_stemming_all_of_them_finds(text, prompt):
    wanted = set(Terms.of(prompt).weights) | set(list(stems(text))[:5])
    assert held(text, wanted) == stems(text) & wanted


def test_only_the_first_characters_of_a_huge_text_are_read():
    text = "filler " * (MAX_CHARS // 7) + " payments"
    assert held(text, {"payment"}) == set()
    assert held("payments " + text, {"payment"}) == {"payment"}


COSINE = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True),
                   st.floats(-1.0, 1.0))  # fmt: skip
HOSTILE = st.sampled_from([
    "y" * 1000 + "ed", "May 0000", "\x00\x01\x02" * 100, "9" * 10_000, "\U0001f680" * 5000,
    "a" * 100_000, "NullPointer" * 1000, "",
])  # fmt: skip


@FUZZ
@given(prompt=st.one_of(TEXT, HOSTILE, st.text(max_size=200)),
       content=st.one_of(TEXT, HOSTILE, st.text(min_size=1, max_size=300)),
       context=st.one_of(TEXT, st.just("")), entity=st.one_of(st.none(), TEXT),
       cosine=COSINE)  # fmt: skip
def test_the_gate_judges_any_pair_with_finite_features_in_range(
    prompt, content, context, entity, cosine
):
    rec = Record(project_id="p", agent_id="a", scope=Scope.team, content=content or "x",
                 context=context, entity_name=entity)  # fmt: skip
    started = time.perf_counter()
    judged = gate.PromptGate(prompt).judge(rec, cosine)
    assert time.perf_counter() - started < 0.5
    assert 0.0 <= judged.coverage <= 1.0
    assert 0.0 <= judged.relevance <= 1.0
    cos, _ = gate.features(gate.prompt_terms(prompt), rec, cosine)
    assert math.isfinite(cos)


def test_a_cosine_that_is_not_a_number_counts_as_an_unrelated_texts():
    rec = Record(project_id="p", agent_id="a", content="retry the payment")
    judge = gate.PromptGate("how do we retry a payment?")
    for bad in (float("nan"), float("inf"), float("-inf")):
        assert judge.judge(rec, bad).relevance == judge.judge(rec, None).relevance
