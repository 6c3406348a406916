"""What a test run's output reports: the tests it names with their outcome, and its summary's
counts of tests run, deselected, filtered out and skipped.

A pass is taken as the fix of a failure only when it re-ran the failing test
(:mod:`ingest.learning.fix_evidence`); these are the output's own words on that, per runner:

- **pytest**: ``-v`` lines (``tests/a.py::test_x PASSED [ 50%]``, with pytest-xdist
  ``[gw0] [ 50%] PASSED tests/a.py::test_x``), ``-rA`` lines (``PASSED tests/a.py::test_x``),
  the summary line (``3 passed, 1 skipped, 2 deselected, 1 xfailed in 0.4s``, ``no tests
  ran``);
- **cargo test**: ``test net::tests::fetch ... ok`` and each binary's ``test result: ok. 2
  passed; 0 failed; 1 ignored; 0 measured; 3 filtered out`` (summed);
- **go test**: ``--- PASS: TestFetch`` (``-v``), a package's ``ok pkg 0.01s [no tests to run]``;
- **jest / vitest**: ``PASS src/a.test.js`` (a file), ``Tests: 1 skipped, 5 passed, 6 total``,
  ``Tests  5 passed | 1 skipped (6)``;
- **Maven / Gradle / JUnit**: ``Tests run: 5, Failures: 0, Errors: 0, Skipped: 1`` (the last
  one: the totals), Gradle's ``FooTest > testBar PASSED``; **unittest**: ``Ran 5 tests``,
  ``OK (skipped=1)``.

An xfailed test and an ignored one count as skipped: each is a test that did not pass. Every
pattern is matched by RE2 (linear time), and an output longer than twice :data:`HALF_CHARS`
is read as its first and last :data:`HALF_CHARS` characters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from retrieval.regexes.linear_regex import compile as linear

HALF_CHARS = 100_000
MAX_NAMED = 5_000
CLIPPED = "characters left out] …"  # what a clipped output holds (ingest.learning.episode_events)
LEFT_OUT = ("deselected", "filtered", "skipped")

_M = 8  # re.MULTILINE
_STATUS = r"(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)"
_PYTEST_V = linear(r"^(\S+::\S+) " + _STATUS + r"\b", _M)
_PYTEST_R = linear(r"^(?:\[gw\d+\] \[ *\d+%\] )?" + _STATUS + r" (\S+::\S+)", _M)
_PYTEST_SUMMARY = linear(r"^[= ]*(?:(?:\d+ [a-z]+(?:, )?)+ in [\d.]+ ?s(?:econds)?\b|no tests ran\b)"
                         r".*$", _M)  # fmt: skip
_COUNT = linear(r"(\d+) (passed|failed|errors?|skipped|deselected|xfailed|xpassed)\b")
_CARGO_TEST = linear(r"^test (\S+) \.\.\. (ok|FAILED|ignored)\b", _M)
_CARGO_RESULT = linear(r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored"
                       r"(?:; (\d+) measured)?(?:; (\d+) filtered out)?", _M)  # fmt: skip
_GO_TEST = linear(r"^[ \t]*--- (PASS|FAIL|SKIP): (\S+)", _M)
_GO_PKG = linear(r"^ok[ \t]+\S+[ \t]+(?:[\d.]+s|\(cached\))(.*)$", _M)
_JEST_FILE = linear(r"^[ \t]*(PASS|FAIL) (\S+\.\w+)", _M)
_JEST_TESTS = linear(r"^(?:Tests:[ \t]+(.*)|[ \t]*Tests[ \t]+(\d.*))$", _M)
_JEST_COUNT = linear(r"(\d+) (passed|failed|skipped|todo|pending)\b")
_SUREFIRE = linear(r"Tests run: (\d+), Failures: (\d+), Errors: (\d+), Skipped: (\d+)")
_GRADLE_TEST = linear(r"^([\w$.]+) > ([\w$]+)(?:\(\))? (PASSED|FAILED|SKIPPED)\b", _M)
_UNITTEST_RAN = linear(r"^Ran (\d+) tests? in ", _M)
_UNITTEST_OK = linear(r"^(?:OK|FAILED) \((.*)\)[ \t]*$", _M)
_UNITTEST_KV = linear(r"(skipped|failures|errors|expected failures)=(\d+)")

_PASSED = {"PASSED": "passed", "XPASS": "passed", "ok": "passed", "PASS": "passed",
           "FAILED": "failed", "ERROR": "failed", "FAIL": "failed",
           "SKIPPED": "skipped", "XFAIL": "skipped", "ignored": "skipped", "SKIP": "skipped"}  # fmt: skip


@dataclass
class Report:
    """What one output reports (module docstring)."""

    tests: dict[str, str] = field(default_factory=dict)  # test id -> passed / failed / skipped
    files: dict[str, str] = field(default_factory=dict)  # jest/vitest: test file -> outcome
    named_by: set[str] = field(default_factory=set)  # runners whose per-test lines it shows
    counts: dict[str, int] = field(default_factory=dict)  # passed failed deselected filtered …
    summary: bool = False  # a runner's summary of counts was read
    ran_nothing: bool = False  # the summary says no test ran
    clipped: bool = False  # the output's middle was left out before it got here

    def left_out(self, kind: str) -> int:
        return self.counts.get(kind, 0)

    @property
    def ran(self) -> int | None:
        """Tests that ran (passed or failed), when a summary says."""
        if self.ran_nothing:
            return 0
        if not self.summary:
            return None
        return self.counts.get("passed", 0) + self.counts.get("failed", 0)


def _bounded(output: str) -> str:
    if len(output) <= 2 * HALF_CHARS:
        return output
    return output[:HALF_CHARS] + "\n" + output[-HALF_CHARS:]


def _add(counts: dict[str, int], kind: str, n: int) -> None:
    counts[kind] = counts.get(kind, 0) + n


def read_report(output: str) -> Report:
    """The tests ``output`` names and the counts its summaries give (never raises)."""
    text = _bounded(output)
    r = Report(clipped=CLIPPED in text)
    _names(r, text)
    summaries = [_pytest_counts(m.group(0)) for m in _PYTEST_SUMMARY.finditer(text)]
    if summaries:  # the last (pytest prints one per run), with the most any line left out
        counts = summaries[-1]
        r.ran_nothing = counts.pop("nothing", 0) > 0
        for kind in ("skipped", "deselected"):  # a line a test prints cannot hide them
            counts[kind] = max(c.get(kind, 0) for c in summaries)
        for kind, n in counts.items():
            _add(r.counts, kind, n)
        r.summary = True
    for m in _CARGO_RESULT.finditer(text):  # one per test binary
        p, f, i, _meas, filt = (int(x or 0) for x in m.groups())
        for kind, n in (("passed", p), ("failed", f), ("skipped", i), ("filtered", filt)):
            _add(r.counts, kind, n)
        r.summary = True
    packages = [m.group(1) for m in _GO_PKG.finditer(text)]
    if packages:
        empty = sum("[no tests to run]" in rest for rest in packages)
        _add(r.counts, "filtered", empty)
        r.ran_nothing = r.ran_nothing or empty == len(packages)
    for m in _JEST_TESTS.finditer(text):
        for n, kind in _JEST_COUNT.findall(m.group(1) or m.group(2) or ""):
            _add(r.counts, "skipped" if kind in ("todo", "pending") else kind, int(n))
        r.summary = True
    totals = _last(_SUREFIRE, text)  # the last: the totals
    if totals is not None:
        run, failures, errors, skipped = (int(x) for x in totals.groups())
        for kind, n in (("passed", run - failures - errors - skipped),
                        ("failed", failures + errors), ("skipped", skipped)):  # fmt: skip
            _add(r.counts, kind, max(0, n))
        r.summary = True
    _unittest(r, text)
    return r


def _last(pattern, text: str):
    found = None
    for found in pattern.finditer(text):  # noqa: B007 - the last one is kept
        continue
    return found


def _unittest(r: Report, text: str) -> None:
    ran = [int(m.group(1)) for m in _UNITTEST_RAN.finditer(text)]
    if not ran:
        return
    passed = sum(ran)
    for m in _UNITTEST_OK.finditer(text):
        for key, n in _UNITTEST_KV.findall(m.group(1)):
            moved = "skipped" if key in ("skipped", "expected failures") else "failed"
            _add(r.counts, moved, int(n))
            passed -= int(n)
    _add(r.counts, "passed", max(0, passed))
    r.summary = True
    r.ran_nothing = r.ran_nothing or sum(ran) == 0


def _pytest_counts(line: str) -> dict[str, int]:
    out = {"nothing": 1} if "no tests ran" in line else {}
    for n, kind in _COUNT.findall(line):
        kind = {"errors": "failed", "error": "failed", "xfailed": "skipped",
                "xpassed": "passed"}.get(kind, kind)  # fmt: skip
        out[kind] = out.get(kind, 0) + int(n)
    return out


def _names(r: Report, text: str) -> None:
    """The lines naming one test (or a jest file) and its outcome."""
    found = [("pytest", m.group(1), m.group(2)) for m in _PYTEST_V.finditer(text)]
    found += [("pytest", m.group(2), m.group(1)) for m in _PYTEST_R.finditer(text)]
    found += [("cargo", m.group(1), m.group(2)) for m in _CARGO_TEST.finditer(text)]
    found += [("go", m.group(2), m.group(1)) for m in _GO_TEST.finditer(text)]
    found += [("junit", f"{m.group(1)}::{m.group(2)}", m.group(3))
              for m in _GRADLE_TEST.finditer(text)]  # fmt: skip
    for runner, test, status in found:
        outcome = _PASSED[status]
        if r.tests.get(test) not in (None, "passed"):  # a test named failed or skipped stays so
            continue
        if test in r.tests or len(r.tests) < MAX_NAMED:
            r.tests[test] = outcome
            r.named_by.add(runner)
    for m in _JEST_FILE.finditer(text):
        if r.files.get(m.group(2)) != "failed" and len(r.files) < MAX_NAMED:
            r.files[m.group(2)] = _PASSED[m.group(1)]


def runner_passed(output: str) -> bool:
    """Whether a runner's own summary in ``output`` reports success: at least one test passed
    and none failed, or a build or linter that says it succeeded."""
    r = read_report(output)
    if r.summary and r.counts.get("failed", 0) == 0 and r.counts.get("passed", 0) > 0:
        return True
    if _GO_PKG.search(_bounded(output)) and not r.ran_nothing:  # go test: `ok pkg 0.02s`
        return True
    tail = output[-4000:]
    return any(word in tail for word in _SUCCESS)


_SUCCESS = ("Failing tests: 0", "BUILD SUCCESS", "All checks passed!", "Success: no issues found",
            "    Finished `")  # fmt: skip


def same_test(a: str, b: str) -> bool:
    """Whether two test ids name one test, as different runs may write it: a pytest node id
    from another root folder (``app/tests/a.py::t`` and ``tests/a.py::t``), a JUnit class with
    or without its package, a test file by a longer or shorter path."""
    if a == b:
        return True
    if "::" in a and "::" in b:
        return _tail(a) == _tail(b)
    if "::" in a or "::" in b:
        return False
    pa, pb = a.replace("\\", "/").lstrip("./"), b.replace("\\", "/").lstrip("./")
    files = "." in pa.rsplit("/", 1)[-1] and "." in pb.rsplit("/", 1)[-1]
    return files and (pa == pb or pa.endswith("/" + pb) or pb.endswith("/" + pa))


def _tail(test: str) -> str:
    where, sep, rest = test.partition("::")
    base = where.replace("\\", "/").rsplit("/", 1)[-1]
    if "/" not in where and "." in base and not base.endswith((".py", ".js", ".ts", ".rs")):
        base = base.rsplit(".", 1)[-1]  # a qualified class: its simple name
    return base + sep + rest
