"""A runner's command line read as the :class:`~ingest.learning.check_targets.Check` it runs.

Test ids are kept in the runner's own notation: pytest node ids
(``tests/test_db.py::test_pool``), JUnit ``pkg.Class::method`` (``defects4j test -t``, Maven
``-Dtest=Class#method``, Gradle ``--tests pkg.Class.method``), ``go test`` packages, ``cargo
test`` name filters, jest paths. What a run selects and leaves out is read as each runner
documents it:

- **pytest**: paths and node ids, ``-k``, ``-m``, ``--deselect``, ``--ignore``,
  ``--ignore-glob``, ``--lf``/``--sw`` (opaque), ``--co`` (collects, runs nothing), and the
  same options in ``PYTEST_ADDOPTS``;
- **go test**: packages, ``-run``, ``-skip``, ``-short``, ``-tags``, ``-list``, and ``GOFLAGS``;
- **cargo test**: the name filters before and after ``--``; libtest's ``--skip``,
  ``--ignored``, ``--list``; ``--no-run``; the targets and packages it builds (``--lib``,
  ``--test X``, ``-p X``);
- **jest / vitest**: paths, ``-t``, ``--testPathIgnorePatterns``, ``--exclude``,
  ``--onlyChanged``/``--changedSince``/``--shard`` (opaque), ``--listTests``;
- **Maven / Gradle**: ``-Dtest`` (``!X`` excludes), ``-DexcludedGroups``, ``-DskipTests`` and
  ``-x test`` (no test runs then);
- **a task runner** (``make``, ``just``, ``npm run``, ``tox``, ...): its task, and as marks the
  variables it is given and the arguments it passes on after ``--``.

For every runner, an environment variable whose name reads as a switch that leaves tests out
(``SKIP_SLOW=1``, ``NO_INTEGRATION``, ``FAST=1``, ``UNIT_ONLY=1``) is an exclusion.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable

from ingest.learning.check_targets import LINTERS, Check

# options that change only what is printed (dropped), and options that take a value
QUIET = frozenset({"-q", "-qq", "-v", "-vv", "-vvv", "-s", "-x", "--quiet", "--verbose", "-rA",
                   "-ra", "--no-header", "--color", "--colour", "--no-cov", "--exitfirst",
                   "-l", "--showlocals", "--no-summary", "--offline", "-B", "--batch-mode"})  # fmt: skip
_VALUED = {
    "pytest": {"-k", "-m", "-p", "-n", "-c", "-o", "-r", "--tb", "--maxfail", "--rootdir",
               "--deselect", "--ignore", "--ignore-glob", "--timeout", "--cov", "--cov-report",
               "--cov-fail-under", "--cov-config", "-W", "--durations", "--junitxml",
               "--junit-xml", "--basetemp", "--log-level", "--log-cli-level", "--confcutdir",
               "--dist", "--reruns", "--reruns-delay", "--count", "--import-mode", "--capture",
               "--override-ini", "--last-failed-no-failures", "--lfnf", "-P", "--randomly-seed"},
    "go": {"-run", "-count", "-timeout", "-tags", "-p", "-parallel", "-coverprofile", "-bench",
           "-skip", "-cpu", "-o", "-ldflags", "-gcflags", "-list", "-covermode", "-coverpkg",
           "-exec", "-vet", "-shuffle", "-benchtime"},
    "cargo": {"-p", "--package", "--features", "-F", "--target", "--bin", "--test", "--example",
              "--bench", "-j", "--jobs", "--manifest-path", "--profile", "--color", "--exclude",
              "-Z", "--config", "--target-dir"},
    "libtest": {"--skip", "--test-threads", "--format", "--logfile", "--color", "-Z",
                "--shuffle-seed"},
    "jest": {"-t", "--testNamePattern", "-c", "--config", "--reporter", "--reporters",
             "--maxWorkers", "-w", "--testPathIgnorePatterns", "--exclude", "--changedSince",
             "--shard", "--testPathPattern", "--project", "--environment"},
    "defects4j": {"-t", "-w", "-s", "-p", "-v"},
}  # fmt: skip
TASK_RUNNERS = frozenset({"make", "gmake", "just", "task", "rake", "invoke", "inv", "tox", "nox",
                          "ant", "npm", "yarn", "pnpm", "bun", "mise", "hatch", "pdm"})  # fmt: skip
JS_TESTS = frozenset({"jest", "vitest", "mocha", "ava", "jasmine", "playwright", "cypress"})
_SKIP_SWITCH = re.compile(r"SKIP|IGNORE|EXCLUDE|DESELECT|DISABLE|ONLY|QUICK|FAST|SHORT|^NO_",
                          re.I)  # fmt: skip
_PYTEST_COLLECT = frozenset({"--co", "--collect-only", "--collectonly", "--fixtures",
                             "--fixtures-per-test", "--markers", "--setup-plan", "--version",
                             "-V", "-h", "--help"})  # fmt: skip
_PYTEST_OPAQUE = frozenset({"--lf", "--last-failed", "--sw", "--stepwise", "--sw-skip",
                            "--stepwise-skip", "--shard-id", "--num-shards"})  # fmt: skip
_JEST_OPAQUE = frozenset({"-o", "--onlyChanged", "--changedSince", "--lastCommit", "-f",
                          "--onlyFailures", "--shard", "--changed", "--related",
                          "--findRelatedTests"})  # fmt: skip
_CARGO_SCOPE = frozenset({"--lib", "--bins", "--bin", "--tests", "--test", "--examples",
                          "--example", "--doc", "--benches", "--bench", "--all-targets", "-p",
                          "--package", "--exclude", "--features", "-F", "--no-default-features",
                          "--all-features"})  # fmt: skip
MAX_ARGS = 400


def _path(p: str, cwd: str | None) -> str:
    if cwd and p.startswith(cwd.rstrip("/") + "/"):
        p = p[len(cwd.rstrip("/")) + 1 :]
    while p.startswith("./"):
        p = p[2:]
    p = p.rstrip("/")
    return "" if p in (".", "") else p


def _split(args: list[str], valued: set[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """(positional words, [(option, value)] in order) of ``args``; ``-k=x``, ``-k x`` and
    ``-kx`` alike."""
    pos: list[str] = []
    opts: list[tuple[str, str]] = []
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
            opts.append((name, value))
        else:
            pos.append(a)
        i += 1
    return pos, opts


def _values(opts: list[tuple[str, str]], *names: str) -> list[str]:
    return [v for n, v in opts if n in names]


def _last(opts: list[tuple[str, str]], *names: str) -> str:
    found = _values(opts, *names)
    return found[-1] if found else ""


def _text(tool: str, words: list[str]) -> str:
    return shlex.join([tool, *[w for w in words if w not in QUIET]])


def _env_args(env: dict[str, str], name: str) -> list[str]:
    try:
        return shlex.split(env.get(name, ""))[:MAX_ARGS]
    except ValueError:
        return env.get(name, "").split()[:MAX_ARGS]


def _switches(env: dict[str, str]) -> list[str]:
    """The environment variables that read as switches leaving tests out."""
    return [f"env:{k}={v}" for k, v in env.items() if _SKIP_SWITCH.search(k)]


def _pytest(args, cwd, env):
    args = _env_args(env, "PYTEST_ADDOPTS") + args
    pos, opts = _split(args, _VALUED["pytest"])
    targets = tuple(sorted({p for a in pos if (p := _path(a, cwd))}))
    excludes = [f"{n}={_path(v, cwd) or v}" for n, v in opts
                if n in ("--deselect", "--ignore", "--ignore-glob")]  # fmt: skip
    action = "collect" if any(n in _PYTEST_COLLECT for n, _ in opts) else "test"
    return Check("pytest", action, targets, _last(opts, "-k"), _text("pytest", args),
                 marks=_last(opts, "-m"), excludes=tuple(sorted({*excludes, *_switches(env)})),
                 opaque=any(n in _PYTEST_OPAQUE for n, _ in opts))  # fmt: skip


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


def _defects4j(args, cwd, env):
    if not args or args[0] != "test":
        return Check("defects4j", args[0] if args else "", (), "", _text("defects4j", args))
    _pos, opts = _split(args[1:], _VALUED["defects4j"])
    targets = tuple(sorted({_junit_id(t) for t in _last(opts, "-t").split(",") if t}))
    return Check("junit", "test", targets, "", _text("defects4j", args),
                 excludes=tuple(_switches(env)))  # fmt: skip


def _maven_gradle(tool: str) -> Callable:
    def make(args, cwd, env):
        goals = [a.rsplit(":", 1)[-1] for a in args if not a.startswith("-")]
        skipped = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-x", "--exclude-task")]
        props = dict(a[2:].partition("=")[::2] for a in args if a.startswith("-D"))
        testing = any(g in ("test", "verify", "check", "install", "package", "build")
                      for g in goals)  # fmt: skip
        no_tests = (props.get("skipTests", "false") in ("", "true")
                    or props.get("maven.test.skip", "false") in ("", "true")
                    or any(t.rsplit(":", 1)[-1] in ("test", "check") for t in skipped))  # fmt: skip
        testing = testing and not no_tests
        specs = [t for t in props.get("test", "").split(",") if t]
        specs += [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--tests"]
        targets = tuple(sorted({_junit_id(t) for t in specs if not t.startswith("!")}))
        excludes = {f"-Dtest={t}" for t in specs if t.startswith("!")}
        excludes |= {f"-DexcludedGroups={v}" for k, v in props.items() if k == "excludedGroups"}
        action = "test" if testing else "build"
        return Check("junit" if testing else tool, action, targets, "", _text(tool, args),
                     marks=props.get("groups", ""),
                     excludes=tuple(sorted({*excludes, *_switches(env)})))  # fmt: skip

    return make


def _go(args, cwd, env):
    sub = args[0] if args else ""
    rest = _env_args(env, "GOFLAGS") + args[1:]
    rest = [a[1:] if a.startswith("--") and len(a) > 2 else a for a in rest]  # --run: -run
    pos, opts = _split(rest, _VALUED["go"])
    targets = tuple(sorted({p for a in pos if (p := _path(a, cwd)) and p != "..."}))
    action = "test" if sub == "test" else sub
    if sub == "test" and _values(opts, "-list"):
        action = "list"
    excludes = [f"-skip={v}" for v in _values(opts, "-skip")]
    excludes += ["-short"] if _values(opts, "-short") else []
    return Check("go", action, targets, _last(opts, "-run"), _text("go", args),
                 marks=_last(opts, "-tags"),
                 excludes=tuple(sorted({*excludes, *_switches(env)})))  # fmt: skip


def _cargo(args, cwd, env):
    sub = next((a for a in args if not a.startswith("-")), "")
    rest = args[args.index(sub) + 1 :] if sub else []
    if sub == "nextest" and rest[:1] == ["run"]:
        sub, rest = "test", rest[1:]
    libtest: list[str] = []
    if "--" in rest:
        rest, libtest = rest[: rest.index("--")], rest[rest.index("--") + 1 :]
    pos, opts = _split(rest, _VALUED["cargo"])
    names = [n for n, _ in opts]
    if sub != "test":
        scope = ":".join(x for x in ("release" if "--release" in names else "",
                                     _last(opts, "-p", "--package")) if x)  # fmt: skip
        action = f"{sub}{':' + scope if scope else ''}"
        return Check("cargo", action, (), "", _text("cargo", args))
    lib_pos, lib_opts = _split(libtest, _VALUED["libtest"])
    lib_names = [n for n, _ in lib_opts]
    action = "list" if "--list" in lib_names else "build tests" if "--no-run" in names else "test"
    excludes = [f"--skip={v}" for v in _values(lib_opts, "--skip")]
    excludes += ["--ignored"] if "--ignored" in lib_names else []
    marks = " ".join(sorted(f"{n}={v}" if v else n for n, v in opts if n in _CARGO_SCOPE))
    return Check("cargo", action, tuple(sorted({*pos, *lib_pos})), "", _text("cargo", args),
                 marks=marks, excludes=tuple(sorted({*excludes, *_switches(env)})))  # fmt: skip


def _jest(args, cwd, env):
    if args[:1] == ["list"]:
        return Check("jest", "list", (), "", _text("jest", args))
    pos, opts = _split([a for a in args if a != "run"], _VALUED["jest"])
    targets = tuple(sorted({p for a in pos if (p := _path(a, cwd))}))
    name = _last(opts, "-t", "--testNamePattern")
    excludes = [f"{n}={v}" for n, v in opts if n in ("--testPathIgnorePatterns", "--exclude")]
    action = "list" if any(n in ("--listTests", "--showConfig") for n, _ in opts) else "test"
    return Check("jest", action, targets, name, _text("jest", args),
                 excludes=tuple(sorted({*excludes, *_switches(env)})),
                 opaque=any(n in _JEST_OPAQUE for n, _ in opts))  # fmt: skip


def _task(tool: str) -> Callable:
    def make(args, cwd, env):
        passed_on = args[args.index("--") + 1 :] if "--" in args else []
        own = args[: args.index("--")] if "--" in args else args
        pos = [a for a in own if not a.startswith("-") and "=" not in a]
        if tool in ("npm", "yarn", "pnpm", "bun") and pos[:1] == ["run"]:
            pos = pos[1:]
        if tool == "tox":
            pos = [own[i + 1] for i, a in enumerate(own[:-1]) if a == "-e"] or ["tox"]
        if tool == "nox":
            pos = [own[i + 1] for i, a in enumerate(own[:-1]) if a in ("-s", "--session")] or [
                "nox"
            ]
        family = "npm" if tool in ("yarn", "pnpm", "bun") else tool
        action = " ".join(pos[:1]) or "(default)"
        given = [a for a in own if "=" in a and not a.startswith("-")]
        marks = shlex.join([*sorted(given), *[a for a in passed_on if a not in QUIET]])
        return Check(family, action, tuple(pos[1:]), "", _text(family, args), wrapper=True,
                     marks=marks, excludes=tuple(_switches(env)))  # fmt: skip

    return make


def _linter(tool: str) -> Callable:
    def make(args, cwd, env):
        sub = args[0] if args and not args[0].startswith("-") and tool == "ruff" else ""
        words = args[1:] if sub else args
        pos = [p for a in words if not a.startswith("-") and (p := _path(a, cwd))]
        action = f"lint {sub}".strip() + (" --check" if "--check" in args else "")
        return Check(tool, action, tuple(sorted(set(pos))), "", _text(tool, args))

    return make


def _generic(tool: str, args, cwd, env) -> Check:
    words = [_path(a, cwd) or a if "/" in a else a for a in args]
    return Check(tool, "run", (), "", _text(tool, words), excludes=tuple(_switches(env)))


RUNNERS: dict[str, Callable] = {
    "pytest": _pytest, "py.test": _pytest, "defects4j": _defects4j,
    "mvn": _maven_gradle("mvn"), "mvnw": _maven_gradle("mvn"),
    "gradle": _maven_gradle("gradle"), "gradlew": _maven_gradle("gradle"),
    "go": _go, "cargo": _cargo,
    **{t: _task(t) for t in TASK_RUNNERS}, **{t: _linter(t) for t in LINTERS},
}  # fmt: skip


def make_check(prog: str, args: list[str], cwd: str | None = None,
               env: dict[str, str] | None = None) -> Check | None:  # fmt: skip
    """The check of one simple command (``prog`` without its folder; None: nothing to run);
    ``env``: the variables its command line sets."""
    args = args[:MAX_ARGS]
    env = env or {}
    if prog in JS_TESTS:
        return _jest(args, cwd, env)
    if prog == "unittest":
        return Check("unittest", "test", tuple(sorted(a for a in args if not a.startswith("-"))),
                     "", _text("unittest", args), excludes=tuple(_switches(env)))  # fmt: skip
    make = RUNNERS.get(prog)
    if make is not None:
        return make(args, cwd, env)
    if prog in ("npx", "node") and args and args[0] in JS_TESTS:
        return _jest(args[1:], cwd, env)
    return _generic(prog, args, cwd, env)
