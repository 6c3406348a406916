"""Lessons (graph/lessons.py): validation, storage, similar-error ranking, success-rate feedback.

Real SQLite + Chroma in tmp_path, the deterministic hashing embedder (ranking logic only).
"""

from __future__ import annotations

import copy
import json

import pytest

from graph.entities import GraphService
from graph.lesson_ranking import SUCCESS_WEIGHT
from graph.lessons import LessonService
from graph.search import search_nodes
from retrieval.embedding.embedder import HashEmbedder
from retrieval.errors import Conflict, InvalidInput, NotFound
from retrieval.records import Kind, RecordFilter
from retrieval.storage.buckets import bucket_of


class Who:
    def __init__(self, project: str = "proj", agent: str = "agent") -> None:
        self.project_id, self.agent_id = project, agent

    def bucket(self, scope: str) -> str:
        return bucket_of(scope, self.project_id, self.agent_id)


SEED = {  # the seed's example lesson, verbatim
    "name": "NPM_VERSION_MISMATCH_01",
    "entityType": "lesson",
    "observations": [
        "Error occurs when using incompatible package versions",
        "Affects Windows environments specifically",
        "Resolution requires version pinning",
    ],
    "errorPattern": {"type": "dependency", "message": "Cannot find package @shadcn/ui", "context": "package installation"},
    "metadata": {
        "severity": "high", "environment": {"os": "windows", "nodeVersion": "18.x"},
        "createdAt": "2025-02-13T13:21:58.523Z", "updatedAt": "2025-02-13T13:22:21.336Z",
        "frequency": 1, "successRate": 1.0,
    },
    "verificationSteps": [
        {"command": "pnpm add shadcn@latest", "expectedOutput": "Successfully installed shadcn", "successIndicators": ["added shadcn"]}
    ],
}  # fmt: skip

NPE = """java.lang.NullPointerException
\tat org.jfree.chart.plot.CategoryPlot.removeDomainMarker(CategoryPlot.java:2166)
\tat org.jfree.chart.plot.CategoryPlot.removeDomainMarker(CategoryPlot.java:2139)
\tat org.jfree.chart.plot.junit.CategoryPlotTests.testRemoveDomainMarker(CategoryPlotTests.java:771)
\tat sun.reflect.NativeMethodAccessorImpl.invoke0(Native Method)"""


def assertion_lessons(lessons: LessonService, who, msg: str, contexts: dict[str, str]) -> None:
    """Lessons alike but for their failing test: {name: test context}, same AssertionError."""
    lessons.create_lessons(
        who,
        [lesson(n, type_="AssertionError", message=msg, context=c) for n, c in contexts.items()],
    )


def relevances(lessons: LessonService, who, query: dict) -> dict[str, float]:
    """{lesson name: relevance} of find_similar_errors for ``query``."""
    return {m.name: m.relevance for m in lessons.find_similar_errors(who, query).lessons}


def lesson(name: str, *, type_="NullPointerException", message="null marker", context="CategoryPlot",
           trace: str | None = None, rate: float = 1.0, observations=("check markers for null",)) -> dict:  # fmt: skip
    doc = copy.deepcopy(SEED)
    doc.update(name=name, observations=list(observations))
    doc["errorPattern"] = {"type": type_, "message": message, "context": context}
    if trace:
        doc["errorPattern"]["stackTrace"] = trace
    doc["metadata"]["successRate"] = rate
    return doc


@pytest.fixture
def services(open_engine):
    graph = GraphService(open_engine(HashEmbedder()))
    return graph, LessonService(graph)


