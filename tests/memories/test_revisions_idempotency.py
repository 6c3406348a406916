"""Revisions, optimistic concurrency (update-memory / commit-insight with expectedRevision) and
idempotency keys on every write."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from server.service.core.errors import AccessDenied, Conflict, InvalidInput, NotFound
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from server.service.memories import bulk
from server.service.memories.memory import MemoryService

pytestmark = pytest.mark.backends("sqlite", "postgres")

A = Identity(project_id="p", agent_id="agent-a")
B = Identity(project_id="p", agent_id="agent-b")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def svc(tmp_path, clock, store_url):
    s = MemoryService(Engine(tmp_path / "store", HashEmbedder(), store_url=store_url), clock=clock)
    yield s
    s.engine.close()


def second(store_url: str | None) -> str:
    """The second writer's folder: the same SQLite file, or another node of the cluster."""
    return "shared" if store_url is None else "node-b"


def rows(svc: MemoryService, sql: str, *params) -> list[tuple]:
    return [tuple(r) for r in svc.store.reader.execute(sql, params).fetchall()]


def n_records(svc: MemoryService) -> int:
    return rows(svc, "SELECT count(*) FROM records")[0][0]


def n_changes(svc: MemoryService) -> int:
    return rows(svc, "SELECT count(*) FROM changes")[0][0]


# ---------------------------------------------------------------------- idempotency keys
def test_a_retried_remember_stores_one_record_and_returns_the_same_result(svc):
    item = MemoryInput(content="the deploy script lives in ops/deploy.sh")
    first = svc.remember(A, item, idempotency_key="req-1")
    again = svc.remember(A, item, idempotency_key="req-1")
    assert again == first
    assert n_records(svc) == 1
    assert n_changes(svc) == 1
    assert svc.store.get_one(first.memoryId).content == item.content
    # without a key, the same call is a new memory (no silent dedup)
    other = svc.remember(A, item)
    assert other.memoryId != first.memoryId and n_records(svc) == 2


def test_every_write_tool_replays_under_its_key(svc):
    task = svc.remember_task(A, "fix login", idempotency_key="t")
    assert svc.remember_task(A, "fix login", idempotency_key="t") == task
    learn = svc.remember_learning(A, "pytest -x stops early", idempotency_key="l")
    assert svc.remember_learning(A, "pytest -x stops early", idempotency_key="l") == learn
    core = svc.core_memory(A, "I review before I merge", idempotency_key="c")
    assert svc.core_memory(A, "I review before I merge", idempotency_key="c") == core
    commit = svc.commit_insight(A, task.memoryId, idempotency_key="ci")
    # a retry finds it already longterm: without the key that is an error, with it the answer
    assert svc.commit_insight(A, task.memoryId, idempotency_key="ci") == commit
    with pytest.raises(InvalidInput):
        svc.commit_insight(A, task.memoryId)
    share = svc.share_learning(A, learn.memoryId, idempotency_key="s")
    assert svc.share_learning(A, learn.memoryId, idempotency_key="s") == share
    upd = svc.update_memory(A, share.memoryId, content="pytest -x stops at the first failure",
                            idempotency_key="u")  # fmt: skip
    assert svc.update_memory(A, share.memoryId, content="pytest -x stops at the first failure",
                             idempotency_key="u") == upd  # fmt: skip
    assert svc.store.get_one(share.memoryId).revision == 2  # not bumped twice
    gone = svc.forget(A, share.memoryId, idempotency_key="f")
    assert svc.forget(A, share.memoryId, idempotency_key="f") == gone  # no NotFound on retry
    with pytest.raises(NotFound):
        svc.forget(A, share.memoryId)
    assert n_records(svc) == 2  # task (committed) and core
    # each write produced exactly one change row set: 4 inserts, commit, share (insert+delete),
    # update, delete
    ops = [r[0] for r in rows(svc, "SELECT op FROM changes ORDER BY seq")]
    assert ops == ["insert", "insert", "insert", "update", "delete", "insert", "update", "delete"]


def test_bulk_writes_replay_under_their_key(svc):
    items = [{"content": f"bulk note {i}"} for i in range(5)]
    first = bulk.remember_bulk(svc, A, items, idempotency_key="bulk-1")
    again = bulk.remember_bulk(svc, A, items, idempotency_key="bulk-1")
    assert again == first and first.stored == 5
    assert n_records(svc) == 5
    gone = bulk.forget_bulk(svc, A, first.memoryIds[:2], idempotency_key="fb")
    assert bulk.forget_bulk(svc, A, first.memoryIds[:2], idempotency_key="fb") == gone
    assert gone.deleted == 2 and n_records(svc) == 3


def test_the_same_key_for_a_different_request_is_refused(svc):
    svc.remember(A, MemoryInput(content="one"), idempotency_key="k")
    with pytest.raises(Conflict) as info:
        svc.remember(A, MemoryInput(content="two"), idempotency_key="k")
    assert info.value.data["idempotencyKey"] == "k"
    with pytest.raises(Conflict):
        svc.remember_task(A, "one", idempotency_key="k")  # another tool
    assert n_records(svc) == 1


