"""Dashboard pages: login, search, memories (table, view, edit, delete, share), health,
projects. Each calls ``server/service`` as the signed-in identity."""

from __future__ import annotations

import csv
import typing
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from retrieval.records import Kind
from server.service.browsing import browse, review
from server.service.core.errors import Conflict, InvalidInput
from server.service.core.maintenance import health, orphan_vectors
from server.service.core.models import RecallInput
from server.service.core.scopes import ALL_CATEGORIES
from server.service.core.scopes import SCOPE_NAMES as SCOPES
from server.service.memories import merge
from server.service.recalling.recall import recall
from server.service.updating import supersede

from .logins import COOKIE, LOGIN_COOKIE, SESSION_MAX, UiSession
from .pages import PREFIX, Pages, route, view

QUOTE = '"'
MESSAGES = {
    "saved": "Saved.",
    "unchanged": "Nothing changed.",
    "merged": "Saved: merged with the changes made since you opened the page.",
    "deleted": "Deleted.",
    "shared": "Shared with the team.",
    "proposed": "Proposed for the team: a reviewer approves or rejects it.",
    "approved": "Approved: the memory moved to the team scope.",
    "rejected": "Rejected: the memory stays private, with your reason.",
    "lesson-accepted": "Accepted: the lesson is reviewed.",
    "lesson-merged": "Merged: its fix is an alternative of the other lesson now.",
    "lesson-rejected": "Rejected: the lesson is deleted; the same error is not learned again.",
    "warning-dismissed": "Dismissed.",
    "project": "Switched project.",
    "unlinked": "Link undone: the older memory is current again.",
    "pair-linked": "Linked: recall puts the newer first and marks the older as updated.",
    "pair-dismissed": "Dismissed: both stay as they are; the pair is not offered again.",
}
HEALTH_SHOWN = {"status", "version", "projectId", "agentId", "subagent", "store",
                "embeddingModel", "embeddingBackend", "modelReady", "ranking",
                "lexicalPostings", "records", "pendingVectorWrites", "issues", "view",
                "orphanVectors", "replica"}  # fmt: skip


def recall_kinds() -> list[str]:
    """The kinds ``recall`` accepts (its input model says; the session indexer adds turn)."""

    def literals(tp) -> list[str]:
        if typing.get_origin(tp) is typing.Literal:
            return [str(a) for a in typing.get_args(tp)]
        return [x for a in typing.get_args(tp) for x in literals(a)]

    return literals(RecallInput.model_fields["kinds"].annotation) or [k.value for k in Kind]


