"""What a check's output says: did it fail, which tests failed, and the error's *signature*.

The signature is what makes two failures "the same error": its type (an exception class, a
compiler's error code such as ``E0412`` or ``TS2304``, ``FAIL`` of ``go test``), its message
and the failing test (or, when no test is named, the check that failed), with everything that
changes from run to run normalised away: numbers, hexadecimal addresses, UUIDs, timestamps,
durations and file paths (a path keeps its file name). Two runs of one broken test give one
signature; the lesson learned from the first is found again by the second
(:data:`ErrorSignature.digest`).

Read from the output: the test runners' failure lines (pytest's ``FAILED path::test``, JUnit's
``Failing tests:`` list and Maven's ``Tests run: …, Failures: …``, ``--- FAIL: TestX`` of
``go test``, ``test x ... FAILED`` of ``cargo test``, jest's ``FAIL path``), exception lines
(Java, Python, JavaScript; the last one of a Python traceback), compiler errors
(``error[E0412]: …``, ``error TS2304: …``, ``file.c:3:5: error: …``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ingest.sessions.transcript_base import FAILED_LINE
from retrieval.regexes import linear_regex

MAX_ERROR_CHARS = 6000  # the error text a lesson keeps (a long trace is cut)
MESSAGE_CHARS = 200

_EXIT = re.compile(r"^Exit code (\d+)\s*$", re.M)
_EXCEPTION = re.compile(
    r"^\s*(?:E\s+)?((?:[A-Za-z_$][\w$]*\.)*[A-Za-z_$][\w$]*(?:Error|Exception|Failure|Fault|"
    r"Panic|Interrupt|Exit))(?::\s?(.*))?$",
    re.M,
)
_COMPILER = re.compile(r"^(?:[^\s:]+:\d+(?::\d+)?:?\s+)?(?:fatal )?error(?:\[(E\d+)\]| (TS\d+))?:\s*(.+)$",
                       re.M | re.I)  # fmt: skip
_TSC = re.compile(r"^\S+\(\d+,\d+\): error (TS\d+): (.+)$", re.M)
_GO_FAIL = re.compile(r"^\s*--- FAIL: (\S+)", re.M)
_PANIC = re.compile(r"panicked at (?:'([^']*)'|([^\n]*))")
_PYTEST_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+::\S+)(?: - (.*))?$", re.M)
_D4J = re.compile(r"^Failing tests: (\d+)\s*$((?:\n\s+- \S+)*)", re.M)
_SUREFIRE = re.compile(r"^\[ERROR\]\s+(?:[\w$.]+\.)?([\w$]+)\.([\w$]+):\d+", re.M)
_GRADLE = re.compile(r"^([\w$.]+) > ([\w$]+)(?:\(\))? FAILED", re.M)
_CARGO_FAIL = re.compile(r"^test (\S+) \.\.\. FAILED", re.M)
_JEST_FAIL = re.compile(r"^FAIL (\S+\.\w+)", re.M)
_RUNNER_FAILED = re.compile(
    r"^=+ .*\b\d+ (?:failed|errors?)\b.* in [\d.]+s|^Failing tests: [1-9]|"
    r"Tests run: \d+, Failures: [1-9]|Tests run: \d+, Failures: \d+, Errors: [1-9]|^--- FAIL|"
    r"^test result: FAILED|^Tests:\s+\d+ failed|error: could not compile|^FAIL\s",
    re.M,
)
_RUNNERS = (
    ("pytest", linear_regex.compile(r"=+ test session starts =+|^=+ .*\b\d+ (?:passed|failed)\b.* in [\d.]+s", re.M)),
    ("junit", re.compile(r"^Failing tests: \d+|Tests run: \d+, Failures: \d+|^Running ant \(", re.M)),
    ("go", re.compile(r"^(?:ok|FAIL)\s+\S+\s+[\d.]+s$|^--- (?:PASS|FAIL):", re.M)),
    ("cargo", re.compile(r"^test result: |^\s+Finished `|^\s+Compiling \S+ v\d", re.M)),
    ("jest", re.compile(r"^Tests:\s+\d+|^Test Suites:", re.M)),
)  # fmt: skip

# what changes from one run to the next
_NORMALISE = (
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<uuid>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), "<time>"),
    (re.compile(r"\b0x[0-9a-f]+\b", re.I), "<addr>"),
    (re.compile(r"@[0-9a-f]{5,}\b", re.I), "@<addr>"),
    (linear_regex.compile(r"(?:[A-Za-z]:)?(?:[\w.~-]*[/\\])+([\w.-]+)"), r"\1"),
    (re.compile(r"\b\d+(?:\.\d+)?(?:ms|s|sec|seconds)\b"), "<dur>"),
    (re.compile(r"(?<![\w$])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w$])", re.I), "<n>"),
    (re.compile(r"\s+"), " "),
)  # fmt: skip


@dataclass(frozen=True)
class ErrorSignature:
    type: str  # exception class, compiler error code, "FAIL", "error", "exit status"
    message: str  # the message as printed (its first line, clipped)
    test: str  # the failing test (runner notation), else the check that failed
    normalized: str  # type | message | test with run-to-run details normalised

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.normalized.encode()).hexdigest()[:16]


def normalise(text: str) -> str:
    for pattern, repl in _NORMALISE:
        text = pattern.sub(repl, text)
    return text.strip()


def exit_code(output: str) -> int | None:
    m = _EXIT.search(output[:200])
    return int(m.group(1)) if m else None


def runner_failed(output: str) -> bool:
    """Whether a test runner's or compiler's own summary in an output reports a failure
    although the command exited 0 (``pytest | tail``: the pipe's status is the filter's). A
    plain "Error:" line is not enough (a program may log one and succeed)."""
    return bool(_RUNNER_FAILED.search(output))


def runner_of(output: str) -> str | None:
    """The test runner or build tool whose output this is (a task runner's recipe shows it)."""
    return next((name for name, rx in _RUNNERS if rx.search(output)), None)


def failing_tests(output: str) -> tuple[str, ...]:
    """The failing tests the output names, in the runner's notation."""
    found: list[str] = [m.group(1) for m in _PYTEST_FAILED.finditer(output)]
    for m in _D4J.finditer(output):
        found += [x.strip()[2:].strip() for x in m.group(2).splitlines() if x.strip()]
    found += [f"{m.group(1)}::{m.group(2)}" for m in _SUREFIRE.finditer(output)]
    found += [f"{m.group(1)}::{m.group(2)}" for m in _GRADLE.finditer(output)]
    found += [m.group(1) for m in _GO_FAIL.finditer(output)]
    found += [m.group(1) for m in _CARGO_FAIL.finditer(output)]
    found += [m.group(1) for m in _JEST_FAIL.finditer(output)]
    return tuple(dict.fromkeys(found))


def _clean(line: str) -> str:
    return " ".join(line.split())[:MESSAGE_CHARS]


def _header(output: str) -> tuple[str, str, int]:
    """(type, message, offset of the error in the output)."""
    text = output
    m = _PYTEST_FAILED.search(text)
    if m and m.group(2):
        typ, _, msg = m.group(2).partition(": ")
        if re.fullmatch(r"[\w.$]+", typ):
            return typ, msg, _first_e_line(text, m.start())
    excs = list(_EXCEPTION.finditer(text))
    if excs:
        pick = excs[-1] if "Traceback (most recent call last)" in text else excs[0]
        return pick.group(1), (pick.group(2) or "").strip(), pick.start()
    for rx in (_TSC, _COMPILER):
        m = rx.search(text)
        if m:
            groups = [g for g in m.groups() if g]
            code = groups[0] if len(groups) > 1 else "error"
            return code, groups[-1], m.start()
    m = _GO_FAIL.search(text)
    if m:
        rest = text[m.end() :].lstrip("\n").splitlines()
        return "FAIL", (rest[0].strip() if rest else m.group(1)), m.start()
    m = _PANIC.search(text)
    if m:
        return "panic", (m.group(1) or m.group(2) or "").strip(), m.start()
    m = FAILED_LINE.search(text)
    if m:
        line = text[m.start() :].split("\n", 1)[0]
        return "error", line.strip(), m.start()
    return "exit status", "", 0


def _first_e_line(text: str, fallback: int) -> int:
    m = re.search(r"^_{3,} .* _{3,}$", text, re.M)
    return m.start() if m else fallback


def error_text(output: str) -> str:
    """The part of a failed check's output that holds the error (from its first line on, at
    most :data:`MAX_ERROR_CHARS`), without the client's ``Exit code N`` line."""
    body = _EXIT.sub("", output, count=1).strip("\n")
    _typ, _msg, at = _header(body)
    tb = body.rfind("Traceback (most recent call last)", 0, at)
    at = tb if tb >= 0 else at  # a Python traceback: its frames come before its exception
    start = body.rfind("\n", 0, at) + 1 if at else 0
    out = body[start:].strip() or body.strip()
    return out[:MAX_ERROR_CHARS]


def error_signature(output: str, check: str, tests: tuple[str, ...] = ()) -> ErrorSignature:
    """The signature of a failure of the check ``check`` (its normalised command text) with
    ``output``; ``tests``: its failing tests (from the output or the command line)."""
    body = _EXIT.sub("", output, count=1)
    typ, msg, _ = _header(body)
    if typ == "exit status":
        code = exit_code(output)
        msg = f"exit code {code}" if code is not None else "failed"
        first = next((ln for ln in body.splitlines() if ln.strip()), "")
        msg = f"{msg}: {first.strip()}" if first else msg
    test = tests[0] if tests else check
    short = typ.rsplit(".", 1)[-1]
    norm = " | ".join((short, normalise(_clean(msg)), normalise(test)))
    return ErrorSignature(typ, _clean(msg), test, norm)
