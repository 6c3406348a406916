"""Which commands are checks, and when a later command re-runs a failed one
(``ingest/learning/commands.py``, ``ingest/learning/check_targets.py``); what an output says
(``ingest/learning/signatures.py``)."""

from __future__ import annotations

import pytest

from ingest.learning.commands import command_key, related
from ingest.learning.signatures import (
    error_signature,
    error_text,
    failing_tests,
    runner_failed,
    runner_of,
)

CWD = "/work/app"


def same(a: str, b: str, tests: tuple[str, ...] = (), ran: str | None = None) -> bool:
    return related(command_key(a, CWD), command_key(b, CWD), tests, ran)


@pytest.mark.parametrize(
    "a, b",
    [
        ("pytest tests/", "cd /work/app && python -m pytest tests/ -q 2>&1 | tail -30"),
        ("pytest tests/test_db.py::test_pool", "uv run pytest ./tests/test_db.py::test_pool -v"),
        ("cargo build 2>&1", 'export PATH="$HOME/.cargo/bin:$PATH" && cargo build --quiet'),
        ("cargo build --release", "cargo build --release 2>&1"),
        ("go test ./pkg/... -run TestPool", "go test -count=1 -run TestPool ./pkg/..."),
        ("defects4j test -t org.a.FooTest::testBar", "defects4j test -t org.a.FooTest::testBar"),
        ("mvn test -Dtest=FooTest#testBar", "mvn -q test -Dtest=FooTest#testBar"),
        ("npx jest src/a.test.js", "jest src/a.test.js --color"),
        ("make test", "make test"),
        ('python3 -c "import yaml; yaml.safe_load(open(\'a.yml\'))" && echo "valid"',
         'python3 -c "import yaml; yaml.safe_load(open(\'a.yml\'))" && echo "NOW valid!"'),
        ("ruff check server/", "ruff check server/ --quiet"),
    ],
)  # fmt: skip
def test_the_same_check_written_differently(a, b):
    assert same(a, b)


@pytest.mark.parametrize(
    "a, b",
    [
        ("pytest tests/test_a.py", "pytest tests/test_b.py"),
        ("cargo build", "cargo build --release"),
        ("cargo build", "cargo test"),
        ("defects4j test -t org.a.FooTest::testBar", "defects4j test -t org.a.FooTest::testBaz"),
        ("make test", "make docs"),
        ("powershell -Command \"$x = 1\"", "powershell -ExecutionPolicy Bypass -File x.ps1"),
        ("python3 run.py", "python3 other.py"),
    ],
)  # fmt: skip
def test_different_checks(a, b):
    assert not same(a, b)


def test_narrower_on_the_failing_test_and_broader_runs():
    failing = ("tests/test_db.py::test_pool",)
    assert same("pytest tests/", "pytest tests/test_db.py::test_pool", failing)
    assert not same("pytest tests/", "pytest tests/test_db.py::test_other", failing)
    assert not same("pytest tests/", "pytest tests/test_db.py")  # failing test unknown
    assert same("pytest tests/test_db.py::test_pool", "pytest")  # a broader run covers it
    assert same("pytest tests/", "pytest tests/ -k pool", failing)
    assert same("defects4j test -t org.a.FooTest::testBar", "defects4j test")
    assert same("go test ./...", "go test ./pkg -run TestPool", ("TestPool",))


def test_a_task_runner_reruns_what_its_output_shows():
    assert not same("pytest tests/ --cov=src", "just check")
    assert same("pytest tests/ --cov=src", "just check", ran="pytest")
    assert not same("cargo build", "just check", ran="pytest")


@pytest.mark.parametrize(
    "command",
    ["ls -la", "git status", "cat justfile", "gh run list", "pip install pytest",
     "python -m pip install x", "npm install", "cd /x && export A=1", "sleep 5 && gh run list",
     "uv pip install pytest || pipx install pytest", "curl -I https://x", "echo ok"],
)  # fmt: skip
def test_not_checks(command):
    assert command_key(command, CWD).checks == ()


