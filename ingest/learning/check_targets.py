"""What one check runs, and when a later check re-runs an earlier one.

A :class:`Check` is a runner (``tool``), what it does (``action``: test, build, lint, a task's
name; ``collect``/``list`` for a run that lists tests without running them), what it is
pointed at (``targets``: paths, test ids, packages; empty: everything it checks by default), a
name filter (``filter``: pytest ``-k``, ``go test -run``, jest ``-t``), a selection by kind
(``marks``: pytest ``-m``, ``go test -tags``, cargo's ``--lib``/``--test X``/``-p``, a task
runner's variables and the arguments it passes on), what it leaves out (``excludes``: pytest
``--deselect``/``--ignore``/``--ignore-glob``, ``go test -skip``/``-short``, cargo ``--skip``/
``--ignored``, jest ``--testPathIgnorePatterns``, Maven ``-Dtest=!X``, an environment variable
named like a switch that skips) and whether its selection cannot be read from the command
line (``opaque``: pytest ``--lf``/``--sw``, jest ``--onlyChanged``, a shard). The command line
is read per runner in :mod:`ingest.learning.runner_args`.

:meth:`Check.rerun_kind` says whether a passing check re-ran a failed one: the same runner and
action; nothing left out that the failure ran (no exclusion the failure did not have, no name
filter that negates, no other selection by kind); and either the same targets, filter and
marks (``same``), or a selection that covers the failure's (``broader``), or, when the failing
tests are known, targets and a filter inside the failure's that select one of them
(``narrower``). A command the runners here do not know is compared as its normalised text.
"""

from __future__ import annotations

from dataclasses import dataclass

from ingest.learning.test_filters import matches, negates

TEST_TOOLS = frozenset({"pytest", "unittest", "junit", "go", "cargo", "jest"})
LINTERS = frozenset({"tsc", "mypy", "pyright", "ruff", "flake8", "pylint", "black", "isort",
                     "eslint", "prettier", "shellcheck", "yamllint", "hadolint", "golangci-lint",
                     "clippy-driver", "rubocop", "stylelint", "markdownlint", "biome"})  # fmt: skip
# runners whose run without ``marks`` runs every kind (pytest without -m, cargo on every target)
MARKS_NARROW = frozenset({"pytest", "cargo"})


@dataclass(frozen=True)
class Check:
    tool: str
    action: str
    targets: tuple[str, ...] = ()
    filter: str = ""
    text: str = ""
    wrapper: bool = False  # a task runner: what its task runs is not on the command line
    marks: str = ""
    excludes: tuple[str, ...] = ()
    opaque: bool = False

    @property
    def label(self) -> str:
        return self.text

    @property
    def is_test(self) -> bool:
        return self.tool in TEST_TOOLS and self.action == "test"

    def selects(self, test: str) -> bool:
        """Whether this check runs the test ``test`` (in the runner's notation)."""
        by_name = self.tool == "go"  # a failing test is named without its package
        if (
            self.targets
            and not by_name
            and not any(under(self.tool, test, t) for t in self.targets)
        ):
            return False
        return matches(self.tool, self.filter, test)

    def reruns(self, failed: Check, failing_tests: tuple[str, ...] = ()) -> bool:
        """Whether this (passing) check re-ran ``failed``: see the module docstring."""
        return bool(self.rerun_kind(failed, failing_tests))

    def rerun_kind(self, failed: Check, failing_tests: tuple[str, ...] = ()) -> str:
        """``same``, ``broader``, ``narrower``, or ``""``: it did not re-run ``failed``."""
        if (self.tool, self.action, self.wrapper) != (failed.tool, failed.action, failed.wrapper):
            return ""
        if not set(self.excludes) <= set(failed.excludes):
            return ""  # it leaves out something the failure ran
        if self.filter != failed.filter and negates(self.tool, self.filter):
            return ""
        if self.marks != failed.marks and (self.marks or self.tool not in MARKS_NARROW):
            return ""
        if (self.targets, self.filter) == (failed.targets, failed.filter):
            if self.action == "run" and self.text != failed.text:
                return ""  # any text of a runner
            return "same" if self.marks == failed.marks else "broader"
        if not (self.is_test or self.tool in LINTERS):
            return ""
        if _covers(self, failed):
            return "broader"
        inside = not failed.targets or all(
            any(under(self.tool, t, f) for f in failed.targets) for t in self.targets
        )
        inside = inside and (not failed.filter or failed.filter == self.filter)
        return "narrower" if inside and any(self.selects(t) for t in failing_tests) else ""


def _covers(broad: Check, narrow: Check) -> bool:
    if broad.filter and broad.filter != narrow.filter:
        return False
    if not broad.targets:
        return True
    if not narrow.targets:
        return False
    return all(any(under(broad.tool, t, b) for b in broad.targets) for t in narrow.targets)


def under(tool: str, item: str, target: str) -> bool:
    """Whether ``item`` (a path, test id or package) lies within ``target``."""
    if item == target:
        return True
    if tool == "junit":
        ic, _, im = item.partition("::")
        tc, _, tm = target.partition("::")
        if "." in ic and "." in tc:  # both qualified: the same class
            same = ic == tc
        else:  # one is a simple name: the simple names agree
            same = ic.rsplit(".", 1)[-1] == tc.rsplit(".", 1)[-1]
        if tc.endswith("*"):
            same = ic.startswith(tc.rstrip("*"))
        return same and (not tm or tm == im)
    if tool in ("cargo", "jest"):
        return target in item
    if tool == "go" and target.endswith("/..."):
        return item == target[:-4] or item.startswith(target[:-3])
    return item.startswith(target) and item[len(target) : len(target) + 1] in ("/", ":", ".")
