"""What one check runs, read per runner, and when a later check re-runs an earlier one.

A :class:`Check` is a runner (``tool``), what it does (``action``: test, build, lint, a task's
name), what it is pointed at (``targets``: paths, test ids, packages; empty: everything it
checks by default) and a name filter (pytest ``-k``, ``go test -run``, jest ``-t``). Test ids
are kept in the runner's own notation: pytest node ids (``tests/test_db.py::test_pool``),
JUnit ``pkg.Class::method`` (``defects4j test -t``, Maven ``-Dtest=Class#method``, Gradle
``--tests pkg.Class.method``), ``go test`` packages, ``cargo test`` name filters, jest paths.

:meth:`Check.reruns` says whether a passing check re-ran a failed one: the same runner and
action, and either the same targets, or targets that cover the failure's (a broader run), or,
when the failing tests are known, targets inside the failure's that select one of them (a
narrower run on the failing test). A command the runners here do not know is compared as its
normalised text.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass

TEST_TOOLS = frozenset({"pytest", "unittest", "junit", "go", "cargo", "jest"})
# options that change only what is printed (dropped), and options that take a value
QUIET = frozenset({"-q", "-qq", "-v", "-vv", "-vvv", "-s", "-x", "--quiet", "--verbose", "-rA",
                   "-ra", "--no-header", "--color", "--colour", "--no-cov", "--exitfirst",
                   "-l", "--showlocals", "--no-summary", "--offline", "-B", "--batch-mode"})  # fmt: skip
_VALUED = {
    "pytest": {"-k", "-m", "-p", "-n", "-c", "-o", "--tb", "--maxfail", "--rootdir", "--deselect",
               "--ignore", "--timeout", "--cov", "--cov-report", "--cov-fail-under", "-W",
               "--durations", "--junitxml", "--basetemp", "--log-level", "--confcutdir"},
    "go": {"-run", "-count", "-timeout", "-tags", "-p", "-parallel", "-coverprofile", "-bench",
           "-skip", "-cpu", "-o", "-ldflags", "-gcflags"},
    "cargo": {"-p", "--package", "--features", "-F", "--target", "--bin", "--test", "--example",
              "-j", "--jobs", "--manifest-path", "--profile", "--color"},
    "jest": {"-t", "--testNamePattern", "-c", "--config", "--reporter", "--maxWorkers", "-w"},
    "defects4j": {"-t", "-w", "-s", "-p", "-v"},
}  # fmt: skip
TASK_RUNNERS = frozenset({"make", "gmake", "just", "task", "rake", "invoke", "inv", "tox", "nox",
                          "ant", "npm", "yarn", "pnpm", "bun", "mise", "hatch", "pdm"})  # fmt: skip
LINTERS = frozenset({"tsc", "mypy", "pyright", "ruff", "flake8", "pylint", "black", "isort",
                     "eslint", "prettier", "shellcheck", "yamllint", "hadolint", "golangci-lint",
                     "clippy-driver", "rubocop", "stylelint", "markdownlint", "biome"})  # fmt: skip
JS_TESTS = frozenset({"jest", "vitest", "mocha", "ava", "jasmine", "playwright", "cypress"})


@dataclass(frozen=True)
class Check:
    tool: str
    action: str
    targets: tuple[str, ...] = ()
    filter: str = ""
    text: str = ""
    wrapper: bool = False  # a task runner: what its task runs is not on the command line

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
        return not self.filter or _filter_matches(self.tool, self.filter, test)

    def reruns(self, failed: Check, failing_tests: tuple[str, ...] = ()) -> bool:
        """Whether this (passing) check re-ran ``failed``: see the module docstring."""
        if (self.tool, self.action, self.wrapper) != (failed.tool, failed.action, failed.wrapper):
            return False
        if (self.targets, self.filter) == (failed.targets, failed.filter):
            return self.action != "run" or self.text == failed.text  # any text of a runner
        if not (self.is_test or self.tool in LINTERS):
            return False
        if _covers(self, failed):
            return True
        inside = not failed.targets or all(
            any(under(self.tool, t, f) for f in failed.targets) for t in self.targets
        )
        inside = inside and (not failed.filter or failed.filter == self.filter)
        return inside and any(self.selects(t) for t in failing_tests)


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
    return item.startswith(target) and item[len(target)] in "/:."


def _filter_matches(tool: str, expr: str, test: str) -> bool:
    if tool == "go":
        try:
            return re.search(expr, test.rsplit("/", 1)[-1]) is not None
        except re.error:
            return expr in test
    words = [w for w in re.findall(r"[\w.]+", expr) if w not in ("and", "or", "not")]
    return not words or any(w.lower() in test.lower() for w in words)


def _path(p: str, cwd: str | None) -> str:
    if cwd and p.startswith(cwd.rstrip("/") + "/"):
        p = p[len(cwd.rstrip("/")) + 1 :]
    while p.startswith("./"):
        p = p[2:]
    p = p.rstrip("/")
    return "" if p in (".", "") else p


def _split(args: list[str], valued: set[str]) -> tuple[list[str], dict[str, str]]:
    """(positional words, {option: value}) of ``args``; ``-k=x`` and ``-k x`` alike."""
    pos: list[str] = []
    opts: dict[str, str] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            pos += args[i + 1 :]
            break
        if a.startswith("-") and len(a) > 1:
            name, eq, value = a.partition("=")
            if not eq and name in valued and i + 1 < len(args):
                value = args[i + 1]
                i += 1
            elif not eq and name[:2] in valued and len(name) > 2 and not name.startswith("--"):
                name, value = name[:2], name[2:]  # -kfoo, -Dtest=… is handled by the caller
            opts[name] = value
        else:
            pos.append(a)
        i += 1
    return pos, opts


def _text(tool: str, words: list[str]) -> str:
    return shlex.join([tool, *[w for w in words if w not in QUIET]])


def _pytest(args, cwd):
    pos, opts = _split(args, _VALUED["pytest"])
    targets = tuple(sorted({p for a in pos if (p := _path(a, cwd))}))
    return Check("pytest", "test", targets, opts.get("-k", ""), _text("pytest", args))


def _junit_id(spec: str) -> str:
    """``Class#method`` / ``pkg.Class.method`` / ``Class::method`` -> ``Class::method``."""
    if "::" in spec:
        return spec
    if "#" in spec:
        return spec.replace("#", "::", 1)
    head, _, last = spec.rpartition(".")
    return (
        f"{head}::{last}"
        if head and last[:1].islower() and head.rsplit(".", 1)[-1][:1].isupper()
        else spec
    )


