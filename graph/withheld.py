"""Graph reads leave out what the write policy flagged, and say how much they left out.

The write policy (``server/service/trust/policy.py``) marks a record whose text reads like
instructions to the model: ``metadata.suspicious`` holds the reason. A graph read returns more
than records: entity names and types and relation types are kept beside them, with no flag of
their own. What ``read_graph``, ``open_nodes`` and ``search_nodes`` return (the lesson tools:
``graph.lesson_ranking``):

- an observation whose record is flagged is left out of its entity's ``observations``;
- an entity is left out whole when its name or its type reads like instructions (the injection
  rules, run on them when they are read: ``Flag``), or when it is a lesson whose record is
  flagged (a lesson's flag covers every field of it, its name included);
- a relation is left out when its type reads like instructions or either end is an entity
  left out (its name would be in it);
- each result counts what it left out (``withheld``) and says so in one line (``note``).

With ``include_suspicious`` nothing is left out and every flagged item is marked with its
reason: an entity's and a relation's ``suspicious``, and an entity's flagged observations
listed in ``flaggedObservations`` ({observation, suspicious}), never among its plain
``observations``. One bad record never fails a read: metadata that does not parse is read as
unflagged, and a name the check fails on is left out as unscanned.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .common import chunks, placeholders
from .models import (
    Entity,
    FlaggedObservation,
    Graph,
    GraphPage,
    MarkedEntity,
    MarkedGraph,
    MarkedGraphPage,
    MarkedRelation,
    Relation,
    ScoredEntity,
)

log = logging.getLogger(__name__)
SUSPICIOUS = "suspicious"  # the write policy's metadata key of a flagged record
Flag = Callable[[str], "str | None"]  # a stored name or type -> why it reads like instructions


# ---------------------------------------------------------------------------- what is flagged
def flag_of(metadata: object) -> str | None:
    """The flag of a record's metadata (its JSON text or a dict), None when unflagged."""
    if isinstance(metadata, str):
        if SUSPICIOUS not in metadata:
            return None
        try:
            metadata = json.loads(metadata)
        except ValueError:
            return None
    reason = metadata.get(SUSPICIOUS) if isinstance(metadata, Mapping) else None
    return str(reason) if reason else None


def record_flags(conn, ids: Iterable[str]) -> dict[str, str]:
    """{record id: reason} of the flagged records among ``ids``."""
    out: dict[str, str] = {}
    wanted = list(dict.fromkeys(i for i in ids if i))
    for part in chunks(wanted):
        rows = conn.execute(
            f"SELECT id, metadata FROM records WHERE id IN ({placeholders(len(part))}) "
            "AND metadata LIKE '%suspicious%'",
            list(part),
        ).fetchall()
        out.update((r["id"], reason) for r in rows if (reason := flag_of(r["metadata"])))
    return out


def observation_flags(conn, bucket: str, names: Sequence[str]) -> dict[str, dict[str, str]]:
    """{entity name: {observation text: reason}} of the flagged observations of ``names``."""
    out: dict[str, dict[str, str]] = {}
    for part in chunks(list(dict.fromkeys(names))):
        rows = conn.execute(
            "SELECT entity_name, content, metadata FROM records WHERE bucket=? AND "
            f"kind='observation' AND entity_name IN ({placeholders(len(part))}) "
            "AND metadata LIKE '%suspicious%'",
            [bucket, *part],
        ).fetchall()
        for r in rows:
            if reason := flag_of(r["metadata"]):
                out.setdefault(r["entity_name"], {})[r["content"]] = reason
    return out


def checked(flag: Flag | None, text: str) -> str | None:
    """``flag(text)``; a check that fails flags the text (it could not be read as safe)."""
    if flag is None or not text:
        return None
    try:
        return flag(text)
    except Exception as exc:  # one odd name never fails a read
        log.warning("a graph name could not be scanned: %s", type(exc).__name__)
        return f"not scanned ({type(exc).__name__})"


def withheld_note(counts: Mapping[str, int] | int, what: str = "item") -> str:
    """One line saying what a read left out: "(left out, flagged as possible instructions to
    the model: 1 entity, 2 observations; ask again with includeSuspicious to see them,
    marked)"; "" when nothing was."""
    if isinstance(counts, int):
        counts = {what: counts}
    parts = [f"{n} {noun if n == 1 else _plural(noun)}" for noun, n in counts.items() if n]
    if not parts:
        return ""
    return (
        f"(left out, flagged as possible instructions to the model: {', '.join(parts)}; ask "
        "again with includeSuspicious to see them, marked)"
    )


