"""What a lesson has earned, as its readers are shown it (the lesson tools and the hooks).

- **Outcomes as counts.** A lesson's success rate is a running mean of its outcomes
  (``update_lesson_success``, the outcomes the hooks count, a learned lesson's occurrences), so
  ``successRate × frequency`` is how many times its fix worked. It is shown as that count,
  "worked 1 of 1 use", "worked 3 of 4 uses": one success must not read as "100 %". A rate
  recorded by hand that is no whole count of its uses ("0.9 over 3") is shown as given.
- **A learned fix earns its diff.** A lesson learned from a session (its ``learned`` block,
  :mod:`graph.learned`) whose fix worked once and that no person accepted is shown as
  "learned once, not reviewed", without its diff hunks: a diff is what the agent wrote, verbatim
  (a secret it put into a file, an instruction a test fixture holds), and one fail → edit → pass
  is weak evidence that it was the fix. Its hunks are shown once the fix worked a second time
  or a person accepted the lesson; an alternative fix's hunks once that fix was seen twice or
  the lesson was accepted.
"""

from __future__ import annotations

import copy
from typing import Any

ACCEPTED = "accepted"
CONFIRMING_SUCCESSES = 2  # a learned fix that worked this often shows its diff unreviewed
WHOLE = 0.05  # successRate × frequency this close to a whole number is a count
LEARNED_ONCE = "learned once, not reviewed"


def successes(rate: float, frequency: int) -> float:
    """How many times the fix worked: ``rate × frequency`` (a running mean's numerator)."""
    return max(0.0, float(rate)) * max(0, int(frequency))


def uses(rate: float, frequency: int) -> str:
    """The outcomes as counts: "worked 3 of 4 uses"; a hand-recorded rate that is no whole
    count of its uses as given ("success rate 90% over 3 uses"); "no recorded uses"."""
    n = max(0, int(frequency))
    if n == 0:
        return "no recorded uses"
    k = successes(rate, n)
    plural = "use" if n == 1 else "uses"
    if abs(k - round(k)) <= WHOLE:
        return f"worked {round(k)} of {n} {plural}"
    return f"success rate {float(rate):.0%} over {n} {plural}"


def learned_block(lesson: Any) -> dict | None:
    """The ``learned`` block of a lesson (a model with extra keys), or None."""
    block = (getattr(lesson, "model_extra", None) or {}).get("learned")
    return block if isinstance(block, dict) else None


def accepted(block: dict | None) -> bool:
    """Whether a person accepted the learned lesson (the review inbox)."""
    return isinstance(block, dict) and block.get("review") == ACCEPTED


def confirmed(lesson: Any) -> bool:
    """Whether the lesson's own fix may be shown with its diff: a lesson recorded by hand, one
    a person accepted, or one whose fix worked at least :data:`CONFIRMING_SUCCESSES` times."""
    block = learned_block(lesson)
    if block is None or accepted(block):
        return True
    md = lesson.metadata
    return successes(md.successRate, md.frequency) >= CONFIRMING_SUCCESSES - WHOLE


def note(lesson: Any) -> str | None:
    """How a learned lesson is introduced (None for a lesson recorded by hand)."""
    block = learned_block(lesson)
    if block is None:
        return None
    if accepted(block):
        return "learned from a session (fail, edit, pass), accepted by a person"
    if not confirmed(lesson):
        return f"{LEARNED_ONCE} (its diff is shown after a second success or a person's review)"
    return "learned from sessions (fail, edit, pass), not reviewed yet"


def _alternative_shown(block: dict, alt: dict) -> bool:
    try:
        count = int(alt.get("count") or 1)
    except (TypeError, ValueError):
        count = 1
    return accepted(block) or count >= CONFIRMING_SUCCESSES


def shown_hunks(lesson: Any) -> list[dict]:
    """The diff hunks of the lesson's own fix that may be shown ([] until it is confirmed)."""
    block = learned_block(lesson)
    if block is None or not confirmed(lesson):
        return []
    hunks = (block.get("fix") or {}).get("hunks") if isinstance(block.get("fix"), dict) else None
    return [h for h in hunks or [] if isinstance(h, dict)]


def shown_block(lesson: Any) -> dict | None:
    """A copy of the ``learned`` block as a reader is shown it: the hunks of a fix that has not
    earned them (module docstring) emptied, and ``hunksWithheld`` saying how many were."""
    block = learned_block(lesson)
    if block is None:
        return None
    out = copy.deepcopy(block)
    withheld = 0
    fix = out.get("fix")
    if isinstance(fix, dict) and fix.get("hunks") and not confirmed(lesson):
        withheld += len(fix["hunks"]) if isinstance(fix["hunks"], list) else 1
        fix["hunks"] = []
    for alt in out.get("alternatives") or []:
        if isinstance(alt, dict) and alt.get("hunks") and not _alternative_shown(block, alt):
            withheld += len(alt["hunks"]) if isinstance(alt["hunks"], list) else 1
            alt["hunks"] = []
    if withheld:
        out["hunksWithheld"] = withheld
    return out
