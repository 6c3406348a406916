"""The vector outbox after a commit (retrieval/vector/vector_sync.py): a Chroma failure after COMMIT
is a warning and a background replay, never an error; a Chroma error while deleting keeps its
outbox row; orphan vectors are counted and removed; a model attaching in the middle of a
write neither fails it nor splits it."""

from __future__ import annotations

import json
import threading
import time

import pytest

from graph.entities import GraphService
from graph.lessons import LessonService
from ingest.workspace.pipeline import Ingestor
from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.records import Kind, RecordFilter, Scope
from retrieval.vector.vector_process import VectorProcess
from retrieval.vector.vector_sync import RetryTimer
from retrieval.vector.vectors import VectorItem
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from server.service.memories import bulk
from server.service.memories.memory import MemoryService
from tests.mcp_util import FakeClock, clocked_service, identity_env, in_process, runtime_on

pytestmark = pytest.mark.usefixtures("vector_index")  # tests of the vector index itself

MODEL = HashEmbedder().model_id
WHO = Identity(project_id="proj", agent_id="agent")
CATCHING_UP = "the vector index is catching up"


def wait_for(condition, timeout: float = 15.0) -> bool:
    """Poll ``condition`` until it holds or the deadline passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def outbox(eng) -> list[tuple[str, str]]:
    return [(r["record_id"], r["op"]) for r in eng.store.outbox()]


def chroma_ids(eng, bucket) -> list[str]:
    return sorted(eng.vectors.ids(bucket, MODEL))


def vector_hits(eng, query: str) -> list[str]:
    return [h.record.id for h in eng.search(query, RecordFilter(), k=5, mode="vector")]


@pytest.fixture
def chroma_down(monkeypatch):
    """While set, every Chroma write (upsert, delete) raises, as a failing server would."""
    down = threading.Event()
    for name in ("upsert", "delete"):
        real = getattr(VectorProcess, name)

        def failing(self, *a, _real=real, **kw):
            if down.is_set():
                raise ConnectionError("chroma is unreachable")
            return _real(self, *a, **kw)

        monkeypatch.setattr(VectorProcess, name, failing)
    return down


def fast_retry(eng: Engine) -> Engine:
    eng._sync.retry.first = 0.02  # the test's replays start within milliseconds
    return eng


# ---------------------------------------------------------------------- failure after COMMIT
def test_a_chroma_failure_after_commit_is_a_warning_and_is_replayed_without_another_write(
    open_engine, make_record, chroma_down
):
    eng = fast_retry(open_engine(HashEmbedder()))
    rec = make_record("harbour crane maintenance window")
    chroma_down.set()
    done = eng.apply(add=[rec])  # no exception: the write is durable at COMMIT
    assert len(done.warnings) == 1 and CATCHING_UP in done.warnings[0]
    assert "ConnectionError: chroma is unreachable" in done.warnings[0]
    assert eng.get(rec.id).content == rec.content
    assert [h.record.id for h in eng.search("crane maintenance", mode="lexical")] == [rec.id]
    assert outbox(eng) == [(rec.id, "insert")]
    time.sleep(0.2)  # the background retry keeps failing meanwhile: nothing is lost
    assert outbox(eng) == [(rec.id, "insert")] and eng._sync.retry.attempts >= 2
    chroma_down.clear()
    # no further write: the retry timer replays the outbox by itself
    assert wait_for(lambda: outbox(eng) == [])
    assert vector_hits(eng, "harbour crane maintenance window") == [rec.id]
    assert wait_for(lambda: not eng._sync.retry.active)


def test_remember_with_chroma_down_stores_once_and_is_found_by_vector_after_the_replay(
    tmp_path, chroma_down
):
    """Through the MCP tool: one call, one record, success with a warning."""
    svc = clocked_service(tmp_path / "store", FakeClock())
    fast_retry(svc.engine)
    env = identity_env(tmp_path / "store", WHO.project_id, WHO.agent_id)
    try:
        with in_process(runtime_on(svc, env, tmp_path)) as client:
            chroma_down.set()
            res = client.ok("remember", {"content": "the staging database moved to eu-west-3"})
            assert any(CATCHING_UP in w for w in res["warnings"])
            memories = svc.store.list(RecordFilter(kinds=[Kind.memory]))
            assert [m.id for m in memories] == [res["memoryId"]]
            chroma_down.clear()
            assert wait_for(lambda: svc.store.outbox() == [])
            assert vector_hits(svc.engine, "the staging database moved to eu-west-3") == [
                res["memoryId"]
            ]
            assert len(svc.store.list(RecordFilter(kinds=[Kind.memory]))) == 1
    finally:
        svc.engine.close()


def _lesson(name: str) -> dict:
    return {
        "name": name, "entityType": "lesson", "observations": ["pin the driver version"],
        "errorPattern": {"type": "ImportError", "message": "no module named psycopg2",
                         "context": "deploy"},
        "metadata": {"severity": "high", "environment": {}, "frequency": 1, "successRate": 1.0},
        "verificationSteps": [],
    }  # fmt: skip


def _write_paths():
    """(name, write(svc, graph, lessons, tmp_path) -> the warnings of its result)."""

    def remember(svc, g, le, tmp):
        return svc.remember(WHO, MemoryInput(content="remember while chroma is down")).warnings

    def bulk_remember(svc, g, le, tmp):
        items = [{"content": f"bulk item {i} while chroma is down"} for i in range(3)]
        return bulk.remember_bulk(svc, WHO, items).warnings

    def update(svc, g, le, tmp):
        chroma = svc.engine._sync.retry  # written while up, updated while down
        mid = svc.remember(WHO, MemoryInput(content="first version")).memoryId
        assert not chroma.active
        return svc.update_memory(WHO, mid, content="second version while down").warnings

    def create_entities(svc, g, le, tmp):
        ent = {"name": "Harbour", "entityType": "place", "observations": ["has two cranes"]}
        return g.create_entities(WHO, [ent]).warnings

    def add_observations(svc, g, le, tmp):
        g.create_entities(WHO, [{"name": "Harbour", "entityType": "place", "observations": []}])
        obs = [{"entityName": "Harbour", "contents": ["opens at six"]}]
        return g.add_observations(WHO, obs).warnings

    def create_lesson(svc, g, le, tmp):
        return le.create_lesson(WHO, _lesson("psycopg2-missing")).warnings

    def ingest(svc, g, le, tmp):
        root = tmp / "ws"
        root.mkdir()
        (root / "notes.md").write_text("The harbour opens at six in the morning.\n")
        return Ingestor(svc.engine, WHO.project_id, WHO.agent_id).run(root).write_warnings

    return [remember, bulk_remember, update, create_entities, add_observations, create_lesson,
            ingest]  # fmt: skip


@pytest.mark.parametrize("write", _write_paths(), ids=lambda f: f.__name__)
def test_every_write_result_carries_the_catching_up_warning(tmp_path, chroma_down, write):
    svc = MemoryService(Engine(tmp_path / "store", HashEmbedder()), clock=FakeClock())
    fast_retry(svc.engine)
    graph = GraphService(svc.engine)
    lessons = LessonService(graph)
    try:
        if write.__name__ != "update":
            chroma_down.set()
        else:  # the first version is written while Chroma is up
            real = svc.remember

            def remember_then_down(*a, **kw):
                res = real(*a, **kw)
                chroma_down.set()
                return res

            svc.remember = remember_then_down
        warnings = write(svc, graph, lessons, tmp_path)
        assert any(CATCHING_UP in w for w in warnings), warnings
        assert svc.store.outbox() != []
        chroma_down.clear()
        assert wait_for(lambda: svc.store.outbox() == [])
    finally:
        svc.engine.close()


def test_closing_the_engine_stops_the_retry_timer(open_engine, make_record, chroma_down):
    eng = fast_retry(open_engine(HashEmbedder()))
    chroma_down.set()
    eng.apply(add=[make_record("never reaches chroma")])
    assert wait_for(lambda: eng._sync.retry.attempts >= 2)
    t0 = time.monotonic()
    eng.close()
    assert time.monotonic() - t0 < 5
    assert not [t for t in threading.enumerate() if t.name == "vector-index-retry" and t.is_alive()]


def test_the_retry_timer_backs_off_and_runs_again_when_kicked_during_a_run():
    starts: list[float] = []
    fail = threading.Event()
    fail.set()
    kicked_once = threading.Event()

    def fn():
        starts.append(time.monotonic())
        if fail.is_set():
            if len(starts) == 4:
                fail.clear()
            raise RuntimeError("down")
        if not kicked_once.is_set():  # a write failed while this successful run was going on
            kicked_once.set()
            timer.kick()

    timer = RetryTimer(fn, first=0.02, cap=0.1)
    timer.kick()
    assert wait_for(lambda: len(starts) >= 6 and not timer.active, timeout=10)
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    # waits after the 1st..4th failure: 0.04, 0.08, then capped at 0.1 (never shorter)
    assert gaps[0] >= 0.035 and gaps[1] >= 0.075 and gaps[2] >= 0.095 and gaps[3] >= 0.095
    assert len(starts) == 6  # 4 failures, the success that was kicked, one more run
    timer.close()
    timer.kick()  # closed: no new thread
    assert not timer.active


# ---------------------------------------------------------------------- deletes and orphans
def test_a_chroma_error_while_deleting_keeps_the_outbox_row(open_engine, make_record):
    first = open_engine(HashEmbedder())
    rec, other = make_record("delete me later"), make_record("keep me")
    first.add([rec, other])
    first.close()
    eng = fast_retry(open_engine(HashEmbedder()))
    real = eng.vectors.delete
    broken = threading.Event()
    broken.set()

    def delete(*a, **kw):
        if broken.is_set():
            raise ConnectionError("chroma is unreachable")
        return real(*a, **kw)

    eng.vectors.delete = delete
    done = eng.apply(delete=[rec.id])
    assert [r.id for r in done.deleted] == [rec.id]
    assert any(CATCHING_UP in w for w in done.warnings)
    assert outbox(eng) == [(rec.id, "delete")]  # not cleared: the vector is still there
    broken.clear()
    assert wait_for(lambda: outbox(eng) == [])
    assert chroma_ids(eng, rec.bucket) == [other.id]
    assert eng.orphan_vectors() == {}


def make_orphans(eng, make_record) -> tuple[list, dict[str, list[str]]]:
    """Three live records and three kinds of orphan vectors; returns (live, orphans)."""
    texts = ("otters swim in the bay", "ferries leave at night", "cranes lift containers")
    live = [make_record(t) for t in texts]
    gone = make_record("deleted behind the outbox's back")
    eng.add([*live, gone])
    with eng.store.transaction() as conn:  # what the old swallowed delete error left behind
        eng.store.delete(conn, [gone.id])
    eng.store.clear_outbox(10**9)
    team = make_record("x").model_copy(update={"scope": Scope.team}).bucket
    vec = eng.store.embeddings([live[0].id], MODEL)[live[0].id][0]
    eng.vectors.upsert(team, MODEL, [VectorItem(live[0].id, 0, vec, {})])  # wrong bucket
    eng.vectors.upsert(live[1].bucket, MODEL, [VectorItem(live[1].id, 3, vec, {})])  # window
    return live, {live[0].bucket: sorted([gone.id, f"{live[1].id}#3"]), team: [live[0].id]}


def test_orphan_vectors_are_counted_and_removed(open_engine, make_record):
    eng = open_engine(HashEmbedder())
    live, orphans = make_orphans(eng, make_record)
    assert {b: sorted(v) for b, v in eng.orphan_vectors().items()} == orphans
    assert eng.remove_orphan_vectors() == 3
    assert eng.orphan_vectors() == {}
    assert chroma_ids(eng, live[0].bucket) == sorted(r.id for r in live)
    assert vector_hits(eng, "ferries leave at night")[0] == live[1].id


def test_reindex_removes_orphan_vectors(open_engine, make_record):
    eng = open_engine(HashEmbedder())
    live, _ = make_orphans(eng, make_record)
    assert eng._sync.reindex() == (3, 3)
    assert eng.orphan_vectors() == {}
    assert chroma_ids(eng, live[0].bucket) == sorted(r.id for r in live)


def test_stats_reports_orphan_vectors_and_reindex_removes_them(
    tmp_path, monkeypatch, capsys, make_record
):
    from server.cli import main

    home = tmp_path / "home"
    for key, value in identity_env(home, "proj", "agent").items():
        monkeypatch.setenv(key, value)
    eng = Engine(home, HashEmbedder())
    make_orphans(eng, make_record)
    eng.close()

    def stats() -> dict:
        capsys.readouterr()
        assert main(["stats"]) == 0
        return json.loads(capsys.readouterr().out)

    assert stats()["orphanVectors"] == 3
    assert main(["reindex", "--orphans"]) == 0
    assert "removed 3 orphan vectors" in capsys.readouterr().out
    assert stats()["orphanVectors"] == 0
    eng = Engine(home, HashEmbedder())
    make_orphans(eng, make_record)
    eng.close()
    assert main(["reindex"]) == 0
    assert "reindexed 6 records, removed 3 orphan vectors" in capsys.readouterr().out
    assert stats()["orphanVectors"] == 0


# ---------------------------------------------------------------------- a model attaching
class AttachesMidWrite(Engine):
    """The model attaches, on another thread, when the writing thread looks at ``embedder``
    for the ``attach_at``-th time (that look still sees no model; every later one sees it)."""

    def __init__(self, *a, model, **kw) -> None:
        self._emb = None
        self.model_to_attach = model
        self.writer: threading.Thread | None = None
        self.attach_at = 1
        super().__init__(*a, **kw)

    @property
    def embedder(self):
        value = self._emb
        if self.writer is threading.current_thread():
            self.attach_at -= 1
            if self.attach_at == 0:
                self.writer = None
                attach = threading.Thread(target=self.set_embedder, args=(self.model_to_attach,))
                attach.start()
                attach.join()
        return value

    @embedder.setter
    def embedder(self, value) -> None:
        self._emb = value


@pytest.mark.parametrize("look", [1, 2, 3])
@pytest.mark.parametrize("path", ["apply", "add", "update", "remember"])
def test_a_model_attaching_during_a_write_neither_fails_nor_splits_it(
    tmp_path, make_record, path, look
):
    eng = AttachesMidWrite(tmp_path / "store", model=HashEmbedder())
    try:
        old = make_record("an older note about ferries")
        if path == "update":
            eng.add([old])
        rec = make_record("the night ferry leaves at ten")
        eng.writer, eng.attach_at = threading.current_thread(), look
        if path == "apply":
            eng.apply(add=[rec])
        elif path == "add":
            eng.add([rec, make_record("the day ferry leaves at nine")], batch=1)
        elif path == "update":
            rec = old.model_copy(update={"content": "the night ferry leaves at ten"})
            eng.update(rec)
        else:
            svc = MemoryService(eng, clock=FakeClock())
            rid = svc.remember(WHO, MemoryInput(content="the night ferry leaves at ten")).memoryId
            rec = eng.get(rid)
        if eng.writer is not None:  # the write looked fewer times: the model attaches after it
            eng.writer = None
            eng.set_embedder(eng.model_to_attach)
        assert eng.get(rec.id).content == "the night ferry leaves at ten"
        eng.sync()
        assert eng.store.outbox() == []
        assert vector_hits(eng, "the night ferry leaves at ten")[0] == rec.id
        assert eng.orphan_vectors() == {}
    finally:
        eng.close()


def test_a_committed_copy_is_applied_from_memory_only_while_it_is_the_stored_version(
    open_engine, make_record
):
    """After a commit the writer hands its records and vectors to the outbox run (no read
    back); a copy that another writer replaced meanwhile is not used."""
    eng = open_engine(HashEmbedder())
    v1 = make_record("first text about pelicans")
    eng.add([v1])
    v1_vecs = eng.store.embeddings([v1.id], MODEL)[v1.id]
    v2 = v1.model_copy(update={"content": "second text about walruses"})
    with eng.store.transaction() as conn:  # another writer's version, not applied yet
        eng.store.replace(conn, v2)
        eng.store.put_embeddings(conn, MODEL, [(v2.id, v2.content_hash, eng.embed([v2])[v2.id])])
    assert eng._sync.run(known={v1.id: (v1, v1_vecs)}) == 1
    hit = eng.search("second text about walruses", RecordFilter(), k=1, mode="vector")[0]
    assert hit.record.id == v1.id and hit.explanation.vector_similarity == pytest.approx(1.0)
    # the stored version's own copy is used as is
    fresh = eng.embed([v2])
    v3 = v2.model_copy(update={"content": "third text about otters"})
    with eng.store.transaction() as conn:
        eng.store.replace(conn, v3)
        eng.store.put_embeddings(conn, MODEL, [(v3.id, v3.content_hash, fresh[v2.id])])
    assert eng._sync.run(known={v3.id: (v3, fresh[v2.id])}) == 1
    hit = eng.search("second text about walruses", RecordFilter(), k=1, mode="vector")[0]
    assert hit.explanation.vector_similarity == pytest.approx(1.0)  # the vectors handed over
