"""What a question asks of time beyond its dates: the current state of something, or a past
event.

    asks_current(question) -> bool

A question about a state that may have changed ("how many bikes do I own?", "what is the
staging database?", "where is the painting hanging now?", "what was my previous status?") is
best answered by the newest statement of it: the ranker then prefers, among candidates of about
the same relevance, the newer (:func:`retrieval.timeline.timeprior.recent_gain`). A question about a
past event ("what did Caroline paint?", "when was the migration?") is answered by the record
of that event, whatever came after it, and is left alone.

The reading, on the lower-cased question:

- it names a change (:data:`CHANGE`: "previous", "initially", "used to", "no longer", ...):
  the question knows the value changed, and the newest record says what it changed to; or
- it is in the simple present (:data:`NOW`: "currently", "still", "these days", ...; or
  :data:`PRESENT`: a present-tense verb after the question word: "what is", "how many … do
  I own") and not about a past event (:data:`PAST`: "did", "was", "before", ...). The present
  perfect ("what has Melanie painted?", "how many tournaments has Nate won?") asks for a
  history, every event of it, not for the newest;
- and it does not ask when (a "when …" question asks for an event's date).

The words were chosen as English grammar, not from the dev sets; the effect on every dev set
and question type is in docs/benchmarks.md ("Time and updates").
"""

from __future__ import annotations

import re

from retrieval.timeline.timeexpr import ASKS_WHEN

CHANGE = re.compile(
    r"\b(?:previous(?:ly)?|initial(?:ly)?|original(?:ly)?|at first|used to|use to be|former(?:ly)?|"
    r"no longer|any ?more)\b"
)
NOW = re.compile(
    r"\b(?:currently|current|now|nowadays|these days|at the moment|at present|still|latest|"
    r"most recent(?:ly)?|so far|to date|up to now|as of today)\b"
)
PRESENT = re.compile(
    r"^\W*(?:(?:what|where|who|how)'s\b|(?:how (?:many|much|often|long|far)|what|where|which|"
    r"who|whose|do|does|am|is|are)\b.*?\b(?:do|does|am|is|are)\b)"
)
PAST = re.compile(r"\b(?:did|was|were|had|before|first|ago)\b")


def asks_current(question: str) -> bool:
    """The question asks for the current state of something (see the module)."""
    low = question.lower().replace("’", "'")
    if ASKS_WHEN.search(low):
        return False
    if CHANGE.search(low):
        return True
    return bool(NOW.search(low) or PRESENT.search(low)) and not PAST.search(low)


__all__ = ["asks_current"]