def _defects4j(args, cwd):
    if not args or args[0] != "test":
        return Check("defects4j", args[0] if args else "", (), "", _text("defects4j", args))
    _pos, opts = _split(args[1:], _VALUED["defects4j"])
    targets = tuple(sorted({_junit_id(t) for t in opts.get("-t", "").split(",") if t}))
    return Check("junit", "test", targets, "", _text("defects4j", args))


def _maven_gradle(tool: str) -> Callable:
    def make(args, cwd):
        goals = [a.rsplit(":", 1)[-1] for a in args if not a.startswith("-")]
        testing = any(
            g in ("test", "verify", "check", "install", "package", "build") for g in goals
        )
        specs = [a.split("=", 1)[1] for a in args if a.startswith("-Dtest=")]
        specs += [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--tests"]
        targets = tuple(sorted({_junit_id(t) for s in specs for t in s.split(",") if t}))
        action = "test" if testing else "build"
        return Check("junit" if testing else tool, action, targets, "", _text(tool, args))

    return make


def _go(args, cwd):
    sub = args[0] if args else ""
    pos, opts = _split(args[1:], _VALUED["go"])
    targets = tuple(sorted({p for a in pos if (p := _path(a, cwd)) and p != "..."}))
    action = "test" if sub == "test" else sub
    return Check("go", action, targets, opts.get("-run", ""), _text("go", args))


def _cargo(args, cwd):
    sub = next((a for a in args if not a.startswith("-")), "")
    rest = args[args.index(sub) + 1 :] if sub else []
    if sub == "nextest" and rest[:1] == ["run"]:
        sub, rest = "test", rest[1:]
    if "--" in rest and sub != "test":
        rest = rest[: rest.index("--")]
    pos, opts = _split(rest, _VALUED["cargo"])
    scope = ":".join(x for x in ("release" if "--release" in opts else "",
                                 opts.get("-p") or opts.get("--package") or "") if x)  # fmt: skip
    action = "test" if sub == "test" else f"{sub}{':' + scope if scope else ''}"
    targets = tuple(sorted(set(pos))) if sub == "test" else ()
    return Check("cargo", action, targets, "", _text("cargo", args))


def _jest(args, cwd):
    pos, opts = _split([a for a in args if a != "run"], _VALUED["jest"])
    targets = tuple(sorted({p for a in pos if (p := _path(a, cwd))}))
    name = opts.get("-t") or opts.get("--testNamePattern") or ""
    return Check("jest", "test", targets, name, _text("jest", args))


def _task(tool: str) -> Callable:
    def make(args, cwd):
        pos = [a for a in args if not a.startswith("-") and "=" not in a]
        if tool in ("npm", "yarn", "pnpm", "bun") and pos[:1] == ["run"]:
            pos = pos[1:]
        if tool == "tox":
            pos = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-e"] or ["tox"]
        if tool == "nox":
            pos = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-s", "--session")] or [
                "nox"
            ]
        family = "npm" if tool in ("yarn", "pnpm", "bun") else tool
        action = " ".join(pos[:1]) or "(default)"
        return Check(family, action, tuple(pos[1:]), "", _text(family, args), wrapper=True)

    return make


