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


def _stat(pid: int | str) -> tuple[int, int]:
    """(parent pid, user + system clock ticks) of a live process."""
    fields = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[11]) + int(fields[12])


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


def table() -> dict[int, tuple[int, int, str]]:
    """Every live process: pid -> (parent pid, clock ticks so far, command line)."""
    out: dict[int, tuple[int, int, str]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid, ticks = _stat(entry.name)
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue  # exited while being read
        out[int(entry.name)] = (ppid, ticks, cmd)
    return out


Classify = Callable[[int, int, str, dict[int, str]], "str | None"]


class CpuByRole:
    """Processor seconds per role over a window. ``classify(pid, ppid, cmdline, roles)`` names
    a process's role (``roles``: the pids named so far, so a child can take its parent's), or
    None to leave it out. A process's time counts from its first reading in the window, or
    from 0 when it started inside it."""

    def __init__(self, classify: Classify, period: float = 0.2) -> None:
        self.classify = classify
        self.period = period
        self._roles: dict[int, str] = {}
        self._first: dict[int, int] = {}
        self._last: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ticks = os.sysconf("SC_CLK_TCK")

    def _read(self, at_start: bool) -> None:
        procs = table()
        for _ in range(3):  # a child is named after its parent: a parent first, then its child
            for pid, (ppid, ticks, cmd) in procs.items():
                if pid in self._roles:
                    continue
                role = self.classify(pid, ppid, cmd, self._roles)
                if role is not None:
                    self._roles[pid] = role
                    self._first[pid] = ticks if at_start else 0
        for pid, (_, ticks, _) in procs.items():
            if pid in self._roles:
                self._last[pid] = ticks

    def start(self) -> CpuByRole:
        self._read(at_start=True)

        def loop() -> None:
            while not self._stop.wait(self.period):
                self._read(at_start=False)

        self._thread = threading.Thread(target=loop, daemon=True, name="cpu-by-role")
        self._thread.start()
        return self

    def stop(self) -> dict[str, dict[str, float]]:
        """Per role: its processes and their processor seconds over the window."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._read(at_start=False)
        out: dict[str, dict[str, float]] = {}
        for pid, role in self._roles.items():
            row = out.setdefault(role, {"processes": 0, "cpu_s": 0.0})
            row["processes"] += 1
            row["cpu_s"] += (self._last[pid] - self._first[pid]) / self._ticks
        for row in out.values():
            row["cpu_s"] = round(row["cpu_s"], 2)
        return out
