"""The daemon's threads. It runs numpy's BLAS on the calling thread: a search's products are small (a query
against a few hundred records' windows), and on a shared machine BLAS threads waiting on each
other cost more than the product (a rescored lesson search: 0.3 ms on one thread, 15 ms at the
median with two at load 7). A user's own setting is kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[2])
# the daemon command as `pattern-memory daemon` runs it, with the daemon itself replaced by a
# report of the BLAS thread count it would have run with (numpy is first imported there)
PROBE = """
import json, sys
import server.http.daemon as daemon

def report(*args, **kwargs):
    import numpy, threadpoolctl
    blas = [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
    print(json.dumps({"numpy_before": NUMPY_BEFORE, "blas": blas,
                      "switch": sys.getswitchinterval()}))
    return 0

NUMPY_BEFORE = "numpy" in sys.modules
daemon.run_daemon = report
from server.cli import main
sys.exit(main(["daemon", "--home", sys.argv[1]]))
"""


def blas_threads(tmp_path, **env) -> dict:
    pytest.importorskip("threadpoolctl")
    clean = {k: v for k, v in os.environ.items()
             if k not in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")}  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "store")],
                          env={**clean, "PYTHONPATH": ROOT, **env}, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_daemon_runs_blas_on_one_thread(tmp_path):
    got = blas_threads(tmp_path)
    assert got["numpy_before"] is False  # the setting is made before numpy loads
    assert got["blas"] and set(got["blas"]) == {1}


def test_a_blas_thread_count_the_user_set_is_kept(tmp_path):
    got = blas_threads(tmp_path, OPENBLAS_NUM_THREADS="2")
    assert got["blas"] == [2]


def test_the_daemon_hands_the_gil_back_to_a_waiting_thread_quickly(tmp_path):
    """A search gives the GIL up at every SQLite statement and model pass; a thread running
    Python beside it keeps it for the switch interval each time (CPython's 5 ms by default)."""
    from server.cli.serve_commands import SWITCH_INTERVAL_S

    got = blas_threads(tmp_path)
    assert got["switch"] == pytest.approx(SWITCH_INTERVAL_S) and SWITCH_INTERVAL_S <= 0.001
