"""Concurrent writes done together: one transaction for the writes queued at once (each in its
own savepoint, a failing one rolled back alone, every one acknowledged only after the COMMIT),
one model call for the texts of concurrent single writes, the vector writer's rounds spaced
and behind queries, and the per-stage timings of a write. Real SQLite and Chroma in
``tmp_path``."""

from __future__ import annotations

import sqlite3
import threading
import time

import numpy as np
import pytest

from retrieval.embedding.embedder import SentenceTransformerEmbedder
from retrieval.engine import Engine
from retrieval.group import Group, settle
from retrieval.records import Record
from retrieval.timings import WriteTimings, timings
from retrieval.vector.vector_process import VectorProcess
from retrieval.vector.vector_writer import BackgroundWriter
from server.service.core.identity import Identity
from server.service.core.maintenance import health
from server.service.core.models import MemoryInput
from server.service.memories.memory import MemoryService
from tests.conftest import HashEmbedder
from tests.race_util import wait_queued

N = 6
QUEUE_WAIT_S = 10.0  # seconds for the writers to queue in a round


def _concurrent_writes(engine: Engine, make_record, checks: dict[int, object]):
    """N writers that queue while the write lock is held, then commit; returns (records,
    outcome per writer: None or the exception, committed-when-returned per writer)."""
    recs = [make_record(f"note {i} about the release checklist") for i in range(N)]
    outcome: dict[int, BaseException | None] = {}
    seen: dict[int, bool] = {}
    begins: list[int] = []
    transaction = engine.store.transaction

    def counted():
        begins.append(1)
        return transaction()

    def write(i: int) -> None:
        try:
            engine.apply(add=[recs[i]], check=checks.get(i))
            outcome[i] = None
        except Exception as exc:
            outcome[i] = exc
        # acknowledged only once committed: another connection sees it when the call returns
        with sqlite3.connect(engine.store.path) as other:
            row = other.execute("SELECT 1 FROM records WHERE id=?", (recs[i].id,)).fetchone()
        seen[i] = row is not None

    engine.store.transaction = counted
    threads = [threading.Thread(target=write, args=(i,)) for i in range(N)]
    with engine.store._write_lock:  # noqa: SLF001 - hold the writers back until all queued
        for t in threads:
            t.start()
        wait_queued(engine._commits._group, N - 1, QUEUE_WAIT_S)  # noqa: SLF001 - the first one leads a round
    for t in threads:
        t.join(30)
    return recs, outcome, seen, len(begins)


def test_concurrent_writes_commit_in_one_transaction(engine, make_record):
    recs, outcome, seen, begins = _concurrent_writes(engine, make_record, {})
    assert outcome == dict.fromkeys(range(N))
    assert all(seen.values())
    assert begins == 2  # the first writer's round, then the N-1 that queued meanwhile
    assert set(engine.store.get([r.id for r in recs])) == {r.id for r in recs}
    assert engine.store.integrity_check() == []


def test_a_failing_write_is_rolled_back_alone(engine, make_record):
    def refuse(conn):
        raise ValueError("over the limit")

    recs, outcome, seen, _ = _concurrent_writes(engine, make_record, {3: refuse})
    assert isinstance(outcome[3], ValueError) and not seen[3]
    assert all(outcome[i] is None and seen[i] for i in range(N) if i != 3)
    stored = engine.store.get([r.id for r in recs])
    assert set(stored) == {r.id for i, r in enumerate(recs) if i != 3}
    # its statements are gone too: no change-log or outbox row for it
    n = engine.store.reader.execute(
        "SELECT count(*) FROM changes WHERE record_id=?", (recs[3].id,)
    ).fetchone()[0]
    assert n == 0


def test_a_transaction_that_ends_fails_every_write_of_its_round(engine, make_record):
    """A storage error that ends SQLite's transaction: nothing of the round was written, and
    every writer of it gets an error (none is told it succeeded)."""

    def end_it(conn):
        conn.execute("ROLLBACK")
        raise sqlite3.OperationalError("disk I/O error")

    recs, outcome, seen, _ = _concurrent_writes(engine, make_record, {2: end_it})
    failed = {i for i, exc in outcome.items() if exc is not None}
    committed = {i for i in range(N) if seen[i]}
    assert failed | committed == set(range(N)) and not failed & committed
    assert 2 in failed and len(failed) > 1  # the writers of its round failed with it
    assert set(engine.store.get([r.id for r in recs])) == {recs[i].id for i in committed}
    assert engine.store.integrity_check() == []