def test_shell_edits():
    assert command_key("sed -i 's/a/b/' src/app.py", CWD).edits == ("src/app.py",)
    assert command_key("cat > notes.md << EOF\nx\nEOF", CWD).edits == ("notes.md",)
    assert command_key("pytest > out.log", CWD).edits == ()


JAVA = """Failing tests: 1
  - org.a.FooTest::testBar
junit.framework.AssertionFailedError: expected:<1> but was:<0>
\tat junit.framework.Assert.fail(Assert.java:57)
\tat org.a.Foo.bar(Foo.java:12)"""

PY = """Exit code 1
Traceback (most recent call last):
  File "/work/app/db.py", line 12, in connect
    raise OperationalError(f"port {port} at 0x7f3a9c refused at 2025-03-04T09:30:00Z")
db.OperationalError: port 5432 at 0x7f3a9c refused at 2025-03-04T09:30:00Z"""


def test_signatures_normalise_what_changes_between_runs():
    java = error_signature(JAVA, "defects4j test -t org.a.FooTest::testBar", failing_tests(JAVA))
    assert (java.type, java.message, java.test) == (
        "junit.framework.AssertionFailedError", "expected:<1> but was:<0>", "org.a.FooTest::testBar")  # fmt: skip
    assert (
        java.normalized
        == "AssertionFailedError | expected:<<n>> but was:<<n>> | org.a.FooTest::testBar"
    )
    py = error_signature(PY, "python db.py")
    again = error_signature(PY.replace("5432", "6543").replace("0x7f3a9c", "0x11").replace("09:30", "10:45"),
                            "python db.py")  # fmt: skip
    assert py.type == "db.OperationalError" and py.digest == again.digest
    assert "<addr>" in py.normalized and "<time>" in py.normalized
    assert error_text(PY).startswith("Traceback")  # the frames before the exception are kept
    rust = error_signature("error[E0412]: cannot find type `Message` in module `cosmic::app`\n"
                           " --> src/app.rs:12:5", "cargo build --release")  # fmt: skip
    assert (rust.type, rust.test) == ("E0412", "cargo build --release")


def test_failing_tests_and_runners_from_outputs():
    assert failing_tests(JAVA) == ("org.a.FooTest::testBar",)
    pytest_out = "FAILED tests/test_db.py::test_pool - AssertionError: assert 1 == 2\n= 1 failed, 3 passed in 0.52s ="
    assert failing_tests(pytest_out) == ("tests/test_db.py::test_pool",)
    assert runner_failed(pytest_out) and runner_of(pytest_out) == "pytest"
    assert failing_tests("--- FAIL: TestPool (0.00s)\nFAIL\tpkg\t0.01s") == ("TestPool",)
    assert not runner_failed("Failing tests: 0") and not runner_failed("ERROR: something logged")
    assert runner_of("test result: ok. 7 passed") == "cargo"


