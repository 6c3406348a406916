"""Conversation turns as searchable records: what a turn says, and what surrounds it.

A turn is stored with its own words as the record's content and its situation as the record's
``context`` (indexed and put in front of every embedding window, ``retrieval.engine``): the
session's date, the speaker, and the neighbouring turns. The LoCoMo benchmark measured why:
evidence recall@10 0.726 with one neighbour on each side, 0.775 with the two turns before and
the one after (docs/benchmarks.md, "Relevance"). ``benchmarks/relevance.py`` builds its LoCoMo
records with these functions. (The session indexer stores whole exchanges instead, a prompt
with what answered it: ``ingest/sessions/exchanges.py``.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

# what goes in a turn's context: the date, the speaker's shared image caption, the two turns
# before and the one after (chosen on LoCoMo, docs/benchmarks.md "Relevance")
DEFAULT_CONTEXT = "date,caption,prev2,next1"


def context_spec(spec: str | set[str]) -> set[str]:
    """``"date,prev2,next1"`` -> ``{"date", "prev2", "next1"}``."""
    if isinstance(spec, set):
        return spec
    return {s.strip() for s in spec.split(",") if s.strip()}


MAX_NEIGHBOURS = 8  # turns on each side a spec may ask for


def turn_text(turn: Mapping) -> str:
    """``Speaker: text`` (a turn is a mapping with ``speaker`` and ``text``; a missing one is
    empty)."""
    return f"{turn.get('speaker', '')}: {turn.get('text', '')}"


def _neighbours(spec: set[str], side: str) -> int:
    """How many turns on one side ``spec`` asks for (``prev2``, ``next1``), at most
    :data:`MAX_NEIGHBOURS`."""
    asked = [s[4:] for s in spec if re.fullmatch(rf"{side}\d{{1,3}}", s)]
    return min(MAX_NEIGHBOURS, max([int(n) for n in asked] or [0]))


def turn_context(turns: Sequence[Mapping], i: int, date: str, spec: set[str] | str) -> str:
    """What a client knows around turn ``i`` when it stores it: the session date, who speaks
    (``speaker``: for turns whose content does not name its speaker), the image the speaker
    shared (its ``blip_caption``), and the neighbouring turns (``prevN`` / ``nextN``). A
    neighbour that is not there yet (the next turn of a session still running) is left out."""
    spec = context_spec(spec)
    parts = []
    head = [f"[{date}]"] if "date" in spec and date else []
    if "speaker" in spec:
        head.append(str(turns[i].get("speaker", "")))
    if head:
        parts.append(" ".join(head))
    n_prev, n_next = _neighbours(spec, "prev"), _neighbours(spec, "next")
    for j in range(max(0, i - n_prev), i):
        parts.append(turn_text(turns[j]))
    if "caption" in spec and turns[i].get("blip_caption"):
        parts.append(f"{turns[i].get('speaker', '')} shared {turns[i]['blip_caption']}")
    for j in range(i + 1, min(len(turns), i + 1 + n_next)):
        parts.append(turn_text(turns[j]))
    return "\n".join(parts)