def validated(model, **kw):
    try:
        return model(**kw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise InvalidInput(f"{where}: {first['msg']}") from None


def day(text: str | None, end: bool = False) -> datetime | None:
    if not text:
        return None
    try:
        d = datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise InvalidInput(f"dates are YYYY-MM-DD, got {text[:20]!r}") from None
    return d + timedelta(days=1) if end else d - timedelta(microseconds=1)


def tags_of(text: str | None) -> list[str]:
    """Tags typed in a form: comma-separated; a tag in double quotes may hold commas (its own
    quotes doubled), as :func:`tags_text` writes it."""
    row = next(csv.reader([" ".join((text or "").splitlines())], skipinitialspace=True), [])
    return [t.strip() for t in row if t.strip()]


def tags_text(tags: Sequence[str]) -> str:
    """Tags as a form shows them, read back exactly by :func:`tags_of`."""
    return ", ".join(
        f'"{t.replace(QUOTE, QUOTE * 2)}"' if "," in t or QUOTE in t else t for t in tags
    )


def same_tags(text: str, tags: Sequence[str]) -> bool:
    """Whether the tags field ``text`` came back as a form shows ``tags``: written by
    :func:`tags_text`, or joined with commas as a plain form (or a script) writes them. A tag
    holding a comma then stays one tag when only the text was edited."""
    sent = one_line(text)
    return sent in (one_line(tags_text(tags)), one_line(", ".join(tags)), one_line(",".join(tags)))


def lines(text: str) -> str:
    """``text`` with the line ends a browser sends (CR LF) or a store may hold, as LF."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def one_line(text: str) -> str:
    """``text`` as a text input gives it back (a browser removes its line breaks)."""
    return text.replace("\r", "").replace("\n", "")


def msg(request: Request) -> str | None:
    return MESSAGES.get(request.query_params.get("msg", ""))


def signed_in(s: UiSession, request: Request, to: str = f"{PREFIX}/") -> Response:
    resp = RedirectResponse(to, status_code=303)
    resp.set_cookie(
        COOKIE, s.id, max_age=SESSION_MAX, path=PREFIX, httponly=True, samesite="strict",
        secure=request.url.scheme == "https",
    )  # fmt: skip
    resp.delete_cookie(LOGIN_COOKIE, path=PREFIX, httponly=True, samesite="strict")
    return resp


# ---------------------------------------------------------------------- login
async def login(request: Request) -> Response:
    import secrets

    ui: Pages = request.app.state.ui
    error = None
    status = 200
    if request.method == "GET" and "t" in request.query_params:
        s = ui.logins.redeem_link(request.query_params["t"])
        if s is not None:
            return signed_in(s, request)
        error = (
            "This login link is invalid, expired or already used: run `pattern-memory ui` again."
        )
        status = 403
    elif request.method == "POST":
        form = await request.form()
        header = request.headers.get("authorization", "")
        bearer = header[7:] if header.lower().startswith("bearer ") else None
        if bearer is None:  # a form post must carry the login form's own CSRF token
            expected = request.cookies.get(LOGIN_COOKIE)
            if not expected or not secrets.compare_digest(expected, str(form.get("csrf", ""))):
                error, status = "The login form expired: try again.", 403
            bearer = str(form.get("token", ""))
        if error is None:
            project = str(form.get("project", "")).strip() or None
            s = await ui.run(lambda: ui.logins.login_with_token(bearer, project))
            if s is not None:
                return signed_in(s, request)
            error, status = "That token is not valid here.", 401
    token = secrets.token_urlsafe(24)
    resp = ui.templates.TemplateResponse(
        request, "login.html", {"error": error, "csrf": token}, status_code=status
    )
    resp.set_cookie(LOGIN_COOKIE, token, max_age=900, path=PREFIX, httponly=True,
                    samesite="strict", secure=request.url.scheme == "https")  # fmt: skip
    return resp


@view
async def logout(ui: Pages, request: Request, s: UiSession) -> Response:
    ui.logins.logout(s.id)
    resp = RedirectResponse(f"{PREFIX}/login", status_code=303)
    resp.delete_cookie(COOKIE, path=PREFIX, httponly=True, samesite="strict")
    return resp


# ---------------------------------------------------------------------- search
@view
async def search(ui: Pages, request: Request, s: UiSession) -> Response:
    q = request.query_params
    form = {k: q.get(k, "").strip() for k in ("q", "scope", "category", "kind", "tags", "after",
                                               "before")}  # fmt: skip

    def build() -> dict:
        ctx = {"form": form, "scopes": SCOPES, "categories": ALL_CATEGORIES,
               "kinds": recall_kinds(), "active": "search", "result": None}  # fmt: skip
        if form["q"]:
            args = validated(
                RecallInput, query=form["q"], budget=200_000, unit="chars", limit=20,
                kinds=[form["kind"]] if form["kind"] else None,
                scopes=[form["scope"]] if form["scope"] else None,
                categories=[form["category"]] if form["category"] else None,
                tags=tags_of(form["tags"]) or None,
                createdAfter=day(form["after"]), createdBefore=day(form["before"], end=True),
            )  # fmt: skip
            ctx["result"] = recall(ui.svc, s.identity, args)
        return ctx

    if request.headers.get("hx-request"):
        return ui.render(request, s, "_results.html", await ui.run(build))
    return await ui.page(request, s, "search.html", build)


# ---------------------------------------------------------------------- memories
@view
async def memories(ui: Pages, request: Request, s: UiSession) -> Response:
    q = request.query_params
    scope = q.get("scope", "private")
    sort = q.get("sort", "updated")
    desc = q.get("dir", "desc") != "asc"
    kind = q.get("kind", "memory")
    try:
        limit = int(q.get("limit", "50"))
    except ValueError:
        raise InvalidInput("limit must be a number") from None

    def build() -> dict:
        page = browse.list_records(ui.svc, s.identity, scope, kind=kind, sort=sort,
                                   descending=desc, cursor=q.get("cursor") or None,
                                   limit=limit)  # fmt: skip
        return {"page": page, "scope": scope, "scopes": SCOPES, "sort": sort, "desc": desc,
                "kind": kind, "limit": limit, "kinds": [k.value for k in Kind], "active": "memories",
                "message": msg(request)}  # fmt: skip

    return await ui.page(request, s, "memories.html", build)


def memory_context(ui: Pages, s: UiSession, memory_id: str) -> dict:
    rec = browse.get_record(ui.svc, s.identity, memory_id)
    policy = ui.policy()
    return {
        "rec": rec,
        # a merged revision: [the revision it was written over, the one its edit was made from]
        "parents": merge.parents_of(ui.svc.store.reader, rec.id, [rec.revision]).get(rec.revision),
        "tags_text": tags_text(rec.tags),
        "own": rec.agent_id == s.identity.agent_id,
        "editable": rec.agent_id == s.identity.agent_id and rec.kind is Kind.memory,
        "shareable": rec.agent_id == s.identity.agent_id and rec.scope.value in SCOPES[:2],
        "review_on": policy.enabled(s.identity.project_id),
        "proposals": review.proposals_for_memory(ui.svc, s.identity, memory_id),
        "team_categories": ("learnings", "decisions", "architecture"),
        "active": "memories",
        **update_chain(ui, s, rec.id),
    }


def update_chain(ui: Pages, s: UiSession, memory_id: str) -> dict:
    """The update links around a memory (older -> newer, both ways) and the records they join."""
    chain = supersede.chain(ui.svc, s.identity, memory_id)
    ids = list(dict.fromkeys(x for lk in chain for x in (lk.older, lk.newer)))
    return {"chain": chain, "linked": ui.svc.store.get(ids) if ids else {}}


@view
async def memory(ui: Pages, request: Request, s: UiSession) -> Response:
    mid = request.path_params["id"]
    return await ui.page(
        request, s, "memory.html", lambda: {**memory_context(ui, s, mid), "message": msg(request)}
    )


def shown(ui: Pages, rec, revision: int) -> tuple[str, list[str], int]:
    """(content, tags, priority) of a memory as its edit form showed them: at the revision the
    page was made from (kept in the history when the memory changed since), else as now."""
    if revision != rec.revision:
        base = merge.base_of(ui.svc.store.reader, rec.id, revision)
        if base is not None:
            content, meta = base
            return content, list(meta.get("tags") or []), int(meta.get("priority") or 2)
    return rec.content, list(rec.tags), rec.priority


@view
async def edit_memory(ui: Pages, request: Request, s: UiSession) -> Response:
    """Save what the user changed, and only that: a field that comes back as the page showed
    it (up to what a browser does to it: line ends, line breaks in an input) is not sent, so
    the form never reinterprets a field the user did not touch."""
    mid = request.path_params["id"]
    form = await request.form()
    raw_content, raw_tags = form.get("content"), form.get("tags")
    content = "" if raw_content is None else lines(str(raw_content))
    try:
        expected = int(str(form.get("revision", "")))
    except ValueError:
        raise InvalidInput("the form lost its revision: reload the page") from None
    priority = str(form.get("priority", "")).strip()

    def save() -> str:
        rec = browse.get_record(ui.svc, s.identity, mid)
        was_content, was_tags, was_priority = shown(ui, rec, expected)
        patch: dict = {}
        if raw_tags is not None and not same_tags(str(raw_tags), was_tags):
            tags = tags_of(str(raw_tags))
            if tags != was_tags:
                patch["tags"] = tags or None
        if priority and int(priority) != was_priority:
            patch["priority"] = int(priority)
        changed = raw_content is not None and content != lines(was_content)
        text = content if changed else None
        if text is None and not patch:
            if rec.revision != expected:  # nothing of ours to write, but the page is stale
                raise ui.svc.conflict(mid, rec.revision, expected)
            return "unchanged"
        res = ui.svc.update_memory(s.identity, mid, text, patch or None, expected)
        return "merged" if res.merged else "saved"

    try:
        done = await ui.run(save)
    except Conflict as exc:  # a stale page: show the message, the current text and our draft
        conflict = exc
        return await ui.page(
            request, s, "memory.html",
            lambda: {**memory_context(ui, s, mid), "conflict": conflict, "draft": content},
            status=409,
        )  # fmt: skip
    return RedirectResponse(f"{PREFIX}/memory/{mid}?msg={done}", status_code=303)


@view
async def delete_memory(ui: Pages, request: Request, s: UiSession) -> Response:
    mid = request.path_params["id"]
    form = await request.form()
    force = form.get("force") == "on"

    def forget() -> str:
        scope = browse.get_record(ui.svc, s.identity, mid).scope.value
        ui.svc.forget(s.identity, mid, force)
        return scope

    scope = await ui.run(forget)
    return RedirectResponse(f"{PREFIX}/memories?scope={scope}&msg=deleted", status_code=303)


@view
async def share_memory(ui: Pages, request: Request, s: UiSession) -> Response:
    mid = request.path_params["id"]
    form = await request.form()
    category = str(form.get("category", "learnings"))
    keep = form.get("keep") == "on"
    res = await ui.run(
        lambda: review.share_learning(ui.svc, ui.policy(), s.identity, mid, category, keep)
    )
    if res.status == "proposed":
        return RedirectResponse(f"{PREFIX}/memory/{mid}?msg=proposed", status_code=303)
    return RedirectResponse(f"{PREFIX}/memory/{res.memoryId}?msg=shared", status_code=303)


@view
async def unlink_memory(ui: Pages, request: Request, s: UiSession) -> Response:
    """Undo a wrong update link: the older memory is current again (the link is kept, undone,
    so it is not detected again)."""
    mid = request.path_params["id"]
    form = await request.form()
    older, newer = str(form.get("older", "")), str(form.get("newer", ""))
    await ui.run(lambda: supersede.undo(ui.svc, s.identity, older, newer))
    return RedirectResponse(f"{PREFIX}/memory/{mid}?msg=unlinked", status_code=303)


# ---------------------------------------------------------------------- health, projects
@view
async def health_page(ui: Pages, request: Request, s: UiSession) -> Response:
    count_orphans = s.is_owner and request.query_params.get("orphans") == "1"

    def build() -> dict:
        res = health(ui.svc, s.identity, ui.rt.model_error)
        if count_orphans:  # store-wide, like `pattern-memory stats`: the owner only, on demand
            res.orphanVectors = orphan_vectors(ui.svc)
        h = res.model_dump(mode="json")
        extra = {k: v for k, v in h.items() if k not in HEALTH_SHOWN}
        return {"h": h, "extra": extra, "size": browse.store_size(ui.svc), "active": "health"}

    return await ui.page(request, s, "health.html", build)


@view
async def projects_page(ui: Pages, request: Request, s: UiSession) -> Response:
    if request.method == "POST":
        form = await request.form()
        project = str(form.get("project", "")).strip()
        if not project or not ui.logins.switch_project(s, project):
            raise InvalidInput(f"you cannot act in project {project!r} with this login")
        return RedirectResponse(f"{PREFIX}/?msg=project", status_code=303)
    return await ui.page(
        request, s, "projects.html",
        lambda: {"projects": browse.projects(ui.svc), "active": "projects"},
    )  # fmt: skip


async def root(request: Request) -> Response:
    return RedirectResponse(f"{PREFIX}/", status_code=307)


def routes(ui: Pages) -> list:
    return [
        route("", root),
        route("/login", login, ("GET", "POST")),
        route("/logout", logout, ("POST",)),
        route("/", search),
        route("/memories", memories),
        route("/memory/{id}", memory),
        route("/memory/{id}/edit", edit_memory, ("POST",)),
        route("/memory/{id}/delete", delete_memory, ("POST",)),
        route("/memory/{id}/share", share_memory, ("POST",)),
        route("/memory/{id}/unlink", unlink_memory, ("POST",)),
        route("/health", health_page),
        route("/projects", projects_page, ("GET", "POST")),
    ]
