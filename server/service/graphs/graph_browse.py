"""Read-only views of the knowledge graph and lessons for the dashboard, on top of
``graph/`` (through the runtime's :class:`~server.service.graphs.graph_services.GraphServices`): a bounded slice of a graph
to draw, one entity with its observations and its relations both ways, and pages of lessons.
The caller reaches only its own graphs (``Identity.bucket(scope)``), as with the tools.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from graph.common import parse_scope
from graph.lesson_models import Lesson
from graph.models import Entity, Relation
from server.service.core.errors import InvalidInput, NotFound
from server.service.core.identity import Identity
from server.service.graphs.graph_services import GraphServices
from server.service.memories.memory import MemoryService

MAX_NODES = 300
FOCUS = 10  # entities a graph search focuses on (search_nodes ranks 5x as many)
NEIGHBOURS = 15  # relations drawn per focused entity, each way
MAX_RELATIONS = 500


class GraphSlice(BaseModel):
    entities: list[Entity]
    relations: list[Relation]
    focus: list[str] = Field(default_factory=list, description="The entities a search matched.")
    totalEntities: int
    totalRelations: int
    truncated: bool


class EntityDetail(BaseModel):
    entity: Entity
    outgoing: list[Relation]
    incoming: list[Relation]


def graph_slice(
    svc: MemoryService, gs: GraphServices, who: Identity, scope: str = "team",
    query: str | None = None, limit: int = 150,
) -> GraphSlice:  # fmt: skip
    """What to draw: without ``query`` the first ``limit`` entities of the graph and the
    relations among them; with it, the best matches of ``search_nodes`` and their neighbours."""
    if not 1 <= limit <= MAX_NODES:
        raise InvalidInput(f"limit must be between 1 and {MAX_NODES}")
    g = gs.graph
    bucket = who.bucket(parse_scope(scope).value)
    if not query or not query.strip():
        page = g.read_graph(who, scope, None, limit)
        names = [e.name for e in page.entities]
        return GraphSlice(
            entities=page.entities,
            relations=g.relations_among(bucket, names)[:MAX_RELATIONS],
            totalEntities=page.totalEntities,
            totalRelations=page.totalRelations,
            truncated=page.nextCursor is not None,
        )
    found = gs.search_nodes(who, query, scope, min(limit, FOCUS))
    focus = [e.name for e in found.entities]
    near = dict.fromkeys(focus)
    for name in focus:
        for rel in neighbours(svc, bucket, name, NEIGHBOURS):
            near.setdefault(rel.to if rel.from_ == name else rel.from_)
    names = list(near)[:limit]
    graph = g.open_nodes(who, names, scope)
    n_ent, n_rel = svc.store.reader.execute(
        "SELECT (SELECT count(*) FROM entities WHERE bucket=?), "
        "(SELECT count(*) FROM relations WHERE bucket=?)",
        (bucket, bucket),
    ).fetchone()
    return GraphSlice(
        entities=graph.entities,
        relations=graph.relations[:MAX_RELATIONS],
        focus=focus,
        totalEntities=n_ent,
        totalRelations=n_rel,
        truncated=len(near) > limit,
    )


def neighbours(svc: MemoryService, bucket: str, name: str, limit: int) -> list[Relation]:
    """Relations from or to ``name`` (at most ``limit`` each way)."""
    out: list[Relation] = []
    for col in ("from_name", "to_name"):
        rows = svc.store.reader.execute(
            f"SELECT from_name, to_name, relation_type FROM relations WHERE bucket=? "
            f"AND {col}=? ORDER BY id LIMIT ?",
            (bucket, name, limit),
        ).fetchall()
        out += [
            Relation.model_validate({"from": f, "to": t, "relationType": r}) for f, t, r in rows
        ]
    return out


def entity_detail(
    svc: MemoryService, gs: GraphServices, who: Identity, scope: str, name: str
) -> EntityDetail:
    g = gs.graph
    bucket = who.bucket(parse_scope(scope).value)
    found = g.open_nodes(who, [name], scope)
    if not found.entities:
        raise NotFound(f"entity {name!r} not found in the {scope} graph", name=name)
    rels = neighbours(svc, bucket, name, MAX_RELATIONS)
    return EntityDetail(
        entity=found.entities[0],
        outgoing=[r for r in rels if r.from_ == name],
        incoming=[r for r in rels if r.to == name and r.from_ != name],
    )


def list_lessons(
    svc: MemoryService, gs: GraphServices, who: Identity, scope: str = "team", after: int = 0,
    limit: int = 25,
) -> tuple[list[tuple[int, Lesson]], int | None]:  # fmt: skip
    """A page of the lessons of a graph (oldest first) and the cursor of the next page."""
    if not 1 <= limit <= 100:
        raise InvalidInput("limit must be between 1 and 100")
    lessons = gs.lessons
    sc = parse_scope(scope).value
    rows = svc.store.reader.execute(
        "SELECT * FROM lessons WHERE bucket=? AND id>? ORDER BY id LIMIT ?",
        (who.bucket(sc), after, limit + 1),
    ).fetchall()
    page = [(r["id"], lessons.from_row(r, sc)) for r in rows[:limit]]
    return page, (page[-1][0] if len(rows) > limit else None)
