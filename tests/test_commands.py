"""Which commands are checks, and when a later command re-runs a failed one
(``ingest/commands.py``, ``ingest/check_targets.py``); what an output says
(``ingest/signatures.py``)."""

from __future__ import annotations

import pytest

from ingest.commands import command_key, related
from ingest.signatures import error_signature, error_text, failing_tests, runner_failed, runner_of

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
