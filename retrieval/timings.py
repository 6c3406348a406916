"""Where a write's time goes: wall and processor time per stage, summed over the writes of a
process (``pattern_health`` reports the means as ``writeStages``).

A write runs inside :meth:`WriteTimings.write`; its parts mark themselves with
:meth:`WriteTimings.stage`. Stages nest exclusively: time spent in an inner stage (the
injection model's embedding inside the write policy) counts for the inner one only. Outside a
write (a recall, a bulk ingest) marking a stage costs one thread-local lookup and records
nothing. Stages:

- ``policy``: the write policy's rules (secrets, instruction-like text) and its checks;
- ``embedding``: the model's forward passes (the record's windows, the injection model's
  reading), including the wait for a group of concurrent writes' texts embedded in one call;
- ``scan``: the update-candidate query (the vector index's nearest records, their scores);
- ``links``: what the candidates' links and eligibility read from the store;
- ``commit``: this write's statements inside the transaction, and the COMMIT;
- ``waiting``: waiting for the store's write lock or for the group commit that carries the
  write;
- ``other``: the rest (validation, citations, building the result).

Wall time includes the time a thread waits for the interpreter lock or a core; processor time
(``time.thread_time``) is what the thread computed itself (the model's kernels run on its
worker threads, so the embedding's processor time is not the thread's).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

STAGES = ("policy", "embedding", "scan", "links", "commit", "waiting", "other")


class WriteTimings:
    """Per-stage wall and processor time of the writes of a process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local = threading.local()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.writes = 0
            self.wall: dict[str, float] = dict.fromkeys(STAGES, 0.0)
            self.cpu: dict[str, float] = dict.fromkeys(STAGES, 0.0)
            self.cpu_seen: set[str] = set()  # stages whose processor time was measured

    @contextmanager
    def write(self) -> Iterator[None]:
        """One write: its stages (and the rest, as ``other``) are added to the sums on exit.
        A write inside a write (a tool that calls another) is part of the outer one."""
        if getattr(self._local, "stack", None) is not None:
            yield
            return
        top = ["other", 0.0, 0.0]  # name, inner wall, inner cpu
        self._local.stack = [top]
        self._local.acc = {}
        w0, c0 = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            wall, cpu = time.perf_counter() - w0, time.thread_time() - c0
            acc = self._local.acc
            self._local.stack = self._local.acc = None
            acc["other"] = (wall - top[1], cpu - top[2])
            with self._lock:
                self.writes += 1
                for name, (w, c) in acc.items():
                    self.wall[name] += w
                    if c is not None:
                        self.cpu[name] += c
                        self.cpu_seen.add(name)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block as stage ``name`` of the current thread's write (nothing outside
        a write)."""
        stack = getattr(self._local, "stack", None)
        if stack is None:
            yield
            return
        frame = [name, 0.0, 0.0]
        stack.append(frame)
        w0, c0 = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            wall, cpu = time.perf_counter() - w0, time.thread_time() - c0
            stack.pop()
            self._count(name, wall - frame[1], cpu - frame[2])
            parent = stack[-1]
            parent[1] += wall
            parent[2] += cpu

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Nothing is timed in the block (it runs other writes' work: a group's round)."""
        saved = getattr(self._local, "stack", None), getattr(self._local, "acc", None)
        self._local.stack = self._local.acc = None
        try:
            yield
        finally:
            self._local.stack, self._local.acc = saved

    def add(self, name: str, wall: float, cpu: float | None = None) -> None:
        """Count ``wall`` (and ``cpu``, when known) seconds to stage ``name`` of the current
        write, outside :meth:`stage` (a time measured elsewhere: a group commit's round)."""
        if getattr(self._local, "acc", None) is None:
            return
        self._count(name, wall, cpu)
        parent = self._local.stack[-1]  # a time added inside another stage is not that one's
        parent[1] += wall
        parent[2] += cpu or 0.0

    def _count(self, name: str, wall: float, cpu: float | None) -> None:
        acc = self._local.acc
        w, c = acc.get(name, (0.0, None))
        acc[name] = (w + wall, c if cpu is None else (c or 0.0) + cpu)

    def snapshot(self) -> dict:
        """{writes, wall_ms: {stage: mean per write}, cpu_ms: {...} (None: not measured, as for
        the time a group commit's round took), total_ms}."""
        with self._lock:
            n = self.writes
            wall, cpu, seen = dict(self.wall), dict(self.cpu), set(self.cpu_seen)
        if not n:
            return {"writes": 0}
        return {
            "writes": n,
            "total_ms": round(1000 * sum(wall.values()) / n, 2),
            "wall_ms": {k: round(1000 * v / n, 2) for k, v in wall.items()},
            "cpu_ms": {k: round(1000 * v / n, 2) if k in seen else None for k, v in cpu.items()},
        }


timings = WriteTimings()  # the process's

__all__ = ["STAGES", "WriteTimings", "timings"]
