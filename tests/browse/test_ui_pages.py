"""Dashboard pages against a real store (SQLite + Chroma, hash embedder), signed in: each page
shows what the tools would show the same identity, edits go through the service's rules and
revisions, errors become messages, and memory content is always escaped."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest

from graph.lesson_models import LessonInput
from graph.models import EntityInput, Relation
from retrieval.records import Kind, Record, Scope, utcnow
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from server.service.transfers.workspace import ingest_workspace
from tests.ui_util import UiHarness, csrf_of, form_fields

ALICE = Identity(project_id="p1", agent_id="alice")
XSS = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'


def lesson(name: str, message: str, rate: float = 0.8) -> LessonInput:
    return LessonInput.model_validate({
        "name": name, "entityType": "lesson",
        "observations": ["pin the version in the lockfile"],
        "errorPattern": {"type": "dependency", "message": message, "context": "npm install",
                         "stackTrace": None},
        "metadata": {"severity": "high", "environment": {"os": "linux"}, "frequency": 3,
                     "successRate": rate},
        "verificationSteps": [{"command": "npm ci", "expectedOutput": "added 120 packages",
                               "successIndicators": ["added"]}],
    })  # fmt: skip


def turns(who: Identity, session: str, texts: list[str]) -> list[Record]:
    t0 = utcnow()
    return [
        Record(kind=Kind.turn, project_id=who.project_id, agent_id=who.agent_id,
               scope=Scope.private, category="turn", content=text,
               metadata={"session": session, "role": ("user", "assistant")[i % 2], "turn": i,
                         "timestamp": (t0 + timedelta(seconds=i)).isoformat(),
                         "transcript": f"/tmp/{session}.jsonl", "gitBranch": "main",
                         "cwd": "/work/app"})
        for i, text in enumerate(texts)
    ]  # fmt: skip


@pytest.fixture
def ui(tmp_path):
    folder = tmp_path / "repo"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "app.py").write_text("def main():\n    return 'hello from the app'\n" * 5)
    (folder / "README.md").write_text("# Demo\n\nThe app greets whoever runs it.\n")
    (folder / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (folder / "yarn.lock").write_text("lock\n")
    h = UiHarness(tmp_path / "store", env={"PATTERN_ALLOWED_DIRS": str(tmp_path)})
    owner = h.rt.identity
    svc = h.svc
    h.ids = {}
    for i in range(7):
        h.ids[f"p{i}"] = svc.remember(owner, MemoryInput(
            content=f"private note {i} about the deploy pipeline", metadata={"priority": 1 + i % 3,
                                                                            "tags": ["ops"]})).memoryId  # fmt: skip
    h.ids["core"] = svc.core_memory(owner, "I review every migration myself").memoryId
    h.ids["team"] = svc.remember(owner, MemoryInput(content="the release train leaves on Tuesdays",
                                                    scope="team", category="decisions")).memoryId  # fmt: skip
    h.ids["alice_team"] = svc.remember(ALICE, MemoryInput(content="alice: staging uses Postgres 16",
                                                          scope="team")).memoryId  # fmt: skip
    h.ids["alice_private"] = svc.remember(
        ALICE, MemoryInput(content="alice's own secret plan")
    ).memoryId
    h.ids["xss"] = svc.remember(owner, MemoryInput(content=XSS, scope="team")).memoryId
    g = h.rt.graphs
    g.graph.create_entities(owner, [
        EntityInput(name="billing-service", entityType="service", observations=["charges cards nightly", XSS]),
        EntityInput(name="postgres", entityType="database", observations=["version 16"]),
        EntityInput(name="Ada", entityType="person", observations=["owns billing"]),
    ])  # fmt: skip
    g.graph.create_relations(owner, [
        Relation.model_validate({"from": "billing-service", "to": "postgres", "relationType": "stores_in"}),
        Relation.model_validate({"from": "Ada", "to": "billing-service", "relationType": "maintains"}),
    ])  # fmt: skip
    g.lessons.create_lesson(
        owner, lesson("NPM_PEER_CONFLICT", "ERESOLVE unable to resolve dependency tree")
    )
    g.lessons.create_lesson(owner, lesson("NPM_LOCK_DRIFT", "npm ERR! lockfile out of date", 0.5))
    svc.engine.add(turns(owner, "sess-1", ["how do I deploy?", "run make deploy", XSS]))
    svc.engine.add(turns(ALICE, "sess-alice", ["alice's private session"]))
    h.report = ingest_workspace(h.rt, owner, folder)
    h.folder = folder
    yield h
    h.close()


def test_search_shows_recall_ranked_results_with_explanations(ui):
    c = ui.owner()
    r = c.get("/ui/", params={"q": "deploy pipeline"})
    assert r.status_code == 200
    assert "private note" in r.text and "why this rank" in r.text and "fused" in r.text
    assert "alice&#39;s own secret plan" not in r.text and "alice's own secret plan" not in r.text
    part = c.get(
        "/ui/", params={"q": "release train", "scope": "team"}, headers={"HX-Request": "true"}
    )
    assert "<html" not in part.text and "Tuesdays" in part.text and "private note" not in part.text
    kinds = c.get("/ui/", params={"q": "hello from the app", "kind": "chunk"})
    assert "app.py" in kinds.text and "private note" not in kinds.text
    bad = c.get("/ui/", params={"q": "x", "after": "yesterday"})
    assert bad.status_code == 400 and "YYYY-MM-DD" in bad.text


def test_memories_table_pages_and_sorts_per_scope(ui):
    import html
    import re

    c = ui.owner()
    url = "/ui/memories?scope=private&sort=created&dir=asc&limit=3"
    seen, pages = [], 0
    while url:
        r = c.get(url)
        assert r.status_code == 200 and "7 memory records" in r.text
        seen += re.findall(r"(private note \d) about", r.text)
        nxt = re.search(r'id="next-page" href="([^"]+)"', r.text)
        url = html.unescape(nxt.group(1)) if nxt else None
        pages += 1
    assert pages == 3 and seen == [f"private note {i}" for i in range(7)]
    newest = c.get("/ui/memories?scope=private&sort=created&dir=desc&limit=2").text
    assert re.findall(r"(private note \d) about", newest) == ["private note 6", "private note 5"]
    team = c.get("/ui/memories?scope=team&sort=priority&dir=desc")
    assert "Tuesdays" in team.text and "alice: staging" in team.text
    assert "secret plan" not in c.get("/ui/memories?scope=private").text
    assert c.get("/ui/memories?scope=nowhere").status_code == 400
    chunks = c.get("/ui/memories?scope=team&kind=chunk").text
    assert "hello from the app" in chunks


def test_keyset_pages_cover_every_record_once_in_order(ui):
    from server.service.browsing import browse

    owner = ui.rt.identity
    for sort in browse.SORTS:
        for desc in (True, False):
            got, cursor = [], None
            while True:
                page = browse.list_records(ui.svc, owner, "private", sort=sort, descending=desc,
                                           cursor=cursor, limit=2)  # fmt: skip
                got += page.items
                cursor = page.nextCursor
                if cursor is None:
                    break
            assert len({m.id for m in got}) == len(got) == 7, (sort, desc)
            col = {"updated": "updatedAt", "created": "createdAt", "priority": None,
                   "category": "category"}[sort]  # fmt: skip
            keys = [m.metadata.get("priority", 2) if col is None else getattr(m, col) for m in got]
            assert keys == sorted(keys, reverse=desc), (sort, desc)


def test_memory_view_edit_conflict_and_delete(ui):
    c = ui.owner()
    mid = ui.ids["p0"]
    page = c.get(f"/ui/memory/{mid}")
    assert page.status_code == 200 and 'id="edit-form"' in page.text
    token = csrf_of(c)
    r = c.post(f"/ui/memory/{mid}/edit", data={"csrf": token, "revision": "1",
               "content": "private note 0: deploys go through the pipeline", "tags": "ops, ci",
               "priority": "1"})  # fmt: skip
    assert r.status_code == 303 and r.headers["location"].endswith("msg=saved")
    rec = ui.svc.store.get([mid])[mid]
    assert (
        rec.revision == 2
        and rec.tags == ["ops", "ci"]
        and rec.content.startswith("private note 0:")
    )
    # the same stale page (revision 1) saves again: conflict, current text, the draft kept
    stale = c.post(f"/ui/memory/{mid}/edit", data={"csrf": token, "revision": "1",
                   "content": "my stale edit", "tags": "ops", "priority": "2"})  # fmt: skip
    assert stale.status_code == 409
    assert "[conflict]" not in stale.text and "conflict" in stale.text
    assert "is at revision 2, not 1" in stale.text
    assert 'id="current-text">private note 0: deploys go through the pipeline' in stale.text
    assert "my stale edit</textarea>" in stale.text
    assert ui.svc.store.get([mid])[mid].content.startswith("private note 0:")  # untouched
    gone = c.post(f"/ui/memory/{mid}/delete", data={"csrf": token})
    assert gone.status_code == 303 and "msg=deleted" in gone.headers["location"]
    assert not ui.svc.store.get([mid])
    assert c.get(f"/ui/memory/{mid}").status_code == 404


def test_an_edit_leaves_every_field_it_did_not_change_as_it_was(ui):
    """The form sends back every field; one the user did not change is never reinterpreted:
    a tag holding a comma stays one tag when only the text is edited, text with CR LF line
    ends stays as it is when only the priority is, and an edited tag list keeps that tag."""
    owner, c = ui.rt.identity, ui.owner()
    tags = ["release,2026.1", "ci"]
    mid = ui.svc.remember(owner, MemoryInput(content="cut the release", metadata={
        "tags": tags, "priority": 3})).memoryId  # fmt: skip
    form = form_fields(c.get(f"/ui/memory/{mid}").text, "edit-form")
    r = c.post(f"/ui/memory/{mid}/edit", data={**form, "content": "cut the release today"})
    assert r.headers["location"].endswith("msg=saved")
    rec = ui.svc.store.get([mid])[mid]
    assert (rec.content, rec.tags, rec.priority) == ("cut the release today", tags, 3)

    form = form_fields(c.get(f"/ui/memory/{mid}").text, "edit-form")
    r = c.post(f"/ui/memory/{mid}/edit", data={**form, "tags": form["tags"] + ", nightly"})
    assert r.headers["location"].endswith("msg=saved")
    assert ui.svc.store.get([mid])[mid].tags == [*tags, "nightly"]

    crlf = "first line\r\nsecond line\rthird"
    mid = ui.svc.remember(owner, MemoryInput(content=crlf)).memoryId
    form = form_fields(c.get(f"/ui/memory/{mid}").text, "edit-form")
    r = c.post(f"/ui/memory/{mid}/edit", data={**form, "priority": "1"})
    assert r.headers["location"].endswith("msg=saved")
    rec = ui.svc.store.get([mid])[mid]
    assert (rec.content, rec.priority) == (crlf, 1)
    form = form_fields(c.get(f"/ui/memory/{mid}").text, "edit-form")
    r = c.post(f"/ui/memory/{mid}/edit", data=form)  # saved as shown: nothing to write
    assert r.headers["location"].endswith("msg=unchanged")


def test_a_text_edit_posting_the_tags_joined_plainly_keeps_a_tag_holding_a_comma(ui):
    """A client that posts the tags as a plain comma join (a script, an older page) and
    changes only the text does not split a tag that holds a comma."""
    owner, c = ui.rt.identity, ui.owner()
    tags = ["release,2026.1", "ci"]
    mid = ui.svc.remember(owner, MemoryInput(content="Release 2026.1 shipped on Friday.",
                                             metadata={"tags": tags})).memoryId  # fmt: skip
    for joined in (", ".join(tags), ",".join(tags)):
        rev = ui.svc.store.get([mid])[mid].revision
        r = c.post(f"/ui/memory/{mid}/edit", data={"csrf": csrf_of(c), "revision": str(rev),
                   "content": f"Release 2026.1 shipped ({rev}).", "tags": joined,
                   "priority": "2"})  # fmt: skip
        assert r.headers["location"].endswith("msg=saved")
        assert ui.svc.store.get([mid])[mid].tags == tags
    rev = ui.svc.store.get([mid])[mid].revision
    r = c.post(f"/ui/memory/{mid}/edit", data={"csrf": csrf_of(c), "revision": str(rev),
               "tags": "release, 2026.1, ci", "priority": "2"})  # fmt: skip
    assert ui.svc.store.get([mid])[mid].tags == ["release", "2026.1", "ci"]  # an edit: as typed


def test_a_stale_page_with_a_disjoint_edit_merges_and_shows_the_parents(ui):
    c = ui.owner()
    mid = ui.ids["p0"]
    token = csrf_of(c)
    base = ui.svc.store.get([mid])[mid]
    first = base.content + " Second sentence from tab one."
    r = c.post(f"/ui/memory/{mid}/edit", data={"csrf": token, "revision": "1", "content": first,
               "priority": str(base.priority)})  # fmt: skip
    assert r.headers["location"].endswith("msg=saved")
    stale = "Edited: " + base.content  # made from revision 1, before tab one's edit
    r = c.post(f"/ui/memory/{mid}/edit", data={"csrf": token, "revision": "1", "content": stale,
               "priority": str(base.priority)})  # fmt: skip
    assert r.status_code == 303 and r.headers["location"].endswith("msg=merged")
    rec = ui.svc.store.get([mid])[mid]
    assert rec.revision == 3 and rec.content == "Edited: " + first
    page = c.get(r.headers["location"])
    assert 'id="merged"' in page.text
    assert "from revision 2 and an edit made from revision 1" in page.text


def test_the_tools_rules_apply_and_errors_are_messages(ui):
    c = ui.owner()
    token = csrf_of(c)
    other = ui.ids["alice_team"]
    page = c.get(f"/ui/memory/{other}")
    assert page.status_code == 200 and 'id="edit-form"' not in page.text
    r = c.post(
        f"/ui/memory/{other}/edit", data={"csrf": token, "revision": "1", "content": "mine now"}
    )
    assert r.status_code == 403 and "only the agent that created memory" in r.text
    r = c.post(f"/ui/memory/{other}/delete", data={"csrf": token})
    assert r.status_code == 403 and ui.svc.store.get([other])
    assert c.get(f"/ui/memory/{ui.ids['alice_private']}").status_code == 404  # invisible
    core = ui.ids["core"]
    r = c.post(f"/ui/memory/{core}/delete", data={"csrf": token})
    assert r.status_code == 403 and "core_protected" in r.text and ui.svc.store.get([core])
    r = c.post(f"/ui/memory/{core}/delete", data={"csrf": token, "force": "on"})
    assert r.status_code == 303 and not ui.svc.store.get([core])


def test_memory_content_is_escaped_everywhere(ui):
    c = ui.owner()
    pages = [
        f"/ui/memory/{ui.ids['xss']}",
        "/ui/memories?scope=team",
        "/ui/?q=script+onerror",
        "/ui/graph/entity?scope=team&name=billing-service",
        "/ui/activity",
        "/ui/sessions/sess-1",
    ]
    for path in pages:
        r = c.get(path)
        assert r.status_code == 200, path
        assert "<script>window.pwned" not in r.text and "<img src=x" not in r.text, path
        assert (
            "&lt;script&gt;window.pwned=1&lt;/script&gt;" in r.text or "&lt;script&gt;" in r.text
        ), path
    r = c.get("/ui/graph?q=billing")
    assert "<script>window.pwned" not in r.text and "<img src=x" not in r.text


def test_edit_then_approve_without_a_change_approves_the_text_as_proposed(tmp_path):
    h = UiHarness(tmp_path / "store", env={"PATTERN_TEAM_REVIEW": "on"})
    try:
        text = "use ruff format\r\nnot black"
        mid = h.svc.remember(ALICE, MemoryInput(content=text)).memoryId
        alice = h.token_client(h.tokens.create("alice", "p1"))
        alice.post(
            f"/ui/memory/{mid}/share", data={"csrf": csrf_of(alice), "category": "decisions"}
        )
        owner = h.owner()
        pid = h.svc.store.reader.execute("SELECT id FROM proposals").fetchone()[0]
        form = form_fields(owner.get("/ui/review").text, f"edit-{pid}")
        r = owner.post(f"/ui/review/{pid}", data={**form, "action": "edit"})
        assert r.status_code == 303 and r.headers["location"].endswith("msg=approved")
        (shared,) = h.svc.store.reader.execute(
            "SELECT shared_memory_id FROM proposals WHERE id=?", (pid,)
        ).fetchone()
        rec = h.svc.store.get([shared])[shared]
        assert rec.content == text and rec.metadata["review"]["edited"] is False
    finally:
        h.close()


def test_share_proposes_under_review_and_the_inbox_approves(tmp_path):
    h = UiHarness(tmp_path / "store", env={"PATTERN_TEAM_REVIEW": "on"})
    try:
        mid = h.svc.remember(ALICE, MemoryInput(content="use ruff format, not black")).memoryId
        alice = h.token_client(h.tokens.create("alice", "p1"))
        r = alice.post(
            f"/ui/memory/{mid}/share", data={"csrf": csrf_of(alice), "category": "decisions"}
        )
        assert r.status_code == 303 and r.headers["location"].endswith("msg=proposed")
        mine = alice.get("/ui/review")
        assert "use ruff format" in mine.text and "not a reviewer" in mine.text
        assert "Approve</button>" not in mine.text
        owner = h.owner()
        inbox = owner.get("/ui/review")
        assert "use ruff format" in inbox.text and "Approve</button>" in inbox.text
        assert 'class="badge"' in inbox.text  # one pending in the header
        pid = h.svc.store.reader.execute("SELECT id FROM proposals").fetchone()[0]
        token = csrf_of(owner)
        stale = owner.post(
            f"/ui/review/{pid}", data={"csrf": token, "action": "approve", "revision": "1"}
        )
        assert stale.status_code == 409 and "changed since" in stale.text
        r = owner.post(f"/ui/review/{pid}", data={"csrf": token, "action": "edit", "revision": "2",
                                                  "content": "Use `ruff format` (not black).",
                                                  "category": "decisions"})  # fmt: skip
        assert r.status_code == 303 and r.headers["location"].endswith("msg=approved")
        team = alice.get("/ui/memories?scope=team").text
        assert "Use `ruff format` (not black)." in team
        mid2 = h.svc.remember(ALICE, MemoryInput(content="tabs are fine")).memoryId
        alice.post(f"/ui/memory/{mid2}/share", data={"csrf": csrf_of(alice)})
        pid2 = h.svc.store.reader.execute(
            "SELECT id FROM proposals WHERE status='pending'").fetchone()[0]  # fmt: skip
        r = owner.post(f"/ui/review/{pid2}", data={"csrf": token, "action": "reject", "revision": "2",
                                                   "reason": "the style guide says spaces"})  # fmt: skip
        assert r.status_code == 303
        page = alice.get(f"/ui/memory/{mid2}")
        assert "the style guide says spaces" in page.text and "rejected" in page.text
    finally:
        h.close()


def test_graph_pages(ui):
    c = ui.owner()
    page = c.get("/ui/graph")
    assert page.status_code == 200 and "5 of 5 entities" in page.text and 'id="cy"' in page.text
    data = c.get("/ui/graph/data").json()
    assert {n["data"]["id"] for n in data["nodes"]} >= {"billing-service", "postgres", "Ada"}
    assert {(e["data"]["source"], e["data"]["target"]) for e in data["edges"]} == {
        ("billing-service", "postgres"), ("Ada", "billing-service")}  # fmt: skip
    panel = c.get(
        "/ui/graph/entity", params={"name": "billing-service"}, headers={"HX-Request": "1"}
    )
    assert "charges cards nightly" in panel.text and "stores_in" in panel.text
    assert "maintains" in panel.text and "Ada" in panel.text  # incoming relation too
    found = c.get("/ui/graph/data", params={"q": "database version"}).json()
    assert "postgres" in found["focus"]
    assert c.get("/ui/graph/entity", params={"name": "nobody"}).status_code == 404
    assert c.get("/ui/graph", params={"scope": "private"}).status_code == 200


def test_lessons_page_and_find_similar(ui):
    c = ui.owner()
    page = c.get("/ui/lessons")
    assert "NPM_PEER_CONFLICT" in page.text and "80 %" in page.text and "npm ci" in page.text
    sim = c.get(
        "/ui/lessons/similar", params={"name": "NPM_PEER_CONFLICT"}, headers={"HX-Request": "1"}
    )
    assert (
        sim.status_code == 200 and "NPM_PEER_CONFLICT" in sim.text and "(this lesson)" in sim.text
    )


def test_sessions_group_turns_in_order(ui):
    c = ui.owner()
    page = c.get("/ui/sessions")
    assert "sess-1" in page.text and "sess-alice" not in page.text  # alice's turns are private
    one = c.get("/ui/sessions/sess-1")
    text = one.text
    assert (
        text.index("how do I deploy?")
        < text.index("run make deploy")
        < text.index("&lt;script&gt;")
    )
    assert c.get("/ui/sessions/sess-alice").text.count('class="turn ') == 0


def test_a_session_page_orders_exchanges_and_their_parts(ui):
    """Exchanges by first turn, a long one's parts in order; a page may end inside one."""
    from server.service.browsing import browse

    owner = ui.rt.identity
    t0 = utcnow()
    spans = [(3, 4, 0, 1), (0, 2, 2, 3), (0, 2, 0, 3), (0, 2, 1, 3)]  # stored out of order
    ui.svc.engine.add([
        Record(kind=Kind.turn, project_id=owner.project_id, agent_id=owner.agent_id,
               scope=Scope.private, category="turn", content=f"text of {a}-{b} part {p}",
               metadata={"session": "sess-long", "role": "exchange", "turn": a, "last_turn": b,
                         "part": p, "parts": n, "timestamp": (t0 + timedelta(seconds=a)).isoformat()})
        for a, b, p, n in spans
    ])  # fmt: skip
    order = [(r.metadata["turn"], r.metadata["part"]) for r in
             browse.session_turns(ui.svc, owner, "sess-long")[0]]  # fmt: skip
    assert order == [(0, 0), (0, 1), (0, 2), (3, 0)]
    page, more = browse.session_turns(ui.svc, owner, "sess-long", limit=2)
    assert more and [r.metadata["part"] for r in page] == [0, 1]
    rest, more = browse.session_turns(ui.svc, owner, "sess-long", after=0, after_part=1)
    assert not more and [(r.metadata["turn"], r.metadata["part"]) for r in rest] == [(0, 2), (3, 0)]
    c = ui.owner()
    text = c.get("/ui/sessions/sess-long", params={"after": 0, "part": 1}).text
    assert "text of 0-2 part 2" in text and "text of 0-2 part 0" not in text
    assert "turns 0–2 · part 3/3" in text and "turns 3–4 ·" in text
    assert "text of 0-2 part 0" not in c.get("/ui/sessions/sess-long?after=0").text


