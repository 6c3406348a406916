"""What a test run's output reports (``ingest/learning/test_reports.py``): the tests it names with their
outcome and its summary's counts, per runner; and whether a pass proves a failure re-run and
an edit can be its fix (``ingest/learning/fix_evidence.py``). Hostile and random outputs never raise and
are read in bounded time (Hypothesis)."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.learning.fix_evidence import file_kind, fix_paths, named_files
from ingest.learning.test_reports import read_report, runner_passed, same_test

PYTEST_V = """tests/test_api.py::test_small PASSED                                   [ 33%]
tests/test_api.py::TestApi::test_large[1] FAILED                          [ 66%]
tests/test_api.py::test_empty SKIPPED (no network)                        [100%]
===== 1 failed, 1 passed, 1 skipped, 2 deselected, 1 xfailed in 0.52s ====="""
CARGO = """running 2 tests
test parser::tests::dates ... ok
test net::tests::fetch ... ignored
test result: ok. 1 passed; 0 failed; 1 ignored; 0 measured; 3 filtered out; finished in 0.01s

running 1 test
test it::roundtrip ... ok
test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s"""


@pytest.mark.parametrize(
    "output, counts, ran",
    [
        (PYTEST_V, {"passed": 1, "failed": 1, "skipped": 2, "deselected": 2}, 2),
        ("3 passed, 1 deselected in 0.12s", {"passed": 3, "deselected": 1}, 3),
        ("=== 4 passed, 1 skipped, 2 warnings in 0.40 seconds ===", {"passed": 4, "skipped": 1}, 4),
        ("===== no tests ran in 0.01s =====", {}, 0),
        ("===== 2 errors in 0.3s =====", {"failed": 2}, 2),
        (CARGO, {"passed": 2, "skipped": 1, "filtered": 3}, 2),
        ("ok  \tshop/cart\t0.01s [no tests to run]\nok  \tshop/net\t(cached)", {"filtered": 1}, None),
        ("ok  \tshop/net\t0.01s [no tests to run]", {"filtered": 1}, 0),
        ("Tests:       1 skipped, 2 todo, 5 passed, 8 total", {"passed": 5, "skipped": 3}, 5),
        (" Test Files  2 passed (2)\n      Tests  5 passed | 1 skipped (6)", {"passed": 5, "skipped": 1}, 5),
        ("Tests run: 2, Failures: 0, Errors: 0, Skipped: 0\nTests run: 7, Failures: 1, Errors: 0, "
         "Skipped: 2", {"passed": 4, "failed": 1, "skipped": 2}, 5),
        ("Ran 5 tests in 0.1s\n\nOK (skipped=1)", {"passed": 4, "skipped": 1}, 4),
        ("Ran 0 tests in 0.0s\n\nOK", {}, 0),
        ("compiling... done", {}, None),
    ],
)  # fmt: skip
def test_summaries_are_counted_per_runner(output, counts, ran):
    r = read_report(output)
    assert {k: v for k, v in r.counts.items() if v} == counts and r.ran == ran


def test_tests_named_one_by_one_with_their_outcome():
    r = read_report(PYTEST_V)
    assert r.tests == {"tests/test_api.py::test_small": "passed",
                       "tests/test_api.py::TestApi::test_large[1]": "failed",
                       "tests/test_api.py::test_empty": "skipped"}  # fmt: skip
    assert r.named_by == {"pytest"}
    xdist = read_report("[gw1] [ 50%] PASSED tests/a.py::test_x\nPASSED tests/a.py::test_y")
    assert set(xdist.tests) == {"tests/a.py::test_x", "tests/a.py::test_y"}
    assert read_report(CARGO).tests["net::tests::fetch"] == "skipped"
    go = read_report("=== RUN   TestA\n--- PASS: TestA (0.00s)\n    --- SKIP: TestA/sub (0.00s)")
    assert go.tests == {"TestA": "passed", "TestA/sub": "skipped"} and go.named_by == {"go"}
    assert read_report("FooTest > testBar PASSED").tests == {"FooTest::testBar": "passed"}
    jest = read_report("PASS src/a.test.js\nFAIL src/b.test.ts\n")
    assert jest.files == {"src/a.test.js": "passed", "src/b.test.ts": "failed"} and not jest.tests


def test_a_test_named_failed_once_stays_failed():
    r = read_report("tests/a.py::t FAILED\ntests/a.py::t PASSED\nPASSED tests/a.py::t")
    assert r.tests == {"tests/a.py::t": "failed"}


def test_a_runners_own_summary_of_success():
    assert runner_passed("===== 3 passed in 0.2s =====")
    assert not runner_passed("===== 1 failed, 3 passed in 0.2s =====")
    assert not runner_passed("tests/test_api.py ...") and not runner_passed("no tests ran")
    assert runner_passed("Failing tests: 0") and runner_passed("[INFO] BUILD SUCCESS")
    assert runner_passed("test result: ok. 3 passed; 0 failed; 0 ignored")


def test_one_test_written_two_ways():
    assert same_test("app/tests/test_a.py::test_x", "tests/test_a.py::test_x")
    assert same_test("org.a.FooTest::testBar", "FooTest::testBar")
    assert same_test("src/a.test.js", "/work/app/src/a.test.js")
    assert not same_test("tests/test_a.py::test_x", "tests/test_a.py::test_x[1]")
    assert not same_test("TestA/sub", "TestB/sub") and not same_test("TestA", "TestAB")


@pytest.mark.parametrize(
    "path, kind",
    [
        ("README.md", "doc"), ("readme", "doc"), ("LICENSE", "doc"), ("LICENSE-MIT", "doc"),
        ("COPYING.LESSER", "doc"), ("CHANGELOG", "doc"), ("docs/conf.py", "doc"),
        ("notes/todo.txt", "doc"), ("guide.rst", "doc"), ("/work/app/doc/api.adoc", "doc"),
        ("license.py", "code"), ("app/history.py", "code"), ("requirements-dev.txt", "code"),
        ("CMakeLists.txt", "code"), ("Cargo.toml", "code"), (".github/workflows/ci.yml", "code"),
        ("tests/data/expected.json", "code"), ("poetry.lock", "lock"), ("web/package-lock.json", "lock"),
        ("go.sum", "lock"), ("/home/me/docs/projects/app/src/x.py", "code"),
    ],
)  # fmt: skip
def test_documentation_lockfiles_and_the_rest(path, kind):
    assert file_kind(path, "/home/me/docs/projects/app") == kind


def test_the_edits_that_make_a_fix():
    cwd = "/w"
    assert fix_paths([], ["/w/README.md"], cwd) == []
    assert fix_paths([], ["/w/poetry.lock"], cwd) == []  # a lockfile alone
    assert fix_paths([], ["/w/poetry.lock", "/w/pyproject.toml"], cwd) == ["/w/poetry.lock",
                                                                          "/w/pyproject.toml"]  # fmt: skip
    assert fix_paths([], ["/w/README.md", "/w/app.py"], cwd) == ["/w/app.py"]
    named = named_files('File "/w/docs/usage.md", line 3', "pytest --doctest-glob='*.md' docs")
    assert "usage.md" in named and fix_paths(named, ["/w/docs/usage.md"], cwd) == [
        "/w/docs/usage.md"
    ]
    assert "foo.java" in named_files("at org.a.Foo.bar(Foo.java:12)")


# ------------------------------------------------------------------------------ hostile input
FRAGMENTS = [
    "===== ", " passed", " failed", " skipped", " deselected", " in 0.1s", "::", "test ", " ... ",
    "ok", "FAILED", "--- PASS: ", "--- FAIL: ", "PASS ", "FAIL ", "Tests: ", "Tests run: ",
    ", Failures: ", "[no tests to run]", "test result: ok. ", "; ", "Ran ", "OK (skipped=",
    "\n", " ", "9" * 30, "(", ")", "é", "\x00", "\u2028", "[gw0] [ 5%] ", "> ", "x" * 50,
]  # fmt: skip
outputs = st.one_of(
    st.text(max_size=400),
    st.lists(st.sampled_from(FRAGMENTS) | st.integers(0, 10**6).map(str), max_size=120).map(
        "".join
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outputs)
def test_any_output_is_read_without_error_and_counts_are_never_negative(output):
    r = read_report(output)
    assert all(v >= 0 for k, v in r.counts.items() if k != "passed")
    assert r.ran is None or r.ran >= -r.counts.get("skipped", 0)
    runner_passed(output)
    named_files(output)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS[:-3]), min_size=1, max_size=30), st.integers(0, 99))
def test_a_summary_after_any_noise_is_read(noise, n):
    r = read_report("".join(noise) + f"\n===== 2 passed, {n} skipped in 0.3s =====\n")
    assert r.counts.get("skipped", 0) >= n and r.summary


@pytest.mark.parametrize(
    "output",
    ["a::b " * 200_000, "=" * 1_000_000, "1 passed, " * 100_000, "test " + "x" * 1_000_000,
     ("tests/a.py::t PASSED\n" * 60_000), "\n" * 1_000_000, "Tests: " + "1 passed " * 100_000],
    ids=["colons", "equals", "counts", "long-line", "many-names", "newlines", "jest-counts"],
)  # fmt: skip
def test_a_megabyte_of_hostile_output_is_read_in_bounded_time(output):
    t0 = time.perf_counter()
    read_report(output)
    runner_passed(output)
    named_files(output)
    assert time.perf_counter() - t0 < 3.0
