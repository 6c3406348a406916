"""Command lines are outside input: any of them is read into its checks without an error and
in bounded time (``ingest/learning/commands.py``, ``ingest/learning/runner_args.py``, ``ingest/learning/check_targets.py``,
``ingest/learning/test_filters.py``), whatever quotes, separators, pipes, environment prefixes, filters
and option values it holds (Hypothesis, and a few pathological lines)."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.learning.check_targets import Check
from ingest.learning.commands import command_key, related
from ingest.learning.test_filters import go_run, matches, negates, pytest_k

WORDS = [
    "pytest", "python", "-m", "cargo", "test", "go", "./...", "npx", "jest", "make", "npm", "run",
    "mvn", "gradle", "-x", "--", "-k", "not", "and", "or", "(", ")", "--deselect", "--ignore",
    "--skip", "-skip", "-run", "-t", "-Dtest=!A", "-DskipTests", "tests/a.py::t[1]", "A=1",
    "SKIP_X=1", "PYTEST_ADDOPTS='-k not x'", "GOFLAGS=-skip=X", "|", "||", "&&", ";", "&", "\n",
    "2>&1", ">", "out.log", "<<", "EOF", "'", '"', "\\", "$(x)", "`y`", "timeout", "1", "env",
    "sudo", "uv", "poetry", "set", "-o", "pipefail", "tail", "-3", "true", "exit", "0", "(a+)+$",
    "[", "]", "*", "--lf", "--co", "-v", "é", "\x00", "x" * 300,
]  # fmt: skip
commands = st.one_of(
    st.lists(st.sampled_from(WORDS) | st.text(max_size=12), max_size=40).map(" ".join),
    st.text(max_size=300),
)
TESTS = ("tests/a.py::t", "net::tests::fetch", "TestFetch", "FooTest::testBar", "src/a.test.js")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(commands, commands)
def test_any_command_line_is_read_without_error(a, b):
    ka, kb = command_key(a, "/work/app"), command_key(b, "/work/app")
    assert isinstance(ka.sure, bool) and all(isinstance(c, Check) for c in ka.checks)
    related(ka, kb, TESTS)
    for c in kb.checks:
        for t in TESTS:
            c.selects(t)
        for f in ka.checks:
            assert c.rerun_kind(f, TESTS) in ("", "same", "broader", "narrower")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["not", "and", "or", "(", ")", "a", "test_x", "[1]", " ", "::",
                                 "-", "é", "\\"]), max_size=60).map(" ".join),
       st.sampled_from(TESTS))  # fmt: skip
def test_any_name_filter_is_evaluated_without_error(expr, test):
    assert pytest_k(expr, test) in (True, False, None)
    for tool in ("pytest", "go", "jest", "cargo"):
        assert isinstance(matches(tool, expr, test), bool)
        assert isinstance(negates(tool, expr), bool)


@pytest.mark.parametrize(
    "command",
    [
        "pytest " + "'" * 10_001, 'pytest "' + "a" * 100_000, "a && " * 20_000 + "pytest",
        "A=1 " * 10_000 + "pytest", "pytest -k '" + "not " * 50_000 + "x'",
        "pytest -k '" + "(" * 20_000 + "x'", "go test -run '" + "(a+)+" * 500 + "$'",
        "cargo test -- " + "--skip x " * 20_000, "x | " * 20_000, "\n" * 100_000,
    ],
    ids=["quotes", "open-quote", "chain", "assignments", "deep-not", "deep-parens", "go-regex",
         "skips", "pipes", "newlines"],
)  # fmt: skip
def test_a_pathological_command_line_is_read_in_bounded_time(command):
    t0 = time.perf_counter()
    key = command_key(command, "/work/app")
    related(key, command_key("pytest tests/", "/work/app"), TESTS)
    related(command_key("pytest tests/", "/work/app"), key, TESTS)
    for c in key.checks:
        c.selects("tests/a.py::t")
    assert time.perf_counter() - t0 < 3.0


def test_a_hostile_go_pattern_runs_in_linear_time():
    t0 = time.perf_counter()
    assert not go_run("(a+)+$", "a" * 200 + "b" + "/x" * 50)
    assert pytest_k("not " * 5_000 + "x", "tests/a.py::x") is None  # deeper than allowed
    assert time.perf_counter() - t0 < 1.0
