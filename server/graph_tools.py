"""Knowledge-graph and lesson MCP tools: the official memory server's names and arguments,
thin adapters over ``graph/`` (via ``server.service.graphs``).

Every tool works on one graph: the team graph of the project unless ``scope`` says otherwise
(``private`` = you in this project, ``personal`` = you everywhere, ``public`` = everyone).
Identity comes from the runtime, never from arguments.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from graph.lesson_models import (
    CreateLessonResult,
    ErrorQuery,
    LessonInput,
    LessonSearchResult,
    LessonSuccessResult,
)
from graph.models import (
    AddObservationsResult,
    CreateEntitiesResult,
    CreateRelationsResult,
    DeleteResult,
    EntityInput,
    Graph,
    GraphPage,
    ObservationDeletion,
    ObservationInput,
    Relation,
    SearchNodesResult,
)

from .service.graphs import GraphServices, graph_services
from .tools import call, runtime_of

GraphScope = Annotated[
    Literal["team", "private", "personal", "public"],
    Field(
        description="Which graph: team (default, every agent of this project), private, personal or public."
    ),
]


def _services(ctx: Context) -> tuple[GraphServices, object]:
    rt = runtime_of(ctx)
    return graph_services(rt.service), rt.identity


def register(server: MCPServer) -> None:  # noqa: C901 - one adapter per tool
    @server.tool(name="create_entities")
    async def create_entities(
        entities: Annotated[
            list[EntityInput],
            Field(description="Entities to create: {name, entityType, observations}."),
        ],
        ctx: Context,
        scope: GraphScope = "team",
    ) -> CreateEntitiesResult:
        """Create entities (people, organizations, services, concepts…) in the knowledge graph,
        each with atomic observations (one fact per string). Names that already exist are
        ignored and listed in `skipped`; use add_observations to extend an existing entity."""
        s, who = _services(ctx)
        return await call(lambda: s.graph.create_entities(who, entities, scope))

    @server.tool(name="create_relations")
    async def create_relations(
        relations: Annotated[
            list[Relation],
            Field(
                description="{from, to, relationType}; relationType in active voice, e.g. works_at."
            ),
        ],
        ctx: Context,
        scope: GraphScope = "team",
    ) -> CreateRelationsResult:
        """Create directed relations between existing entities. Existing relations are skipped.
        If any endpoint entity does not exist the call fails with [not_found] naming it and
        writes nothing: create the entity first, then retry (retrying is safe)."""
        s, who = _services(ctx)
        return await call(lambda: s.graph.create_relations(who, relations, scope))

    @server.tool(name="add_observations")
    async def add_observations(
        observations: Annotated[
            list[ObservationInput], Field(description="{entityName, contents: [new observations]}.")
        ],
        ctx: Context,
        scope: GraphScope = "team",
    ) -> AddObservationsResult:
        """Add observations (atomic facts) to existing entities; returns what was added per
        entity (observations the entity already has are not repeated). Fails with
        [not_found] and writes nothing if an entity does not exist."""
        s, who = _services(ctx)
        return await call(lambda: s.graph.add_observations(who, observations, scope))

    @server.tool(name="delete_entities")
    async def delete_entities(
        entityNames: Annotated[list[str], Field(description="Names of the entities to delete.")],
        ctx: Context,
        scope: GraphScope = "team",
    ) -> DeleteResult:
        """Delete entities together with their observations and every relation from or to
        them. Missing names are ignored."""
        s, who = _services(ctx)
        return await call(lambda: s.graph.delete_entities(who, entityNames, scope))

    @server.tool(name="delete_observations")
    async def delete_observations(
        deletions: Annotated[
            list[ObservationDeletion],
            Field(description="{entityName, observations: [exact texts to delete]}."),
        ],
        ctx: Context,
        scope: GraphScope = "team",
    ) -> DeleteResult:
        """Delete specific observations (exact text) from entities, e.g. facts that became
        wrong; the entities stay. Missing entities or observations are ignored."""
        s, who = _services(ctx)
        return await call(lambda: s.graph.delete_observations(who, deletions, scope))

    @server.tool(name="delete_relations")
    async def delete_relations(
        relations: Annotated[
            list[Relation],
            Field(description="{from, to, relationType} of the relations to delete."),
        ],
        ctx: Context,
        scope: GraphScope = "team",
    ) -> DeleteResult:
        """Delete specific relations (exact from, to and relationType); the entities stay.
        Relations that do not exist are ignored."""
        s, who = _services(ctx)
        return await call(lambda: s.graph.delete_relations(who, relations, scope))

    @server.tool(name="read_graph")
    async def read_graph(
        ctx: Context,
        cursor: Annotated[
            str | None,
            Field(description="nextCursor of the previous page; omit for the first page."),
        ] = None,
        limit: Annotated[
            int, Field(ge=1, le=1000, description="Entities per page (default 100).")
        ] = 100,
        scope: GraphScope = "team",
    ) -> GraphPage:
        """Read the knowledge graph page by page: entities with their observations, and the
        relations starting at them. Follow `nextCursor` until it is null. To find something
        specific, search_nodes is cheaper."""
        s, who = _services(ctx)
        return await call(lambda: s.graph.read_graph(who, scope, cursor, limit))

    @server.tool(name="search_nodes")
    async def search_nodes(
        query: Annotated[
            str,
            Field(min_length=1, description="What you are looking for, in plain words or names."),
        ],
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=100, description="Max entities (default 10).")] = 10,
        scope: GraphScope = "team",
    ) -> SearchNodesResult:
        """Find entities by meaning and keywords over their names, types and observations
        (not substring matching: "who knows Spanish" finds the person who "speaks fluent
        Spanish"). Returns the best entities with all their observations, the observations
        that matched, and the relations among them."""
        s, who = _services(ctx)
        return await call(lambda: s.search_nodes(who, query, scope, limit))

    @server.tool(name="open_nodes")
    async def open_nodes(
        names: Annotated[list[str], Field(description="Entity names to open.")],
        ctx: Context,
        scope: GraphScope = "team",
    ) -> Graph:
        """Get entities by exact name with their observations and the relations among them.
        Names that do not exist are skipped silently."""
        s, who = _services(ctx)
        return await call(lambda: s.graph.open_nodes(who, names, scope))

    @server.tool(name="create_lesson")
    async def create_lesson(
        lesson: Annotated[
            LessonInput,
            Field(
                description="name, entityType='lesson', observations, errorPattern{type,message,context,stackTrace?}, metadata{severity,environment,frequency,successRate}, verificationSteps[{command,expectedOutput,successIndicators}]."
            ),
        ],
        ctx: Context,
        scope: GraphScope = "team",
    ) -> CreateLessonResult:
        """Record a lesson after you fixed an error: the error pattern (include the stack trace
        when you have one), what you learned (observations) and how to verify the fix. Every
        required field is validated; createdAt/updatedAt are set for you."""
        s, who = _services(ctx)
        return await call(lambda: s.lessons.create_lesson(who, lesson, scope))

    @server.tool(name="find_similar_errors")
    async def find_similar_errors(
        errorPattern: Annotated[
            ErrorQuery,
            Field(description="{type, message, context, stackTrace?} of the error you are facing."),
        ],
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=50, description="Max lessons (default 10).")] = 10,
        scope: GraphScope = "team",
    ) -> LessonSearchResult:
        """Before debugging an error, look for lessons about similar ones: fuzzy match on the
        message, exception classes and stack frames; ordered by relevance × (0.7 + 0.3 ×
        successRate), so fixes that worked come first. Each lesson has its resolution notes
        and verification steps; report the outcome with update_lesson_success."""
        s, who = _services(ctx)
        return await call(lambda: s.lessons.find_similar_errors(who, errorPattern, scope, limit))

    @server.tool(name="update_lesson_success")
    async def update_lesson_success(
        lessonName: Annotated[str, Field(min_length=1, description="The lesson you applied.")],
        success: Annotated[bool, Field(description="Did its solution work this time?")],
        ctx: Context,
        scope: GraphScope = "team",
    ) -> LessonSuccessResult:
        """Report whether a lesson's fix worked: updates its success rate (running average),
        frequency and updatedAt, which reorders future results."""
        s, who = _services(ctx)
        return await call(lambda: s.lessons.update_lesson_success(who, lessonName, success, scope))

    @server.tool(name="get_lesson_recommendations")
    async def get_lesson_recommendations(
        context: Annotated[
            str, Field(min_length=1, description="What you are doing or facing, in plain words.")
        ],
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=50, description="Max lessons (default 10).")] = 10,
        scope: GraphScope = "team",
    ) -> LessonSearchResult:
        """Lessons relevant to your current situation (error types, messages, contexts and
        notes, by meaning and keywords), with full resolution details and verification steps,
        ordered by relevance and success rate."""
        s, who = _services(ctx)
        return await call(lambda: s.lessons.get_lesson_recommendations(who, context, scope, limit))