def test_a_write_inside_a_transaction_runs_in_it(engine, make_record):
    rec = make_record("nested")
    with engine.store.transaction():
        engine.apply(add=[rec])  # the caller holds the lock: no round, no deadlock
    assert rec.id in engine.store.get([rec.id])


def test_group_runs_queued_calls_together_and_answers_each():
    rounds: list[list[int]] = []
    gate = threading.Event()

    def run_many(calls):
        rounds.append([c.item for c in calls])
        if len(rounds) == 1:
            gate.wait(10)
        for c in calls:
            if c.item == 13:
                settle(c, False, KeyError(c.item))
            else:
                settle(c, True, c.item * 2)

    group: Group[int, int] = Group(run_many)
    out: dict[int, object] = {}

    def call(i: int) -> None:
        try:
            out[i] = group(i)
        except KeyError as exc:
            out[i] = exc

    first = threading.Thread(target=call, args=(0,))
    first.start()
    while not rounds:
        time.sleep(0.001)
    rest = [threading.Thread(target=call, args=(i,)) for i in (11, 12, 13)]
    for t in rest:
        t.start()
    wait_queued(group, 3, QUEUE_WAIT_S)
    gate.set()
    for t in [first, *rest]:
        t.join(10)
    assert rounds[0] == [0] and sorted(rounds[1]) == [11, 12, 13]
    assert out[0] == 0 and out[11] == 22 and out[12] == 24
    assert isinstance(out[13], KeyError)
    assert group(5) == 10  # alone: runs at once, in its own round


class _Model(SentenceTransformerEmbedder):
    """The grouping of :class:`SentenceTransformerEmbedder` over a deterministic model (no
    weights read): each forward pass recorded; the text "broken" cannot be embedded."""

    def __init__(self) -> None:
        super().__init__()
        self.dimension = 64
        self.inner = HashEmbedder(64)
        self.passes: list[list[str]] = []
        self.workers: list[int | None] = []
        self.gate = threading.Event()

    def _encode_now(self, texts, workers=None):
        self.passes.append(list(texts))
        self.workers.append(workers)
        if len(self.passes) == 1:
            self.gate.wait(10)
        if "broken" in texts:
            raise ValueError("cannot embed")
        return self.inner.embed_documents(list(texts))


def test_concurrent_embeddings_share_one_model_call_and_fail_alone():
    model = _Model()
    out: dict[str, object] = {}

    def embed(text: str) -> None:
        try:
            out[text] = model.embed_documents([text])
        except ValueError as exc:
            out[text] = exc

    first = threading.Thread(target=embed, args=("first text",))
    first.start()
    while not model.passes:
        time.sleep(0.001)
    texts = ["alpha beta", "gamma delta", "broken", "alpha beta"]
    rest = [threading.Thread(target=embed, args=(t,)) for t in texts]
    for t in rest:
        t.start()
    wait_queued(model._group, 4, QUEUE_WAIT_S)  # noqa: SLF001
    model.gate.set()
    for t in [first, *rest]:
        t.join(10)
    # the four queued calls: one batch (each text once), which failed on "broken"; then each
    # call alone, so only the broken one fails
    assert sorted(model.passes[1]) == ["alpha beta", "broken", "gamma delta"]
    assert isinstance(out["broken"], ValueError)
    for text in ("first text", "alpha beta", "gamma delta"):
        assert np.allclose(out[text], model.inner.embed_documents([text]))
    assert set(model.workers) == {1}  # a group's batch runs on one core
    # a bulk call is not grouped: it is its own model call, on every core
    model.passes.clear()
    model.workers.clear()
    model.embed_documents([f"text {i}" for i in range(40)])
    assert len(model.passes) == 1 and len(model.passes[0]) == 40
    assert model.workers == [None]


def test_the_vector_writer_spaces_its_rounds():
    starts: list[float] = []
    writer = BackgroundWriter(lambda: starts.append(time.monotonic()), gap=0.3)
    try:
        t0 = time.monotonic()
        writer.kick()
        assert writer.wait_idle(5)
        writer.kick()  # a write right after a round: applied one gap after it started
        assert writer.wait_idle(5)
        assert starts[0] - t0 < 0.2  # the first at once
        assert starts[1] - starts[0] >= 0.29
    finally:
        writer.close()