def _plural(noun: str) -> str:
    return noun[:-1] + "ies" if noun.endswith("y") else noun + "s"


# ---------------------------------------------------------------------------- marking
@dataclass
class GraphFlags:
    """What is flagged among some entities of a graph and the strings around them."""

    flag: Flag | None
    entities: dict[str, str] = field(default_factory=dict)  # left out whole: name -> reason
    observations: dict[str, dict[str, str]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # what was left out, by kind

    @classmethod
    def read(cls, graph, bucket: str, names: Iterable[str], flag: Flag | None) -> GraphFlags:
        """The flags of the entities ``names`` (of ``graph``, a ``GraphService``): their names
        and types checked by ``flag``, their lesson records' and observations' flags."""
        names = list(dict.fromkeys(names))
        out = cls(flag)
        rows = graph.entity_rows(bucket, names)
        for name in names:
            row = rows.get(name)
            kind = row["entity_type"] if row is not None else ""
            if reason := checked(flag, name) or checked(flag, kind):
                out.entities[name] = reason
        lessons = graph.lesson_rows(bucket, [n for n, r in rows.items()
                                             if r["entity_type"] == "lesson"])  # fmt: skip
        flagged = record_flags(graph.reader, [r["record_id"] for r in lessons.values()])
        for name, row in lessons.items():
            if reason := flagged.get(row["record_id"]):
                out.entities.setdefault(name, reason)
        plain = [n for n, r in rows.items() if r["entity_type"] != "lesson"]
        out.observations = observation_flags(graph.reader, bucket, plain)
        return out

    def left_out(self, kind: str, n: int = 1) -> None:
        if n:
            self.counts[kind] = self.counts.get(kind, 0) + n

    @property
    def withheld(self) -> dict:
        order = ("entity", "observation", "relation")
        counts = {k: self.counts[k] for k in order if k in self.counts}
        return {"withheld": sum(counts.values()), "note": withheld_note(counts)}

    def entity(self, e: Entity, include: bool, cls: type[Entity] = MarkedEntity):
        """``e`` marked (None when it is left out)."""
        reason = self.entities.get(e.name)
        if reason and not include:
            self.left_out("entity")
            return None
        flags = self.observations.get(e.name, {})
        plain = [o for o in e.observations if o not in flags]
        marked = [FlaggedObservation(observation=o, suspicious=flags[o])
                  for o in e.observations if o in flags]  # fmt: skip
        if marked and not include:
            self.left_out("observation", len(marked))
            marked = []
        fields = {**e.model_dump(), "observations": plain}
        if isinstance(e, ScoredEntity):
            fields["matched"] = [o for o in e.matched if o not in flags]
        return cls(**fields, suspicious=reason, flaggedObservations=marked)

    def relations(self, relations: Iterable[Relation], include: bool) -> list[MarkedRelation]:
        out = []
        for r in relations:
            reason = (checked(self.flag, r.relationType) or self.entities.get(r.from_)
                      or self.entities.get(r.to))  # fmt: skip
            if reason and not include:
                self.left_out("relation")
                continue
            out.append(MarkedRelation.model_validate({**r.dump(), "suspicious": reason}))
        return out


def endpoints(relations: Iterable[Relation]) -> list[str]:
    return [n for r in relations for n in (r.from_, r.to)]


def mark_graph(graph, bucket: str, result: Graph, flag: Flag | None, include: bool):
    """``result`` (a ``Graph`` or ``GraphPage`` of ``graph``) with what is flagged left out or
    marked (module docstring): a ``MarkedGraph`` or ``MarkedGraphPage``."""
    names = [e.name for e in result.entities] + endpoints(result.relations)
    flags = GraphFlags.read(graph, bucket, names, flag)
    entities = [m for e in result.entities if (m := flags.entity(e, include)) is not None]
    relations = flags.relations(result.relations, include)
    cls = MarkedGraphPage if isinstance(result, GraphPage) else MarkedGraph
    rest = result.model_dump(exclude={"entities", "relations"})
    return cls(**rest, entities=entities, relations=relations, **flags.withheld)
