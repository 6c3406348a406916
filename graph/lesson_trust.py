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
import math
from collections.abc import Mapping
from typing import Any

ACCEPTED = "accepted"
CONFIRMING_SUCCESSES = 2  # a learned fix that worked this often shows its diff unreviewed
WHOLE = 0.05  # successRate × frequency this close to a whole number is a count
LEARNED_ONCE = "learned once, not reviewed"


def rate_of(rate: float) -> float:
    """A stored success rate as a fraction in [0, 1] (anything else a store holds: 0 or 1)."""
    r = float(rate)
    return min(1.0, max(0.0, r)) if math.isfinite(r) else 0.0


def successes(rate: float, frequency: int) -> float:
    """How many times the fix worked: ``rate × frequency`` (a running mean's numerator)."""
    return rate_of(rate) * max(0, int(frequency))


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
    return f"success rate {rate_of(rate):.0%} over {n} {plural}"


def _get(value: object, *keys: str) -> object:
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _number(value: object, default: float) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) else default


def _facts(lesson: Any) -> tuple[dict | None, float, int]:
    """(its ``learned`` block, success rate, frequency) of a lesson, or of a lesson record's
    metadata (which keeps the block in ``details.extra.lesson``)."""
    if isinstance(lesson, Mapping):
        block = _get(lesson, "details", "extra", "lesson", "learned")
        rate, frequency = lesson.get("successRate"), lesson.get("frequency")
    else:
        block = (getattr(lesson, "model_extra", None) or {}).get("learned")
        rate, frequency = lesson.metadata.successRate, lesson.metadata.frequency
    n = _number(frequency, 0.0)
    return (block if isinstance(block, dict) else None, _number(rate, 0.0),
            int(min(max(n, 0.0), 1e12)))  # fmt: skip


def learned_block(lesson: Any) -> dict | None:
    """The ``learned`` block of a lesson (or of a lesson record's metadata), or None."""
    return _facts(lesson)[0]


def accepted(block: dict | None) -> bool:
    """Whether a person accepted the learned lesson (the review inbox)."""
    return isinstance(block, dict) and block.get("review") == ACCEPTED


def pending(lesson: Any) -> bool:
    """Whether it was learned from a session and no person accepted it yet."""
    block = learned_block(lesson)
    return block is not None and not accepted(block)


def confirmed(lesson: Any) -> bool:
    """Whether the lesson's own fix may be shown with its diff: a lesson recorded by hand, one
    a person accepted, or one whose fix worked at least :data:`CONFIRMING_SUCCESSES` times."""
    block, rate, frequency = _facts(lesson)
    if block is None or accepted(block):
        return True
    return successes(rate, frequency) >= CONFIRMING_SUCCESSES - WHOLE


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
    count = alt.get("count")
    seen = isinstance(count, int | float) and not isinstance(count, bool) and count >= 2
    return accepted(block) or seen


def shown_metadata(metadata: Mapping[str, Any]) -> Mapping[str, Any]:
    """A lesson record's metadata as a reader is shown it: its ``learned`` block as
    :func:`shown_block` (``metadata`` itself when it holds none)."""
    if learned_block(metadata) is None:
        return metadata
    out = copy.deepcopy(dict(metadata))
    out["details"]["extra"]["lesson"]["learned"] = shown_block(metadata)
    return out


def _listed(value: object) -> list:
    """``value`` if it is a list, else [] (a stored block may hold anything)."""
    return value if isinstance(value, list) else []


def shown_hunks(lesson: Any) -> list[dict]:
    """The diff hunks of the lesson's own fix that may be shown ([] until it is confirmed)."""
    block = learned_block(lesson)
    if block is None or not confirmed(lesson) or not isinstance(block.get("fix"), dict):
        return []
    return [h for h in _listed(block["fix"].get("hunks")) if isinstance(h, dict)]


def _withhold(fix: object) -> int:
    """Empty the hunks of ``fix`` (a dict): how many there were."""
    if not isinstance(fix, dict) or not fix.get("hunks"):
        return 0
    n = len(fix["hunks"]) if isinstance(fix["hunks"], list) else 1
    fix["hunks"] = []
    return n


def shown_block(lesson: Any) -> dict | None:
    """A copy of the ``learned`` block as a reader is shown it: the hunks of a fix that has not
    earned them (module docstring) emptied, and ``hunksWithheld`` saying how many were."""
    block = learned_block(lesson)
    if block is None:
        return None
    out = copy.deepcopy(block)
    withheld = 0 if confirmed(lesson) else _withhold(out.get("fix"))
    for alt in _listed(out.get("alternatives")):
        if isinstance(alt, dict) and not _alternative_shown(block, alt):
            withheld += _withhold(alt)
    if withheld:
        out["hunksWithheld"] = withheld
    return out
