"""Every ``pattern-memory …`` command line in the code blocks of the README and of the
documentation pages parses and runs.

The lines are read from README.md, then from each page of the documentation site in the order of
``mkdocs.yml``'s nav (:data:`DOCS`; fenced code blocks only; a trailing ``# comment`` is dropped,
a trailing ``\\`` joins the next line) and run in that order, as a user would type them, in one
temporary store (``PATTERN_HOME``) from one temporary working directory that holds the files the
examples name (:data:`FILES`), with ``PATTERN_EMBEDDER=hash`` (no model is needed to
check that a command works). Each must exit 0. So a README section or a page added later is covered
without touching this file, unless its command needs something special:

- a command that runs until stopped (``daemon``, ``ingest --watch``) is started, waited for
  until it is ready (an event with a deadline), stopped with a signal and must exit cleanly:
  :data:`RUNS_UNTIL_STOPPED`, keyed by the sub-command or flag, so every such line is covered;
- ``--http HOST:PORT`` is rewritten to ``127.0.0.1:<free port>`` (:func:`rewrite`): a test must
  not listen on every interface or a fixed port of a shared machine;
- a command that cannot run here is only parsed: :data:`PARSE_ONLY`, each entry with its reason.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from server.cli import build_parser
from server.http.daemon import read_info

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def doc_pages() -> list[Path]:
    """README.md, then the documentation pages in the order of ``mkdocs.yml``'s nav (read with a
    pattern: the file has a YAML tag that a safe loader refuses)."""
    nav = re.findall(r"^\s*-\s*[^:\n]+:\s*(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    return [README, *(ROOT / "docs" / page for page in nav)]


DOCS = doc_pages()
COMMAND = re.compile(r"^(?:\S*/)?pattern-memory(?:\s|$)")
RUN_TIMEOUT = 180  # seconds for one command that should finish by itself
READY_TIMEOUT = 90  # seconds for a long-running command to become ready

# Command lines (after ``pattern-memory``) that are only parsed, never run, by prefix -> reason.
PARSE_ONLY: dict[str, str] = {
    "import-from": "reads the user's own stores (~/.claude-mem, ~/.claude, a mem0 export, …): "
    "run on a fixture of each source by test_import_from.py, alone and under a daemon",
    "export-to": "writes into the user's folders (~/notes): run by test_import_from.py",
    "serve": "speaks MCP on stdin/stdout and starts a detached daemon: run by test_mcp_stdio.py "
    "and test_daemon.py's bridge test",
    "stop": "stops whatever daemon owns the store: run by test_daemon.py",
    "ui": "starts a detached daemon and opens a browser: run by test_ui_cli.py (and the "
    "browser tests)",
    "hooks install --user": "writes the user's own files (~/.claude/settings.json and "
    "~/.claude.json, ~/.codex, ~/.gemini, ~/.cursor, ~/.copilot), with --user anywhere and any "
    "--client: run by test_hook_install.py and test_client_*.py under a temporary HOME",
    "hooks uninstall --user": "the same files: run by test_hook_install.py",
    "index-sessions": "reads the user's ~/.claude/projects and starts the store's daemon (which "
    "would hold the store the later commands use): run by test_index_sessions.py",
    "remember": "starts the store's daemon (which would hold the store the later commands "
    "use): run by test_shell_commands.py",
    "lessons": "starts the store's daemon, as remember: run by test_shell_commands.py",
}

# Files the examples name, created in the working directory before the first command.
OFFICIAL_GRAPH = [
    {"type": "entity", "name": "Ada", "entityType": "person", "observations": ["writes tests"]},
    {"type": "entity", "name": "Lovelace_Lab", "entityType": "team", "observations": []},
    {"type": "relation", "from": "Ada", "to": "Lovelace_Lab", "relationType": "works_in"},
]
LESSON = {
    "name": "YAML_MISSING_01", "entityType": "lesson", "observations": ["install PyYAML"],
    "errorPattern": {"type": "ModuleNotFoundError", "message": "No module named 'yaml'",
                     "context": "running the tests"},
    "metadata": {"severity": "medium", "environment": {"os": "linux"}, "frequency": 1,
                 "successRate": 1.0},
    "verificationSteps": [{"command": "pip install pyyaml", "expectedOutput": "Successfully",
                           "successIndicators": ["installed"]}],
}  # fmt: skip
FILES: dict[str, str] = {
    "README.md": "# Demo\n\nHow do we deploy: the release job pushes a tag.\n",
    "docs/guide.md": "# Guide\n\nThe fusion of lexical and vector scores is in fusion.py.\n",
    "src/app.py": "def deploy():\n    '''Push a release tag.'''\n    return 'tag'\n",
    "memory.jsonl": "".join(json.dumps(r) + "\n" for r in OFFICIAL_GRAPH),
    "lesson.json": json.dumps([LESSON]),
}


@dataclass
class Line:
    lineno: int
    text: str
    argv: list[str]  # after "pattern-memory"
    file: str = "README.md"

    @property
    def id(self) -> str:
        return f"{self.file}:{self.lineno}: {' '.join(self.argv)}"[:90]

    @property
    def where(self) -> str:
        return f"{self.file} line {self.lineno}"


def readme_commands(text: str | None = None, path: Path = README) -> list[Line]:
    """Every ``pattern-memory`` command line of a page's fenced code blocks, in order."""
    lines = (path.read_text(encoding="utf-8") if text is None else text).splitlines()
    out: list[Line] = []
    fence = False
    i = 0
    while i < len(lines):
        raw, start = lines[i], i + 1
        i += 1
        if raw.lstrip().startswith("```"):
            fence = not fence
            continue
        if not fence:
            continue
        while raw.rstrip().endswith("\\") and i < len(lines):  # a continued line
            raw = raw.rstrip()[:-1] + " " + lines[i].strip()
            i += 1
        if COMMAND.match(raw.strip()):
            words = shlex.split(raw, comments=True)
            out.append(Line(start, raw.strip(), words[1:], path.relative_to(ROOT).as_posix()))
    return out