def test_create_lesson_validates_every_required_field(services):
    _, lessons = services
    who = Who()
    bad = [
        ("entityType", lambda d: d.update(entityType="person")),
        ("severity", lambda d: d["metadata"].update(severity="extreme")),
        ("successRate", lambda d: d["metadata"].update(successRate=1.5)),
        ("errorPattern.message", lambda d: d["errorPattern"].pop("message")),
        ("errorPattern.context", lambda d: d["errorPattern"].pop("context")),
        ("metadata.environment", lambda d: d["metadata"].pop("environment")),
        ("metadata.frequency", lambda d: d["metadata"].pop("frequency")),
        ("verificationSteps", lambda d: d.pop("verificationSteps")),
        ("successIndicators", lambda d: d["verificationSteps"][0].pop("successIndicators")),
        ("observations", lambda d: d.pop("observations")),
    ]
    for field, breaker in bad:
        doc = copy.deepcopy(SEED)
        breaker(doc)
        with pytest.raises(InvalidInput) as err:
            lessons.create_lesson(who, doc)
        assert field.split(".")[-1] in err.value.message, (field, err.value.message)
    assert lessons.graph.read_graph(who).totalEntities == 0  # nothing half-written


def test_create_lesson_initialises_timestamps_and_round_trips(services):
    graph, lessons = services
    who = Who()
    made = lessons.create_lesson(who, SEED).lesson
    assert made.metadata.createdAt == made.metadata.updatedAt
    assert made.metadata.createdAt.year >= 2026  # set by the server, not copied from the input
    got = lessons.get(who, SEED["name"])
    assert got.model_dump(exclude={"metadata"}) == made.model_dump(exclude={"metadata"})
    assert got.errorPattern.stackTrace is None
    # a lesson is a graph node too, with its observations
    node = graph.open_nodes(who, [SEED["name"]]).entities[0]
    assert node.entityType == "lesson" and node.observations == SEED["observations"]
    with pytest.raises(Conflict):
        lessons.create_lesson(who, SEED)
    graph.create_entities(who, [{"name": "Plain", "entityType": "thing", "observations": []}])
    with pytest.raises(Conflict):  # an entity already holds the name
        lessons.create_lesson(who, {**SEED, "name": "Plain"})


def test_find_similar_errors_uses_the_stack_trace(services):
    _, lessons = services
    who = Who()
    other = NPE.replace("CategoryPlot", "XYPlot").replace("removeDomainMarker", "removeRangeMarker")
    lessons.create_lessons(who, [
        lesson("CATEGORY_NPE", trace=NPE, context="tests"),
        lesson("XY_NPE", trace=other.replace("2166", "2529"), context="tests"),
        lesson("NPM", type_="dependency", message="Cannot find package", context="pnpm install", trace=None),
    ])  # fmt: skip
    query = {"type": "java.lang.NullPointerException", "message": "", "context": "",
             "stackTrace": NPE.replace("testRemoveDomainMarker(CategoryPlotTests.java:771)", "testOther(CategoryPlotTests.java:900)")}  # fmt: skip
    res = lessons.find_similar_errors(who, query)
    assert [m.name for m in res.lessons][:2] == ["CATEGORY_NPE", "XY_NPE"]
    top = res.lessons[0]
    assert "CategoryPlot.removeDomainMarker" in top.matchedFrames
    assert top.verificationSteps and top.observations  # full resolution details
    assert "successRate" in res.ranking
    with pytest.raises(InvalidInput):
        lessons.find_similar_errors(who, {"type": "", "message": " ", "context": ""})


def test_long_traces_are_not_cut_at_32_query_terms(services):
    _, lessons = services
    who = Who()
    frames = "\n".join(
        f"\tat com.acme.pkg{i}.Service{i}.call{i}(Service{i}.java:{i})" for i in range(60)
    )
    lessons.create_lessons(who, [
        lesson("DEEP", trace=frames + "\n\tat com.acme.Deep.bottom(Deep.java:1)", message="m"),
        lesson("SHALLOW", trace="\tat com.acme.pkg0.Service0.call0(Service0.java:0)", message="m"),
    ])  # fmt: skip
    q = {"type": "IllegalStateException", "message": "m", "context": "",
         "stackTrace": frames + "\n\tat com.acme.Deep.bottom(Deep.java:1)"}  # fmt: skip
    assert lessons.find_similar_errors(who, q, mode="lexical").lessons[0].name == "DEEP"
    assert len(lessons.lexical.match_expr(q["stackTrace"]).split(" OR ")) > 100


