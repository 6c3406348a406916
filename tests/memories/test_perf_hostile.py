"""Hostile checks of the performance paths: group commit (writes that fail inside a shared
transaction, duplicate idempotency keys in one round, a COMMIT that fails, a leader that dies,
fifty writers at once, a waiter interrupted while it waits), grouped embedding (a call that is
no text, empty and huge texts in a round), tools built lazily (the same list as eager building,
built once under concurrent calls) and the vector index started after the first answer (a
daemon nobody asks, writes before it starts, shutdown before it starts). Real SQLite and
Chroma in ``tmp_path``."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time

import numpy as np
import pytest

from retrieval.engine import Engine
from retrieval.group import Group, settle
from server.service.core import scopes
from server.service.core.errors import InvalidInput, LimitExceeded, PatternError
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from server.service.memories.memory import MemoryService
from server.service.trust.secret_scan.secrets import SecretPolicy
from tests.conftest import HashEmbedder
from tests.race_util import race, wait_queued

WHO = Identity(project_id="proj", agent_id="agent-a")
AKID = "AKIA" + "J5Q7R2L4M8N3P6T9"
QUEUE_WAIT_S = 20.0  # seconds for the writers to queue in a round


@pytest.fixture
def svc(tmp_path):
    service = MemoryService(Engine(tmp_path / "store", HashEmbedder()),
                            secret_policy=SecretPolicy.block)  # fmt: skip
    yield service
    service.engine.close()


def _in_one_round(svc: MemoryService, calls: list, queued: int | None = None) -> dict:
    """Run ``calls`` (no-argument callables) on threads that queue behind the held write lock,
    so the ones that reach the commit share a round. Returns index -> result or exception."""
    out: dict[int, object] = {}

    def run(i: int) -> None:
        try:
            out[i] = calls[i]()
        except BaseException as exc:  # noqa: BLE001 - the outcome under test
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(calls))]
    with svc.store._write_lock:  # noqa: SLF001 - hold the round back until all queued
        for t in threads:
            t.start()
        behind = len(calls) - 1 if queued is None else queued
        wait_queued(svc.engine._commits._group, behind, QUEUE_WAIT_S)  # noqa: SLF001
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a writer never returned"
    return out


def _stored(svc: MemoryService) -> list[str]:
    rows = svc.store.reader.execute("SELECT content FROM records WHERE kind='memory'")
    return sorted(r[0] for r in rows.fetchall())


def test_limits_inside_one_round_see_the_rounds_earlier_writes(svc, monkeypatch):
    """Ten writes race for three free places: the limit check of each savepoint counts the
    writes of the round before it; exactly three commit, the rest get LimitExceeded."""
    monkeypatch.setattr(scopes, "MAX_SHARED_PER_PROJECT", 3)
    texts = [f"shared decision number {i} on the release" for i in range(10)]
    out = _in_one_round(svc, [
        (lambda t=t: svc.remember(WHO, MemoryInput(content=t, scope="team"))) for t in texts
    ])  # fmt: skip
    ok = {i for i, r in out.items() if not isinstance(r, BaseException)}
    assert len(ok) == 3
    assert all(isinstance(out[i], LimitExceeded) for i in set(out) - ok)
    assert _stored(svc) == sorted(texts[i] for i in ok)
    assert {out[i].memoryId for i in ok} == set(
        r[0] for r in svc.store.reader.execute("SELECT id FROM records").fetchall()
    )


def test_a_blocked_secret_and_bad_input_fail_alone_among_concurrent_writes(svc):
    texts = [f"the deploy step {i} waits for the canary" for i in range(8)]
    texts[2] = f"the deploy key is {AKID} keep it"
    calls = [(lambda t=t: svc.remember(WHO, MemoryInput(content=t))) for t in texts]
    big = "x" * (scopes.MAX_CONTENT_BYTES + 10)
    calls.append(lambda: svc.remember(WHO, MemoryInput(content=big)))
    # the secret and the bad input fail before the commit: 7 writes queue
    out = _in_one_round(svc, calls, queued=6)
    assert isinstance(out[2], PatternError) and AKID not in str(out[2])
    assert isinstance(out[8], (InvalidInput, ValueError))
    good = [i for i in range(8) if i != 2]
    assert all(not isinstance(out[i], BaseException) for i in good)
    assert len({out[i].memoryId for i in good}) == 7
    assert _stored(svc) == sorted(texts[i] for i in good)


def test_one_idempotency_key_in_one_round_writes_once(svc):
    """Six calls with one key and one request, in one round: one record, every caller gets its
    result; a seventh with the same key and another request gets a clear error."""
    same = [(lambda: svc.remember(WHO, MemoryInput(content="the cache key is the lockfile"),
                                  idempotency_key="k1")) for _ in range(6)]  # fmt: skip
    other = lambda: svc.remember(WHO, MemoryInput(content="another text"), idempotency_key="k1")  # noqa: E731
    out = _in_one_round(svc, [*same, other])
    ids = {out[i].memoryId for i in range(6) if not isinstance(out[i], BaseException)}
    assert len(ids) == 1, out
    assert isinstance(out[6], PatternError), out[6]
    assert _stored(svc) == ["the cache key is the lockfile"]


def test_a_failing_commit_fails_every_write_of_the_round(svc, monkeypatch):
    """No write is acknowledged before COMMIT: when COMMIT fails, every writer of the round
    gets an error and nothing is stored."""
    real = svc.store._writer  # noqa: SLF001

    class Failing:
        def __getattr__(self, name):
            return getattr(real, name)

        def execute(self, sql, *args):
            if sql == "COMMIT":
                raise sqlite3.OperationalError("disk I/O error")
            return real.execute(sql, *args)

    texts = [f"note {i} about the flaky test" for i in range(5)]
    calls = [(lambda t=t: svc.remember(WHO, MemoryInput(content=t))) for t in texts]
    monkeypatch.setattr(svc.store, "_writer", Failing())
    out = _in_one_round(svc, calls)
    monkeypatch.setattr(svc.store, "_writer", real)
    assert all(isinstance(r, Exception) for r in out.values()), out
    assert _stored(svc) == []
    svc.remember(WHO, MemoryInput(content="written after the failure"))  # the store still works
    assert _stored(svc) == ["written after the failure"]


class Died(BaseException):
    """Not an Exception: what a leader dying mid-round (an interrupt) raises."""


def test_a_leader_dying_mid_round_fails_its_round_and_the_group_goes_on(svc, make_record):
    eng = svc.engine
    recs = [make_record(f"note {i} on the schema") for i in range(5)]

    def die(conn):
        raise Died()

    checks = {2: die}
    out = _in_one_round(svc, [
        (lambda i=i: eng.apply(add=[recs[i]], check=checks.get(i))) for i in range(5)
    ])  # fmt: skip
    # the round that ran the dying body was rolled back whole: its writers all got the error
    died = {i for i, r in out.items() if isinstance(r, Died)}
    assert 2 in died
    stored = set(eng.store.get([r.id for r in recs]))
    assert stored == {recs[i].id for i in range(5) if i not in died}
    assert all(out[i] is not None and not isinstance(out[i], BaseException)
               for i in range(5) if i not in died)  # fmt: skip
    assert not eng.store.in_write() and not eng.store._writer.in_transaction  # noqa: SLF001
    late = make_record("written after the leader died")
    t = threading.Thread(target=eng.apply, kwargs={"add": [late]}, daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive() and late.id in eng.store.get([late.id])


def test_fifty_writers_lose_and_duplicate_nothing(svc):
    n = 50
    out = dict(enumerate(race(n, lambda i: svc.remember(
        WHO, MemoryInput(content=f"fact {i}: the port of service {i}"),
        idempotency_key=f"k{i % 40}" if i < 45 else None), timeout=120)))  # fmt: skip
    errors = {i: r for i, r in out.items() if isinstance(r, Exception)}
    # keys k0..k4 are used twice with different texts: one of each pair wins, the other
    # gets the idempotency mismatch; every other call succeeds
    assert all(isinstance(e, PatternError) and i % 40 < 5 for i, e in errors.items()), errors
    ids = [r.memoryId for r in out.values() if not isinstance(r, Exception)]
    assert len(ids) == len(set(ids)) == n - len(errors) == 45
    rows = svc.store.reader.execute("SELECT id FROM records WHERE kind='memory'").fetchall()
    assert sorted(r[0] for r in rows) == sorted(ids)
    assert svc.store.integrity_check() == []
    assert not svc.engine._commits._group._busy  # noqa: SLF001 - nothing left queued


class Interrupted(Exception):
    pass


def test_a_writer_interrupted_while_it_waits_is_withdrawn_and_the_group_goes_on(svc, make_record):
    """The main thread waits in a round's queue and a signal handler raises there (Ctrl-C, a
    timeout alarm): its write is withdrawn (its caller got the error: nothing written), and
    the writes after it are still committed; before, the interrupted call stayed first in the
    queue, was woken to lead the next round that nobody ran, and every later write hung."""
    eng = svc.engine
    first, mine, late = (make_record(t) for t in ("the leader's", "interrupted", "later"))
    gate, entered = threading.Event(), threading.Event()

    def hold(conn):
        entered.set()
        gate.wait(20)

    leader = threading.Thread(target=eng.apply, kwargs={"add": [first], "check": hold},
                              daemon=True)  # fmt: skip
    leader.start()
    assert entered.wait(20)

    def alarm(*_):
        raise Interrupted()

    before = signal.signal(signal.SIGALRM, alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(Interrupted):
            eng.apply(add=[mine])  # queues behind the leader's round, then the signal
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    gate.set()
    leader.join(20)
    t = threading.Thread(target=eng.apply, kwargs={"add": [late]}, daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "writes hang after an interrupted waiter"
    assert set(eng.store.get([first.id, mine.id, late.id])) == {first.id, late.id}


def test_a_group_waiter_interrupted_after_it_was_made_leader_passes_the_round_on():
    """The unit case: the interrupted call had already been woken to run the next round;
    the calls queued behind it still run."""
    gate, started = threading.Event(), threading.Event()

    def run_many(calls):
        if calls[0].item == "first":
            started.set()
            gate.wait(20)
        for c in calls:
            settle(c, True, c.item.upper())

    group: Group[str, str] = Group(run_many)
    out: dict[str, str] = {}
    threading.Thread(target=lambda: out.setdefault("first", group("first")), daemon=True).start()
    assert started.wait(20)

    def alarm(*_):
        gate.set()  # the round ends: this waiter is woken to lead the next ...
        time.sleep(0.2)  # ... and "behind" queues meanwhile
        raise Interrupted()  # ... and then it is interrupted

    behind = threading.Thread(target=lambda: out.setdefault("behind", group("behind")),
                              daemon=True)  # fmt: skip
    before = signal.signal(signal.SIGALRM, alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        threading.Timer(0.1, behind.start).start()
        with pytest.raises(Interrupted):
            group("mine")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    behind.join(20)
    assert out == {"first": "FIRST", "behind": "BEHIND"}
    assert not group._busy and not group._queue  # noqa: SLF001


# ---------------------------------------------------------------------- grouped embedding


def _grouped(model, calls: dict[str, list]) -> dict[str, object]:
    """Each of ``calls`` (name -> texts) embedded by its own thread, all in one round of the
    model's group (a first call holds the model until the others queued)."""
    gate, passes = threading.Event(), []
    encode = model._encode_now  # noqa: SLF001

    def held(texts, *args, **kwargs):
        passes.append(list(texts))
        if len(passes) == 1:
            gate.wait(20)
        return encode(texts, *args, **kwargs)

    model._encode_now = held  # noqa: SLF001
    out: dict[str, object] = {}

    def run(name: str, texts: list) -> None:
        try:
            out[name] = model.embed_documents(texts)
        except Exception as exc:  # noqa: BLE001 - the outcome under test
            out[name] = exc

    try:
        first = threading.Thread(target=run, args=("_first", ["the first text"]), daemon=True)
        first.start()
        deadline = time.monotonic() + 20
        while not passes:
            assert time.monotonic() < deadline, "the first call never reached the model"
            time.sleep(0.001)
        threads = [threading.Thread(target=run, args=item, daemon=True) for item in calls.items()]
        for t in threads:
            t.start()
        wait_queued(model._group, len(calls), QUEUE_WAIT_S)  # noqa: SLF001
        gate.set()
        for t in [first, *threads]:
            t.join(120)
        assert not any(t.is_alive() for t in threads)
    finally:
        del model._encode_now  # noqa: SLF001 - the class's own again
    return out