def test_workspace_lists_roots_files_skips_and_reingests(ui):
    c = ui.owner()
    page = c.get("/ui/workspace")
    assert str(ui.folder) in page.text
    assert "logo.png" in page.text and "yarn.lock" in page.text  # skipped, with reasons
    assert "app.py" in page.text and "indexed" in page.text
    (ui.folder / "NOTES.md").write_text("# Notes\n\nA new file appears before the re-ingest.\n")
    r = c.post("/ui/workspace/ingest", data={"csrf": csrf_of(c), "root": str(ui.folder)},
               headers={"HX-Request": "1"})  # fmt: skip
    assert r.status_code == 200 and "Re-ingesting" in r.text or "Re-ingested" in r.text
    job_id = r.text.split('id="job-')[1].split('"')[0]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        part = c.get(f"/ui/workspace/job/{job_id}", headers={"HX-Request": "1"}).text
        if 'data-done="yes"' in part:
            break
        time.sleep(0.1)
    assert "1 indexed" in part and "Done in" in part
    outside = c.post("/ui/workspace/ingest", data={"csrf": csrf_of(c), "root": "/etc"})
    assert outside.status_code == 403 and "outside the allowed directories" in outside.text


def test_health_page(ui):
    c = ui.owner()
    r = c.get("/ui/health")
    assert r.status_code == 200 and "hash" in r.text and "vector write" in r.text
    assert "memory" in r.text and "Orphan vectors" in r.text and "count them" in r.text
    counted = c.get("/ui/health?orphans=1")
    assert counted.status_code == 200 and 'id="orphans">0 (store-wide' in counted.text
    token = ui.token_client(ui.tokens.create("alice", "p1"))
    other = token.get("/ui/health?orphans=1").text  # not the owner: no store-wide count
    assert "count them" not in other and "counted by the store owner" in other
    assert 'id="replica-lag">none: one SQLite store' in r.text


