"""Conversation exchanges: the unit a transcript is searched by.

A question that matches a problem must bring back its answer. A single turn cannot: the user's
report ("test_upload_timeout keeps failing on CI") and the assistant's fix ("the moto mock is
never reset…") are different turns, and the words of one are not in the other. So the session
indexer stores *exchanges*: a user's prompt together with what the assistant did and said until
the next prompt.

An exchange's text, in order:

    Prompt: <the user's prompt>
    Tools: Bash(command=pytest -q) → error: AssertionError …; Read(file_path=app.py)
    Reply: <the assistant's texts, the last one being its answer>

(The labels are not chat roles: a text with ``User:`` and ``Assistant:`` lines reads as a faked
dialogue to the write-time injection scan, and would never be recalled by the hooks.)

- Tool calls are summarised on one line: each call with its key arguments, a failed call with
  its error excerpt (the first lines the transcript reader keeps), at most ``MAX_TOOL_CALLS``
  calls (failed ones first), the others counted.
- An exchange longer than ``MAX_UNIT_WORDS`` words is split into parts of at most that many,
  so a hit still points at the answer rather than at a whole session. Parts after the first
  carry the prompt's first words in their context; when the assistant said several things, its
  earlier texts are cut to their first sentence before anything is split.
- An exchange is open until the next prompt arrives: the indexer stores what is there, and
  replaces it (same record ids) when the exchange grows.

:func:`units` is pure: turns in, units out; the indexer (``server/service/indexing/sessions.py``) keeps
the turns of the open exchange between runs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

MAX_UNIT_WORDS = 500
MAX_TOOL_CALLS = 8
TOOL_CALL_WORDS = 40  # a failed call's summary (tool, arguments, error excerpt)
PROMPT_HEAD_WORDS = 24  # of the prompt, in the context of a continued part

_WORD = re.compile(r"\S+\s*")
SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(frozen=True)
class TurnText:
    """One turn as an exchange uses it (``role`` user | assistant | tool)."""

    role: str
    text: str
    index: int  # the turn's position in its session


@dataclass(frozen=True)
class Unit:
    first: int  # index of the exchange's first turn
    last: int  # index of its last turn
    part: int  # 0-based part of a split exchange
    parts: int
    text: str
    head: str  # the prompt's first words ('' when the exchange has no prompt)


def split(turns: Sequence[TurnText]) -> list[list[TurnText]]:
    """Turns grouped into exchanges: each starts at a user turn (the first may not, when a
    session opens with the assistant)."""
    out: list[list[TurnText]] = []
    for t in turns:
        if t.role == "user" or not out:
            out.append([t])
        else:
            out[-1].append(t)
    return out


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _clip_words(text: str, n: int) -> str:
    words = _words(text)
    if len(words) <= n:
        return text.strip()
    return "".join(words[:n]).strip() + " …"


def first_sentence(text: str, max_words: int = 30) -> str:
    head = SENTENCE.split(text.strip(), maxsplit=1)[0]
    return _clip_words(head, max_words)


def tool_line(calls: Sequence[str], extra: int = 0) -> str:
    """One line for the exchange's tool calls: failed ones first with their error, then the
    others' call only (``Name(args)``), at most ``MAX_TOOL_CALLS``; ``extra``: calls made
    besides ``calls`` (counted only)."""
    failed = [c for c in calls if " → error" in c]
    other = [c for c in calls if " → error" not in c]
    shown = [_clip_words(" ".join(c.split()), TOOL_CALL_WORDS) for c in failed]
    shown += [c.split(" → ", 1)[0] for c in other]
    more = len(shown) + extra - MAX_TOOL_CALLS
    line = "; ".join(shown[:MAX_TOOL_CALLS])
    if more > 0:
        line += f"{'; and ' if line else ''}{more} more tool call{'s' if more > 1 else ''}"
    return f"Tools: {line}"


def exchange_text(
    turns: Sequence[TurnText], max_words: int = MAX_UNIT_WORDS, extra_calls: int = 0
) -> str:
    """The text of one exchange (module docstring); its length is not bounded here.
    ``extra_calls``: tool calls of the exchange not in ``turns`` (counted in the summary)."""
    prompt = [t.text for t in turns if t.role == "user"]
    calls = [t.text for t in turns if t.role == "tool"]
    said = [t.text for t in turns if t.role == "assistant"]
    parts = [f"Prompt: {p.strip()}" for p in prompt]
    if calls or extra_calls:
        parts.append(tool_line(calls, extra_calls))
    if said:
        total = sum(len(_words(p)) for p in parts) + sum(len(_words(s)) for s in said)
        if total > max_words and len(said) > 1:  # the answer keeps its words, the rest shrinks
            said = [first_sentence(s) for s in said[:-1]] + said[-1:]
        parts.append("Reply: " + "\n\n".join(s.strip() for s in said))
    return "\n".join(parts)


def units(
    turns: Sequence[TurnText], max_words: int = MAX_UNIT_WORDS, extra_calls: int = 0
) -> list[Unit]:
    """The stored units of one exchange: its text, split into parts of at most ``max_words``
    words (each part ends at a word boundary; the text's own line breaks are kept)."""
    if not turns:
        return []
    text = exchange_text(turns, max_words, extra_calls)
    prompt = next((t.text for t in turns if t.role == "user"), "")
    head = _clip_words(prompt, PROMPT_HEAD_WORDS) if prompt else ""
    words = _words(text)
    pieces = ["".join(words[i : i + max_words]).strip() for i in range(0, len(words), max_words)]
    pieces = [p for p in pieces if p] or [text.strip()]
    first, last = turns[0].index, turns[-1].index
    return [Unit(first, last, i, len(pieces), p, head) for i, p in enumerate(pieces)]
