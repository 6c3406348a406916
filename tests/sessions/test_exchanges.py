"""Exchanges, the unit a transcript is searched by: grouping turns, the tool summary, the text,
and long exchanges split into parts (``ingest/sessions/exchanges.py``, pure functions)."""

from __future__ import annotations

from ingest.sessions import exchanges as ex
from ingest.sessions.exchanges import TurnText


def turns(*pairs: tuple[str, str]) -> list[TurnText]:
    return [TurnText(role, text, i) for i, (role, text) in enumerate(pairs)]


def words(n: int, word: str = "lorem") -> str:
    return " ".join(f"{word}{i}" for i in range(n))


def test_split_starts_an_exchange_at_every_user_turn():
    ts = turns(("assistant", "welcome back"), ("user", "a"), ("tool", "Read(file_path=x) → ok"),
               ("assistant", "b"), ("user", "c"), ("assistant", "d"))  # fmt: skip
    groups = ex.split(ts)
    assert [[t.index for t in g] for g in groups] == [[0], [1, 2, 3], [4, 5]]
    assert ex.split([]) == []


def test_exchange_text_is_prompt_tools_reply_in_that_order():
    text = ex.exchange_text(turns(
        ("user", "why does the build fail?"),
        ("tool", "Bash(command=make) → error:\nmake: *** [all] Error 2"),
        ("assistant", "A header is missing."),
    ))  # fmt: skip
    assert text == ("Prompt: why does the build fail?\n"
                    "Tools: Bash(command=make) → error: make: *** [all] Error 2\n"
                    "Reply: A header is missing.")  # fmt: skip
    assert "User:" not in text and "Assistant:" not in text  # never reads as a faked dialogue
    assert ex.exchange_text(turns(("user", "only a question"))) == "Prompt: only a question"


def test_tool_line_puts_failed_calls_first_and_counts_the_rest():
    ok = [f"Read(file_path=f{i}.py) → ok: line one (3 lines, 40 characters)" for i in range(9)]
    failed = "Bash(command=pytest -q) → error:\nE   AssertionError: 1 != 2\nFAILED t.py::test_x"
    line = ex.tool_line([*ok, failed], extra=3)
    shown = line.removeprefix("Tools: ").split("; ")
    assert (
        shown[0] == "Bash(command=pytest -q) → error: E AssertionError: 1 != 2 FAILED t.py::test_x"
    )
    assert shown[1:8] == [f"Read(file_path=f{i}.py)" for i in range(7)]  # the call, not its output
    assert len(shown) == ex.MAX_TOOL_CALLS + 1
    assert shown[-1] == "and 5 more tool calls"  # 10 given + 3 counted - 8 shown
    assert ex.tool_line(["Glob(pattern=*.py) → ok"], extra=0) == "Tools: Glob(pattern=*.py)"
    assert ex.tool_line(["A() → ok"] * 8, extra=1).endswith("; and 1 more tool call")


def test_a_failed_calls_summary_is_clipped():
    long_error = "Bash(command=npm ci) → error:\n" + words(200, "err")
    line = ex.tool_line([long_error])
    assert len(line.split()) <= ex.TOOL_CALL_WORDS + 2 and line.endswith("…")


def test_a_short_exchange_is_one_unit_with_its_turn_range():
    (unit,) = ex.units(turns(("user", "hello"), ("assistant", "hi")))
    assert (unit.first, unit.last, unit.part, unit.parts) == (0, 1, 0, 1)
    assert unit.head == "hello" and unit.text == "Prompt: hello\nReply: hi"
    assert ex.units([]) == []


def test_a_long_exchange_is_split_into_parts_of_at_most_500_words():
    prompt = "please review the migration plan for the billing tables " + words(40, "plan")
    reply = words(1100, "answer")
    units = ex.units(turns(("user", prompt), ("assistant", reply)))
    assert len(units) == 3 and [u.part for u in units] == [0, 1, 2]
    assert all(u.parts == 3 and (u.first, u.last) == (0, 1) for u in units)
    assert all(len(u.text.split()) <= ex.MAX_UNIT_WORDS for u in units)
    assert units[0].text.startswith("Prompt: please review the migration plan")
    # every word once, in order, across the parts
    assert (
        " ".join(u.text for u in units).split()
        == ex.exchange_text(turns(("user", prompt), ("assistant", reply))).split()
    )
    # a continued part carries the prompt's first words (the indexer puts them in its context)
    assert units[1].head.startswith("please review the migration plan for the billing tables")
    assert len(units[1].head.split()) <= ex.PROMPT_HEAD_WORDS + 1 and units[1].head.endswith("…")


def test_the_answer_is_kept_whole_when_earlier_replies_are_shrunk():
    earlier = [f"Step {i} looks fine. " + words(120, f"detail{i}_") for i in range(4)]
    answer = "Found it: the cache key ignores the tenant id. " + words(150, "because")
    ts = turns(("user", "why do tenants see each other's data?"),
               *[("assistant", e) for e in earlier], ("assistant", answer))  # fmt: skip
    text = ex.exchange_text(ts)
    assert answer in text  # the last text is the answer: never cut
    for i in range(4):
        assert f"Step {i} looks fine." in text and f"detail{i}_0" not in text
    assert len(text.split()) <= ex.MAX_UNIT_WORDS
    assert len(ex.units(ts)) == 1
    # short enough: nothing is shrunk
    short = turns(
        ("user", "q"), ("assistant", "First point. More of it."), ("assistant", "Answer.")
    )
    assert "More of it." in ex.exchange_text(short)


def test_first_sentence():
    assert ex.first_sentence("One. Two three.") == "One."
    assert ex.first_sentence("line one\nline two") == "line one"
    assert ex.first_sentence(words(50), max_words=5).endswith("…")
