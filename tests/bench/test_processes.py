"""The benchmarks' processor time by role (``benchmarks/harness/processes.py``), on real
processes: a child's time is its own, a grandchild takes its parent's role, and a failing
classifier or a vanished process never fails the run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from benchmarks.harness.processes import CpuByRole, cpu_seconds, table

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"


def test_a_process_and_its_child_are_counted_under_one_role():
    parent_code = (
        "import subprocess, sys\n"
        + BURN.format(s=0.2)
        + f"subprocess.run([sys.executable, '-c', {BURN.format(s=0.3)!r}])\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()\n" + parent_code],
                            stdin=subprocess.PIPE)  # fmt: skip

    def classify(pid, ppid, cmd, roles):
        if pid == proc.pid:
            return "worker"
        return "worker" if roles.get(ppid) == "worker" else None

    sampler = CpuByRole(classify, period=0.05).start()
    proc.communicate(b"", timeout=60)
    got = sampler.stop()
    assert got["worker"]["processes"] == 2
    assert 0.4 <= got["worker"]["cpu_s"] < 5.0, got
    assert not sampler.errors


def test_a_failing_classifier_is_recorded_not_raised():
    calls = []

    def classify(pid, ppid, cmd, roles):
        calls.append(pid)
        if len(calls) > 5:
            raise RuntimeError("a classifier bug")
        return None

    sampler = CpuByRole(classify, period=0.02).start()
    got = sampler.stop()
    assert got == {} and sampler.errors and "a classifier bug" in sampler.errors[0]


def test_the_table_and_a_process_time():
    procs = table()
    assert os.getpid() in procs and procs[os.getpid()][3]
    assert cpu_seconds(os.getpid()) > 0