def test_a_call_that_is_no_text_fails_alone_in_its_round():
    """A call whose item cannot even be batched (unhashable) fails its own call only; before,
    it failed every call of the round (the batch was built outside the per-call fallback)."""
    from retrieval.embedding.embedder import SentenceTransformerEmbedder

    model = SentenceTransformerEmbedder()  # its grouping, over the hashing embedder: no weights
    model.dimension = 64
    inner = HashEmbedder(64)
    model._encode_batches = lambda texts, *_: inner.embed_documents(  # noqa: SLF001
        [t if isinstance(t, str) else 1 / 0 for t in texts])  # fmt: skip
    out = _grouped(model, {"bad": [["not", "a", "text"]], "a": ["alpha beta"],
                           "b": ["gamma", "alpha beta"]})  # fmt: skip
    assert isinstance(out["bad"], Exception)
    assert np.allclose(out["a"], inner.embed_documents(["alpha beta"]))
    assert np.allclose(out["b"], inner.embed_documents(["gamma", "alpha beta"]))
    assert np.allclose(out["_first"], inner.embed_documents(["the first text"]))


@pytest.mark.slow
def test_empty_and_huge_texts_in_a_round_get_their_own_vectors(real_embedder):
    texts = {"empty": [""], "huge": ["word " * 200_000], "pair": ["beta gamma", ""],
             "none": [None], "plain": ["the release checklist"]}  # fmt: skip
    alone = {k: real_embedder._encode_now(v) for k, v in texts.items() if k != "none"}  # noqa: SLF001
    out = _grouped(real_embedder, texts)
    assert isinstance(out["none"], Exception)  # fails alone, the others are answered
    for k, want in alone.items():
        assert out[k].shape == want.shape and np.allclose(out[k], want, atol=1e-4), k


