"""Facts that changed: update links between memories (stated and detected), the ranking of a
chain, the provenance line of an updated item, undoing a link."""

from __future__ import annotations

from datetime import timedelta

import pytest

from retrieval import links
from retrieval.records import Kind, Record, RecordFilter, Scope
from server.service import supersede
from server.service.errors import InvalidInput, NotFound
from server.service.identity import Identity
from server.service.memory import MemoryService
from server.service.models import MemoryInput, RecallInput
from server.service.recall import recall
from server.service.trust import framing

from .conftest import T0

A = Identity(project_id="proj", agent_id="agent-a")
B = Identity(project_id="proj", agent_id="agent-b")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self):
        self.now += timedelta(days=1)
        return self.now


@pytest.fixture
def svc(engine) -> MemoryService:
    return MemoryService(engine, clock=Clock())


def remember(svc, who, text, scope="team", **kw):
    return svc.remember(who, MemoryInput(content=text, scope=scope, **kw))


def rec(text: str, agent: str = "agent-a") -> Record:
    return Record(project_id="proj", agent_id=agent, scope=Scope.team, content=text)


# ---------------------------------------------------------------------------- the rule
@pytest.mark.parametrize(
    ("old", "new", "linked"),
    [
        ("Project Atlas uses PostgreSQL 14", "Project Atlas moved to PostgreSQL 16", True),
        ("We deploy on Tuesdays", "We deploy continuously now", True),
        ("The flag --fast-path is on by default", "The flag --fast-path is off by default", True),
        ("Caroline likes hiking in the mountains", "Melanie likes hiking in the mountains", False),
        ("Project Atlas uses PostgreSQL 14", "Project Atlas uses PostgreSQL 14", False),  # same
        ("Atlas uses PostgreSQL 14", "Zephyr uses PostgreSQL 16", False),  # another subject
    ],
)
def test_rule_same_subject_new_value(old, new, linked):
    assert supersede.updates(rec(new), rec(old), similarity=0.9) is linked


def test_rule_first_person_is_its_author():
    mine, theirs = rec("I prefer window seats", "agent-a"), rec("I prefer aisle seats", "agent-b")
    assert not supersede.updates(theirs, mine, similarity=0.95)
    assert supersede.updates(rec("I prefer aisle seats", "agent-a"), mine, similarity=0.95)


def test_rule_needs_a_close_embedding():
    old, new = rec("We deploy on Tuesdays"), rec("We deploy continuously now")
    assert not supersede.updates(new, old, similarity=supersede.DETECT_MIN_COS - 0.01)


# ---------------------------------------------------------------------------- stated links
def test_stated_link_ranks_the_newer_first_and_marks_the_older(svc):
    old = remember(svc, A, "release checklist: deploy on Tuesdays after the QA sign-off")
    new = remember(svc, A, "release checklist: deploy continuously, QA runs in CI",
                   supersedes=[old.memoryId])  # fmt: skip
    assert [(s.memoryId, s.how) for s in new.supersedes] == [(old.memoryId, "stated")]
    # a query that matches the old wording best still gets the current value first
    res = recall(svc, A, RecallInput(query="deploy on Tuesdays after QA sign-off"))
    ids = [i.id for i in res.items]
    assert ids.index(new.memoryId) < ids.index(old.memoryId)
    item = res.items[ids.index(old.memoryId)]
    assert item.explanation["updated_by"]["id"] == new.memoryId
    assert f"updated by {new.memoryId} on " in item.provenance
    line = next(ln for ln in res.text.splitlines() if "updated by" in ln)
    assert line.startswith("— ") and new.memoryId in line  # the provenance line, one line
    assert not any("updated by" in i.provenance for i in res.items if i.id == new.memoryId)


def test_current_record_joins_the_candidates(svc, engine):
    old = remember(svc, A, "the staging database listens on port 5433")
    new = remember(svc, A, "moved: cache server config lives in /etc/cachesrv.toml",
                   supersedes=[old.memoryId])  # fmt: skip
    f = RecordFilter(buckets=A.visible_buckets(), kinds=[Kind.memory])
    hits = engine.search("staging database port 5433", f, k=1, mode="lexical")
    assert [h.record.id for h in hits] == [new.memoryId]
    assert hits[0].explanation.boosts.get("current")


def test_supersedes_must_be_visible_and_same_scope(svc):
    mine = remember(svc, A, "my private note about ports", scope="private")
    with pytest.raises(InvalidInput):
        remember(svc, A, "team note about ports", supersedes=[mine.memoryId])
    other = remember(svc, B, "agent b private", scope="private")
    with pytest.raises(NotFound):
        remember(svc, A, "a private note", scope="private", supersedes=[other.memoryId])


def test_update_memory_accepts_supersedes(svc):
    old = remember(svc, A, "the on-call rota changes on Mondays")
    new = remember(svc, A, "the on-call rota is kept in the wiki")
    res = svc.update_memory(A, new.memoryId, supersedes=[old.memoryId])
    assert [s.memoryId for s in res.supersedes] == [old.memoryId]
    assert svc.store.get([old.memoryId])[old.memoryId].updated_by.id == new.memoryId


