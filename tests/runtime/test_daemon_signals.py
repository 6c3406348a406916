"""A daemon started by a process that ignores SIGCHLD (``serve``'s bridge does, so the daemons
it starts never linger as zombies) does not keep it ignored: with SIGCHLD ignored the kernel
reaps its children at once and every child's exit status reads as 0 (a failed ONNX export would
look like a success)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from server.http.daemon import read_info

ROOT = str(Path(__file__).resolve().parents[2])
SPAWN = """
import os, signal, sys
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # as run_bridge does
from server.http.daemonfiles import spawn_daemon
spawn_daemon(sys.argv[1], dict(os.environ))
"""


def ignored_signals(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("SigIgn:"):
                return int(line.split()[1], 16)
    raise AssertionError("no SigIgn line")


def test_a_daemon_started_with_sigchld_ignored_waits_for_its_children_itself(tmp_path):
    home = tmp_path / "store"
    env = {
        **os.environ,
        "PATTERN_HOME": str(home),
        "PATTERN_EMBEDDER": "hash",
        "PYTHONPATH": ROOT,
        "PATTERN_VECTOR_INDEX_FROM": "0",
    }  # fmt: skip (an index child)
    subprocess.run([sys.executable, "-c", SPAWN, str(home)], env=env, check=True, timeout=60)
    end = time.monotonic() + 60
    while read_info(home) is None and time.monotonic() < end:
        time.sleep(0.05)
    info = read_info(home)
    assert info, "the daemon did not start"
    try:
        assert not ignored_signals(info["pid"]) & (1 << (signal.SIGCHLD - 1))
        # and so its children's exit statuses are real: the vector index's process, a child
        # of the daemon started once it serves, has the default disposition too
        children = []
        while not children and time.monotonic() < end:
            try:
                with open(f"/proc/{info['pid']}/task/{info['pid']}/children") as fh:
                    children = [int(p) for p in fh.read().split()]
            except OSError:
                break
            time.sleep(0.05)
        assert children, "the daemon started no child (its vector index's spawner)"
        for pid in children:
            assert not ignored_signals(pid) & (1 << (signal.SIGCHLD - 1))
    finally:
        os.kill(info["pid"], signal.SIGTERM)
        while read_info(home) is not None and time.monotonic() < end + 30:
            time.sleep(0.1)
