"""Control sessions of the replay benchmark (``benchmarks/lessons_auto.py``) beyond the fix
flow of ``benchmarks/d4j_sessions.py``, written from one Defects4J bug each.

**Negative controls**: sequences in which the failing test never passed, or only
documentation changed. None may become a lesson.

- ``readme``, ``docs``: the bug's test fails with its real trace (``defects4j test -t``), the
  agent edits ``README.md`` (``docs/notes.md``), the test passes (a flaky test);
- the same failure written for another runner, then the bug's real patch applied as Edit
  calls, then a pass that leaves the failing test out: ``k_not`` (``pytest -k "not X"``),
  ``deselect`` (``--deselect``), ``m_not`` (``-m "not slow"``), ``ignore`` (``--ignore``),
  ``ignore_glob`` (``--ignore-glob``), ``cargo_skip`` (``cargo test -- --skip X``),
  ``go_skip`` (``go test -skip X``), ``jest_ignore`` (``--testPathIgnorePatterns``);
- a pass whose summary says the failing test did not pass: ``skipped``, ``xfailed``,
  ``deselected`` (the same command, one test counted so), ``deleted`` (one test fewer);
- hostile ways to run less than failed: ``or_true`` (``timeout 60 pytest … || true``, cut
  before its summary), ``exit_0`` (``pytest …; exit 0``, no summary), ``collect_only``
  (``pytest --co``), ``last_failed`` (``pytest --lf`` deselecting the rest), ``env_skip``
  (``SKIP_SLOW=1 pytest …``, one test skipped).

**Positive controls**: the same failures fixed and re-run narrower, each must be an episode:
``pytest_k`` (``pytest -k <the failing test>``), ``pytest_node`` (its node id alone),
``cargo_name`` (``cargo test <name>``), ``go_run`` (``go test ./pkg -run TestX``). They are
read by the episode detector alone, never stored: the replay's store, and so its recall,
stays what the Defects4J sessions make it.

The runner a control is written for names the bug's test in its notation (``tests/test_
category_plot_tests.py::test_remove_domain_marker``, ``category_plot_tests::tests::
test_remove_domain_marker``, ``TestCategoryPlotTestsRemoveDomainMarker``,
``src/CategoryPlotTests.test.js``) and gives the bug's exception line as its message.
"""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks import d4j_sessions as d4j

DOC_KINDS = ("readme", "docs")
RUNNER_KINDS = ("k_not", "deselect", "m_not", "ignore", "ignore_glob", "cargo_skip", "go_skip",
                "jest_ignore", "skipped", "xfailed", "deselected", "deleted", "or_true", "exit_0",
                "collect_only", "last_failed", "env_skip")  # fmt: skip
POSITIVE_KINDS = ("pytest_k", "pytest_node", "cargo_name", "go_run")


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def names(test: str) -> dict[str, str]:
    """The bug's failing test in each runner's notation."""
    cls, _, method = test.partition("::")
    simple = cls.rsplit(".", 1)[-1]
    fn = _snake(method) if method.startswith("test") else f"test_{_snake(method)}"
    return {"file": f"tests/test_{_snake(simple)}.py", "fn": fn,
            "pytest": f"tests/test_{_snake(simple)}.py::{fn}",
            "cargo": f"{_snake(simple)}::tests::{fn}",
            "go": f"Test{simple}{method[4:] if method.startswith('test') else method.title()}",
            "jest": f"src/{simple}.test.js"}  # fmt: skip


def py_fail(node: str, exc: str, others: int = 5) -> str:
    path, fn = node.split("::")
    return (f"Exit code 1\n============================= test session starts ==============\n"
            f"collected {others + 1} items\n\n{path} ...F..\n\n=== FAILURES ===\n"
            f"___________ {fn} ___________\n    def {fn}():\n>       run()\nE       {exc}\n\n"
            f"{path}:14: {exc.split(':')[0]}\n=== short test summary info ===\n"
            f"FAILED {node} - {exc}\n===== 1 failed, {others} passed in 0.42s =====")  # fmt: skip


def py_pass(n: int, extra: str = "") -> str:
    return (
        f"============================= test session starts ==============\n"
        f"collected {n} items\n\n......\n\n===== {n} passed{extra} in 0.40s ====="
    )


def cargo_fail(name: str, exc: str) -> str:
    return (f"Exit code 101\nrunning 3 tests\ntest util::tests::parses ... ok\n"
            f"test {name} ... FAILED\ntest util::tests::formats ... ok\n\nfailures:\n\n"
            f"---- {name} stdout ----\nthread '{name}' panicked at src/lib.rs:40:9:\n{exc}\n\n"
            f"test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out")  # fmt: skip


def go_fail(name: str, exc: str) -> str:
    return f"--- FAIL: {name} (0.01s)\n    x_test.go:12: {exc}\nFAIL\nFAIL\tbench/pkg\t0.02s"


def jest_fail(path: str, exc: str) -> str:
    return (f"Exit code 1\nFAIL {path}\n  ● {exc}\n\nPASS src/util.test.js\n"
            f"Tests:       1 failed, 5 passed, 6 total")  # fmt: skip


def _edits(w: d4j.Writer, bug: dict, cwd: str) -> None:
    for h in d4j.hunks(bug.get("src_patch") or ""):
        same = h.fixed == h.buggy
        w.tool("Edit", {"file_path": f"{cwd}/{h.path}", "old_string": h.buggy,
                        "new_string": h.fixed, "replace_all": False},
               d4j.NO_CHANGE if same else f"The file {cwd}/{h.path} has been updated successfully.",
               same)  # fmt: skip