# ---------------------------------------------------------------------- LazyTools


def _listed(server) -> list[dict]:
    import asyncio

    return [t.model_dump(mode="json") for t in asyncio.run(server.list_tools())]


def test_lazy_tools_list_what_eager_building_lists(monkeypatch):
    """Same tools, same order, same schemas, descriptions and annotations."""
    import server.mcp.toolset as toolset
    from server.mcp.app import create_server

    lazy = _listed(create_server())
    monkeypatch.setattr(toolset, "lazy_tools", lambda server: None)
    eager_server = create_server()
    assert not isinstance(eager_server._tool_manager, toolset.LazyTools)  # noqa: SLF001
    eager = _listed(eager_server)
    assert [t["name"] for t in lazy] == [t["name"] for t in eager]
    assert lazy == eager


def test_lazy_tools_built_concurrently_are_built_once_and_listed_whole(monkeypatch):
    from mcp.server.mcpserver.tools import ToolManager

    from server.mcp.app import create_server

    want = _listed(create_server())
    server = create_server()
    manager = server._tool_manager  # noqa: SLF001
    names = [t["name"] for t in want]
    built: list[str] = []
    add = ToolManager.add_tool

    def counted(self, fn, name=None, **kw):
        built.append(name)
        time.sleep(0.002)  # widen the window in which another thread asks for it
        return add(self, fn, name=name, **kw)

    monkeypatch.setattr(ToolManager, "add_tool", counted)
    lists: list[list[str]] = []
    got: dict[str, object] = {}
    errors: list[BaseException] = []

    def lister() -> None:
        try:
            start.wait(10)
            lists.append([t.name for t in manager.list_tools()])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def getter(part: list[str]) -> None:
        try:
            start.wait(10)
            for n in part:
                got[n] = manager.get_tool(n)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=lister) for _ in range(4)]
    threads += [threading.Thread(target=getter, args=(names[i::4][::-1],)) for i in range(4)]
    threads.append(threading.Thread(target=manager.build_all))
    start = threading.Barrier(len(threads) - 1)  # the listers and getters; build_all runs free
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert sorted(built) == sorted(names)  # each tool built exactly once
    assert lists == [names] * 4
    assert all(got[n] is manager.get_tool(n) and got[n].name == n for n in names)
    assert manager.get_tool("no-such-tool") is None
    assert _listed(server) == want