def test_update_lesson_success_is_a_running_average(services):
    _, lessons = services
    who = Who()
    lessons.create_lesson(who, lesson("L", rate=1.0))  # frequency 1, rate 1.0
    r = lessons.update_lesson_success(who, "L", False)
    assert (r.frequency, r.successRate) == (2, 0.5)
    r = lessons.update_lesson_success(who, "L", True)
    assert (r.frequency, round(r.successRate, 4)) == (3, round(2 / 3, 4))
    got = lessons.get(who, "L")
    assert got.metadata.updatedAt == r.updatedAt and got.metadata.updatedAt > got.metadata.createdAt
    # the embedded record carries the rate too (recall boosts lessons by it)
    rec = lessons.engine.store.list(RecordFilter(kinds=[Kind.lesson]))[0]
    assert (
        round(rec.metadata["successRate"], 4) == round(2 / 3, 4) and rec.metadata["frequency"] == 3
    )
    with pytest.raises(NotFound):
        lessons.update_lesson_success(who, "missing", True)


def test_two_equally_relevant_lessons_are_reordered_by_reported_outcomes(services):
    """The success-rate feedback loop: identical error patterns, different track records."""
    _, lessons = services
    who = Who()
    same = {"type_": "TimeoutError", "message": "connection to postgres timed out after 30s",
            "context": "docker compose up", "observations": ("restart the database container",)}  # fmt: skip
    lessons.create_lessons(
        who, [lesson("FIX_A", rate=0.9, **same), lesson("FIX_B", rate=0.8, **same)]
    )
    query = {
        "type": "TimeoutError",
        "message": "postgres connection timed out",
        "context": "docker compose",
    }
    before = lessons.find_similar_errors(who, query).lessons
    assert [m.name for m in before] == ["FIX_A", "FIX_B"]
    assert before[0].relevance == pytest.approx(before[1].relevance, abs=0.02)  # equally relevant
    for _ in range(3):
        lessons.update_lesson_success(who, "FIX_A", False)
        lessons.update_lesson_success(who, "FIX_B", True)
    after = lessons.find_similar_errors(who, query).lessons
    assert [m.name for m in after] == ["FIX_B", "FIX_A"]
    for m in after:
        assert m.score == pytest.approx(
            m.relevance * (1 - SUCCESS_WEIGHT + SUCCESS_WEIGHT * m.metadata.successRate), abs=1e-3
        )
    recs = lessons.get_lesson_recommendations(
        who, "docker compose postgres keeps timing out"
    ).lessons
    assert [m.name for m in recs] == ["FIX_B", "FIX_A"]


def test_lesson_observations_are_graph_observations(services):
    graph, lessons = services
    who = Who()
    lessons.create_lesson(who, lesson("L", observations=["first note"]))
    out = graph.add_observations(
        who, [{"entityName": "L", "contents": ["first note", "pin the version"]}]
    )
    assert out.results[0].addedObservations == ["pin the version"]
    assert lessons.get(who, "L").observations == ["first note", "pin the version"]
    hits = lessons.get_lesson_recommendations(who, "pin the version").lessons
    assert hits and hits[0].name == "L"  # the lesson record was re-indexed
    assert (
        graph.delete_observations(
            who, [{"entityName": "L", "observations": ["first note"]}]
        ).deleted
        == 1
    )
    assert lessons.get(who, "L").observations == ["pin the version"]
    assert search_nodes(graph, who, "pin version").entities[0].name == "L"
    graph.delete_entities(who, ["L"])
    assert lessons.all_lessons(who.bucket("team")) == []
    assert lessons.engine.store.count(RecordFilter(kinds=[Kind.lesson])) == 0


def test_lessons_live_in_the_team_graph_unless_a_scope_is_given(services):
    _, lessons = services
    alice, bob, stranger = Who("proj", "alice"), Who("proj", "bob"), Who("other", "carol")
    lessons.create_lesson(alice, lesson("TEAM"))
    lessons.create_lesson(alice, lesson("MINE"), scope="private")
    q = {"type": "NullPointerException", "message": "null marker", "context": ""}
    assert [m.name for m in lessons.find_similar_errors(bob, q).lessons] == ["TEAM"]
    assert lessons.find_similar_errors(stranger, q).lessons == []
    assert [m.name for m in lessons.find_similar_errors(alice, q, scope="private").lessons] == [
        "MINE"
    ]
    assert lessons.find_similar_errors(bob, q, scope="private").lessons == []
    assert (
        json.loads(lessons.get(alice, "MINE", scope="private").model_dump_json())["scope"]
        == "private"
    )


