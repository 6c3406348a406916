"""What a memory's kept versions forget: a secret removed from a memory leaves its history too.

``record_revisions`` keeps a memory's recent versions, the bases of three-way merges
(:meth:`~retrieval.storage.store.SQLiteStore.replace` keeps the version it replaces). Under a secret
policy that stores secrets (``warn``), a memory may hold one; when an update removes it, the
kept versions must not hold it either, or the history (and a conflict's ``base``) would give it
back.

Retrieval knows no secrets: the write policy does. A policy that can tell which secrets a new
version dropped (a :data:`Forget`, ``WritePolicy.forgotten``) is passed to ``replace``, which
rewrites every kept version of the memory with it (:func:`forget_dropped`) inside the update's
transaction. A secret the new version still holds is left where it is: the memory shows it
anyway.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

Scrub = Callable[[str], str]
# (the strings of the version replaced, the strings of the new version) -> a function that
# redacts from a text what the first hold and the second do not; None when nothing was dropped
Forget = Callable[[Sequence[str], Sequence[str]], Scrub | None]


def strings_in(value: Any) -> Iterator[str]:
    """Every string of a JSON-like value, dict keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from strings_in(k)
            yield from strings_in(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from strings_in(v)


def map_strings(value: Any, fn: Scrub) -> Any:
    """``value`` with ``fn`` applied to each of its strings, dict keys included."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, Mapping):
        return {map_strings(k, fn): map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [map_strings(v, fn) for v in value]
    return value


def forget_dropped(
    conn: sqlite3.Connection,
    record_id: str,
    old: tuple[str, Mapping],
    new: tuple[str, Mapping],
    forget: Forget,
) -> int:
    """Inside an update's transaction, after the new version is written: redact from every
    kept version of the memory what ``old`` (the version replaced: content, metadata) held and
    ``new`` does not. Returns how many versions changed."""
    scrub = forget([old[0], *strings_in(old[1])], [new[0], *strings_in(new[1])])
    if scrub is None:
        return 0
    rows = conn.execute(
        "SELECT revision, content, metadata FROM record_revisions WHERE record_id=?",
        (record_id,),
    ).fetchall()
    changed = 0
    for revision, content, metadata in rows:
        meta = json.loads(metadata or "{}")
        text, clean = scrub(content), map_strings(meta, scrub)
        if text != content or clean != meta:
            conn.execute(
                "UPDATE record_revisions SET content=?, metadata=? WHERE record_id=? AND "
                "revision=?",
                (text, json.dumps(clean, ensure_ascii=False), record_id, revision),
            )
            changed += 1
    return changed


__all__ = ["Forget", "Scrub", "forget_dropped", "map_strings", "strings_in"]