# ---------------------------------------------------------------------- the deferred vector index


@pytest.fixture
def deferred(tmp_path, monkeypatch):
    """A daemon's runtime: the hashing embedder loaded, the vector index's process deferred."""
    from server.http import after_start
    from server.service.core.runtime import Runtime

    monkeypatch.setattr(after_start, "FIRST_ANSWER_WAIT_S", 0.5)
    rt = Runtime.start({"PATTERN_HOME": str(tmp_path / "home"), "PATTERN_EMBEDDER": "hash",
                        "PATTERN_VECTOR_INDEX_FROM": "0"},  # the index, not a small store's scan
                       model="now", defer_vectors=True)  # fmt: skip
    yield rt, after_start
    rt.close()


def _after_first_answer(after_start, rt):
    later, failed = threading.Event(), []

    def run() -> None:
        try:
            after_start.after_first_answer(rt, (later.set,))
        except BaseException as exc:  # noqa: BLE001
            failed.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, later, failed


def test_a_daemon_nobody_asks_still_starts_its_vector_index(deferred):
    rt, after_start = deferred
    vp = rt.engine.vectors
    assert rt.model_ready.is_set() and vp._child is None  # noqa: SLF001 - deferred
    t, later, failed = _after_first_answer(after_start, rt)
    t.join(20)
    assert not t.is_alive() and not failed and later.is_set()
    assert vp._child is not None  # noqa: SLF001 - started without any search
    assert not rt.engine.answered.is_set()


