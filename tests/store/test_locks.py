"""The file-lock primitives (retrieval/storage/locks.py) between real processes: a lock held by one
process is refused, waited for or reported to another, and released by the kernel when its
holder dies."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from retrieval.storage import locks

ROOT = Path(__file__).resolve().parents[2]

HOLDER = """
import sys, time
from retrieval.storage import locks
mode, path, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
if mode == "exclusive":
    with locks.exclusive(path):
        print("held", flush=True)
        time.sleep(seconds)
else:
    fd = locks.acquire(path, owner="pid 4242 (test holder)")
    print("held", flush=True)
    time.sleep(seconds)
    if mode == "release":
        locks.release(fd)
        print("released", flush=True)
        time.sleep(60)
"""


def holder(path: Path, mode: str = "hold", seconds: float = 60.0) -> subprocess.Popen:
    """A second process that takes the lock on ``path`` and says so."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HOLDER), mode, str(path), str(seconds)],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        p.kill()
        p.wait()


def test_a_held_lock_is_refused_with_its_owner_and_freed_when_the_holder_dies(tmp_path, procs):
    path = tmp_path / "sub" / "store.lock"
    assert not locks.held(path)
    assert not path.exists()  # asking does not create the file
    procs.append(child := holder(path))
    assert locks.held(path)
    with pytest.raises(locks.Held) as err:
        locks.acquire(path, owner="pid 1 (second)")
    assert err.value.owner == "pid 4242 (test holder)"
    assert path.read_text() == "pid 4242 (test holder)"  # the refused caller wrote nothing
    child.kill()
    child.wait()
    assert not locks.held(path)  # the kernel released it
    fd = locks.acquire(path, owner="pid 1 (second)")
    try:
        assert path.read_text() == "pid 1 (second)"
        assert locks.held(path)
    finally:
        locks.release(fd)
    assert not locks.held(path)
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)


def test_wait_gets_the_lock_once_the_other_process_releases_it(tmp_path, procs):
    path = tmp_path / "folder.lock"
    procs.append(child := holder(path, mode="release", seconds=0.5))
    with pytest.raises(locks.Held):
        locks.wait(path, timeout=0.1)
    start = time.monotonic()
    fd = locks.wait(path, timeout=10)
    try:
        assert child.stdout.readline().strip() == "released"
        assert time.monotonic() - start < 10
    finally:
        locks.release(fd)


def test_exclusive_blocks_until_the_holder_lets_go(tmp_path, procs):
    path = tmp_path / ".export.lock"
    procs.append(child := holder(path, mode="exclusive", seconds=0.8))
    got: list[float] = []

    def take() -> None:
        with locks.exclusive(path):
            got.append(time.monotonic())

    t = threading.Thread(target=take)
    t.start()
    time.sleep(0.3)
    assert got == []  # still waiting: the other process holds it
    t.join(timeout=30)
    assert got and child.wait(timeout=30) == 0  # taken after the holder's block ended
    with locks.exclusive(path):  # again, in this process, once released: seen as held
        assert locks.held(path)
    assert not locks.held(path)