# ------------------------------------------------------------------ what a pass leaves out
@pytest.mark.parametrize(
    "failed, passed",
    [
        ("pytest tests/test_api.py", 'pytest tests/test_api.py -k "not test_upload_large"'),
        ("pytest tests/test_api.py", "pytest tests/test_api.py -k 'test_upload and not large'"),
        ("pytest tests/test_api.py", "pytest tests/test_api.py --deselect tests/test_api.py::test_upload_large"),
        ("pytest tests/", "pytest tests/ --ignore=tests/test_api.py"),
        ("pytest tests/", "pytest tests/ --ignore-glob='*_api.py'"),
        ("pytest -m integration", 'pytest -m "not integration"'),
        ("pytest tests/test_api.py", 'pytest tests/test_api.py -m "not slow"'),
        ("pytest tests/test_api.py", "pytest tests/test_api.py -m fast"),
        ("cargo test", "cargo test -- --skip fetch_retries"),
        ("cargo test", "cargo test -- --ignored"),
        ("cargo test", "cargo test --lib"),
        ("go test ./...", "go test ./... -skip TestFetch"),
        ("go test ./...", "go test --skip=TestFetch ./..."),
        ("go test -tags integration ./...", "go test ./..."),
        ("npx jest", "npx jest --testPathIgnorePatterns upload"),
        ("npx jest", "npx jest -t '^(?!.*large)'"),
        ("pytest tests/test_api.py", "PYTEST_ADDOPTS='--deselect tests/test_api.py::test_upload_large' pytest tests/test_api.py"),
        ("pytest tests/test_api.py", "SKIP_SLOW=1 pytest tests/test_api.py"),
        ("go test ./...", "GOFLAGS=-skip=TestFetch go test ./..."),
        ("make test", "make test PYTEST_ARGS='-k not_large'"),
        ("npm test", "npm test -- --testPathIgnorePatterns upload"),
        ("mvn test", "mvn install -DskipTests"),
        ("mvn test", "mvn test -Dmaven.test.skip=true"),
        ("mvn test", "mvn test -Dtest='!FooTest'"),
        ("gradle test", "gradle build -x test"),
        ("pytest tests/test_api.py", "pytest tests/test_api.py --collect-only"),
        ("go test ./...", "go test -list . ./..."),
        ("cargo test", "cargo test -- --list"),
        ("cargo test", "cargo test --no-run"),
    ],
)  # fmt: skip
def test_a_pass_that_excludes_anything_the_failure_ran_is_no_rerun(failed, passed):
    for tests in ((), ("tests/test_api.py::test_upload_large", "net::tests::fetch_retries",
                       "TestFetch", "FooTest::testBar")):  # fmt: skip
        assert not same(failed, passed, tests)


def test_k_and_m_are_part_of_the_checks_identity():
    a, b = command_key("pytest -m integration", CWD), command_key("pytest -m unit", CWD)
    assert a.checks[0].marks == "integration" and a.checks[0] != b.checks[0]
    assert command_key("pytest -k pool", CWD).checks[0].filter == "pool"
    assert not same("pytest -k pool", "pytest -k cache")
    assert same('pytest -m "not integration"', "pytest -m 'not integration' -q")
    assert same("pytest -m integration", "pytest", ("tests/test_db.py::test_m",))  # broader


@pytest.mark.parametrize(
    "expr, selected",
    [
        ("upload", True), ("not upload", False), ("upload and large", True),
        ("upload and not large", False), ("small or large", True), ("not (small or large)", False),
        ("TestApi", True), ("test_api.py", True), ("UPLOAD", True), ("(upload", False), ("", True),
        ("test_upload_large[1]", False),
    ],
)  # fmt: skip
def test_pytest_k_expressions_are_evaluated(expr, selected):
    from ingest.learning.check_targets import Check

    check = Check("pytest", "test", ("tests/test_api.py",), expr)
    assert check.selects("tests/test_api.py::TestApi::test_upload_large") is selected


def test_cargo_options_after_the_separator_are_libtests():
    [c] = command_key("cargo test parser -- --skip fetch --test-threads 1 --exact", CWD).checks
    assert c.targets == ("parser",) and c.excludes == ("--skip=fetch",)


@pytest.mark.parametrize(
    "command, sure",
    [
        ("pytest", True), ("cd app && pytest -q 2>&1", True), ("pytest && echo ok", True),
        ("(cd app && pytest)", True), ("timeout 60 pytest", True),
        ("pytest || true", False), ("pytest; exit 0", False), ("pytest | tail -5", False),
        ("timeout 1 pytest || echo timed out", False), ("pytest & wait", False),
        ("pytest\necho done", False), ("set -o pipefail; pytest | tail -5", True),
        ("set -euo pipefail && pytest 2>&1 | tee log", True),
    ],
)  # fmt: skip
def test_whether_the_exit_status_is_the_checks_own(command, sure):
    assert command_key(command, CWD).sure is sure
