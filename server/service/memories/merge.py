"""Merge, don't reject: a stale update is combined with what was written meanwhile.

An ``update-memory`` whose ``expectedRevision`` is older than the stored revision is merged
three-way when the store still holds that revision (``record_revisions``, the last
``retrieval.storage.store.HISTORY_DEPTH`` versions of each memory): *base* = the revision the writer
read, *theirs* = the stored revision (everything committed since), *ours* = the writer's edit
applied to the base.

- **Text** merges with ``merge3`` (the three-way merge of Breezy/bzr) over word tokens (a word
  with the whitespace after it). Edits to different words merge; the same edit made on both
  sides is taken once; edits that change the same words (or insert at the same place) are a
  conflict: nothing is written and the ``Conflict`` carries the merge attempt with conflict
  markers, the base, the stored text and the writer's text, so an agent resolves it in one call
  (pass ``current_revision`` as expectedRevision with the resolved text).
- **Tags** are a set with add-wins (OR-set) semantics: a tag is kept if either side added it or
  both kept it; a side removes only a tag it saw (one in the base).
- **Other metadata keys** merge per key: a key only one side changed takes that side's value;
  both changed it differently → the later write (ours, committed after theirs) wins, and the key
  is reported in ``overridden``. Priority is such a key.
- **Limits.** Each side obeys the rules of a memory (content size, tags), but their merge may
  not (9 tags and 9 tags make 12). A merge that breaks a rule is a ``Conflict`` too, with
  ``reason="limit_exceeded"``, the rule broken (``limit``: ``field``, ``message`` and the
  numbers) and the attempt (``merge``, ``merge_metadata``): the writer trims it and sends it
  with the current revision. An edit that breaks a rule on its own stays an invalid input.

Why merge3 and word tokens: measured on the merge cases of ``tests/memories/test_merge.py`` (disjoint
sentences, different words of one sentence, the same edit twice, the same word changed two
ways, a deleted sentence against an edit of it), merge3 over words merges every disjoint case
and flags every overlapping one. Over lines it conflicts on any two edits of a one-line memory
(most memories); over sentences it conflicts on two edits of one sentence. ``pycrdt`` (a Yjs
CRDT) never reports a conflict: it interleaves both inserts, so two agents changing ``v1`` to
``v2`` and ``v3`` store ``v32`` and the same edit made twice stores ``v22`` — silently wrong
text, where a conflict the agent can resolve is the honest answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import merge3

from server.service.core import scopes as rules
from server.service.core.errors import InvalidInput

# a word with the whitespace after it (leading whitespace is a token of its own)
_TOKENS = re.compile(r"\s+|\S+\s*")
MARK_OURS = "<<<<<<< yours\n"
MARK_MID = "=======\n"
MARK_THEIRS = ">>>>>>> current\n"
SET_KEYS = ("tags",)


def tokens(text: str) -> list[str]:
    return _TOKENS.findall(text)


@dataclass
class TextMerge:
    text: str  # the merged text (clean), or the attempt with conflict markers
    conflicts: int  # conflicting regions (0: clean)

    @property
    def clean(self) -> bool:
        return self.conflicts == 0


def merge_text(base: str, ours: str, theirs: str) -> TextMerge:
    """Three-way merge of ``base → ours`` and ``base → theirs`` over word tokens."""
    if ours == theirs or ours == base:
        return TextMerge(theirs, 0)
    if theirs == base:
        return TextMerge(ours, 0)
    m = merge3.Merge3(tokens(base), tokens(ours), tokens(theirs))
    conflicts = sum(g[0] == "conflict" for g in m.merge_groups())
    if not conflicts:
        return TextMerge("".join(m.merge_lines()), 0)
    out = ""
    for group in m.merge_groups():
        if group[0] == "conflict":
            _, _base, a, b = group
            for marker, part in ((MARK_OURS, a), (MARK_MID, b)):
                out = _line(out, marker) + "".join(part)
            out = _line(out, MARK_THEIRS)
        else:
            out += "".join(group[1])
    return TextMerge(out, conflicts)


def _line(text: str, marker: str) -> str:
    """``text`` + a conflict marker on a line of its own (word tokens need not end a line)."""
    return text + marker if not text or text.endswith("\n") else text + "\n" + marker


def merge_set(base: list, ours: list, theirs: list) -> list:
    """Add-wins three-way set merge, in order: theirs first, then what ours added. An item is
    kept if both kept it or either side added it; a side removes only what it saw (base)."""
    b, o = set(base), set(ours)
    kept = [x for x in theirs if x in o or x not in b]
    have = set(kept)
    return kept + [x for x in ours if x not in b and x not in have]


@dataclass
class MetaMerge:
    metadata: dict[str, Any]
    overridden: list[str] = field(default_factory=list)  # keys both changed: ours won


def same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def merge_metadata(base: dict, ours: dict, theirs: dict) -> MetaMerge:
    """Per key: tags as an add-wins set; any other key takes the side that changed it, and
    when both changed it differently ours (the later write) wins, reported in ``overridden``."""
    out: dict[str, Any] = {}
    overridden: list[str] = []
    for key in dict.fromkeys([*theirs, *ours, *base]):
        b, o, t = base.get(key), ours.get(key), theirs.get(key)
        if key in SET_KEYS and any(isinstance(v, list) for v in (b, o, t)):
            value = merge_set(b or [], o or [], t or [])
        elif same(o, b):
            value = t
        elif same(t, b) or same(o, t):
            value = o
        else:
            value = o
            overridden.append(key)
        if value is not None and value != []:
            out[key] = value
    return MetaMerge(out, overridden)


# ---------------------------------------------------------------------- a stale update
@dataclass
class Merged:
    """A stale update merged onto the stored revision: what to write and what to report."""

    content: str
    metadata: dict[str, Any]
    parents: list[int]  # [the stored revision it is written over, the revision it was made from]
    overridden: list[str]


def base_of(conn, record_id: str, revision: int) -> tuple[str, dict] | None:
    """(content, metadata) of a memory at ``revision``, if the store still holds it."""
    row = conn.execute(
        "SELECT content, metadata FROM record_revisions WHERE record_id=? AND revision=?",
        (record_id, revision),
    ).fetchone()
    return None if row is None else (row[0], json.loads(row[1] or "{}"))


def parents_of(conn, record_id: str, revisions: list[int]) -> dict[int, list[int]]:
    """{revision: parents} of the merged revisions among ``revisions`` of one record."""
    if not revisions:
        return {}
    marks = ",".join("?" * len(revisions))
    rows = conn.execute(
        f"SELECT revision, parents FROM record_revisions WHERE record_id=? AND revision IN "
        f"({marks}) AND parents IS NOT NULL",
        [record_id, *revisions],
    ).fetchall()
    return {int(r[0]): json.loads(r[1]) for r in rows}


def mark_merged(conn, record_id: str, revision: int, parents: list[int]) -> None:
    """Inside the write transaction, after the record: the new revision's two parents."""
    conn.execute(
        "UPDATE record_revisions SET parents=? WHERE record_id=? AND revision=?",
        (json.dumps(parents), record_id, revision),
    )


