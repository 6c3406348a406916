"""An entity's observations as an add-wins set (an OR-set): a delete removes only what its
writer saw.

Each entity has a ``revision`` that goes up with every change of its observations (``open_nodes``,
``read_graph`` and ``search_nodes`` return it). Each observation record carries
``metadata.addedAt``: the entity revision its add produced. A ``delete_observations`` group with
``expectedRevision`` R (the revision its writer read) deletes a matching observation only if it
was added at or before R; one added since (by another agent, unseen by the deleter) is kept and
reported. Adding an observation the entity already has re-asserts it (its ``addedAt`` moves to
the new revision), so a concurrent delete from an older read does not take it away either.
Without ``expectedRevision`` a delete removes every matching observation, as before.

Revisions never repeat for a name within a graph: an entity deleted and created again continues
from its last revision (:func:`graph.common.first_revisions`), and the observations it is created
with are added at its first revision. So an ``expectedRevision`` read from an earlier incarnation
is older than everything the new entity holds, and a delete made from it keeps all of it.

The revisions a write was planned from are checked inside its transaction (:func:`unmoved`);
another writer's commit in between (another process, or another PostgreSQL node) makes the
write plan again from a fresh read (:func:`retrying`), so ``addedAt`` always orders against
every read a deleter could have made.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from retrieval.errors import Conflict

from .common import chunks, observation_records, placeholders

T = TypeVar("T")
RETRIES = 8


class Moved(Exception):  # noqa: N818 - control flow
    """An entity's revision changed between a write's read and its transaction."""


@dataclass(frozen=True)
class Obs:
    id: str
    content: str
    added_at: int  # the entity revision that added it (0: before revisions were kept)
    metadata: dict


def observations(
    conn: sqlite3.Connection, bucket: str, names: Sequence[str]
) -> dict[str, list[Obs]]:
    """{entity name: [Obs, …]} of plain observations, in insertion order."""
    return {
        name: [_obs(r) for r in rows]
        for name, rows in observation_records(conn, bucket, names).items()
    }


def _obs(row: sqlite3.Row) -> Obs:
    meta = json.loads(row["metadata"] or "{}")
    return Obs(row["id"], row["content"], int(meta.get("addedAt", 0)), meta)


def revisions(rows: Mapping[str, sqlite3.Row]) -> dict[str, int]:
    return {n: int(r["revision"] or 0) for n, r in rows.items()}


def unmoved(bucket: str, planned: Mapping[str, int]) -> Callable[[sqlite3.Connection], None]:
    """A transaction check: every entity is still at the revision the write was planned from."""

    def check(conn: sqlite3.Connection) -> None:
        names = list(planned)
        for part in chunks(names):
            rows = conn.execute(
                f"SELECT name, revision FROM entities WHERE bucket=? AND name IN "
                f"({placeholders(len(part))})",
                [bucket, *part],
            ).fetchall()
            for name, rev in rows:
                if int(rev or 0) != planned[name]:
                    raise Moved

    return check


def bump(conn: sqlite3.Connection, bucket: str, names: Iterable[str], now: str) -> None:
    """Inside the transaction: the entities' observations changed (revision + 1)."""
    conn.executemany(
        "UPDATE entities SET revision=revision+1, updated_at=? WHERE bucket=? AND name=?",
        [(now, bucket, n) for n in dict.fromkeys(names)],
    )


def reassert(conn: sqlite3.Connection, items: Sequence[tuple[Obs, int]]) -> None:
    """Inside the transaction: observations added again move to their new revision."""
    for obs, rev in items:
        meta = {**obs.metadata, "addedAt": rev}
        conn.execute(
            "UPDATE records SET metadata=? WHERE id=?",
            (json.dumps(meta, ensure_ascii=False), obs.id),
        )


def split(
    have: Sequence[Obs], drop: set[str], expected: int | None, taken: set[str]
) -> tuple[list[str], list[str]]:
    """(ids to delete, contents kept because they were added after ``expected``)."""
    gone, kept = [], []
    for o in have:
        if o.content not in drop or o.id in taken:
            continue
        if expected is None or o.added_at <= expected:
            gone.append(o.id)
        else:
            kept.append(o.content)
    return gone, kept


def retrying(fn: Callable[[], T]) -> T:
    """Run a plan-and-write until its entities did not move in between."""
    for _ in range(RETRIES):
        try:
            return fn()
        except Moved:
            continue
    raise Conflict("the entity kept changing while it was being written; retry")


__all__ = [
    "Moved",
    "Obs",
    "bump",
    "observations",
    "reassert",
    "retrying",
    "revisions",
    "split",
    "unmoved",
]
