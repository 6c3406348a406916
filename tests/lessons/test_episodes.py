"""The episode detector (``ingest/learning/episodes.py``) fed from transcripts
(``ingest/learning/episode_events.py``): fail -> edit -> pass, and nothing else; the real transcripts of
``tests/data/transcripts`` (PROVENANCE.md names their episodes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingest.learning.episode_events import FeedProgress, read_events
from ingest.learning.episodes import Event, SessionEpisodes, feed, finish
from tests.transcript_util import TranscriptWriter

DATA = Path(__file__).parents[1] / "data" / "transcripts"
FAIL = "Exit code 1\nFAILED tests/test_db.py::test_pool - AssertionError: assert 1 == 2\n= 1 failed in 0.1s ="
PASS = "= 3 passed in 0.2s ="


def episodes_of(path: Path) -> list:
    events, places = read_events(path, FeedProgress(), final=True)
    states: dict[str, SessionEpisodes] = {}
    for session, ev in events:
        st = states.setdefault(session, SessionEpisodes(session=session, **{
            k: v for k, v in places.get(session, {}).items() if k in ("cwd", "branch")}))  # fmt: skip
        feed(st, ev)
    out = []
    for st in states.values():
        finish(st)
        out += st.ready
    return out


def run(command: str, output: str, ok: bool, call: str = "") -> Event:
    return Event(kind="run", command=command, output=output, ok=ok, call=call)


def edit(path: str = "/work/app/db.py") -> Event:
    return Event(kind="edit", path=path, hunk="-    return pool\n+    return pool.reset()")


def detect(*events: Event) -> SessionEpisodes:
    st = SessionEpisodes(session="s", cwd="/work/app")
    for ev in events:
        feed(st, ev)
    finish(st)
    return st


def test_fail_edit_pass_is_an_episode_with_the_fix_and_the_agents_words():
    st = detect(
        run("pytest tests/test_db.py", FAIL, False, "c1"),
        Event(kind="say", text="The pool is never reset between tests."),
        edit(),
        run("python -m pytest tests/test_db.py -q", PASS, True, "c2"),
        Event(kind="say", text="Fixed: `pool.reset()` is now called in db.py."),
    )
    [ep] = st.ready
    assert ep.failure.signature.test == "tests/test_db.py::test_pool"
    assert ep.failure.signature.type == "AssertionError"
    assert ep.files == ["/work/app/db.py"] and "pool.reset()" in ep.edits[0].hunk
    assert ep.explanation == "Fixed: `pool.reset()` is now called in db.py."
    assert ep.passed_command == "python -m pytest tests/test_db.py -q"


def test_the_explanation_before_the_pass_when_the_words_after_it_say_nothing_of_the_fix():
    st = detect(run("pytest", FAIL, False), Event(kind="say", text="The pool leaks: reset it."),
                edit(), run("pytest", PASS, True), Event(kind="say", text="Great, all green!"))  # fmt: skip
    assert st.ready[0].explanation == "The pool leaks: reset it."


@pytest.mark.parametrize(
    "events",
    [
        [run("pytest", FAIL, False), edit(), run("pytest", FAIL, False)],  # never passes
        [run("pytest", PASS, True), edit(), run("pytest", PASS, True)],  # no failure before
        [run("pytest tests/test_db.py", FAIL, False), edit(), run("pytest tests/test_ui.py", PASS, True)],
        [run("pytest", FAIL, False), Event(kind="say", text="flaky?"), run("pytest", PASS, True)],
        [run("ls src", "Exit code 2\nls: cannot access", False), edit(), run("ls src", "app.py", True)],
        [run("pytest", FAIL, False), edit(), run("pytest", "[Request interrupted by user for tool use]", True)],
    ],
    ids=["never-passes", "no-failure-before", "unrelated-pass", "no-edit", "not-a-check", "interrupted"],
)  # fmt: skip
def test_not_episodes(events):
    assert detect(*events).ready == []


def test_the_latest_failure_of_a_streak_and_the_edits_after_it():
    st = detect(run("cargo build", "error[E0433]: failed to resolve", False), edit("/a/x.rs"),
                run("cargo build 2>&1", "error[E0412]: cannot find type `Message`", False),
                edit("/a/app.rs"), run("cargo build", "Finished `dev` profile", True))  # fmt: skip
    [ep] = st.ready
    assert ep.failure.signature.type == "E0412" and ep.files == ["/a/app.rs"]
    assert st.failures == []  # the whole streak is resolved


def test_a_call_seen_twice_counts_once_and_outcomes_follow_the_injected_lesson():
    fail = run("pytest", FAIL, False, "c1")
    st = SessionEpisodes(session="s", cwd="/work/app")
    feed(st, fail)
    feed(st, fail.model_copy(update={"injected": ["POOL_LESSON"]}))  # the hook's view, later
    assert len(st.failures) == 1 and [o.lesson for o in st.outcomes] == ["POOL_LESSON"]
    feed(st, edit())
    feed(st, run("pytest", FAIL, False, "c2"))  # the same error after the fix was tried
    assert st.verdicts == [("POOL_LESSON", False)] and st.outcomes == []
    st2 = SessionEpisodes(session="t", cwd="/work/app")
    for ev in (run("pytest", FAIL, False, "d1").model_copy(update={"injected": ["L"]}), edit(),
               run("pytest", PASS, True, "d2")):  # fmt: skip
        feed(st2, ev)
    assert st2.verdicts == [("L", True)]
    st3 = SessionEpisodes(session="u", cwd="/work/app")
    for ev in (run("pytest tests/test_db.py", FAIL, False, "e1").model_copy(update={"injected": ["L"]}),
               edit(), run("make docs", "ok", True), run("pytest tests/test_ui.py", PASS, True)):  # fmt: skip
        feed(st3, ev)
    assert st3.verdicts == [] and len(st3.outcomes) == 1  # unrelated commands count nothing


def test_generic_jsonl_tool_lines(tmp_path):
    rows = [{"session": "g", "role": "user", "content": "fix the pool test"},
            {"session": "g", "role": "tool", "tool": "Bash", "input": {"command": "pytest"},
             "exit_code": 1, "content": FAIL, "id": "t1"},
            {"session": "g", "role": "tool", "tool": "Edit", "id": "t2",
             "input": {"file_path": "db.py", "old_string": "a", "new_string": "b"}, "content": "ok"},
            {"session": "g", "role": "tool", "tool": "Bash", "input": {"command": "pytest"},
             "exit_code": 0, "content": PASS, "id": "t3"},
            {"session": "g", "role": "assistant", "content": "Reset the pool in db.py."}]  # fmt: skip
    path = tmp_path / "g.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    [ep] = episodes_of(path)
    assert ep.files == ["db.py"] and ep.explanation == "Reset the pool in db.py."


def test_claude_code_transcript_read_in_pieces(tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.user("the pool test fails")
    w.tool("Bash", {"command": "pytest tests/test_db.py"}, FAIL, is_error=True)
    w.tool(
        "Edit", {"file_path": "/work/app/db.py", "old_string": "x", "new_string": "y"}, "updated"
    )
    tid = w.tool_use_only("Bash", {"command": "pytest tests/test_db.py"})
    prog = FeedProgress()
    first, _ = read_events(w.path, prog)
    assert [e.kind for _, e in first] == ["prompt", "run", "edit"] and prog.pending
    w.tool_result(tid, PASS)
    second, _ = read_events(w.path, prog)
    assert [e.kind for _, e in second] == ["run"] and second[0][1].ok


# ---------------------------------------------------------------------------- real transcripts
EXPECTED = {  # PROVENANCE.md: (failing command, passing command, changed file, signature type)
    "drm-coverage-fix.jsonl": [("python -m pytest tests/ --cov=src", "just check",
                                "tests/test_math_utils.py", "error")],
    "mclaude-cosmic-cargo-build.jsonl": [
        ("cargo build 2>&1", "cargo build 2>&1", "Cargo.toml", "error"),
        ("cargo build --release 2>&1", "cargo build --release 2>&1", "src/app.rs", "E0412")],
    "mclaude-gha-yaml-fix.jsonl": [("yaml.safe_load", "YAML is NOW valid", "generate-markdown.yml",
                                    "ScannerError")],
    "mclaude-powershell-shortcut.jsonl": [],  # fixed by running another command: no episode
    "drm-python-to-rust-port.jsonl": [],
    "session-share-curry-subagents.jsonl": [],
    "bastion-skill-lock-push.jsonl": [],
    "agentic-wallet-grant-skill.jsonl": [],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_transcripts_hold_exactly_their_episodes(name):
    found = episodes_of(DATA / name)
    assert len(found) == len(EXPECTED[name]), [e.failure.command for e in found]
    for ep, (failed, passed, changed, kind) in zip(found, EXPECTED[name], strict=True):
        assert failed in ep.failure.command and passed in ep.passed_command
        assert ep.files and all(f.endswith(changed) for f in ep.files)
        assert ep.failure.signature.type == kind or ep.failure.signature.type.endswith(kind)
        assert ep.explanation  # the agent's own words about the fix


def test_the_hooks_word_on_an_injection_may_come_after_the_transcript_showed_the_outcome():
    """The worker may read the transcript past the fix before it feeds the failure hook's
    event (which says what the hook injected): the outcome is counted all the same."""
    fail = run("pytest", FAIL, False, "c1")
    st = detect(fail, edit(), run("pytest", PASS, True, "c2"))
    feed(st, fail.model_copy(update={"injected": ["L"]}))
    assert st.verdicts == [("L", True)]
    st = detect(fail, edit(), run("pytest", FAIL, False, "c3"))
    feed(st, fail.model_copy(update={"injected": ["L"]}))
    assert st.verdicts == [("L", False)]
    st = detect(fail, run("pytest", PASS, True, "c4"))  # passed without a change: no outcome
    feed(st, fail.model_copy(update={"injected": ["L"]}))
    assert st.verdicts == []