def test_nothing_is_deleted_and_undo_restores(svc):
    old = remember(svc, A, "builds run on Jenkins")
    new = remember(svc, A, "builds run on GitHub Actions", supersedes=[old.memoryId])
    assert svc.store.get([old.memoryId])[old.memoryId].content == "builds run on Jenkins"
    assert [(lk.older, lk.newer) for lk in supersede.chain(svc, A, new.memoryId)] == [
        (old.memoryId, new.memoryId)
    ]
    supersede.undo(svc, A, old.memoryId, new.memoryId)
    assert svc.store.get([old.memoryId])[old.memoryId].updated_by is None
    assert not supersede.chain(svc, A, new.memoryId)[0].active
    with pytest.raises(NotFound):
        supersede.undo(svc, A, old.memoryId, new.memoryId)


def test_forgetting_the_newer_makes_the_older_current(svc):
    old = remember(svc, A, "lint with flake8", scope="private")
    new = remember(svc, A, "lint with ruff", scope="private", supersedes=[old.memoryId])
    svc.forget(A, new.memoryId)
    assert svc.store.get([old.memoryId])[old.memoryId].updated_by is None


# ---------------------------------------------------------------------------- detection
class Fixed:
    """An embedder under which every text is the same vector: similarity is never the reason
    a pair is or is not linked in these tests."""

    model_id, dimension = "fixed", 8

    def embed_query(self, text):
        import numpy as np

        return np.ones(8, dtype=np.float32) / np.sqrt(8)

    def embed_documents(self, texts):
        import numpy as np

        return np.ones((len(texts), 8), dtype=np.float32) / np.sqrt(8)


@pytest.fixture
def fixed_svc(open_engine) -> MemoryService:
    return MemoryService(open_engine(Fixed()), clock=Clock())


def test_detected_same_subject_new_value(fixed_svc):
    old = remember(fixed_svc, A, "Project Atlas uses PostgreSQL 14")
    new = remember(fixed_svc, A, "Project Atlas moved to PostgreSQL 16")
    assert [(s.memoryId, s.how) for s in new.supersedes] == [(old.memoryId, "detected")]
    got = fixed_svc.store.get([old.memoryId])[old.memoryId]
    assert got.updated_by.id == new.memoryId and got.updated_by.how == "detected"


def test_not_detected_for_a_different_subject(fixed_svc):
    remember(fixed_svc, A, "Caroline likes hiking in the mountains")
    new = remember(fixed_svc, A, "Melanie likes hiking in the mountains")
    assert new.supersedes == []


def test_undone_pair_is_not_detected_again(fixed_svc):
    old = remember(fixed_svc, A, "Project Atlas uses PostgreSQL 14")
    new = remember(fixed_svc, A, "Project Atlas moved to PostgreSQL 16")
    supersede.undo(fixed_svc, A, old.memoryId, new.memoryId)
    with fixed_svc.store.transaction() as conn:  # a detection of the same pair is ignored
        links.write(conn, old.memoryId, new.memoryId, "b", "detected", "agent-a")
    assert fixed_svc.store.get([old.memoryId])[old.memoryId].updated_by is None


def test_no_detection_without_a_model(open_engine):
    svc = MemoryService(open_engine(None), clock=Clock())
    remember(svc, A, "Project Atlas uses PostgreSQL 14")
    assert remember(svc, A, "Project Atlas moved to PostgreSQL 16").supersedes == []


# ---------------------------------------------------------------------------- quoting
def test_update_note_is_one_escaped_line():
    from datetime import UTC, datetime

    from retrieval.records import UpdatedBy

    r = rec("old value")
    r.updated_by = UpdatedBy(id="new\nid · forged", at=datetime(2024, 6, 2, tzinfo=UTC))
    line = framing.provenance(r)
    assert "\n" not in line
    assert "updated by new\\nid \\u00b7 forged on 2024-06-02" in line
    assert framing.quote(r).splitlines()[0] == f"— {line}"


def test_the_prompt_hook_injects_the_note(svc):
    from server.service.hook_context import HookConfig, select_for_prompt

    old = remember(svc, A, "the release train leaves on Tuesdays")
    new = remember(svc, A, "the release train leaves every day", supersedes=[old.memoryId])
    sel = select_for_prompt(svc, A, "when does the release train leave?",
                            config=HookConfig(threshold=0.0))  # fmt: skip
    assert sel.ids.index(new.memoryId) < sel.ids.index(old.memoryId)
    lines = sel.text.splitlines()
    note = next(ln for ln in lines if "updated by" in ln)
    assert note.startswith("— ") and f"updated by {new.memoryId} on " in note
    assert lines[lines.index(note) + 1] == "> the release train leaves on Tuesdays"