def all_commands() -> list[Line]:
    """The command lines of the README and of every documentation page, in reading order."""
    return [line for page in DOCS for line in readme_commands(path=page)]


def parse_only_reason(argv: list[str]) -> str | None:
    if argv[:2] in (["hooks", "install"], ["hooks", "uninstall"]) and "--user" in argv:
        return PARSE_ONLY["hooks install --user"]  # any client's: the user's own files
    joined = " ".join(argv)
    for prefix, reason in PARSE_ONLY.items():
        if joined == prefix or joined.startswith(prefix + " "):
            return reason
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rewrite(argv: list[str]) -> list[str]:
    """``--http HOST:PORT`` -> ``--http 127.0.0.1:<free port>`` (see the module docstring)."""
    out = list(argv)
    for i, word in enumerate(out[:-1]):
        if word == "--http":
            out[i + 1] = f"127.0.0.1:{free_port()}"
    return out


# --------------------------------------------------------------------------- running
@dataclass
class Workspace:
    home: Path
    cwd: Path
    env: dict[str, str]

    def popen(self, argv: list[str], **kw) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "server.cli", *argv], cwd=self.cwd, env=self.env,
            stdin=subprocess.DEVNULL, text=True, preexec_fn=default_signals, **kw,
        )  # fmt: skip


def default_signals() -> None:
    """In the child, before exec: SIGINT and SIGTERM as a shell would leave them. A test
    process may ignore SIGINT (a pytest-xdist worker, a browser driver), and an ignored
    signal stays ignored across exec: Ctrl-C would then never reach the command."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def lines_of(proc: subprocess.Popen, stream) -> list[str]:
    """Collect a pipe's lines on a thread (so a full pipe never blocks the child)."""
    got: list[str] = []

    def pump() -> None:
        for line in stream:
            got.append(line)

    threading.Thread(target=pump, daemon=True).start()
    return got


def wait_for(ready: Callable[[], bool], proc: subprocess.Popen, what: str, err: list[str]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while not ready():
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited with {proc.returncode}: {''.join(err)}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} was not ready within {READY_TIMEOUT}s: {''.join(err)}")
        time.sleep(0.05)


def stop(proc: subprocess.Popen, sig: int, ok: tuple[int, ...], what: str, err: list[str]):
    proc.send_signal(sig)
    try:
        code = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"{what} did not stop on signal {sig}") from None
    assert code in ok, f"{what} exited with {code} when stopped: {''.join(err)}"


def run_daemon(ws: Workspace, argv: list[str], what: str) -> None:
    """Ready when it has written daemon.json with its pid; SIGTERM drains and exits 0."""
    proc = ws.popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = lines_of(proc, proc.stderr)
    try:
        wait_for(lambda: (read_info(ws.home) or {}).get("pid") == proc.pid, proc, what, err)
    finally:
        stop(proc, signal.SIGTERM, (0,), what, err)


