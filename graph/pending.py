"""Relations waiting for an entity: the forward references an import keeps.

basic-memory links a note to a title that may not exist yet (``- depends_on [[Payment
Gateway]]``) and makes the relation when that note appears; the official memory server keeps a
relation to any name. This graph holds a relation only between entities that exist
(``create_relations`` refuses a missing one, so an agent hears about a mistyped name), so an
import keeps such a relation here instead, in ``pending_relations``: out of every read of the
graph (no entity is made up for it), and made a relation by
:func:`~graph.pending_rows.resolve` in the transaction that creates the entity it waits for
(``GraphBase.insert_entity``: ``create_entities``, a lesson, a later import). Deleting an entity
drops the pending relations that name it, as it drops its relations
(:func:`~graph.pending_rows.drop`); deleting a relation drops it pending too. The rows
themselves are read and written in :mod:`graph.pending_rows`.

The names and type are screened by the write policy like a relation's (:func:`keep`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .common import Caller, parse_scope, ts
from .pending_rows import COLUMNS

if TYPE_CHECKING:
    from .entities import GraphService
    from .models import Relation


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