def test_find_similar_errors_ranks_the_same_exception_and_frames_first(services):
    _, lessons = services
    who = Who()
    frames = NPE.split("\n", 1)[1]
    ise = "java.lang.IllegalStateException\n" + frames
    elsewhere = NPE.replace("org.jfree.chart.plot", "org.apache.commons.cli")
    lessons.create_lessons(who, [
        lesson("OTHER_EXCEPTION_SAME_FRAMES", type_="IllegalStateException", message="bad state", trace=ise, context="tests"),
        lesson("SAME_EXCEPTION_OTHER_CODE", trace=elsewhere.replace("CategoryPlot", "Parser"), context="tests"),
        lesson("SAME", trace=NPE, context="org.jfree.chart.plot.junit.CategoryPlotTests::testRemoveDomainMarker"),
        lesson("NPM", type_="dependency", message="Cannot find package", context="pnpm install"),
    ])  # fmt: skip
    query = {"type": "java.lang.NullPointerException", "message": "", "context": "",
             "stackTrace": NPE.replace("2139", "2140")}  # fmt: skip
    names = [m.name for m in lessons.find_similar_errors(who, query).lessons]
    assert names[0] == "SAME" and names.index("OTHER_EXCEPTION_SAME_FRAMES") < names.index("NPM")


def test_trace_affinity_blends_into_the_relevance(services):
    """A lesson about the failing test of the unit the query's error comes from (same package)
    gains over an otherwise equally relevant lesson from other code."""
    from graph import lesson_ranking as ranking
    from graph.traces import trace_profile

    _, lessons = services
    who = Who()
    lessons.create_lessons(who, [
        lesson("LEDGER", type_="AssertionError", message="totals differ", context="io.acme.core.LedgerTest::posts"),
        lesson("QUOTA", type_="AssertionError", message="totals differ", context="io.other.QuotaTest::limits"),
    ])  # fmt: skip
    trace = "\tat io.acme.core.Ledger.post(Ledger.java:7)\n\tat io.acme.core.Ledger.close(Ledger.java:9)"
    query = {
        "type": "AssertionError",
        "message": "totals differ",
        "context": "",
        "stackTrace": trace,
    }
    res = lessons.find_similar_errors(who, query).lessons
    assert [m.name for m in res] == ["LEDGER", "QUOTA"]
    q = trace_profile(f"totals differ\n{trace}")
    row = lessons.graph.lesson_rows(who.bucket("team"), ["LEDGER"])["LEDGER"]
    assert ranking.trace_affinity(q, row) == (1.0, 1.0)  # package io.acme.core, unit Ledger
    row = lessons.graph.lesson_rows(who.bucket("team"), ["QUOTA"])["QUOTA"]
    assert ranking.trace_affinity(q, row) == (1 / 3, 0.0)  # only "io" in common
    assert all(0.0 <= m.relevance <= 1.0 for m in res) and res[0].relevance > res[1].relevance


