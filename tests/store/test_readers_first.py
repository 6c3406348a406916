"""Readers first (``retrieval/priority.py``): a write gives way to a running search between its
stages, for at most ``max_wait`` a stage, and never when no search runs. Real threads, a
real engine in a temp folder."""

from __future__ import annotations

import threading
import time

import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.priority import ReadersFirst
from retrieval.records import Record


def test_a_write_waits_while_a_read_runs_and_goes_on_when_it_ends():
    gate = ReadersFirst(max_wait=5.0)
    order: list[str] = []
    inside, release = threading.Event(), threading.Event()

    def read() -> None:
        with gate.reading():
            inside.set()
            release.wait(5)
            order.append("read ended")

    def write() -> None:
        gate.give_way()
        order.append("write went on")

    reader = threading.Thread(target=read)
    reader.start()
    inside.wait(5)
    writer = threading.Thread(target=write)
    writer.start()
    writer.join(0.2)
    assert writer.is_alive() and order == []  # held while the read runs
    release.set()
    reader.join(5)
    writer.join(5)
    assert order == ["read ended", "write went on"]


def test_a_write_is_slowed_never_starved():
    gate = ReadersFirst(max_wait=0.05)
    inside, release = threading.Event(), threading.Event()

    def read() -> None:
        with gate.reading():
            inside.set()
            release.wait(10)

    reader = threading.Thread(target=read)
    reader.start()
    inside.wait(5)
    t0 = time.monotonic()
    gate.give_way()  # the read does not end while we wait: the bound lets the write go
    waited = time.monotonic() - t0
    release.set()
    reader.join(5)
    assert 0.04 <= waited < 2.0


def test_nested_and_concurrent_reads_are_counted():
    gate = ReadersFirst(max_wait=5.0)
    with gate.reading():
        with gate.reading():
            pass
        done = threading.Event()
        threading.Thread(target=lambda: (gate.give_way(), done.set())).start()
        assert not done.wait(0.1)  # the outer read still runs
    assert done.wait(5)


def test_a_read_that_raises_still_lets_writes_go():
    gate = ReadersFirst(max_wait=5.0)
    try:
        with gate.reading():
            raise ValueError("a failing search")
    except ValueError:
        pass
    t0 = time.monotonic()
    gate.give_way()
    assert time.monotonic() - t0 < 1.0


def test_a_read_that_writes_does_not_wait_for_itself():
    gate = ReadersFirst(max_wait=5.0)
    with gate.reading():
        t0 = time.monotonic()
        gate.give_way()
        assert time.monotonic() - t0 < 1.0


def test_no_read_no_wait():
    gate = ReadersFirst(max_wait=5.0)
    t0 = time.monotonic()
    for _ in range(1000):
        gate.give_way()
    assert time.monotonic() - t0 < 1.0


@pytest.mark.parametrize("how", ["add", "apply"])
def test_the_engines_writes_give_way_to_its_searches(tmp_path, how):
    """A search in progress holds back a write at its next stage (a batch of ``add``, the
    start of ``apply``), and the write commits once the search ends."""
    engine = Engine(tmp_path / "store", HashEmbedder(32))
    engine.readers.max_wait = 5.0
    try:
        engine.add([Record(project_id="p", agent_id="a", content="first note")])
        committed = threading.Event()

        def write() -> None:
            rec = Record(project_id="p", agent_id="a", content="second note")
            engine.add([rec]) if how == "add" else engine.apply(add=[rec])
            committed.set()

        with engine.readers.reading():  # as Engine.search holds it
            writer = threading.Thread(target=write)
            writer.start()
            assert not committed.wait(0.3)
        assert committed.wait(10)
        writer.join(5)
        assert len(engine.search("note", k=5)) == 2
    finally:
        engine.close()


def test_a_stream_of_reads_delays_a_stage_by_one_read_not_by_the_bound():
    """Reads that start while a write waits are not waited for: against readers that overlap
    without a gap, each give_way waits for the reads running when it was called (5 ms
    each here), not for its whole bound (found in review: 20 stages took 20 x 50 ms)."""
    gate = ReadersFirst(max_wait=0.25)
    stop = threading.Event()

    def read_forever() -> None:
        while not stop.is_set():
            with gate.reading():
                time.sleep(0.005)

    readers = [threading.Thread(target=read_forever) for _ in range(3)]
    for r in readers:
        r.start()
    try:
        time.sleep(0.05)
        t0 = time.monotonic()
        for _ in range(20):
            gate.give_way()
        took = time.monotonic() - t0
    finally:
        stop.set()
        for r in readers:
            r.join(5)
    assert took < 20 * 0.25 / 4, took  # the bound each time would be 5 s


def test_a_bulk_write_gives_way_once_per_stage_not_once_per_record(tmp_path):
    """A read that never ends holds a write of 100 records for one bound per stage (the
    batch, its transaction), not one per record screened (found in review)."""
    engine = Engine(tmp_path / "store", HashEmbedder(32))
    engine.readers.max_wait = 0.3
    engine.screen = lambda rec: (rec, [])  # every record screened, as the daemon's policy does
    inside, release = threading.Event(), threading.Event()

    def read() -> None:
        with engine.readers.reading():
            inside.set()
            release.wait(30)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        inside.wait(5)
        recs = [Record(project_id="p", agent_id="a", content=f"note {i}") for i in range(100)]
        t0 = time.monotonic()
        engine.apply(add=recs)
        took = time.monotonic() - t0
    finally:
        release.set()
        reader.join(5)
        engine.close()
    assert 0.25 <= took < 5 * 0.3, took


def test_a_read_left_on_another_thread_is_not_counted_forever():
    """A read entered on one thread and ended on another (an async hand-off) still ends."""
    gate = ReadersFirst(max_wait=5.0)
    cm = gate.reading()
    entered = threading.Thread(target=cm.__enter__)
    entered.start()
    entered.join(5)
    cm.__exit__(None, None, None)  # ended here, on a thread that never entered
    t0 = time.monotonic()
    gate.give_way()
    assert time.monotonic() - t0 < 1.0
    with gate.reading():  # and this thread's own count is not below zero
        done = threading.Event()
        threading.Thread(target=lambda: (gate.give_way(), done.set())).start()
        assert not done.wait(0.1)
    assert done.wait(5)
