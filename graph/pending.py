"""Relations waiting for an entity: the forward references an import keeps.

basic-memory links a note to a title that may not exist yet (``- depends_on [[Payment
Gateway]]``) and makes the relation when that note appears; the official memory server keeps a
relation to any name. This graph holds a relation only between entities that exist
(``create_relations`` refuses a missing one, so an agent hears about a mistyped name), so an
import keeps such a relation here instead, in ``pending_relations``: out of every read of the
graph (no entity is made up for it), and made a relation by :func:`resolve` in the transaction
that creates the entity it waits for (``GraphBase.insert_entity``: ``create_entities``, a
lesson, a later import). Deleting an entity drops the pending relations that name it, as it
drops its relations (:func:`drop`); deleting a relation drops it pending too.

The names and type are screened by the write policy like a relation's (:func:`keep`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .common import Caller
    from .entities import GraphService
    from .models import Relation

COLUMNS = "bucket, from_name, to_name, relation_type, created_by, created_at"
CHUNK = 400  # names per statement (SQLite's limit on variables is 999 in older builds)


@dataclass
class Kept:
    """What :func:`keep` did: relations made at once (their entities exist by now), relations
    pending (new or already there), the policy's warnings."""

    created: int = 0
    pending: int = 0
    warnings: list[str] = field(default_factory=list)


def keep(
    graph: GraphService, who: Caller, relations: Sequence[Relation], scope: str | None = None
) -> Kept:
    """Keep ``relations`` (an endpoint of each was missing when the import planned) pending,
    in one transaction; a relation whose endpoints both exist by then is made at once."""
    from .common import parse_scope, ts

    bucket = who.bucket(parse_scope(scope).value)
    out = Kept()
    triples = {
        (
            graph.clean_name(r.from_, "relation source", out.warnings),
            graph.clean_name(r.to, "relation target", out.warnings),
            graph.clean_name(r.relationType, "relation type", out.warnings),
        ): None
        for r in relations
    }
    with graph.lock, graph.store.transaction() as conn:
        names = list(dict.fromkeys(n for f, t, _ in triples for n in (f, t)))
        there = set(graph.entity_rows(bucket, names, conn))
        now = ts(graph.clock())
        for f, t, kind in triples:
            row = (bucket, f, t, kind, who.agent_id, now)
            if f in there and t in there:
                cur = conn.execute(f"INSERT OR IGNORE INTO relations({COLUMNS}) VALUES "
                                   "(?,?,?,?,?,?)", row)  # fmt: skip
                out.created += cur.rowcount
            else:
                conn.execute(f"INSERT OR IGNORE INTO pending_relations({COLUMNS}) VALUES "
                             "(?,?,?,?,?,?)", row)  # fmt: skip
                out.pending += 1
    return out


def resolve(conn: sqlite3.Connection, bucket: str, name: str) -> int:
    """Make a relation of every relation pending on ``name`` (just created, in ``conn``'s
    transaction) whose other endpoint exists too; returns how many."""
    rows = conn.execute(
        "SELECT from_name, to_name, relation_type, created_by, created_at FROM "
        "pending_relations WHERE bucket=? AND (from_name=? OR to_name=?)",
        (bucket, name, name),
    ).fetchall()
    made = 0
    for f, t, kind, by, at in rows:
        other = t if f == name else f
        if (
            other != name
            and not conn.execute(
                "SELECT 1 FROM entities WHERE bucket=? AND name=?", (bucket, other)
            ).fetchone()
        ):
            continue
        conn.execute(f"INSERT OR IGNORE INTO relations({COLUMNS}) VALUES (?,?,?,?,?,?)",
                     (bucket, f, t, kind, by, at))  # fmt: skip
        conn.execute(
            "DELETE FROM pending_relations WHERE bucket=? AND from_name=? AND to_name=? "
            "AND relation_type=?",
            (bucket, f, t, kind),
        )
        made += 1
    return made


def drop(conn: sqlite3.Connection, bucket: str, names: Sequence[str]) -> None:
    """Forget the relations pending from or to ``names`` (entities being deleted)."""
    for start in range(0, len(names), CHUNK):
        part = list(names[start : start + CHUNK])
        marks = ",".join("?" * len(part))
        conn.execute(
            f"DELETE FROM pending_relations WHERE bucket=? AND (from_name IN ({marks}) "
            f"OR to_name IN ({marks}))",
            [bucket, *part, *part],
        )


def forget(conn: sqlite3.Connection, bucket: str, triple: tuple[str, str, str]) -> int:
    """Forget one pending relation (``delete_relations``); returns 1 if it was there."""
    return conn.execute(
        "DELETE FROM pending_relations WHERE bucket=? AND from_name=? AND to_name=? "
        "AND relation_type=?",
        (bucket, *triple),
    ).rowcount


def of(reader: sqlite3.Connection, bucket: str) -> list[tuple[str, str, str]]:
    """The relations pending in ``bucket``: (from, to, type), oldest first."""
    return [
        (r[0], r[1], r[2])
        for r in reader.execute(
            "SELECT from_name, to_name, relation_type FROM pending_relations WHERE bucket=? "
            "ORDER BY created_at, from_name, to_name, relation_type",
            (bucket,),
        )
    ]
