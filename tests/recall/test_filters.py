"""RecordFilter applies inside every retriever, before truncation.

Each case builds 50 strong distractors (their content *is* the query) that fail the filter, one
weak record that passes it and shares two query words, and a few unrelated records that pass it.
With k=1 the weak record must win in lexical-only, vector-only and hybrid search: a filter applied
after truncation would return nothing, or a distractor. The engines use a small candidate depth
(5) as well as the default, so truncation also happens inside the retrievers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.ranking.hybrid import FusionConfig
from retrieval.records import Kind, Record, RecordFilter, Scope

MODES = ("lexical", "vector", "hybrid")
QUERY = "quantum harbor lighthouse"
TARGET_TEXT = "the harbor lighthouse keeper wrote about fog and ferries"
FILLER_TEXTS = (
    "sourdough bread needs flour water salt and patience",
    "the committee postponed the budget vote until spring",
    "install the printer driver before rebooting",
)
NOW = datetime(2031, 1, 1, tzinfo=UTC)


def d(year: int) -> datetime:
    return datetime(year, 6, 1, tzinfo=UTC)


@dataclass
class Case:
    name: str
    distractor: Callable[[int], dict]  # i -> Record fields of the i-th distractor
    target: dict
    filter: dict
    passes: Callable[[Record], bool]
    control: dict = field(default_factory=dict)  # a filter under which a distractor wins


CASES = [
    Case(
        "buckets",
        lambda i: {"scope": Scope.team},
        {"scope": Scope.private},
        {"buckets": ["private/proj/agent"]},
        lambda r: r.bucket == "private/proj/agent",
    ),
    Case(
        "kinds",
        lambda i: {"kind": Kind.observation},
        {"kind": Kind.memory},
        {"kinds": [Kind.memory]},
        lambda r: r.kind is Kind.memory,
    ),
    Case(
        "categories",
        lambda i: {"category": "recent"},
        {"category": "longterm"},
        {"categories": ["longterm", "tasks"]},
        lambda r: r.category in ("longterm", "tasks"),
    ),
    Case(
        "exclude_categories",
        lambda i: {"category": "recent"},
        {"category": "longterm"},
        {"exclude_categories": ["recent"]},
        lambda r: r.category != "recent",
    ),
    Case(  # AND: every distractor has one of the two tags, only the target has both
        "tags_and",
        lambda i: {"metadata": {"tags": ["alpha"] if i % 2 else ["beta", "gamma"]}},
        {"metadata": {"tags": ["gamma", "alpha", "beta"]}},
        {"tags": ["alpha", "beta"]},
        lambda r: {"alpha", "beta"} <= set(r.tags),
    ),
    Case(
        "min_priority",
        lambda i: {"metadata": {"priority": 1 + i % 2}},
        {"metadata": {"priority": 3}},
        {"min_priority": 3},
        lambda r: r.priority >= 3,
    ),
    Case(
        "max_priority",
        lambda i: {"metadata": {"priority": 2 + i % 2}},
        {"metadata": {"priority": 1}},
        {"max_priority": 1},
        lambda r: r.priority <= 1,
    ),
    Case(
        "priority_range",
        lambda i: {"metadata": {"priority": 1 if i % 2 else 3}},
        {"metadata": {"priority": 2}},
        {"min_priority": 2, "max_priority": 2},
        lambda r: r.priority == 2,
    ),
    Case(
        "created_after",
        lambda i: {"created_at": d(2020), "updated_at": d(2025)},
        {"created_at": d(2024), "updated_at": d(2024)},
        {"created_after": d(2023)},
        lambda r: r.created_at > d(2023),
    ),
    Case(
        "created_before",
        lambda i: {"created_at": d(2024), "updated_at": d(2019)},
        {"created_at": d(2020), "updated_at": d(2020)},
        {"created_before": d(2021)},
        lambda r: r.created_at < d(2021),
    ),
    Case(
        "created_range",
        lambda i: {"created_at": d(2019 if i % 2 else 2025)},
        {"created_at": d(2022)},
        {"created_after": d(2021), "created_before": d(2023)},
        lambda r: d(2021) < r.created_at < d(2023),
    ),
    Case(
        "updated_after",
        lambda i: {"created_at": d(2024), "updated_at": d(2020)},
        {"created_at": d(2020), "updated_at": d(2024)},
        {"updated_after": d(2023)},
        lambda r: r.updated_at > d(2023),
    ),
    Case(
        "updated_before",
        lambda i: {"created_at": d(2019), "updated_at": d(2024)},
        {"created_at": d(2019), "updated_at": d(2020)},
        {"updated_before": d(2021)},
        lambda r: r.updated_at < d(2021),
    ),
    Case(  # expired only by the injected clock; include_expired brings them back
        "expiry_injected_now",
        lambda i: {"expires_at": d(2030)},
        {"expires_at": None},
        {"now": NOW},
        lambda r: r.expires_at is None or r.expires_at > NOW,
        control={"now": NOW, "include_expired": True},
    ),
    Case(  # expired by the real clock
        "expiry_real_clock",
        lambda i: {"expires_at": d(2001)},
        {"expires_at": datetime(2999, 1, 1, tzinfo=UTC)},
        {},
        lambda r: r.expires_at > datetime.now(UTC),
        control={"include_expired": True},
    ),
]


def build(case: Case) -> list[Record]:
    base = {"project_id": "proj", "agent_id": "agent", "created_at": d(2022), "updated_at": d(2022)}
    target_fields = {**base, **case.target}
    recs = [Record(content=TARGET_TEXT, **target_fields)]
    recs += [Record(content=t, **target_fields) for t in FILLER_TEXTS]
    recs += [Record(content=QUERY, **{**base, **case.distractor(i)}) for i in range(50)]
    return recs


# depth 5: both retrievers truncate long before the weak record; the default depth (100) takes
# the other branch of the vector side (the ANN returns every vector there is)
PARAMS = [(c, 5) for c in CASES] + [
    (c, 100) for c in CASES if c.name in ("buckets", "tags_and", "expiry_injected_now")
]


@pytest.fixture(
    scope="module", params=PARAMS, ids=[f"{c.name}-depth{depth}" for c, depth in PARAMS]
)
def corpus(request, tmp_path_factory):
    case, depth = request.param
    eng = Engine(
        tmp_path_factory.mktemp(case.name), HashEmbedder(), fusion=FusionConfig(depth=depth)
    )
    recs = build(case)
    eng.add(recs)
    yield case, eng, recs[0]
    eng.close()


def test_case_is_well_formed(corpus):
    case, eng, target = corpus
    assert case.passes(target)
    recs = eng.store.list(RecordFilter(include_expired=True))
    passing = [r for r in recs if case.passes(r)]
    assert len(passing) == 1 + len(FILLER_TEXTS)  # no distractor passes
    assert eng.store.count(RecordFilter(**case.filter)) == len(passing)


@pytest.mark.parametrize("mode", MODES)
def test_without_the_filter_a_distractor_wins(corpus, mode):
    case, eng, target = corpus
    (hit,) = eng.search(QUERY, RecordFilter(**case.control), k=1, mode=mode)
    assert hit.record.content == QUERY
    assert not case.passes(hit.record)


@pytest.mark.parametrize("mode", MODES)
def test_the_filter_applies_before_truncation(corpus, mode):
    case, eng, target = corpus
    hits = eng.search(QUERY, RecordFilter(**case.filter), k=1, mode=mode)
    assert [h.record.id for h in hits] == [target.id]
    assert hits[0].explanation.mode == mode


@pytest.mark.parametrize("mode", MODES)
def test_every_hit_satisfies_the_filter(corpus, mode):
    case, eng, target = corpus
    hits = eng.search(QUERY, RecordFilter(**case.filter), k=20, mode=mode)
    assert hits and hits[0].record.id == target.id
    assert all(case.passes(h.record) for h in hits)
    if mode != "lexical":  # the unrelated passing records are reachable by vector only
        assert len(hits) == 1 + len(FILLER_TEXTS)


# ---------------------------------------------------------------------- edge cases
@pytest.mark.parametrize("mode", MODES)
def test_no_visible_bucket_means_no_result(engine, make_record, mode):
    engine.add([make_record("visible only to someone")])
    assert engine.search("visible someone", RecordFilter(buckets=[]), mode=mode) == []
    assert engine.search("visible someone", RecordFilter(buckets=["public"]), mode=mode) == []
    assert len(engine.search("visible someone", RecordFilter(), mode=mode)) == 1


@pytest.mark.parametrize("mode", MODES)
def test_tags_match_exactly(engine, make_record, mode):
    rec = make_record("tagged note about deployments", tags=["Deploy"])
    engine.add([rec, make_record("another deployments note", tags=["deploy-old"])])
    hits = engine.search("deployments", RecordFilter(tags=["Deploy"]), mode=mode)
    assert [h.record.id for h in hits] == [rec.id]
    assert engine.search("deployments", RecordFilter(tags=["deploy"]), mode=mode) == []


@pytest.mark.parametrize("mode", MODES)
def test_expiry_boundary_uses_the_injected_clock(engine, make_record, mode):
    rec = make_record("expiring reminder about the dentist", expires_at=d(2030))
    engine.add([rec])

    def ids(now):
        return [
            h.record.id for h in engine.search("dentist reminder", RecordFilter(now=now), mode=mode)
        ]

    assert ids(datetime(2030, 5, 31, 23, 59, tzinfo=UTC)) == [rec.id]
    assert ids(d(2030)) == []  # expires_at is exclusive: expired at that instant
    assert ids(d(2031)) == []
