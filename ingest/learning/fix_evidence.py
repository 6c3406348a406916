"""Whether a pass shows that a failure was fixed, and which edits can be the fix.

**The pass re-ran the failing test.** The command line has its say first
(:meth:`ingest.learning.check_targets.Check.rerun_kind`: no exclusion, no negating filter, the same
or a covering selection, or a narrower one on a failing test). The output then has the last
word (:func:`proves`, read by :mod:`ingest.learning.test_reports`):

- when the runner names tests one by one (pytest ``-v``/``-rA``, cargo, ``go test -v``,
  Gradle), the failing test must be named as passed: named as failed or skipped, or not named
  at all while others are, it was not re-run (unless the output was clipped in the middle).
  Named as passed, it was re-run, whatever else the run left out, as long as the tests named
  skipped account for the skips the summary counts (a line a test prints is no proof);
- a run that ran no test proves nothing, and so does a run whose output says nothing of what
  it ran when the failure's counted its tests (``pytest -p no:terminal``, ``> /dev/null``);
- a summary that leaves out more tests than the failure's did (skipped, xfailed or ignored;
  deselected or filtered out) proves nothing, unless the failing test is named as passed, or
  the leaving out is the narrowing the command line asked for (``pytest -k test_x``,
  ``cargo test name``, ``go test -run TestX`` selecting the failing test: deselected and
  filtered out only, never skipped);
- the same or a broader run that ran fewer tests than the failure's (a test removed) proves
  nothing, unless the failing test is named as passed;
- a run whose selection cannot be read (``pytest --lf``) needs a summary or the test's name.

Known limits: a broader run that does not name its tests cannot show that it still collected
the failing test's file, and ``go test`` without ``-v`` reports no skipped test.

**The edit can be the fix** (:func:`fix_paths`): it touches a file the failure names (in its
output, its command or its failing tests' ids), or a file that is neither documentation nor
a lockfile. Documentation: ``README*``, ``CHANGELOG*``, ``LICENSE*`` and the like,
``*.md``/``*.rst``/``*.txt``/``*.adoc`` (``requirements*.txt``, ``constraints*.txt`` and
``CMakeLists.txt`` are not), and anything under ``docs/`` or ``doc/``. A lockfile
(``poetry.lock``, ``package-lock.json``, ``Cargo.lock``, ``go.sum``, ...) does not count on
its own: it is written by a tool, not by the fix, and its diff teaches nothing; beside a
file that counts it is kept as part of the fix. Documentation the failure does not name is
left out of the episode.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ingest.learning.check_targets import Check
from ingest.learning.test_reports import LEFT_OUT, Report, same_test

MAX_NAMED = 200
SCAN_CHARS = 50_000
DOC_EXTENSIONS = frozenset({".md", ".markdown", ".mdx", ".rst", ".txt", ".adoc", ".asciidoc",
                            ".rdoc", ".textile"})  # fmt: skip
DOC_NAMES = frozenset({"readme", "changelog", "changes", "history", "news", "license",
                       "licence", "copying", "authors", "contributors", "contributing",
                       "notice", "code_of_conduct"})  # fmt: skip
DOC_FOLDERS = frozenset({"docs", "doc", "documentation"})
NOT_DOCS = ("requirements", "constraints", "cmakelists")  # *.txt that build or install
LOCKFILES = frozenset({"poetry.lock", "uv.lock", "pdm.lock", "pipfile.lock", "package-lock.json",
                       "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lockb",
                       "bun.lock", "cargo.lock", "go.sum", "gemfile.lock", "composer.lock",
                       "flake.lock", "mix.lock", "podfile.lock", "pubspec.lock",
                       "packages.lock.json", "gradle.lockfile", "conda-lock.yml"})  # fmt: skip
_PATHLIKE = re.compile(r"[\w./\\-]+")


def named_files(*texts: str) -> list[str]:
    """The file names (lower-cased, without their folders) written in ``texts``: a trace's
    files, a command's arguments, a pytest node id's file."""
    out: dict[str, None] = {}
    for text in texts:
        for tok in _PATHLIKE.findall(text[:SCAN_CHARS]):
            base = tok.replace("\\", "/").rstrip("/.").rsplit("/", 1)[-1].lower()
            if "." in base.strip(".") and len(base) <= 120:
                out.setdefault(base, None)
            if len(out) >= MAX_NAMED:
                return list(out)
    return list(out)


def _parts(path: str, cwd: str | None) -> list[str]:
    p = path.replace("\\", "/")
    root = (cwd or "").replace("\\", "/").rstrip("/")
    if root and p.startswith(root + "/"):
        return [x for x in p[len(root) + 1 :].split("/") if x and x != "."]
    return [x for x in p.split("/") if x and x != "."][-3:]  # outside the project: its end


def file_kind(path: str, cwd: str | None = None) -> str:
    """``doc``, ``lock`` or ``code`` (anything else: source, tests, configuration, data)."""
    parts = _parts(path, cwd)
    if not parts:
        return "code"
    base = parts[-1]
    low = base.lower()
    if low in LOCKFILES:
        return "lock"
    stem, dot, ext = low.partition(".")
    ext = "." + low.rsplit(".", 1)[-1] if dot else ""
    if ext in DOC_EXTENSIONS and not (ext == ".txt" and stem.startswith(NOT_DOCS)):
        return "doc"
    if stem.split("-")[0] in DOC_NAMES and (not dot or base.split(".")[0].isupper()):
        return "doc"  # LICENSE, README, COPYING.LESSER, LICENSE-MIT (not license.py)
    if any(p.lower() in DOC_FOLDERS for p in parts[:-1]):
        return "doc"
    return "code"


def fix_paths(named: Iterable[str], paths: list[str], cwd: str | None) -> list[str]:
    """The edited ``paths`` that make the fix (module docstring); [] when none can be."""
    names = set(named)

    def is_named(p: str) -> bool:
        return p.replace("\\", "/").rsplit("/", 1)[-1].lower() in names

    kinds = {p: file_kind(p, cwd) for p in paths}
    if not any(is_named(p) or kinds[p] == "code" for p in paths):
        return []
    return [p for p in paths if kinds[p] != "doc" or is_named(p)]


def proves(
    tests: list[str],
    counts: dict[str, int],
    runner: str,
    kinds: list[str],
    passed: Iterable[Check],
    report: Report,
) -> bool:
    """Whether a pass whose output reads as ``report`` re-ran a failure with failing ``tests``,
    whose own output counted ``counts`` (``ran`` and :data:`LEFT_OUT`) and was written by
    ``runner``; ``kinds``: how the pass's checks re-run the failure's (``same``, ``broader``,
    ``narrower``). See the module docstring."""
    if tests:
        test = tests[0]
        status = next((s for t, s in report.tests.items() if same_test(test, t)), None)
        if status == "passed":  # unless more skips than the names account for (a test's
            named_skips = sum(s == "skipped" for s in report.tests.values())  # own print)
            return report.left_out("skipped") - counts.get("skipped", 0) <= named_skips
        if status is not None:
            return False
        if runner in report.named_by and not report.clipped:
            return False  # it names the tests it ran, and not this one
        as_file = next((s for f, s in report.files.items() if same_test(test, f)), None)
        if as_file not in (None, "passed"):
            return False
        if as_file is None and report.files and runner == "jest" and not report.clipped:
            return False
    if report.ran == 0:
        return False
    if not report.summary and (counts.get("ran") or any(c.opaque for c in passed)):
        return False  # the failure's output counted its tests, the pass's says nothing
    narrower = "narrower" in kinds
    excess = {k for k in LEFT_OUT if report.left_out(k) > counts.get(k, 0)}
    if "skipped" in excess or (excess and not narrower):
        return False
    ran, before = report.ran, counts.get("ran")
    return narrower or ran is None or before is None or ran >= before


def failure_counts(report: Report) -> dict[str, int]:
    """What a failure's output counted, as :func:`proves` compares it."""
    out = {k: report.left_out(k) for k in LEFT_OUT if report.left_out(k)}
    if report.ran is not None:
        out["ran"] = report.ran
    return out
