"""The review inbox's records that may state the same thing, through the dashboard's routes: a
pair a write listed is shown (escaped, secrets redacted), linked or dismissed by a person, and
the link undone from the memory page; another agent's private pair is never shown."""

from __future__ import annotations

import pytest

from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from tests.mcp_util import FakeClock
from tests.ui_util import UiHarness, csrf_of

OLD = "The payments queue runs on RabbitMQ <b>in</b> the eu-west cluster."
NEW = "We moved the payments queue from RabbitMQ to SQS."


@pytest.fixture
def ui(tmp_path):
    h = UiHarness(tmp_path / "store")
    h.clock = FakeClock()
    h.svc.clock = h.clock  # writes an hour and more apart
    yield h
    h.close()


def pair(h, who, old_text=OLD, new_text=NEW, scope="team"):
    old = h.svc.remember(who, MemoryInput(content=old_text, scope=scope)).memoryId
    h.clock.advance(days=1)
    new = h.svc.remember(who, MemoryInput(content=new_text, scope=scope))
    assert new.candidates and new.candidates[0].startswith(old)
    return old, new.memoryId


def test_the_inbox_lists_a_pair_and_a_person_links_it_then_undoes_it(ui):
    c = ui.owner()
    old, new = pair(ui, ui.rt.identity)
    page = c.get("/ui/review").text
    assert 'id="pairs"' in page and f"/ui/memory/{old}" in page and f"/ui/memory/{new}" in page
    assert "&lt;b&gt;in&lt;/b&gt;" in page and "<b>in</b>" not in page
    assert page.index('id="pairs"') < page.index("<h2>Proposals</h2>")
    r = c.post("/ui/review/pairs",
               data={"csrf": csrf_of(c), "older": old, "newer": new, "action": "link"})  # fmt: skip
    assert r.status_code == 303 and r.headers["location"].endswith("msg=pair-linked")
    got = ui.svc.store.get([old])[old].updated_by
    assert got.id == new and got.how == "stated"
    assert 'id="pairs"' not in c.get("/ui/review").text  # decided: not offered again
    r = c.post(f"/ui/memory/{new}/unlink", data={"csrf": csrf_of(c), "older": old, "newer": new})
    assert r.status_code == 303 and r.headers["location"].endswith("msg=unlinked")
    assert ui.svc.store.get([old])[old].updated_by is None
    assert 'id="pairs"' not in c.get("/ui/review").text  # undone: still decided


def test_a_dismissed_pair_is_neither_listed_nor_marked_by_recall(ui):
    from server.service.core.models import RecallInput
    from server.service.recalling.recall import recall

    c = ui.owner()
    old, new = pair(ui, ui.rt.identity)
    marked = recall(ui.svc, ui.rt.identity, RecallInput(query="payments queue RabbitMQ"))
    assert "may state the same thing" in marked.text
    r = c.post("/ui/review/pairs",
               data={"csrf": csrf_of(c), "older": old, "newer": new, "action": "dismiss"})  # fmt: skip
    assert r.status_code == 303 and r.headers["location"].endswith("msg=pair-dismissed")
    assert 'id="pairs"' not in c.get("/ui/review").text
    again = recall(ui.svc, ui.rt.identity, RecallInput(query="payments queue RabbitMQ"))
    assert "may state the same thing" not in again.text
    assert ui.svc.store.get([old])[old].updated_by is None
    bad = c.post("/ui/review/pairs",
                 data={"csrf": csrf_of(c), "older": old, "newer": new, "action": "dismiss"})  # fmt: skip
    assert bad.status_code != 303  # nothing left to dismiss: an error message, not a redirect


def test_another_agents_private_pair_and_a_secret_never_reach_the_inbox(ui):
    c = ui.owner()
    other = Identity(project_id=ui.rt.identity.project_id, agent_id="someone-else")
    pair(ui, other, "someone's private plan for the payments queue on RabbitMQ",
         "someone's private plan: the payments queue moves to SQS", scope="private")  # fmt: skip
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    page = c.get("/ui/review").text
    assert "someone's private plan" not in page and 'id="pairs"' not in page
    old = ui.svc.remember(ui.rt.identity, MemoryInput(content=f"deploy key {token} for the "
                                                      "payments queue on RabbitMQ", scope="team"))  # fmt: skip
    stored = ui.svc.store.get([old.memoryId])[old.memoryId].content
    assert token in stored  # the default policy warns and keeps it
    ui.clock.advance(days=1)
    ui.svc.remember(ui.rt.identity, MemoryInput(content=NEW, scope="team"))
    page = c.get("/ui/review").text
    assert 'id="pairs"' in page and token not in page
    assert old.memoryId in page
    bad = c.post("/ui/review/pairs",
                 data={"csrf": csrf_of(c), "older": old.memoryId, "newer": old.memoryId,
                       "action": "link"})  # fmt: skip
    assert bad.status_code != 303