def patched(metadata: dict, patch: dict | None) -> dict:
    """``metadata`` with an update's keys: a given value replaces the stored one, ``None``
    removes the key, the rest is kept."""
    out = dict(metadata)
    for key, value in (patch or {}).items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def merge_update(
    conn, rec, expected: int, content: str | None, patch: dict | None, conflict
) -> Merged:
    """Merge an update made from revision ``expected`` onto ``rec`` (the stored revision).
    ``conflict(**data)`` builds the error raised when it cannot merge: the base is no longer
    held, the text edits overlap (then with the attempt, its markers and both versions), or
    the merge breaks a limit (then with the limit and the attempt). The merged metadata comes
    back checked (:func:`.scopes.check_metadata`)."""
    base = base_of(conn, rec.id, expected)
    if base is None or expected > rec.revision:
        raise conflict(reason="no_base")
    base_text, base_meta = base
    ours_text = base_text if content is None else content
    versions = {"base": base_text, "current": rec.content, "yours": ours_text}
    text = merge_text(base_text, ours_text, rec.content)
    if not text.clean:
        raise conflict(
            reason="overlapping_edits", conflicts=text.conflicts, merge=text.text, **versions
        )
    ours_meta = rules.check_metadata(patched(base_meta, patch))  # invalid alone: invalid input
    meta = merge_metadata(base_meta, ours_meta, dict(rec.metadata))
    try:
        field = "content"
        rules.check_content(text.text)
        field = "metadata"
        checked = rules.check_metadata(meta.metadata)
    except InvalidInput as exc:  # each side is valid, their merge is not
        raise conflict(
            reason="limit_exceeded", limit={"field": field, **exc.data, "message": exc.message},
            merge=text.text, merge_metadata=meta.metadata, **versions,
        ) from None  # fmt: skip
    return Merged(text.text, checked, [rec.revision, expected], meta.overridden)


__all__ = [
    "MARK_MID", "MARK_OURS", "MARK_THEIRS", "Merged", "MetaMerge", "TextMerge", "base_of",
    "mark_merged", "merge_metadata", "merge_set", "merge_text", "merge_update", "parents_of", "patched",
    "same",
    "tokens",
]  # fmt: skip
