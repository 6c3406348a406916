"""Code or prose: the detector, the prose-query test, and the vector weight of a prose question
asked of code."""

from __future__ import annotations

import pytest

from retrieval.ranking import fusion, modality
from retrieval.records import RecordFilter

PY = '''def is_iterable(obj):
    """Whether obj can be iterated over."""
    try:
        iter(obj)
    except TypeError:
        return False
    return True'''

JS = """function retry(fn, times) {
  let last = null;
  for (let i = 0; i < times; i++) {
    try { return fn(); } catch (e) { last = e; }
  }
  throw last;
}"""

ABSTRACT = (
    "Background: Statins lower cardiovascular risk (HR = 0.75, 95% CI 0.6-0.9). Methods: a "
    "cohort of 1,204 adults was followed for 5 years (median). Results: risk fell; p = 0.03."
)

CHAT = """Caroline: I went to the LGBTQ support group yesterday.
Melanie: That's great! How was it?
Caroline: Really moving, everyone shared their stories.
Melanie: I'm so glad you went."""


@pytest.mark.parametrize("text", [PY, JS])
def test_code_is_code(text):
    assert modality.is_code(text)
    assert modality.code_lines(text) >= 0.6


@pytest.mark.parametrize("text", [ABSTRACT, CHAT, "one line\nand two"])
def test_prose_is_not_code(text):
    assert not modality.is_code(text)


def test_code_share_counts_texts():
    assert modality.code_share([PY, JS, CHAT, ABSTRACT]) == 0.5
    assert modality.code_share([]) == 0.0


@pytest.mark.parametrize(
    ("query", "prose"),
    [
        ("python check if a variable is iterable", True),
        ("How do we retry a failed card payment?", True),
        ("why does is_iterable fail", False),
        ("where is NullPointerException thrown", False),
        ("what does os.path.join do", False),
        ("iter(obj) raises", False),
    ],
)
def test_a_prose_query_names_no_identifier(query, prose):
    assert modality.is_prose_query(query) is prose


@pytest.fixture
def alphas(monkeypatch) -> list[float]:
    """The vector weight of every fusion the ranker makes."""
    seen: list[float] = []
    convex = fusion.convex

    def spy(lexical, vector, alpha, norm=fusion.minmax):
        seen.append(alpha)
        return convex(lexical, vector, alpha, norm)

    monkeypatch.setattr(fusion, "convex", spy)
    return seen


def _store(engine, make_record, texts):
    records = engine.add([make_record(t) for t in texts])
    return RecordFilter(buckets=[records[0].bucket])


def test_a_prose_question_of_code_leans_on_the_vector_side(engine, make_record, alphas):
    code = [PY, JS, PY.replace("is_iterable", "is_sized").replace("iter(", "len("),
            JS.replace("retry", "repeat")]  # fmt: skip
    f = _store(engine, make_record, code)
    assert engine.search("check whether a variable can be iterated", f, k=10)
    # an identifier in the question: bm25 is the sharper side, the usual weight
    assert engine.search("where is is_iterable defined", f, k=10)
    engine.ranker.config.code_alpha = None  # the rule off
    assert engine.search("check whether a variable can be iterated", f, k=10)
    assert alphas == [0.8, 0.6, 0.6]


def test_prose_records_keep_the_usual_weight(engine, make_record, alphas):
    f = _store(engine, make_record, [CHAT, ABSTRACT, "The deploy runs at noon on Fridays."])
    assert engine.search("when did Caroline go to the support group", f, k=10)
    assert alphas == [0.6]