def run_watch(ws: Workspace, argv: list[str], what: str) -> None:
    """Ready when the first run's report is printed; Ctrl-C (SIGINT) ends it (0, or 130 when
    the signal lands outside the wait for changes)."""
    proc = ws.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = lines_of(proc, proc.stdout), lines_of(proc, proc.stderr)
    try:
        wait_for(lambda: any("files" in line for line in out), proc, what, err)
    finally:
        stop(proc, signal.SIGINT, (0, 130), what, err)


# how to run a command that runs until stopped: by sub-command, or by a flag anywhere in it
RUNS_UNTIL_STOPPED: dict[str, Callable[[Workspace, list[str], str], None]] = {
    "daemon": run_daemon,
    "--watch": run_watch,
}


def runner_for(argv: list[str]):
    for key, fn in RUNS_UNTIL_STOPPED.items():
        if (key.startswith("--") and key in argv) or (argv and argv[0] == key):
            return fn
    return None


def run_to_completion(ws: Workspace, argv: list[str], what: str) -> None:
    proc = ws.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(
            f"{what} ran longer than {RUN_TIMEOUT}s: if it runs until stopped, add a runner to "
            "RUNS_UNTIL_STOPPED; if it needs special setup, add it to PARSE_ONLY with a reason"
        ) from None
    assert proc.returncode == 0, f"{what} exited with {proc.returncode}:\n{err}\n{out}"


# --------------------------------------------------------------------------- tests
COMMANDS = all_commands()


def test_the_readme_has_command_lines():
    """The extractor finds the commands of the README and of the pages (a broken extractor must
    not pass silently)."""
    texts = [" ".join(c.argv) for c in COMMANDS]
    assert len(COMMANDS) >= 10
    assert "token revoke alice" in texts and "stats" in texts
    assert "hooks install" in [" ".join(c.argv) for c in readme_commands()]
    assert {p.name for p in DOCS} >= {"README.md", "configuration.md", "clients.md", "daemon.md"}
    assert all(p.is_file() for p in DOCS), [p for p in DOCS if not p.is_file()]
    sample = 'x\n```sh\npattern-memory recall "a b" --json  # the text\n```\npattern-memory no\n'
    assert [c.argv for c in readme_commands(sample)] == [["recall", "a b", "--json"]]


@pytest.mark.parametrize("line", COMMANDS, ids=[c.id for c in COMMANDS])
def test_readme_command_parses(line):
    try:
        build_parser().parse_args(rewrite(line.argv))
    except SystemExit as exc:
        pytest.fail(f"{line.where} does not parse ({exc.code}): {line.text}")


@pytest.mark.slow  # every command line a new process, daemons started and stopped
def test_readme_commands_run(tmp_path):
    home, cwd = tmp_path / "home", tmp_path / "work"
    for rel, text in FILES.items():
        (cwd / rel).parent.mkdir(parents=True, exist_ok=True)
        (cwd / rel).write_text(text, encoding="utf-8")
    env = {**os.environ, "PATTERN_HOME": str(home), "PATTERN_EMBEDDER": "hash",
           "PATTERN_PROJECT_ID": "readme", "PATTERN_AGENT_ID": "reader",
           "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(
               [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}  # fmt: skip
    ws = Workspace(home, cwd, env)
    ran = 0
    try:
        for line in COMMANDS:
            if parse_only_reason(line.argv):
                continue
            argv = rewrite(line.argv)
            what = f"{line.where} ({line.text})"
            (runner_for(argv) or run_to_completion)(ws, argv, what)
            ran += 1
    finally:  # a command that starts a detached daemon (hooks, index-sessions) leaves it running
        if (read_info(home) or {}).get("pid"):
            run_to_completion(ws, ["stop"], "pattern-memory stop, after the README's commands")
    assert ran >= 10


def test_every_cli_option_has_a_help_line():
    missing = []

    def walk(parser, path: str) -> None:
        for action in parser._actions:
            if action.dest == "help":
                continue
            if hasattr(action, "choices") and isinstance(action.choices, dict):  # sub-commands
                helps = {a.dest: a.help for a in action._choices_actions}
                for name, sub in action.choices.items():
                    if not helps.get(name):
                        missing.append(f"{path} {name} (sub-command)")
                    walk(sub, f"{path} {name}")
            elif not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "pattern-memory")
    assert missing == []


def test_the_readme_links_resolve():
    """Every relative link of the README names a file of the repository (the documentation
    pages it points to for the details); the site's own links are checked by
    ``mkdocs build --strict`` in ``make test``."""
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link.split("#")[0] for link in links if not re.match(r"[a-z]+:|#", link)]
    assert local, "the README links to the documentation pages"
    assert [link for link in local if not (ROOT / link).exists()] == []
