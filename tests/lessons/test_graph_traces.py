"""Stack-trace features of lessons (graph/traces.py): frames, exception classes, fingerprints."""

from __future__ import annotations

from graph.traces import (
    app_frames,
    diff_words,
    edit_shapes,
    exception_types,
    fingerprint_terms,
    parse_frames,
    split_trace,
    summarize_trace,
)

JAVA = """java.lang.NullPointerException: boom
\tat org.jfree.chart.plot.CategoryPlot.removeDomainMarker(CategoryPlot.java:2166)
\tat org.jfree.chart.plot.junit.CategoryPlotTests.testRemoveDomainMarker(CategoryPlotTests.java:771)
\tat sun.reflect.NativeMethodAccessorImpl.invoke0(Native Method)
\tat junit.framework.TestCase.runTest(TestCase.java:176)
Caused by: java.io.IOException: disk
\tat a.b.C$Inner.run(C.java:3)"""

PYTHON = """Traceback (most recent call last):
  File "/app/main.py", line 10, in <module>
    run()
  File "/app/lib/db.py", line 42, in run
    conn.execute(q)
  File "/usr/lib/python3.11/site-packages/sqlalchemy/engine.py", line 7, in execute
    raise
sqlite3.OperationalError: no such table: users"""

NODE = """TypeError: Cannot read properties of undefined (reading 'map')
    at renderList (/app/src/List.js:12:20)
    at Object.<anonymous> (/app/src/index.js:5:1)
    at Module._compile (node:internal/modules/cjs/loader:1105:14)"""


def test_java_frames_and_framework_detection():
    frames = parse_frames(JAVA)
    assert [f.simple for f in frames][:2] == [
        "CategoryPlot.removeDomainMarker",
        "CategoryPlotTests.testRemoveDomainMarker",
    ]
    assert frames[0].line == "2166" and not frames[0].framework
    assert frames[2].framework and frames[3].framework  # reflection, junit
    assert frames[-1].simple == "C.run"  # inner class folded into its outer class
    assert app_frames(JAVA) == [
        "CategoryPlot.removeDomainMarker",
        "CategoryPlotTests.testRemoveDomainMarker",
        "C.run",
    ]
    assert summarize_trace(JAVA).startswith("at CategoryPlot.removeDomainMarker, ")


def test_python_and_node_frames():
    py = parse_frames(PYTHON)
    assert [(f.simple, f.line, f.framework) for f in py] == [
        ("main.<module>", "10", False), ("db.run", "42", False), ("engine.execute", "7", True),
    ]  # fmt: skip
    js = parse_frames(NODE)
    assert [f.simple for f in js if not f.framework] == ["List.renderList", "index.<anonymous>"]
    assert js[-1].framework  # node:internal


def test_exception_types_and_split():
    assert exception_types(JAVA) == ["java.lang.NullPointerException", "java.io.IOException"]
    assert split_trace(JAVA)[:2] == ("java.lang.NullPointerException", "boom")
    assert split_trace(PYTHON)[:2] == ("sqlite3.OperationalError", "no such table: users")
    typ, msg, rest = split_trace(NODE)
    assert (typ, msg) == ("TypeError", "Cannot read properties of undefined (reading 'map')")
    assert rest.lstrip().startswith("at renderList")


def test_fingerprints_name_exceptions_frames_and_lines():
    terms = fingerprint_terms(JAVA)
    assert "xcnullpointerexception" in terms and "xcjavalangnullpointerexception" in terms
    assert "xcioexception" in terms
    assert "flcategoryplotremovedomainmarker2166" in terms  # frame + line
    assert "fmcategoryplotremovedomainmarker" in terms  # application frame without line
    assert "fmtestcaseruntest" not in terms  # runner frames only get frame+line tokens
    assert "fltestcaseruntest176" in terms
    assert all(t.isalnum() and t == t.lower() for t in terms)  # one FTS5 token each


