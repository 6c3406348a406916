"""Record ids: time-ordered UUIDv7 (RFC 9562), unique, sorted by creation within a process."""

from __future__ import annotations

import threading
import time
import uuid

from retrieval import records
from retrieval.records import new_id


def test_an_id_is_a_version_7_uuid_carrying_its_creation_millisecond():
    before = time.time_ns() // 1_000_000
    value = uuid.UUID(new_id())
    after = time.time_ns() // 1_000_000
    assert value.version == 7
    assert value.variant == uuid.RFC_4122
    assert before <= value.int >> 80 <= after


def test_ids_sort_in_creation_order_and_never_repeat():
    ids = [new_id() for _ in range(20_000)]  # many per millisecond: the counter orders them
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_ids_from_many_threads_are_unique():
    out: list[list[str]] = [[] for _ in range(4)]

    def make(slot: list[str]) -> None:
        slot.extend(new_id() for _ in range(5_000))

    threads = [threading.Thread(target=make, args=(slot,)) for slot in out]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for slot in out for i in slot]
    assert len(set(every)) == len(every)
    for slot in out:
        assert slot == sorted(slot)


def test_a_full_counter_borrows_the_next_millisecond(monkeypatch):
    last = time.time_ns() // 1_000_000 + 60_000  # ahead of the clock however loaded the machine
    monkeypatch.setattr(records, "_last_id", [last, 0xFFF])
    value = uuid.UUID(new_id())
    assert value.int >> 80 == last + 1  # still after the previous id, never before it
    assert (value.int >> 64) & 0xFFF == 0


def test_a_clock_stepping_back_keeps_the_order(monkeypatch):
    later = time.time_ns() // 1_000_000 + 60_000
    monkeypatch.setattr(records, "_last_id", [later, 7])
    a, b = new_id(), new_id()
    assert uuid.UUID(a).int >> 80 == later
    assert a < b
