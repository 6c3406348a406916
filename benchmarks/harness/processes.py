"""Processes measured from outside (Linux ``/proc``): a process's processor seconds, its
children, and the processor time a group of processes used over a window, by role.

``/proc/PID/stat`` fields 14 and 15 (``utime``, ``stime``, in clock ticks) are the process's
own user and system time, all of its threads included; a child's time is not in them. A
process that has exited is gone from ``/proc``: :class:`CpuByRole` reads the table every
``period`` seconds and keeps each process's last reading, so a process that exits inside the
window loses at most one period of its time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

PROC = Path("/proc")


def _stat(pid: int | str) -> tuple[int, int, int]:
    """(parent pid, user + system clock ticks, start time in ticks since boot) of a live
    process (``stat`` fields 4, 14 + 15, 22; the name in field 2 may hold spaces and ")")."""
    fields = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[19])


def cpu_seconds(pid: int) -> float:
    """User + system processor seconds of a process so far (``/proc/PID/stat``)."""
    return _stat(pid)[1] / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The direct children of a process (``/proc/PID/task/*/children``)."""
    out: list[int] = []
    for task in (PROC / str(pid) / "task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def table() -> dict[int, tuple[int, int, int, str]]:
    """Every live process: pid -> (parent pid, clock ticks so far, start time, command line)."""
    out: dict[int, tuple[int, int, int, str]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid, ticks, start = _stat(entry.name)
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue  # exited while being read
        out[int(entry.name)] = (ppid, ticks, start, cmd)
    return out


Classify = Callable[[int, int, str, dict[int, str]], "str | None"]


class CpuByRole:
    """Processor seconds per role over a window. ``classify(pid, ppid, cmdline, roles)`` names
    a process's role (``roles``: pid -> role of the processes named so far, so a child can take
    its parent's), or None to leave it out. A process is known by its pid and start time (a
    pid used again is another process). Its time counts from its first reading when it
    started before the window, from 0 when it started inside it. A reading that fails is kept
    in :attr:`errors`; the figures then miss that period, the run goes on."""

    def __init__(self, classify: Classify, period: float = 0.2) -> None:
        self.classify = classify
        self.period = period
        self.errors: list[str] = []
        self._roles: dict[tuple[int, int], str] = {}
        self._left_out: set[tuple[int, int]] = set()
        self._first: dict[tuple[int, int], int] = {}
        self._last: dict[tuple[int, int], int] = {}
        self._started = 0.0  # ticks since boot when the window opened
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ticks = os.sysconf("SC_CLK_TCK")

    def _read(self) -> None:
        procs = table()
        named = {
            pid: self._roles[(pid, p[2])] for pid, p in procs.items() if (pid, p[2]) in self._roles
        }
        new = True
        while new:  # a parent named in one pass lets its children be named in the next
            new = False
            for pid, (ppid, ticks, start, cmd) in procs.items():
                key = (pid, start)
                if key in self._roles or key in self._left_out:
                    continue
                role = self.classify(pid, ppid, cmd, named)
                if role is None:
                    if ppid not in named:
                        continue  # asked again once its parent is named, or next period
                    self._left_out.add(key)
                    continue
                self._roles[key] = named[pid] = role
                self._first[key] = ticks if start <= self._started else 0
                new = True
        for pid, (_, ticks, start, _) in procs.items():
            if (pid, start) in self._roles:
                self._last[(pid, start)] = ticks

    def _safe_read(self) -> None:
        try:
            self._read()
        except Exception as exc:  # a figure short by one period, never a failed run
            self.errors.append(repr(exc)[:200])

    def start(self) -> CpuByRole:
        self._started = _uptime_ticks(self._ticks)
        self._safe_read()

        def loop() -> None:
            while not self._stop.wait(self.period):
                self._safe_read()

        self._thread = threading.Thread(target=loop, daemon=True, name="cpu-by-role")
        self._thread.start()
        return self

    def stop(self) -> dict[str, dict[str, float]]:
        """Per role: its processes and their processor seconds over the window."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._safe_read()
        out: dict[str, dict[str, float]] = {}
        for key, role in self._roles.items():
            row = out.setdefault(role, {"processes": 0, "cpu_s": 0.0})
            row["processes"] += 1
            row["cpu_s"] += max(0, self._last.get(key, 0) - self._first[key]) / self._ticks
        for row in out.values():
            row["cpu_s"] = round(row["cpu_s"], 2)
        return out


def _uptime_ticks(hz: int) -> float:
    """Clock ticks since boot (``/proc/uptime``), the unit of a process's start time."""
    return float((PROC / "uptime").read_text().split()[0]) * hz
