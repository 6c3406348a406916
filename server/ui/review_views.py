"""The review inbox page: proposals of the signed-in project (a reviewer's whole inbox, or an
agent's own proposals), with approve, reject (with a reason) and edit-then-approve."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from server.service import review
from server.service.errors import Conflict, InvalidInput

from .dashboard import PREFIX, Dashboard, route, view
from .logins import UiSession
from .views import lines, msg

STATUSES = ("pending", "approved", "rejected", "withdrawn", "all")


def inbox(ui: Dashboard, s: UiSession, status: str, cursor: str | None) -> dict:
    page = review.list_proposals(ui.svc, ui.policy(), s.identity, status, cursor)
    return {"page": page, "status": status, "statuses": STATUSES, "active": "review",
            "team_categories": ("learnings", "decisions", "architecture")}  # fmt: skip


@view
async def review_page(ui: Dashboard, request: Request, s: UiSession) -> Response:
    status = request.query_params.get("status", "pending")
    cursor = request.query_params.get("cursor") or None
    return await ui.page(
        request, s, "review.html",
        lambda: {**inbox(ui, s, status, cursor), "message": msg(request)},
    )  # fmt: skip


@view
async def decide(ui: Dashboard, request: Request, s: UiSession) -> Response:
    pid = request.path_params["id"]
    form = await request.form()
    action = str(form.get("action", ""))
    if action not in ("approve", "edit", "reject"):
        raise InvalidInput(f"unknown action {action!r}")
    try:
        revision = int(str(form.get("revision", "")))
    except ValueError:
        raise InvalidInput("the form lost its revision: reload the page") from None
    content = None
    if action == "edit":
        content = lines(str(form.get("content", "")))
    category = str(form.get("category", "")) or None

    def decide_now():
        edited = content
        if edited is not None:  # the text as shown (up to its line ends) is not an edit
            shown = review.get_proposal(ui.svc, ui.policy(), s.identity, pid).content
            edited = None if edited == lines(shown) else edited
        return review.review_proposal(
            ui.svc, ui.policy(), s.identity, pid, "reject" if action == "reject" else "approve",
            reason=str(form.get("reason", "")) or None, content=edited, category=category,
            expected_revision=revision,
        )  # fmt: skip

    try:
        await ui.run(decide_now)
    except Conflict as exc:  # changed since the page was read: show it again, current text
        conflict = exc
        return await ui.page(
            request, s, "review.html",
            lambda: {**inbox(ui, s, "pending", None), "conflict": conflict, "conflict_id": pid},
            status=409,
        )  # fmt: skip
    done = "rejected" if action == "reject" else "approved"
    return RedirectResponse(f"{PREFIX}/review?msg={done}", status_code=303)


def routes(ui: Dashboard) -> list:
    return [
        route("/review", review_page),
        route("/review/{id}", decide, ("POST",)),
    ]
