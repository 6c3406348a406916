"""Merge, don't reject: a stale expectedRevision merges three-way (text with merge3 over words,
tags as an add-wins set, other metadata per key); only overlapping edits conflict, and the
conflict carries the attempt with its markers and both versions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from server.service.core.errors import Conflict
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from server.service.memories import changes, merge
from server.service.memories.memory import MemoryService
from tests.race_util import race

pytestmark = pytest.mark.backends("sqlite", "postgres")

A = Identity(project_id="p", agent_id="agent-a")
BASE = "Deploys run on Fridays. The cache key is v1. Tests use pytest with xdist. Owners: alice."


@pytest.fixture
def svc(tmp_path, store_url):
    clock = lambda: datetime(2030, 1, 1, 12, 0, tzinfo=UTC)  # noqa: E731
    s = MemoryService(Engine(tmp_path / "store", HashEmbedder(), store_url=store_url), clock=clock)
    yield s
    s.engine.close()


# ---------------------------------------------------------------------- the merge functions
@pytest.mark.backends("sqlite")
@pytest.mark.parametrize(
    ("ours", "theirs", "want"),
    [
        # disjoint sentences
        (BASE.replace("Fridays", "Tuesdays"), BASE.replace("alice.", "alice and bob."),
         "Deploys run on Tuesdays. The cache key is v1. Tests use pytest with xdist. "
         "Owners: alice and bob."),
        # different words of one sentence
        (BASE.replace("use pytest", "run pytest"), BASE.replace("xdist.", "xdist -n 4."),
         BASE.replace("use pytest with xdist.", "run pytest with xdist -n 4.")),
        # the same edit on both sides is taken once
        (BASE.replace("v1", "v2"), BASE.replace("v1", "v2"), BASE.replace("v1", "v2")),
        # one side unchanged
        (BASE, BASE.replace("v1", "v2"), BASE.replace("v1", "v2")),
        (BASE.replace("v1", "v2"), BASE, BASE.replace("v1", "v2")),
    ],
)  # fmt: skip
def test_merge_text_combines_disjoint_edits(ours, theirs, want):
    got = merge.merge_text(BASE, ours, theirs)
    assert got.clean and got.text == want


@pytest.mark.backends("sqlite")
@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (BASE.replace("v1", "v2"), BASE.replace("v1", "v3")),  # the same word, two ways
        (BASE.replace(" The cache key is v1.", ""), BASE.replace("v1", "v9")),  # delete vs edit
        ("something else entirely", "and another text"),
    ],
)
def test_merge_text_flags_overlapping_edits_with_markers(ours, theirs):
    got = merge.merge_text(BASE, ours, theirs)
    assert not got.clean and got.conflicts >= 1
    assert merge.MARK_OURS in got.text and merge.MARK_MID in got.text
    assert merge.MARK_THEIRS in got.text
    for marker in (merge.MARK_OURS, merge.MARK_MID, merge.MARK_THEIRS):  # each on its own line
        i = got.text.index(marker)
        assert i == 0 or got.text[i - 1] == "\n"


@pytest.mark.backends("sqlite")
def test_merge_set_is_add_wins():
    assert merge.merge_set(["a"], ["a", "b"], ["a", "c"]) == ["a", "c", "b"]  # add / add
    assert merge.merge_set(["a", "b"], ["a"], ["a", "b", "c"]) == ["a", "c"]  # remove / add
    assert merge.merge_set(["a"], [], ["a", "b"]) == ["b"]  # a remove takes only what it saw
    assert merge.merge_set(["a"], ["a", "b"], ["a", "b"]) == ["a", "b"]  # same add twice
    assert merge.merge_set([], ["x"], []) == ["x"]


@pytest.mark.backends("sqlite")
def test_merge_metadata_per_key_and_last_writer_wins():
    base = {"tags": ["a"], "priority": 2, "source": "s"}
    ours = {"tags": ["a", "b"], "priority": 1, "source": "s"}
    theirs = {"tags": ["c"], "priority": 3, "source": "t", "relatedTo": ["m1"]}
    got = merge.merge_metadata(base, ours, theirs)
    assert got.metadata == {"tags": ["c", "b"], "priority": 1, "source": "t", "relatedTo": ["m1"]}
    assert got.overridden == ["priority"]


# ---------------------------------------------------------------------- update-memory
def test_a_stale_update_with_disjoint_edits_merges(svc):
    m = svc.remember(A, MemoryInput(content=BASE))
    first = svc.update_memory(A, m.memoryId, content=BASE.replace("Fridays", "Tuesdays"),
                              expected_revision=1)  # fmt: skip
    assert first.revision == 2 and not first.merged
    res = svc.update_memory(A, m.memoryId, content=BASE.replace("alice.", "alice and bob."),
                            expected_revision=1)  # fmt: skip
    assert res.merged and res.revision == 3 and res.parents == [2, 1]
    stored = svc.store.get_one(m.memoryId)
    assert "Tuesdays" in stored.content and "alice and bob." in stored.content
    assert stored.revision == 3
    row = svc.store.reader.execute(
        "SELECT parents FROM record_revisions WHERE record_id=? AND revision=3", (m.memoryId,)
    ).fetchone()
    assert row[0] == "[2, 1]"
    # the change stream's event for the merge says so, with both parents
    events = [c for c in changes.read_changes(svc, A).changes if c.record_id == m.memoryId]
    assert [(c.op, c.revision, c.merged, c.parents) for c in events] == [
        ("insert", 1, False, None), ("update", 2, False, None), ("update", 3, True, [2, 1]),
    ]  # fmt: skip


def test_the_same_edit_twice_is_idempotent(svc):
    m = svc.remember(A, MemoryInput(content=BASE))
    edit = BASE.replace("v1", "v2")
    svc.update_memory(A, m.memoryId, content=edit, expected_revision=1)
    again = svc.update_memory(A, m.memoryId, content=edit, expected_revision=1)
    assert again.merged and again.revision == 2  # nothing new to write
    stored = svc.store.get_one(m.memoryId)
    assert stored.content == edit and stored.revision == 2


def test_overlapping_edits_conflict_with_the_attempt_and_both_versions(svc):
    m = svc.remember(A, MemoryInput(content=BASE))
    svc.update_memory(A, m.memoryId, content=BASE.replace("v1", "v2"), expected_revision=1)
    with pytest.raises(Conflict) as info:
        svc.update_memory(A, m.memoryId, content=BASE.replace("v1", "v3"), expected_revision=1)
    data = info.value.data
    assert data["reason"] == "overlapping_edits" and data["current_revision"] == 2
    assert data["current"] == BASE.replace("v1", "v2")
    assert data["yours"] == BASE.replace("v1", "v3") and data["base"] == BASE
    assert data["merge"] == (
        "Deploys run on Fridays. The cache key is \n<<<<<<< yours\nv3. \n=======\nv2. \n"
        ">>>>>>> current\nTests use pytest with xdist. Owners: alice."
    )
    assert "expectedRevision=2" in info.value.message
    assert svc.store.get_one(m.memoryId).revision == 2  # nothing written
    # resolved in one call
    res = svc.update_memory(A, m.memoryId, content=BASE.replace("v1", "v3"), expected_revision=2)
    assert res.revision == 3 and not res.merged


def test_a_base_no_longer_held_is_a_conflict(svc):
    m = svc.remember(A, MemoryInput(content=BASE))
    svc.update_memory(A, m.memoryId, content="changed", expected_revision=1)
    with svc.store.transaction() as conn:
        conn.execute("DELETE FROM record_revisions WHERE record_id=? AND revision=1", (m.memoryId,))
    with pytest.raises(Conflict) as info:
        svc.update_memory(A, m.memoryId, content=BASE + " More.", expected_revision=1)
    assert info.value.data["reason"] == "no_base"


def test_tags_add_add_and_add_remove_and_priority_last_writer_wins(svc):
    m = svc.remember(A, MemoryInput(content=BASE, metadata={"tags": ["ci", "old"]}))
    svc.update_memory(A, m.memoryId, metadata={"tags": ["ci", "old", "deploy"], "priority": 3},
                      expected_revision=1)  # fmt: skip
    res = svc.update_memory(A, m.memoryId, metadata={"tags": ["ci", "cache"], "priority": 1},
                            expected_revision=1)  # fmt: skip
    assert res.merged and res.overridden == ["priority"]
    stored = svc.store.get_one(m.memoryId)
    # "deploy" (added by the other writer, unseen) stays; "old" (seen and removed) goes
    assert stored.tags == ["ci", "deploy", "cache"]
    assert stored.priority == 1
    # a metadata-only update keeps the text the other writer made
    svc.update_memory(A, m.memoryId, content=BASE.replace("v1", "v5"), expected_revision=3)
    res = svc.update_memory(A, m.memoryId, metadata={"source": "review"}, expected_revision=3)
    stored = svc.store.get_one(m.memoryId)
    assert res.merged and "v5" in stored.content and stored.metadata["source"] == "review"


def test_a_merge_over_a_limit_is_a_conflict_with_the_attempt(svc):
    """Two valid edits (9 tags each) whose merge would hold 12 tags: the stale writer gets a
    conflict naming the limit and carrying the attempt, never invalid_input, and resolves it
    in one call."""
    shared = [f"t{i}" for i in range(6)]
    m = svc.remember(A, MemoryInput(content=BASE, metadata={"tags": shared}))
    svc.update_memory(A, m.memoryId, metadata={"tags": [*shared, "a1", "a2", "a3"]},
                      expected_revision=1)  # fmt: skip
    stale = [*shared, "b1", "b2", "b3"]
    for _ in range(2):  # the same retry gets the same answer
        with pytest.raises(Conflict) as info:
            svc.update_memory(A, m.memoryId, content=BASE.replace("v1", "v2"),
                              metadata={"tags": stale}, expected_revision=1)  # fmt: skip
        data = info.value.data
        assert data["reason"] == "limit_exceeded" and data["current_revision"] == 2
        assert data["limit"]["field"] == "tags"
        assert (data["limit"]["limit"], data["limit"]["got"]) == (10, 12)
        assert data["merge"] == BASE.replace("v1", "v2")
        assert data["merge_metadata"]["tags"] == [*shared, "a1", "a2", "a3", "b1", "b2", "b3"]
        message = info.value.message
        assert "at most 10 tags" in message and "expectedRevision=2" in message
    assert svc.store.get_one(m.memoryId).revision == 2  # nothing written
    res = svc.update_memory(A, m.memoryId, content=BASE.replace("v1", "v2"),
                            metadata={"tags": [*shared, "a1", "b1"]}, expected_revision=2)  # fmt: skip
    assert res.revision == 3 and svc.store.get_one(m.memoryId).tags == [*shared, "a1", "b1"]


def test_a_merge_over_the_size_limit_is_a_conflict(svc):
    from server.service.core.scopes import MAX_CONTENT_BYTES

    half = "x" * (MAX_CONTENT_BYTES // 2 + 10)
    m = svc.remember(A, MemoryInput(content="head. middle. tail."))
    svc.update_memory(A, m.memoryId, content=f"head. {half} middle. tail.", expected_revision=1)
    with pytest.raises(Conflict) as info:
        svc.update_memory(A, m.memoryId, content=f"head. middle. {half} tail.",
                          expected_revision=1)  # fmt: skip
    limit = info.value.data["limit"]
    assert info.value.data["reason"] == "limit_exceeded" and limit["field"] == "content"
    assert limit["limit"] == MAX_CONTENT_BYTES and limit["size"] > MAX_CONTENT_BYTES


def test_an_edit_invalid_on_its_own_is_still_invalid_input_when_stale(svc):
    from server.service.core.errors import InvalidInput

    m = svc.remember(A, MemoryInput(content=BASE))
    svc.update_memory(A, m.memoryId, content=BASE.replace("v1", "v2"), expected_revision=1)
    with pytest.raises(InvalidInput):
        svc.update_memory(A, m.memoryId, metadata={"tags": [f"t{i}" for i in range(11)]},
                          expected_revision=1)  # fmt: skip


def test_a_three_way_race_keeps_every_disjoint_edit(svc):
    text = "alpha one. beta two. gamma three."
    m = svc.remember(A, MemoryInput(content=text))
    edits = [text.replace("one", "1"), text.replace("two", "2"), text.replace("three", "3")]
    out = race(3, lambda i: svc.update_memory(A, m.memoryId, content=edits[i], expected_revision=1))
    errors = [r for r in out if isinstance(r, Exception)]
    results = [r for r in out if not isinstance(r, Exception)]
    assert not errors, [getattr(e, "data", e) for e in errors]
    stored = svc.store.get_one(m.memoryId)
    assert stored.content == "alpha 1. beta 2. gamma 3." and stored.revision == 4
    assert sorted(r.merged for r in results) == [False, True, True]


def test_two_nodes_editing_concurrently_merge_and_end_equal(tmp_path, store_url):
    """Two writers on one store (with PostgreSQL: two nodes, each with its own replica): the
    merge is decided against the revision committed in the canonical transaction."""
    folder_b = "a" if store_url is None else "b"
    a = MemoryService(Engine(tmp_path / "a", HashEmbedder(), store_url=store_url))
    b = MemoryService(Engine(tmp_path / folder_b, HashEmbedder(), store_url=store_url))
    try:
        m = a.remember(A, MemoryInput(content=BASE))
        edits = [(a, "Fridays", "Tuesdays"), (b, "alice.", "alice and bob.")]

        def edit(i: int):
            svc, old, new = edits[i]
            return svc.update_memory(A, m.memoryId, content=BASE.replace(old, new),
                                     expected_revision=1)  # fmt: skip

        done = race(2, edit)
        assert not [r for r in done if isinstance(r, Exception)], done
        assert sorted(r.merged for r in done) == [False, True]
        for svc in (a, b):
            svc.store.catch_up()
            rec = svc.store.get_one(m.memoryId)
            assert rec.revision == 3
            assert rec.content == BASE.replace("Fridays", "Tuesdays").replace(
                "alice.", "alice and bob."
            )
            last = changes.read_changes(svc, A).changes[-1]
            assert (last.revision, last.merged, last.parents) == (3, True, [2, 1])
    finally:
        a.engine.close()
        b.engine.close()


@pytest.mark.backends("sqlite")
def test_a_v7_store_migrates_and_its_old_memories_merge(tmp_path):
    import sqlite3

    from retrieval.storage.store import SQLiteStore

    path = tmp_path / "store" / "pattern.sqlite3"
    svc = MemoryService(Engine(tmp_path / "store", HashEmbedder()))
    old = svc.remember(A, MemoryInput(content=BASE)).memoryId
    svc.engine.close()
    conn = sqlite3.connect(str(path), isolation_level=None)  # back to v7: no history, no column
    conn.execute("DROP TABLE record_revisions")
    conn.execute("ALTER TABLE entities DROP COLUMN revision")
    conn.execute("PRAGMA user_version = 7")
    conn.close()
    SQLiteStore(path).close()  # migrates to the current version
    svc = MemoryService(Engine(tmp_path / "store", HashEmbedder()))
    try:
        # its first update keeps the version it replaces: a stale edit of it merges
        svc.update_memory(A, old, content=BASE.replace("Fridays", "Mondays"))
        res = svc.update_memory(A, old, content=BASE + " More.", expected_revision=1)
        want = BASE.replace("Fridays", "Mondays") + " More."
        assert res.merged and svc.store.get_one(old).content == want
    finally:
        svc.engine.close()


@pytest.mark.backends("sqlite")
def test_the_history_keeps_the_last_versions_and_goes_with_the_record(svc, monkeypatch):
    from retrieval.storage import store as store_mod

    monkeypatch.setattr(store_mod, "HISTORY_DEPTH", 3)
    m = svc.remember(A, MemoryInput(content=BASE))
    for i in range(5):
        svc.update_memory(A, m.memoryId, content=f"{BASE} {i}")

    def kept() -> list[int]:
        return [r[0] for r in svc.store.reader.execute(
            "SELECT revision FROM record_revisions WHERE record_id=? ORDER BY revision",
            (m.memoryId,))]  # fmt: skip

    assert kept() == [4, 5, 6]
    never = svc.remember(A, MemoryInput(content="never updated")).memoryId
    assert not svc.store.reader.execute(
        "SELECT 1 FROM record_revisions WHERE record_id=?", (never,)
    ).fetchone()  # a memory costs history from its first update on
    svc.forget(A, m.memoryId)
    assert kept() == []