def test_keys_are_per_agent(svc):
    item = MemoryInput(content="shared wording", scope="team")
    a = svc.remember(A, item, idempotency_key="k")
    b = svc.remember(B, item, idempotency_key="k")
    assert a.memoryId != b.memoryId and n_records(svc) == 2


def test_keys_expire_after_24_hours(svc, clock):
    item = MemoryInput(content="daily standup notes")
    first = svc.remember(A, item, idempotency_key="day")
    clock.now += timedelta(hours=23, minutes=59)
    assert svc.remember(A, item, idempotency_key="day") == first
    clock.now += timedelta(minutes=2)
    later = svc.remember(A, item, idempotency_key="day")
    assert later.memoryId != first.memoryId
    # the expired row was replaced by the new one (purged on claim)
    assert rows(svc, "SELECT count(*) FROM idempotency_keys")[0][0] == 1


def test_a_failed_write_does_not_consume_its_key(svc):
    rec = svc.remember(A, MemoryInput(content="permanent already"))
    with pytest.raises(InvalidInput):
        svc.commit_insight(A, rec.memoryId, idempotency_key="x")
    assert rows(svc, "SELECT count(*) FROM idempotency_keys")[0][0] == 0
    with pytest.raises(InvalidInput):  # the retry runs again (and fails again), not replayed
        svc.commit_insight(A, rec.memoryId, idempotency_key="x")


def test_concurrent_calls_with_one_key_write_once(svc):
    item = MemoryInput(content="raced by eight threads")
    results, errors = [], []
    start = threading.Barrier(8)

    def worker():
        start.wait()
        try:
            results.append(svc.remember(A, item, idempotency_key="race"))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len({r.memoryId for r in results}) == 1
    assert n_records(svc) == 1


def test_two_processes_racing_on_one_key_write_once(tmp_path, clock, store_url):
    """Two services (two writer connections, like two processes; with PostgreSQL two nodes,
    each with its own folder) on one store: the second claim runs inside its write
    transaction, after the first commit, and replays."""
    a = MemoryService(Engine(tmp_path / "shared", store_url=store_url), clock=clock)
    b = MemoryService(Engine(tmp_path / second(store_url), store_url=store_url), clock=clock)
    try:
        item = MemoryInput(content="both think they are first")
        inner: dict = {}
        real_apply = b.engine.apply

        def apply_after_a(*args, **kw):  # b has looked the key up (missing); a commits now
            if "a" not in inner:
                inner["a"] = a.remember(A, item, idempotency_key="k")
            return real_apply(*args, **kw)

        b.engine.apply = apply_after_a
        got = b.remember(A, item, idempotency_key="k")
        assert got == inner["a"]
        assert rows(a, "SELECT count(*) FROM records")[0][0] == 1
    finally:
        a.engine.close()
        b.engine.close()


def test_key_validation(svc):
    with pytest.raises(InvalidInput):
        svc.remember(A, MemoryInput(content="x"), idempotency_key="")
    with pytest.raises(InvalidInput):
        svc.remember(A, MemoryInput(content="x"), idempotency_key="k" * 201)
    assert n_records(svc) == 0


# ---------------------------------------------------------------------- revisions
def test_update_memory_bumps_the_revision_and_merges_metadata(svc):
    rec = svc.remember(
        A,
        MemoryInput(content="use ruff", metadata={"tags": ["lint"], "priority": 1, "source": "x"}),
    )
    res = svc.update_memory(A, rec.memoryId, content="use ruff and ruff format",
                            metadata={"tags": ["lint", "format"], "source": None})  # fmt: skip
    assert (res.revision, res.previousRevision) == (2, 1)
    stored = svc.store.get_one(rec.memoryId)
    assert stored.content == "use ruff and ruff format"
    assert stored.metadata == {"tags": ["lint", "format"], "priority": 1}  # source removed
    assert stored.revision == 2
    res = svc.update_memory(A, rec.memoryId, metadata={"priority": 3}, expected_revision=2)
    assert res.revision == 3 and svc.store.get_one(rec.memoryId).priority == 3
    changes = rows(svc, "SELECT op, revision FROM changes ORDER BY seq")
    assert changes == [("insert", 1), ("update", 2), ("update", 3)]
    # the new content is what search finds
    hits = svc.engine.search("format", k=3)
    assert hits and hits[0].record.id == rec.memoryId


