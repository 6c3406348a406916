"""The review inbox page: proposals of the signed-in project (a reviewer's whole inbox, or an
agent's own proposals), with approve, reject (with a reason) and edit-then-approve; and the
lessons learned from sessions that nobody reviewed yet, with accept, edit, merge and reject
(``server/service/learning/lesson_review.py``); and the warnings of writes no person asked for, with
dismiss (``server/service/browsing/unattended_warnings.py``); and the records that may state the same
thing, with link and dismiss (``server/service/memories/conflicts.py``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from server.service.browsing import review
from server.service.browsing import unattended_warnings as write_warnings
from server.service.core.errors import Conflict, InvalidInput
from server.service.learning import lesson_review
from server.service.memories import conflicts

from .logins import UiSession
from .pages import PREFIX, Pages, route, view
from .views import lines, msg

STATUSES = ("pending", "approved", "rejected", "withdrawn", "all")


def inbox(ui: Pages, s: UiSession, status: str, cursor: str | None) -> dict:
    page = review.list_proposals(ui.svc, ui.policy(), s.identity, status, cursor)
    learned = lesson_review.pending(ui.rt.graphs, s.identity)
    names = lesson_review.lesson_names(ui.rt.graphs, s.identity) if learned else []
    warnings = write_warnings.listing(ui.svc, s.identity)
    pairs = conflicts.pending(ui.svc, s.identity)  # records that may state the same thing
    return {"page": page, "status": status, "statuses": STATUSES, "active": "review",
            "team_categories": ("learnings", "decisions", "architecture"),
            "learned": learned, "lesson_names": names, "write_warnings": warnings,
            "pairs": pairs}  # fmt: skip


@view
async def review_page(ui: Pages, request: Request, s: UiSession) -> Response:
    status = request.query_params.get("status", "pending")
    cursor = request.query_params.get("cursor") or None
    return await ui.page(
        request, s, "review.html",
        lambda: {**inbox(ui, s, status, cursor), "message": msg(request)},
    )  # fmt: skip


@view
async def decide(ui: Pages, request: Request, s: UiSession) -> Response:
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


LESSON_DONE = {"accept": "lesson-accepted", "edit": "lesson-accepted",
               "merge": "lesson-merged", "reject": "lesson-rejected"}  # fmt: skip


@view
async def decide_lesson(ui: Pages, request: Request, s: UiSession) -> Response:
    """A decision on a lesson learned from a session (its name is a form field: a lesson's
    name may hold any character)."""
    form = await request.form()
    action = str(form.get("action", ""))
    if action not in LESSON_DONE:
        raise InvalidInput(f"unknown action {action!r}")
    name = str(form.get("name", ""))
    fix = [ln for ln in lines(str(form.get("observations", ""))).split("\n") if ln.strip()]
    await ui.run(
        lambda: lesson_review.decide(
            ui.rt.graphs,
            s.identity,
            name,
            action,
            reason=str(form.get("reason", "")) or None,
            observations=fix if action == "edit" else None,
            target=str(form.get("target", "")) or None,
        )  # fmt: skip
    )
    return RedirectResponse(f"{PREFIX}/review?msg={LESSON_DONE[action]}", status_code=303)


@view
async def dismiss_warning(ui: Pages, request: Request, s: UiSession) -> Response:
    """Dismiss one warning of an automatic write (``id``), or all the caller sees (``all``)."""
    form = await request.form()
    wid = None if form.get("all") else str(form.get("id", "")).strip()
    if wid == "":
        raise InvalidInput("dismiss needs the warning's id (or all)")
    await ui.run(lambda: write_warnings.dismiss(ui.svc, s.identity, wid))
    return RedirectResponse(f"{PREFIX}/review?msg=warning-dismissed", status_code=303)


PAIR_DONE = {"link": "pair-linked", "dismiss": "pair-dismissed"}


@view
async def decide_pair(ui: Pages, request: Request, s: UiSession) -> Response:
    """A decision on two records that may state the same thing: link (the newer replaces the
    older) or dismiss (both stay true) (``server/service/memories/conflicts.py``)."""
    form = await request.form()
    action = str(form.get("action", ""))
    if action not in PAIR_DONE:
        raise InvalidInput(f"unknown action {action!r}")
    older, newer = str(form.get("older", "")), str(form.get("newer", ""))
    await ui.run(lambda: conflicts.decide(ui.svc, s.identity, older, newer, action))
    return RedirectResponse(f"{PREFIX}/review?msg={PAIR_DONE[action]}", status_code=303)


def routes(ui: Pages) -> list:
    return [
        route("/review", review_page),
        route("/review/lessons", decide_lesson, ("POST",)),
        route("/review/warnings", dismiss_warning, ("POST",)),
        route("/review/pairs", decide_pair, ("POST",)),
        route("/review/{id}", decide, ("POST",)),
    ]
