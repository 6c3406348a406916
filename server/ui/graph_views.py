"""Dashboard pages of the knowledge graph (drawn by cytoscape.js, searched with
``search_nodes``, an entity's observations and relations on click) and of lessons (success
rate, uses, verification steps, "find similar")."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from graph.lesson_models import ErrorQuery
from server.service.core.errors import InvalidInput
from server.service.graphs import graph_browse

from .logins import UiSession
from .pages import Pages, route, view

GRAPH_SCOPES = ("team", "private", "personal", "public")


def _scope(request: Request) -> str:
    scope = request.query_params.get("scope", "team")
    if scope not in GRAPH_SCOPES:
        raise InvalidInput(f"unknown scope {scope!r}")
    return scope


@view
async def graph_page(ui: Pages, request: Request, s: UiSession) -> Response:
    scope, q = _scope(request), request.query_params.get("q", "").strip()

    def build() -> dict:
        sl = graph_browse.graph_slice(ui.svc, ui.rt.graphs, s.identity, scope, q or None)
        return {"slice": sl, "scope": scope, "q": q, "scopes": GRAPH_SCOPES, "active": "graph"}

    return await ui.page(request, s, "graph.html", build)


@view
async def graph_data(ui: Pages, request: Request, s: UiSession) -> Response:
    """cytoscape.js elements of the slice the page shows (labels are drawn as canvas text)."""
    scope, q = _scope(request), request.query_params.get("q", "").strip()
    sl = await ui.run(
        lambda: graph_browse.graph_slice(ui.svc, ui.rt.graphs, s.identity, scope, q or None)
    )
    focus = set(sl.focus)
    nodes = [
        {"data": {"id": e.name, "label": e.name, "type": e.entityType,
                  "observations": len(e.observations)},
         "classes": ("focus " if e.name in focus else "") + e.entityType.replace(" ", "_")}
        for e in sl.entities
    ]  # fmt: skip
    names = {e.name for e in sl.entities}
    edges = [
        {"data": {"id": f"{r.from_}|{r.relationType}|{r.to}", "source": r.from_,
                  "target": r.to, "label": r.relationType}}
        for r in sl.relations
        if r.from_ in names and r.to in names
    ]  # fmt: skip
    return JSONResponse({"nodes": nodes, "edges": edges, "focus": sl.focus})


@view
async def entity_panel(ui: Pages, request: Request, s: UiSession) -> Response:
    scope, name = _scope(request), request.query_params.get("name", "")
    build = lambda: {"d": graph_browse.entity_detail(ui.svc, ui.rt.graphs, s.identity, scope, name),  # noqa: E731
                     "scope": scope, "active": "graph"}  # fmt: skip
    if request.headers.get("hx-request"):
        return ui.render(request, s, "_entity.html", await ui.run(build))
    return await ui.page(request, s, "entity.html", build)


@view
async def lessons_page(ui: Pages, request: Request, s: UiSession) -> Response:
    scope = _scope(request)
    try:
        after = int(request.query_params.get("after", "0"))
    except ValueError:
        raise InvalidInput("invalid page cursor") from None

    def build() -> dict:
        page, nxt = graph_browse.list_lessons(ui.svc, ui.rt.graphs, s.identity, scope, after)
        return {"lessons": page, "next": nxt, "scope": scope, "scopes": GRAPH_SCOPES,
                "active": "lessons"}  # fmt: skip

    return await ui.page(request, s, "lessons.html", build)


@view
async def similar_lessons(ui: Pages, request: Request, s: UiSession) -> Response:
    """find_similar_errors with a lesson's own error pattern (the lesson itself ranks first)."""
    scope, name = _scope(request), request.query_params.get("name", "")

    def build() -> dict:
        svc = ui.rt.graphs.lessons
        lesson = svc.get(s.identity, name, scope)
        ep = lesson.errorPattern
        query = ErrorQuery(type=ep.type, message=ep.message, context=ep.context,
                           stackTrace=ep.stackTrace)  # fmt: skip
        found = svc.find_similar_errors(s.identity, query, scope, 6)
        return {"found": found, "name": name, "scope": scope, "active": "lessons"}

    if request.headers.get("hx-request"):
        return ui.render(request, s, "_similar.html", await ui.run(build))
    return await ui.page(request, s, "similar.html", build)


def routes(ui: Pages) -> list:
    return [
        route("/graph", graph_page),
        route("/graph/data", graph_data),
        route("/graph/entity", entity_panel),
        route("/lessons", lessons_page),
        route("/lessons/similar", similar_lessons),
    ]