def test_a_context_naming_the_failing_test_class_ranks_that_class_first(services, monkeypatch):
    """find_similar_errors with the failing test as context: a lesson recorded for the same
    test class gains TEST_CLASS_WEIGHT / (candidates of that class); without a class in the
    query's context nothing changes."""
    from graph import lesson_ranking as ranking

    _, lessons = services
    who = Who()
    msg = "expected:<3> but was:<4>"
    assertion_lessons(
        lessons,
        who,
        msg,
        {
            "LEDGER": "io.acme.core.LedgerTest::posts",
            "JOURNAL": "io.acme.core.JournalTest::posts",
            "JOURNAL_2": "io.acme.core.JournalTest::books",
        },
    )

    def ask(context: str) -> dict[str, float]:
        q = {"type": "AssertionError", "message": msg, "context": context}
        return relevances(lessons, who, q)

    got = ask("io.acme.core.LedgerTest::closes")
    assert max(got, key=got.get) == "LEDGER"
    got = ask("io.acme.core.JournalTest::closes")
    assert max(got, key=got.get) in ("JOURNAL", "JOURNAL_2")
    assert all(0.0 <= r <= 1.0 for r in got.values())
    # the bonus is what puts the class first: zero weight, smaller margin
    with_bonus = ask("io.acme.core.LedgerTest::closes")
    monkeypatch.setattr(ranking, "TEST_CLASS_WEIGHT", 0.0)
    without = ask("io.acme.core.LedgerTest::closes")
    assert with_bonus["LEDGER"] - with_bonus["JOURNAL"] > without["LEDGER"] - without["JOURNAL"]
    # no class named in the context (or none at all): the weight plays no part
    plain = ask("posting a ledger")
    monkeypatch.setattr(ranking, "TEST_CLASS_WEIGHT", 5.0)
    assert ask("posting a ledger") == plain


RUNNER_ONLY = (
    "\tat org.junit.internal.runners.statements.ExpectException.evaluate(ExpectException.java:32)\n"
    "\tat org.junit.runners.ParentRunner.runLeaf(ParentRunner.java:271)\n"
    "\tat org.junit.runners.ParentRunner.run(ParentRunner.java:309)"
)


def test_a_frameless_query_weighs_the_package_of_its_failing_test_more(services, monkeypatch):
    """A query trace with runner frames only says nothing about where it failed: the package
    of its failing test (context) weighs FRAMELESS_PACKAGE_WEIGHT instead of PACKAGE_WEIGHT;
    a query with application frames is not affected."""
    from graph import lesson_ranking as ranking

    _, lessons = services
    who = Who()
    msg = "Expected exception: java.lang.IllegalArgumentException"
    lessons.create_lessons(who, [
        lesson("CODEC", type_="AssertionFailedError", message="expected:<-1> but was:<183>",
               context="org.acme.codec.binary.Base32StreamTest::testSkipToEnd", trace=RUNNER_ONLY),
        lesson("ZIP", type_="AssertionFailedError", message=msg,
               context="org.other.zip.ZipStreamTest::testThrows", trace=RUNNER_ONLY),
        lesson("MATH", type_="AssertionFailedError", message=msg,
               context="org.third.math.FitterTest::testLimit", trace=RUNNER_ONLY),
    ])  # fmt: skip

    def ask(trace: str) -> dict[str, float]:
        q = {"type": "AssertionFailedError", "message": msg, "stackTrace": trace,
             "context": "org.acme.codec.binary.Base32StreamTest::testSkipWrongArgument"}  # fmt: skip
        return relevances(lessons, who, q)

    got = ask(RUNNER_ONLY)
    assert all(0.0 <= r <= 1.0 for r in got.values())
    monkeypatch.setattr(ranking, "FRAMELESS_PACKAGE_WEIGHT", ranking.PACKAGE_WEIGHT)
    flat = ask(RUNNER_ONLY)
    assert got["CODEC"] - got["ZIP"] > flat["CODEC"] - flat["ZIP"]
    # with an application frame the query's trace locates it: the weight plays no part
    framed = "\tat org.acme.codec.binary.Base32Stream.skip(Base32Stream.java:9)\n" + RUNNER_ONLY
    before = ask(framed)
    monkeypatch.setattr(ranking, "FRAMELESS_PACKAGE_WEIGHT", 5.0)
    assert ask(framed) == before


def test_same_test_class_compares_the_qualified_classes_of_the_contexts(services):
    from graph import lesson_ranking as ranking
    from graph.traces import trace_profile

    _, lessons = services
    who = Who()
    lessons.create_lesson(who, lesson("L", context="io.acme.core.LedgerTest::posts"))
    row = lessons.graph.lesson_rows(who.bucket("team"), ["L"])["L"]
    assert ranking.same_test_class(trace_profile("", "io.acme.core.LedgerTest::x"), row)
    assert not ranking.same_test_class(trace_profile("", "io.other.LedgerTest::x"), row)
    assert not ranking.same_test_class(trace_profile("", "LedgerTest"), row)  # unqualified
    assert not ranking.same_test_class(trace_profile(NPE), row)  # frames are not the context


