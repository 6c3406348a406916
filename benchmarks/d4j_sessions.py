"""Claude Code transcripts of Defects4J bugs, written from their real data
(``benchmarks/lessons_auto.py``).

Entries follow the format the session indexer reads (``ingest/sessions/transcripts.py``: one JSON object
per line, ``type`` user/assistant, ``uuid``/``parentUuid``, ``sessionId``, ``cwd``,
``gitBranch``, ``timestamp``, ``message.content`` a string or blocks ``text`` / ``tool_use``
{id, name, input} / ``tool_result`` {tool_use_id, content, is_error}; a failed Bash call's
result starts with ``Exit code N``, as Claude Code writes it).

A bug's **fix session**: the user reports the failing test; the agent runs it
(``defects4j test -t Class::method``) and gets the real trace as an error result; it applies
the real patch as Edit calls (Defects4J's ``src_patch`` goes from the fixed to the buggy
version, so the fix applies it in reverse: each hunk's buggy lines are replaced by the fixed
ones); the test passes (``Failing tests: 0``); the agent states the fix in one sentence naming
the file and the method changed (from the hunk: git's function context, else the nearest
method declaration in the hunk, else the class).

A patch whose two sides are the same (``Lang-48`` in ``defects4j_errors_fixes.jsonl``: its
one changed line reads alike on both sides) gives a refused Edit, so that session has no fix
and no episode.

**Controls** (never an episode): ``never``: the same, but the test fails again after the edits
and the agent gives up; ``other``: after the edits another test (of another bug of the
project) is run and passes; ``reads``: the agent only reads the patched files, then the test
passes (a flaky run).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

T0 = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@ ?(.*)$")
_METHOD = re.compile(
    r"^\s*(?:(?:public|private|protected|static|final|synchronized|abstract|native)\s+)*"
    r"(?:<[^>]+>\s+)?[\w<>\[\].,?\s]+?\s+(\w+)\s*\([^;{]*\)?\s*(?:throws [\w., ]+)?\s*\{?\s*$"
)
_KEYWORDS = {"if", "for", "while", "switch", "catch", "return", "new", "else", "synchronized"}


@dataclass
class Hunk:
    path: str
    context: str  # git's function context after the @@ header
    fixed: str  # the lines of the fixed version (the patch's "-" side and the context)
    buggy: str  # the lines of the buggy version (its "+" side and the context)
    lines: list[str]


def hunks(patch: str) -> list[Hunk]:
    """The hunks of a unified diff (``a/``/``b/`` prefixes dropped)."""
    out: list[Hunk] = []
    path, cur = "", None
    for line in patch.splitlines():
        if line.startswith("+++ "):
            path = line[4:].strip().removeprefix("b/")
        elif line.startswith(("--- ", "diff ", "index ")):
            continue
        elif (m := _HUNK.match(line)) is not None:
            cur = Hunk(path, m.group(1).strip(), "", "", [])
            out.append(cur)
        elif cur is not None and line[:1] in (" ", "-", "+", ""):
            cur.lines.append(line)
    for h in out:
        body = h.lines  # as written: a fix may change only line ends or blanks
        h.fixed = "\n".join(ln[1:] for ln in body if ln[:1] in (" ", "-", ""))
        h.buggy = "\n".join(ln[1:] for ln in body if ln[:1] in (" ", "+", ""))
    return out


def method_of(h: Hunk) -> str:
    """The method a hunk changes (best effort), else its class."""
    m = _METHOD.match(h.context)
    if m and m.group(1) not in _KEYWORDS:
        return m.group(1)
    first = next((i for i, ln in enumerate(h.lines) if ln[:1] in "+-"), len(h.lines))
    for ln in reversed(h.lines[:first]):
        m = _METHOD.match(ln[1:] if ln[:1] in " +-" else ln)
        if m and m.group(1) not in _KEYWORDS:
            return m.group(1)
    cls = re.search(r"\b(?:class|interface|enum)\s+(\w+)", h.context)
    return cls.group(1) if cls else Path(h.path).stem


def fix_sentence(hs: list[Hunk]) -> str:
    """One sentence naming the files and methods the fix changed."""
    by_file: dict[str, list[str]] = {}
    for h in hs:
        by_file.setdefault(h.path, [])
        name = method_of(h)
        if name not in by_file[h.path]:
            by_file[h.path].append(name)
    parts = [f"`{', '.join(ms)}` in `{Path(p).name}`" for p, ms in by_file.items()]
    return f"The test passes now: the fix changes {'; '.join(parts)}."


class Writer:
    """Appends one session's Claude Code entries."""

    def __init__(self, path: Path, session: str, cwd: str) -> None:
        self.path, self.session, self.cwd = path, session, cwd
        self.lines: list[dict] = []
        self.parent: str | None = None
        self.n = 0
        self.tools = 0

    def _entry(self, kind: str, content) -> dict:
        uid = f"{self.session}-{self.n:04d}"
        e = {"parentUuid": self.parent, "isSidechain": False, "userType": "external",
             "cwd": self.cwd, "sessionId": self.session, "version": "2.0.0",
             "gitBranch": "main", "type": kind, "uuid": uid,
             "timestamp": (T0 + timedelta(seconds=20 * self.n)).isoformat().replace("+00:00", "Z"),
             "message": {"role": kind, "content": content}}  # fmt: skip
        self.n += 1
        self.parent = uid
        self.lines.append(e)
        return e

    def user(self, text: str) -> None:
        self._entry("user", text)

    def say(self, text: str) -> None:
        self._entry("assistant", [{"type": "text", "text": text}])

    def tool(self, name: str, args: dict, output: str, is_error: bool = False) -> None:
        self.tools += 1
        tid = f"toolu_{self.session}_{self.tools:03d}"
        self._entry("assistant", [{"type": "tool_use", "id": tid, "name": name, "input": args}])
        self._entry("user", [{"type": "tool_result", "tool_use_id": tid, "content": output,
                              "is_error": is_error}])  # fmt: skip

    def save(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("".join(json.dumps(e) + "\n" for e in self.lines), encoding="utf-8")
        return self.path


def test_command(test: str) -> str:
    return f"defects4j test -t {test}"


def failed_output(test: str, trace: str) -> str:
    """A failing ``defects4j test -t`` as Claude Code records it: exit status, the runner's
    list of failing tests, the trace."""
    return (f"Exit code 1\nRunning ant (compile.tests)........ OK\nRunning ant (run.dev.tests)"
            f"........ OK\nFailing tests: 1\n  - {test}\n{trace.rstrip()}")  # fmt: skip


NO_CHANGE = (
    "<tool_use_error>No changes to make: old_string and new_string are exactly the "
    "same.</tool_use_error>"
)
PASSED = "Running ant (compile.tests)........ OK\nRunning ant (run.dev.tests)........ OK\nFailing tests: 0"


def session(bug: dict, kind: str, folder: Path, cwd: str, other_test: str | None = None) -> Path:
    """Write one session of ``bug`` (``fix`` or a control: ``never``, ``other``, ``reads``)."""
    first = bug["trigger_tests"][0]
    test, trace = first["test"], first["trace"]
    name = f"{bug['project']}-{bug['bug_id']}-{kind}"
    w = Writer(folder / f"{name}.jsonl", name, cwd)
    exc = trace.strip().splitlines()[0][:160] if trace.strip() else "an error"
    w.user(f"The test {test} fails ({exc}). Please find the cause and fix it.")
    w.say("Let me run the failing test first.")
    w.tool("Bash", {"command": test_command(test), "description": "Run the failing test"},
           failed_output(test, trace), True)  # fmt: skip
    hs = hunks(bug.get("src_patch") or "")
    w.say("The trace points at the code under test; let me look at it.")
    for path in dict.fromkeys(h.path for h in hs):
        lines = [ln for h in hs if h.path == path for ln in h.buggy.splitlines()][:40]
        body = "\n".join(f"{i + 1:>6}→{ln}" for i, ln in enumerate(lines))
        w.tool("Read", {"file_path": f"{cwd}/{path}"}, body)
    if kind == "reads":
        w.tool("Bash", {"command": test_command(test)}, PASSED)
        w.say("It passes on a second run: the failure looks flaky, nothing to change.")
        return w.save()
    for h in hs:  # a hunk whose sides are the same is refused, as Claude Code's Edit refuses it
        same = h.fixed == h.buggy
        w.tool("Edit", {"file_path": f"{cwd}/{h.path}", "old_string": h.buggy,
                        "new_string": h.fixed, "replace_all": False},
               NO_CHANGE if same else f"The file {cwd}/{h.path} has been updated successfully.",
               same)  # fmt: skip
    if kind == "never":
        w.tool("Bash", {"command": test_command(test)}, failed_output(test, trace), True)
        w.say("It still fails the same way; I could not fix it in this session.")
    elif kind == "other":
        w.tool("Bash", {"command": test_command(other_test or test + "Other")}, PASSED)
        w.say("That other test passes; the failing one still needs work.")
    else:
        w.tool("Bash", {"command": test_command(test)}, PASSED)
        w.say(fix_sentence(hs))
    return w.save()