def _linter(tool: str) -> Callable:
    def make(args, cwd):
        sub = args[0] if args and not args[0].startswith("-") and tool == "ruff" else ""
        words = args[1:] if sub else args
        pos = [p for a in words if not a.startswith("-") and (p := _path(a, cwd))]
        action = f"lint {sub}".strip() + (" --check" if "--check" in args else "")
        return Check(tool, action, tuple(sorted(set(pos))), "", _text(tool, args))

    return make


def _generic(tool: str, args, cwd) -> Check:
    words = [_path(a, cwd) or a if "/" in a else a for a in args]
    return Check(tool, "run", (), "", _text(tool, words))


RUNNERS: dict[str, Callable] = {
    "pytest": _pytest, "py.test": _pytest, "defects4j": _defects4j,
    "mvn": _maven_gradle("mvn"), "mvnw": _maven_gradle("mvn"),
    "gradle": _maven_gradle("gradle"), "gradlew": _maven_gradle("gradle"),
    "go": _go, "cargo": _cargo,
    **{t: _task(t) for t in TASK_RUNNERS}, **{t: _linter(t) for t in LINTERS},
}  # fmt: skip


def make_check(prog: str, args: list[str], cwd: str | None = None) -> Check | None:
    """The check of one simple command (``prog`` without its folder; None: nothing to run)."""
    if prog in JS_TESTS:
        return _jest(args, cwd)
    if prog == "unittest":
        return Check("unittest", "test", tuple(sorted(a for a in args if not a.startswith("-"))),
                     "", _text("unittest", args))  # fmt: skip
    make = RUNNERS.get(prog)
    if make is not None:
        return make(args, cwd)
    if prog in ("npx", "node") and args and args[0] in JS_TESTS:
        return _jest(args[1:], cwd)
    return _generic(prog, args, cwd)