def test_assertion_differences():
    junit = "junit.framework.ComparisonFailure: expected:<... (this:f): [undefined]\nreq> but was:<... (this:f): [?]\nreq>"
    assert diff_words(junit) == ["undefined"]  # JUnit's [ ] markers
    closure = "AssertionFailedError: \nExpected: var y=function(x){}\nResult: var y=function(){}\nNode tree"
    assert edit_shapes(closure) == ["dxdellpwxrp", "dxdelwx"]  # a name deleted between ( )
    renamed = "Expected: var b$$inline_1=y\nResult: var b$$inline_3=y\n"
    assert "dxrepnum" in edit_shapes(renamed)  # names that differ only by a number
    assert diff_words(renamed) == ["inline"]
    assert diff_words("assert parse_host(url) == 'example.org'") == [
        "parse",
        "host",
        "url",
        "example",
        "org",
    ]
    assert diff_words("no assertion here") == [] and edit_shapes("plain text") == []


def test_difference_words_keep_their_side():
    from graph.traces import diff_sides

    junit = "junit.framework.ComparisonFailure: expected:<... (this:f): [undefined]\nreq> but was:<... (this:f): [?]\nreq>"
    assert diff_sides(junit) == ["deundefined"]  # expected, missing from the actual
    swapped = "AssertionFailedError: expected:<None> but was:<undefined>"
    assert diff_sides(swapped) == ["denone", "daundefined"]  # undefined found, not missing
    assert {"ddundefined", "daundefined"} <= set(fingerprint_terms(swapped))
    assert diff_sides("no assertion here") == []


def test_assertion_pair_stops_at_the_frames_and_reads_cut_traces():
    from graph.traces import assertion_pair

    framed = (
        "junit.framework.AssertionFailedError: expected:<1> but was:<2>\n"
        "\tat a.B.check(B.java:1)\n\tat a.B.<init>(B.java:2)"
    )
    assert assertion_pair(framed) == ("1", "2")  # not on into the frame's <init>
    multiline = "expected:<<a>\n<b>> but was:<<a>\n<c>>\n\tat a.B.c(B.java:2)"
    assert assertion_pair(multiline) == ("<a>\n<b>", "<a>\n<c>")
    # the query layout of find_similar_errors: the Context line sits between message and frames
    query = "ComparisonFailure: expected:<x> but was:<y>\nContext: a.BTest::t\n\tat a.B.c(B.java:2)"
    assert assertion_pair(query) == ("x", "y")
    # a trace cut inside the actual value: the expected is compared over the same length
    cut = "ComparisonFailure: expected:</*\n [  This\n   is\n ] ART\n*/\n> but was:</*\n [This\n is"
    assert assertion_pair(cut) == ("/*\n [  This\n   is\n ", "/*\n [This\n is")


def test_whitespace_only_and_identical_values_get_their_own_shape():
    assert edit_shapes("expected:<x-[ ]-0.0> but was:<x-[]-0.0>") == ["dxws"]
    cut = "ComparisonFailure: expected:</*\n [  This\n   is\n ] ART\n*/\n> but was:</*\n [This\n is"
    assert edit_shapes(cut) == ["dxws"]
    assert edit_shapes("expected:<4.5> but was:<4.5>") == ["dxsame"]
    assert "dxws" in fingerprint_terms("AssertionFailedError: expected:<a  b> but was:<a b>")
    assert "dxws" not in edit_shapes("expected:<a b> but was:<a c>")


def test_code_units_map_tests_to_the_unit_they_test():
    from graph.traces import code_unit

    assert code_unit("InvocationMatcherTest") == "InvocationMatcher"
    assert code_unit("CategoryPlotTests") == "CategoryPlot"
    assert code_unit("TestHelpFormatter") == "HelpFormatter"
    assert code_unit("ZipTestCase") == "Zip"
    assert code_unit("test_db") == "db" and code_unit("db_test") == "db"
    assert code_unit("C$Inner") == "C"
    assert code_unit("Testament") == "Testament"  # "Test" only as a word of its own
    assert code_unit("Test") == "Test"


def test_trace_profile_units_and_packages():
    from graph.traces import trace_profile

    prof = trace_profile(JAVA, "org.jfree.chart.plot.junit.XYPlotTests::testX")
    # runner and reflection frames are left out; the context's test names its unit too
    assert prof.units == {"CategoryPlot", "C", "XYPlot"}
    assert prof.packages == {"org.jfree.chart.plot", "org.jfree.chart.plot.junit", "a.b"}
    assert prof.classes == {"org.jfree.chart.plot.junit.XYPlotTests"}  # the context's only
    py = trace_profile(PYTHON)
    assert py.units == {"main", "db"} and py.packages == {"app", "app.lib"}
    assert trace_profile("no frames at all", "java.lang.String").units == set()
    assert trace_profile("", "java.lang.String").classes == set()  # the runtime's, not a test
    assert trace_profile("", "a.b.Outer$InnerTest::t junit.framework.TestCase").classes == {
        "a.b.Outer"
    }