def test_writes_before_the_index_starts_are_found_by_meaning_and_applied(deferred):
    rt, after_start = deferred
    eng = rt.engine
    ids = [rt.service.remember(rt.identity, MemoryInput(content=t)).memoryId for t in (
        "the deploy pipeline rolls out blue green", "the cache key is the lockfile hash",
    )]  # fmt: skip
    found = eng.search("blue green deploy rollout", k=5, mode="vector")
    assert found and found[0].record.id == ids[0]
    t, _, failed = _after_first_answer(after_start, rt)
    t.join(20)
    assert not failed
    assert eng.wait_vectors(30)
    assert eng.store.reader.execute("SELECT count(*) FROM vector_outbox").fetchone()[0] == 0
    vp = eng.vectors
    end = time.monotonic() + 30
    while not vp.ready and time.monotonic() < end:
        time.sleep(0.05)
    found = eng.search("lockfile hash cache key", k=5, mode="vector")
    assert found[0].record.id == ids[1]
    assert "opening" not in found[0].explanation.mode  # from the index, not the exact scan


def test_shutdown_before_the_index_starts_starts_nothing(deferred, monkeypatch):
    rt, after_start = deferred
    monkeypatch.setattr(after_start, "FIRST_ANSWER_WAIT_S", 1.0)
    vp = rt.engine.vectors
    t, later, failed = _after_first_answer(after_start, rt)
    rt.close()  # the daemon stops before the first answer came and before the wait ended
    t.join(20)
    assert not t.is_alive() and not failed
    assert vp._child is None  # noqa: SLF001 - no process started for a closed index