def test_query_counts_assertion_difference_terms_twice(services):
    """dd (changed word) and de/da (the same word with its side) terms count DIFF_WEIGHT times."""
    from graph.traces import DIFF_WEIGHT

    _, lessons = services
    terms = lessons.lexical.match_expr("expected:<a> but was:<bb>").split(" OR ")
    assert terms.count('"dabb"') == DIFF_WEIGHT and terms.count('"ddbb"') == DIFF_WEIGHT


def test_a_test_named_after_the_same_issue_ranks_first(services, monkeypatch):
    """Two tests written for one issue (testIssue772 in different classes) are about one bug:
    the lesson of the same issue gains ISSUE_WEIGHT over an otherwise alike lesson."""
    from graph import lesson_ranking as ranking

    _, lessons = services
    who = Who()
    msg = "expected:<0> but was:<1>"
    assertion_lessons(
        lessons,
        who,
        msg,
        {
            "Z_ISSUE": "a.b.IntegrationTest::testIssue772",
            "A_OTHER": "a.b.IntegrationTest::testIssue504",
        },
    )
    query = {"type": "AssertionError", "message": msg, "context": "a.b.ScopedTest::testIssue772"}

    def gap() -> float:
        rel = relevances(lessons, who, query)
        assert all(0.0 <= r <= 1.0 for r in rel.values())
        return rel["Z_ISSUE"] - rel["A_OTHER"]

    with_issue = gap()
    monkeypatch.setattr(ranking, "ISSUE_WEIGHT", 0.0)
    assert with_issue > gap() > 0


def test_every_lexical_path_reads_the_fingerprint_terms(services):
    """LessonLexical feeds its fingerprints through ``terms``, the one method the FTS5 MATCH,
    the in-memory postings and score_ids all read (overriding match_expr alone no longer
    reaches search/search_all)."""
    from graph import traces

    _, lessons = services
    query = "expected:<a> but was:<bb>\n\tat io.acme.Ledger.post(Ledger.java:7)"
    terms = lessons.lexical.terms(query)
    assert set(traces.fingerprint_terms(query)) <= set(terms)
    assert "flledgerpost7" in lessons.lexical.match_expr(query)


def test_shared_rare_test_words_blend_into_the_relevance(services, monkeypatch):
    """find_similar_errors adds TEST_WORDS_WEIGHT × the IDF-weighted share of the query's
    test-name words a lesson's test has (traces.test_words / weighted_overlap, tested there)."""
    from graph import lesson_ranking as ranking

    _, lessons = services
    who = Who()
    msg = "expected:<-1> but was:<183>"
    assertion_lessons(
        lessons,
        who,
        msg,
        {
            "Z_SKIP": "a.b.Base32InputStreamTest::testSkipToEnd",
            "A_READ": "a.b.Base32InputStreamTest::testReadToEnd",
            "M_HEX": "a.b.HexTest::testDecode",
        },
    )
    query = {
        "type": "AssertionError",
        "message": msg,
        "context": "a.b.Base64InputStreamTest::testSkipNone",
    }

    def relevance() -> dict[str, float]:
        rel = relevances(lessons, who, query)
        assert all(0.0 <= r <= 1.0 for r in rel.values())
        return rel

    monkeypatch.setattr(ranking, "TEST_WORDS_WEIGHT", 0.0)
    without = relevance()
    monkeypatch.setattr(ranking, "TEST_WORDS_WEIGHT", 1.0)
    heavy = relevance()
    # HexTest shares no word of Base64InputStreamTest::testSkipNone, ReadToEnd shares
    # base/input/stream: they swap once the test words count
    assert without["A_READ"] < without["M_HEX"] and heavy["A_READ"] > heavy["M_HEX"]
    assert max(heavy, key=heavy.get) == "Z_SKIP"  # skip: the rarer shared word