def test_trace_profile_frameless_when_the_trace_has_no_application_frame():
    from graph.traces import trace_profile

    runner = (
        "\tat org.junit.internal.runners.statements.ExpectException.evaluate(ExpectException.java:32)\n"
        "\tat org.junit.runners.ParentRunner.runLeaf(ParentRunner.java:271)"
    )
    assert not trace_profile(JAVA).frameless and not trace_profile(PYTHON).frameless
    prof = trace_profile(f"Expected exception: java.lang.IllegalArgumentException\n{runner}",
                         "a.b.FooTest::testBar")  # fmt: skip
    assert prof.frameless and prof.packages == {"a.b"}  # the test is its only location
    assert trace_profile("Expected: x Result: y (cut before its frames)").frameless


def test_jaccard_and_package_affinity():
    from graph.traces import jaccard, package_affinity

    assert jaccard({"A", "B"}, {"B", "C"}) == 1 / 3
    assert jaccard(set(), {"A"}) == 0.0
    cli = {"org.apache.commons.cli"}
    assert package_affinity(cli, {"org.apache.commons.cli.help"}) == 1.0
    assert package_affinity(cli, {"org.apache.commons.codec"}) == 0.75
    assert package_affinity(cli, {"com.google.javascript.jscomp"}) == 0.0
    assert package_affinity(set(), cli) == 0.0


def test_package_affinity_weighted_by_prefix_rarity():
    """Among candidates that all live under org.apache.commons, sharing that prefix says
    nothing; sharing org.apache.commons.cli says everything."""
    from graph.traces import package_affinity, package_prefixes, prefix_idf

    assert package_prefixes({"a.b.c"}) == {"a", "a.b", "a.b.c"}
    cands = [{"org.apache.commons.cli"}, {"org.apache.commons.codec"}, {"org.apache.commons.io"}]
    idf = prefix_idf(cands)
    assert idf("org.apache.commons") == 0.0 and idf("org.apache.commons.cli") > 0
    cli = {"org.apache.commons.cli"}
    assert package_affinity(cli, {"org.apache.commons.codec"}, idf) == 0.0  # was 0.75
    assert package_affinity(cli, {"org.apache.commons.cli.help"}, idf) == 1.0
    alone = prefix_idf([cli])  # one candidate: every prefix is shared by all, nothing tells
    assert package_affinity(cli, {"org.apache.commons.cli"}, alone) == 0.0


def test_issue_numbers_of_the_test_names():
    from graph.traces import issue_numbers, trace_profile

    assert issue_numbers("com.google.javascript.jscomp.ScopedAliasesTest::testIssue772") == {"772"}
    assert issue_numbers("tests/test_api.py::test_bug_01234") == {"1234"}
    assert issue_numbers("a.b.X5455_ExtendedTimestampTest::testGetters") == set()  # class only
    assert issue_numbers("a.b.FooTest::testFoo2") == set()  # too short for an issue
    assert trace_profile("", "a.b.CTest::testIssue772").issues == {"772"}


def test_test_words_and_weighted_overlap():
    from graph.traces import idf, test_words, weighted_overlap

    words = test_words(
        "org.apache.commons.codec.binary.Base64InputStreamTest::testSkipWrongArgument"
    )
    assert words == {"base", "input", "stream", "skip", "wrong", "argument"}
    assert test_words("tests/test_api.py::test_parse_host") == {"api", "parse", "host"}
    assert test_words("pnpm install") == set()
    cands = [{"base", "input", "stream", "skip"}, {"base", "input", "stream"}, {"soundex"}]
    w = idf(cands)
    assert w("soundex") > w("base") > 0
    q = frozenset({"base", "input", "skip"})
    assert weighted_overlap(q, cands[0], w) == 1.0
    assert 0 < weighted_overlap(q, cands[1], w) < 0.5  # the rare word (skip) is missing
    assert weighted_overlap(q, cands[2], w) == 0.0 and weighted_overlap(set(), cands[0], w) == 0.0