def _failure(kind: str, n: dict, exc: str) -> tuple[str, str]:
    """(command, output) of the failing run a control starts with."""
    if kind in ("cargo_skip", "cargo_name"):
        return "cargo test", cargo_fail(n["cargo"], exc)
    if kind in ("go_skip", "go_run"):
        return "go test ./...", go_fail(n["go"], exc)
    if kind == "jest_ignore":
        return "npx jest", jest_fail(n["jest"], exc)
    if kind == "m_not":
        return "pytest -m slow", py_fail(n["pytest"], exc)
    if kind in ("ignore", "ignore_glob", "last_failed"):
        return "pytest tests/", py_fail(n["pytest"], exc)
    return f"pytest {n['file']}", py_fail(n["pytest"], exc)


def _pass(kind: str, n: dict) -> tuple[str, str]:
    """(command, output) of the passing run that ends a control."""
    f, node = n["file"], n["pytest"]
    ok5 = "running 2 tests\ntest util::tests::parses ... ok\ntest util::tests::formats ... ok\n\n"
    return {
        "k_not": (f'pytest {f} -k "not {n["fn"]}"', py_pass(5, ", 1 deselected")),
        "deselect": (f"pytest {f} --deselect {node}", py_pass(5, ", 1 deselected")),
        "m_not": ('pytest -m "not slow"', py_pass(40, ", 6 deselected")),
        "ignore": (f"pytest tests/ --ignore={f}", py_pass(30)),
        "ignore_glob": (f"pytest tests/ --ignore-glob='*{Path(f).stem[5:]}*'", py_pass(30)),
        "cargo_skip": (f"cargo test -- --skip {n['cargo'].rsplit('::', 1)[-1]}",
                       ok5 + "test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; "
                             "1 filtered out"),
        "go_skip": (f"go test ./... -skip {n['go']}", "ok  \tbench/pkg\t0.02s"),
        "jest_ignore": (f"npx jest --testPathIgnorePatterns {Path(n['jest']).name.split('.')[0]}",
                        "PASS src/util.test.js\nTests:       5 passed, 5 total"),
        "skipped": (f"pytest {f}", py_pass(5, ", 1 skipped")),
        "xfailed": (f"pytest {f}", py_pass(5, ", 1 xfailed")),
        "deselected": (f"pytest {f}", py_pass(5, ", 1 deselected")),
        "deleted": (f"pytest {f}", py_pass(5)),
        "or_true": (f"timeout 60 pytest {f} || true", f"collected 6 items\n\n{f} ..."),
        "exit_0": (f"pytest {f}; exit 0", "collected 6 items"),
        "collect_only": (f"pytest {f} --co -q", f"{node}\n\n6 tests collected in 0.02s"),
        "last_failed": ("pytest --lf", py_pass(1, ", 35 deselected")),
        "env_skip": (f"SKIP_SLOW=1 pytest {f}", py_pass(5, ", 1 skipped")),
        "pytest_k": (f"pytest {f} -k {n['fn']}", py_pass(1, ", 5 deselected")),
        "pytest_node": (f"pytest {node} -q", py_pass(1)),
        "cargo_name": (f"cargo test {n['cargo'].rsplit('::', 1)[-1]}",
                       f"running 1 test\ntest {n['cargo']} ... ok\n\ntest result: ok. 1 passed; "
                       "0 failed; 0 ignored; 0 measured; 2 filtered out"),
        "go_run": (f"go test ./pkg -run '^{n['go']}$'", "ok  \tbench/pkg\t0.02s"),
    }[kind]  # fmt: skip


def session(bug: dict, kind: str, folder: Path, cwd: str) -> Path:
    """Write one control session of ``bug`` (a kind of this module's docstring)."""
    first = bug["trigger_tests"][0]
    test, trace = first["test"], first["trace"]
    exc = (trace.strip().splitlines() or ["java.lang.AssertionError"])[0][:200]
    name = f"{bug['project']}-{bug['bug_id']}-{kind}"
    w = d4j.Writer(folder / f"{name}.jsonl", name, cwd)
    w.user(f"The test {test} fails ({exc[:160]}). Please find the cause and fix it.")
    if kind in DOC_KINDS:
        w.tool("Bash", {"command": d4j.test_command(test)}, d4j.failed_output(test, trace), True)
        doc = "README.md" if kind == "readme" else "docs/notes.md"
        w.say(f"Probably a flaky run; meanwhile I'll note how to run this test in {doc}.")
        w.tool("Edit", {"file_path": f"{cwd}/{doc}", "old_string": "## Tests\n",
                        "new_string": f"## Tests\n\nRun `{d4j.test_command(test)}`.\n"},
               f"The file {cwd}/{doc} has been updated successfully.")  # fmt: skip
        w.tool("Bash", {"command": d4j.test_command(test)}, d4j.PASSED)
        w.say("It passes now; the failure was flaky.")
        return w.save()
    n = names(test)
    command, output = _failure(kind, n, exc)
    w.tool("Bash", {"command": command}, output, True)
    w.say("The trace points at the code under test; let me change it.")
    _edits(w, bug, cwd)
    command, output = _pass(kind, n)
    w.tool("Bash", {"command": command}, output)
    w.say(d4j.fix_sentence(d4j.hunks(bug.get("src_patch") or "")))
    return w.save()