def test_update_memory_rules(svc):
    team = svc.remember(B, MemoryInput(content="team decision", scope="team", category="decisions"))
    with pytest.raises(AccessDenied):  # visible, but only its creator may update it
        svc.update_memory(A, team.memoryId, content="hijacked")
    private = svc.remember(B, MemoryInput(content="B's secret plan"))
    with pytest.raises(NotFound):  # invisible looks like missing
        svc.update_memory(A, private.memoryId, content="x")
    with pytest.raises(InvalidInput):
        svc.update_memory(B, private.memoryId)  # nothing to update
    with pytest.raises(InvalidInput):
        svc.update_memory(B, private.memoryId, metadata={"priority": 7})
    assert svc.store.get_one(team.memoryId).content == "team decision"
    assert svc.store.get_one(private.memoryId).revision == 1


def test_a_stale_expected_revision_is_a_conflict_and_writes_nothing(svc):
    rec = svc.remember(A, MemoryInput(content="version one"))
    svc.update_memory(A, rec.memoryId, content="version two", expected_revision=1)
    before = n_changes(svc)
    with pytest.raises(Conflict) as info:
        svc.update_memory(A, rec.memoryId, content="lost update", expected_revision=1)
    assert info.value.code == "conflict"
    assert info.value.data["current_revision"] == 2
    assert info.value.data["expected_revision"] == 1
    assert svc.store.get_one(rec.memoryId).content == "version two"
    assert n_changes(svc) == before


def test_concurrent_updates_from_one_revision_one_wins(svc):
    rec = svc.remember(A, MemoryInput(content="contended"))
    wins, conflicts, other = [], [], []
    start = threading.Barrier(6)

    def worker(i: int):
        start.wait()
        try:
            svc.update_memory(A, rec.memoryId, content=f"writer {i}", expected_revision=1)
            wins.append(i)
        except Conflict as exc:
            conflicts.append(exc)
        except Exception as exc:  # pragma: no cover
            other.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not other
    assert len(wins) == 1 and len(conflicts) == 5
    assert all(c.data["current_revision"] == 2 for c in conflicts)
    stored = svc.store.get_one(rec.memoryId)
    assert stored.revision == 2 and stored.content == f"writer {wins[0]}"


@pytest.fixture
def two_writers(tmp_path, clock, store_url):
    """Two services on one store: two writer connections, as two processes would have (with
    PostgreSQL: two nodes, each with its own folder)."""
    a = MemoryService(Engine(tmp_path / "shared", store_url=store_url), clock=clock)
    b = MemoryService(Engine(tmp_path / second(store_url), store_url=store_url), clock=clock)
    yield a, b
    a.engine.close()
    b.engine.close()


def run_before_first_write(svc: MemoryService, action) -> None:
    """Run ``action`` after ``svc`` has read the record but before its write transaction."""
    real_apply = svc.engine.apply
    done = []

    def apply(*args, **kw):
        if not done:
            done.append(action())
        return real_apply(*args, **kw)

    svc.engine.apply = apply


def test_the_revision_check_runs_inside_the_write_transaction(two_writers):
    a, b = two_writers
    rec = a.remember(A, MemoryInput(content="original"))
    # A reads (and pre-checks) revision 1, then B commits revision 2, then A's transaction runs
    run_before_first_write(
        a, lambda: b.update_memory(A, rec.memoryId, content="from B", expected_revision=1)
    )
    with pytest.raises(Conflict) as info:
        a.update_memory(A, rec.memoryId, content="from A", expected_revision=1)
    assert info.value.data["current_revision"] == 2
    assert a.store.get_one(rec.memoryId).content == "from B"


def test_without_expected_revision_a_stale_read_is_redone(two_writers):
    a, b = two_writers
    rec = a.remember(A, MemoryInput(content="original"))
    run_before_first_write(a, lambda: b.update_memory(A, rec.memoryId, metadata={"tags": ["b"]}))
    res = a.update_memory(A, rec.memoryId, content="from A")
    assert res.revision == 3  # B made 2, A re-read and wrote 3 on top of it
    final = a.store.get_one(rec.memoryId)
    assert final.content == "from A" and final.tags == ["b"]  # B's change is kept


def test_commit_insight_with_expected_revision(svc):
    note = svc.remember_task(A, "write the migration")
    svc.update_memory(A, note.memoryId, content="write the v2 migration")
    with pytest.raises(Conflict) as info:
        svc.commit_insight(A, note.memoryId, expected_revision=1)
    assert info.value.data["current_revision"] == 2
    res = svc.commit_insight(A, note.memoryId, expected_revision=2)
    assert res.revision == 3 and res.category == "longterm"
    assert svc.store.get_one(note.memoryId).expires_at is None


def test_every_replacement_bumps_the_revision_even_from_a_stale_copy(svc):
    rec = svc.remember(A, MemoryInput(content="v1"))
    old = svc.store.get_one(rec.memoryId)
    svc.update_memory(A, rec.memoryId, content="v2")
    stale = old.model_copy(update={"content": "restored from an old export"})  # revision 1
    svc.engine.apply(replace=[stale])
    assert svc.store.get_one(rec.memoryId).revision == 3
    assert rows(svc, "SELECT revision FROM changes ORDER BY seq") == [(1,), (2,), (3,)]