def test_a_vector_write_waits_for_the_queries_in_flight(tmp_path):
    vp = VectorProcess(str(tmp_path / "chroma"), start=False)
    order: list[str] = []
    answering = threading.Event()

    def send(method, *args):
        order.append(f"{method} sent")
        if method == "query":
            answering.wait(10)
        order.append(f"{method} done")

    vp._send = send  # the child's side is not what this tests
    q = threading.Thread(target=vp.query, args=(["b"], "m", [0.0], 5))
    q.start()
    while "query sent" not in order:
        time.sleep(0.001)
    w = threading.Thread(target=vp.upsert, args=("b", "m", [object()]))
    w.start()
    time.sleep(0.1)
    assert "upsert sent" not in order  # held while the query is answered
    answering.set()
    q.join(5)
    w.join(5)
    assert order == ["query sent", "query done", "upsert sent", "upsert done"]


def test_stages_nest_exclusively_and_outside_a_write_record_nothing():
    """A stage inside another is counted once, in the inner one; the stages and the rest add
    up to the write's time. (Sleeps give lower bounds only: a loaded machine only adds.)"""
    t = WriteTimings()
    with t.stage("policy"):
        time.sleep(0.01)  # not inside a write: not counted
    assert t.writes == 0
    with t.write():
        p0 = time.perf_counter()
        with t.stage("policy"):
            time.sleep(0.02)
            with t.stage("embedding"):
                time.sleep(0.03)
        outer_ms = (time.perf_counter() - p0) * 1000
        w0 = time.perf_counter()
        time.sleep(0.05)  # a wait measured elsewhere (a group commit's), added to the write
        t.add("waiting", time.perf_counter() - w0)
    snap = t.snapshot()
    wall = snap["wall_ms"]
    assert snap["writes"] == 1
    assert wall["policy"] >= 20 and wall["embedding"] >= 30 and wall["waiting"] >= 50
    # the policy stage holds the embedding's time once, not twice
    assert abs(wall["policy"] + wall["embedding"] - outer_ms) < 1.0
    assert wall["other"] >= 0
    assert abs(sum(wall.values()) - snap["total_ms"]) < 0.1


def test_health_reports_where_writes_spend_their_time(tmp_path):
    timings.reset()
    svc = MemoryService(Engine(tmp_path / "s", HashEmbedder()))
    who = Identity(project_id="p", agent_id="a")
    try:
        assert health(svc, who).writeStages is None
        for i in range(3):
            svc.remember(who, MemoryInput(content=f"the cache key of step {i} is the lockfile"))
        stages = health(svc, who).writeStages
        assert stages["writes"] == 3
        assert set(stages["wall_ms"]) == {
            "policy", "embedding", "scan", "links", "commit", "waiting", "other",
        }  # fmt: skip
        assert stages["wall_ms"]["commit"] > 0 and stages["wall_ms"]["policy"] > 0
        assert stages["cpu_ms"]["commit"] is not None
        assert stages["cpu_ms"]["waiting"] is None  # a wait: no processor time of its own
        assert abs(sum(stages["wall_ms"].values()) - stages["total_ms"]) < 0.1
    finally:
        svc.engine.close()
        timings.reset()


@pytest.mark.parametrize("fresh", [True, False])
def test_candidates_query_the_index_only_when_the_bucket_has_older_records(
    tmp_path, monkeypatch, fresh
):
    """Records of this sitting are never candidates: a bucket holding nothing older asks the
    vector index nothing."""
    from datetime import timedelta

    from retrieval.records import utcnow

    eng = Engine(tmp_path / "s", HashEmbedder())
    svc = MemoryService(eng)
    who = Identity(project_id="p", agent_id="a")
    try:
        if not fresh:
            old = utcnow() - timedelta(days=3)
            rec = Record(project_id="p", agent_id="a", content="the cache key is the lockfile",
                         created_at=old, updated_at=old)  # fmt: skip
            eng.add([rec])
        eng.wait_vectors(10)
        asked: list[str] = []
        query = eng.ranker.vector_candidates
        monkeypatch.setattr(eng.ranker, "vector_ready", lambda: True)
        monkeypatch.setattr(eng.ranker, "vector_candidates",
                            lambda *a, **k: asked.append("q") or query(*a, **k))  # fmt: skip
        svc.remember(who, MemoryInput(content="the cache key is the lockfile hash"))
        assert asked == ([] if fresh else ["q"])
    finally:
        eng.close()