@pytest.mark.backends("postgres")
def test_health_page_shows_the_replica(tmp_path, store_url):
    """With PATTERN_STORE_URL the health page shows this daemon's replica: node, lag in log rows
    (0 right after its own write: read-your-writes), applied/head, rebuilds."""
    h = UiHarness(tmp_path / "store", env={"PATTERN_STORE_URL": store_url})
    try:
        h.svc.remember(h.rt.identity, MemoryInput(content="written through PostgreSQL"))
        text = h.owner().get("/ui/health").text
        assert 'id="replica-lag">0 log rows behind' in text and "PostgreSQL" in text
        assert "password" not in text.lower()
    finally:
        h.close()


def test_activity_stream_sends_visible_changes_only(ui):
    c = ui.owner()
    page = c.get("/ui/activity")
    assert "Tuesdays" in page.text
    head = int(page.text.split("after=")[1].split('"')[0])
    ui.svc.remember(ui.rt.identity, MemoryInput(content="fresh team note", scope="team"))
    ui.svc.remember(ALICE, MemoryInput(content="alice private change"))  # invisible to owner
    ui.svc.remember(ALICE, MemoryInput(content="alice team change", scope="team"))
    ui.dashboard.stream_seconds = 1.0
    ui.dashboard.poll_seconds = 0.2
    body = c.get(f"/ui/activity/stream?after={head}").text
    events = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: {")]
    texts = [e["text"] for e in events]
    assert texts == ["fresh team note", "alice team change"]
    assert [e["agent"] for e in events] == ["owner", "alice"]
    only = c.get(f"/ui/activity/stream?after={head}&agent=alice").text
    assert [json.loads(x[6:])["text"] for x in only.splitlines() if x.startswith("data: {")] == [
        "alice team change"
    ]
    kinds = c.get(f"/ui/activity/stream?after={head}&kind=observation").text
    assert "data: {" not in kinds and f"id: {head + 3}" in kinds  # the cursor still moves on
    assert c.get("/ui/activity?kind=nonsense").status_code == 400


def test_schema_v7_migrates_a_v6_store_and_its_indexes_serve_the_lists(tmp_path):
    import sqlite3

    from retrieval.storage import schema
    from retrieval.storage.store import SQLiteStore

    path = tmp_path / "db.sqlite3"
    SQLiteStore(path).close()
    conn = sqlite3.connect(str(path), isolation_level=None)
    for name in ("proposals", "ingest_runs"):
        conn.execute(f"DROP TABLE {name}")
    for name in ("records_bucket_updated", "records_bucket_created", "records_bucket_priority",
                 "records_turns"):  # fmt: skip
        conn.execute(f"DROP INDEX {name}")
    conn.execute("DROP TABLE record_revisions")  # and what v8 added
    conn.execute("ALTER TABLE entities DROP COLUMN revision")
    conn.execute("PRAGMA user_version = 6")
    conn.close()
    store = SQLiteStore(path)
    try:
        assert store.reader.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        plan = lambda sql, params: " ".join(  # noqa: E731
            r["detail"] for r in store.reader.execute("EXPLAIN QUERY PLAN " + sql, params)
        )
        for col, index in (("updated_at", "records_bucket_updated"),
                           ("created_at", "records_bucket_created"),
                           ("priority", "records_bucket_priority")):  # fmt: skip
            sql = (f"SELECT rowid, id FROM records WHERE bucket=? AND kind=? AND ({col}, rowid) "
                   f"< (?, ?) ORDER BY {col} DESC, rowid DESC LIMIT 50")  # fmt: skip
            got = plan(sql, ["b", "memory", "x", 1])
            assert index in got and "TEMP B-TREE" not in got, got
        sql = ("SELECT id FROM records WHERE kind='turn' AND bucket=? AND "
               "json_extract(metadata, '$.session') = ? ORDER BY "
               "CAST(json_extract(metadata, '$.turn') AS INTEGER) LIMIT 100")  # fmt: skip
        assert "records_turns" in plan(sql, ["b", "s"])
        assert store.reader.execute("SELECT count(*) FROM proposals").fetchone()[0] == 0
    finally:
        store.close()


def test_expired_records_are_neither_listed_nor_counted(ui):
    from server.service.browsing import browse

    owner = ui.rt.identity
    gone = Record(project_id="p1", agent_id="owner", scope=Scope.private, category="recent",
                  content="an expired note", expires_at=utcnow() - timedelta(hours=1))  # fmt: skip
    ui.svc.engine.add([gone])
    page = browse.list_records(ui.svc, owner, "private")
    assert page.total == 7 and "an expired note" not in [m.content for m in page.items]
    assert "an expired note" not in ui.owner().get("/ui/memories?scope=private").text


def test_activity_page_filters_by_agent_and_kind(ui):
    import re

    c = ui.owner()
    rows = lambda html: re.findall(r'<tr data-seq="\d+">(.*?)</tr>', html, re.S)  # noqa: E731
    alice = rows(c.get("/ui/activity?agent=alice").text)
    assert alice and all("<code>alice</code>" in r for r in alice)
    assert any("staging uses Postgres 16" in r for r in alice)
    assert not any("secret plan" in r for r in alice)  # her private memory: invisible
    turns = rows(c.get("/ui/activity?kind=turn").text)
    assert len(turns) == 3 and all("<td>turn</td>" in r for r in turns)
    everything = rows(c.get("/ui/activity").text)
    assert len(everything) >= len(alice) + len(turns) and len(everything) <= 50


def test_sessions_pages_show_a_transcript_indexed_by_the_session_indexer(tmp_path):
    """The Sessions pages read what the real indexer writes (not only hand-made turn records)."""
    from server.service.indexing.sessions import SessionIndexer
    from tests.transcript_util import TranscriptWriter

    h = UiHarness(tmp_path / "store")
    try:
        w = TranscriptWriter(tmp_path / "s.jsonl", session="sess-real", cwd="/repo", branch="dev")
        w.user("Where is the retry logic?")
        w.assistant("In net/retry.py, with exponential backoff.")
        w.tool("Bash", {"command": "pytest tests/test_retry.py"}, "FAILED test_backoff", is_error=True)  # fmt: skip
        w.user("Fix it please.")
        report = SessionIndexer(h.svc).index_file(h.rt.identity, w.path, flush=True)
        assert report.added == 2  # two exchanges
        c = h.owner()
        listing = c.get("/ui/sessions").text
        assert "sess-real" in listing and "<td>4</td>" in listing and "dev" in listing  # turns
        page = c.get("/ui/sessions/sess-real").text
        assert page.index("Where is the retry logic?") < page.index("FAILED test_backoff")
        assert page.index("FAILED test_backoff") < page.index("In net/retry.py")
        assert page.index("In net/retry.py") < page.index("Fix it please.")
        assert page.count("role-exchange") == 2 and "turns 0–2" in page and "turn 3 ·" in page
    finally:
        h.close()


def test_memory_page_shows_its_update_chain_and_undoes_a_link(ui):
    c = ui.owner()
    owner = ui.rt.identity
    old = ui.ids["team"]
    new = ui.svc.remember(owner, MemoryInput(content="the release train leaves every day",
                                             scope="team", category="decisions",
                                             supersedes=[old])).memoryId  # fmt: skip
    page = c.get(f"/ui/memory/{old}")
    assert page.status_code == 200 and 'id="updates"' in page.text
    assert 'id="updated-by"' in page.text and f"/ui/memory/{new}" in page.text
    assert "the release train leaves every day" in page.text
    r = c.post(f"/ui/memory/{new}/unlink", data={"csrf": csrf_of(c), "older": old, "newer": new})
    assert r.status_code == 303 and r.headers["location"].endswith("msg=unlinked")
    assert ui.svc.store.get([old])[old].updated_by is None
    again = c.get(f"/ui/memory/{old}")
    assert 'id="updated-by"' not in again.text and "undone" in again.text
    assert "unlink-form" not in again.text  # nothing left to undo
