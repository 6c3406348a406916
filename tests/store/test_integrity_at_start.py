"""The daemon's integrity check at start: a store up to ``PATTERN_INTEGRITY_WAIT_MB`` is
checked before the daemon serves (a damaged one is refused); a larger one is checked while it
serves, and damage found stops it. Real daemon processes over a real SQLite store."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.records import Record, Scope


def _damaged_store(home) -> None:
    """A store whose FTS index lost a row (the check compares records with FTS rows)."""
    eng = Engine(home, HashEmbedder())
    try:
        eng.add([Record(project_id="p1", agent_id="owner", scope=Scope.team,
                        category="learnings", content=f"fact {i} about the build")
                 for i in range(5)])  # fmt: skip
        eng.store.checkpoint()
    finally:
        eng.close()
    conn = sqlite3.connect(str(home / "pattern.sqlite3"))
    conn.execute("DELETE FROM records_fts WHERE rowid = (SELECT min(rowid) FROM records)")
    conn.commit()
    conn.close()


def _run_daemon(home, **env) -> tuple[int, str]:
    env = {**os.environ, "PATTERN_HOME": str(home), "PATTERN_EMBEDDER": "hash",
           "PATTERN_PROJECT_ID": "p1", "PATTERN_AGENT_ID": "owner", **env}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "server.cli", "daemon", "--home", str(home)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return proc.returncode, proc.stderr


def test_a_damaged_small_store_is_refused_before_serving(tmp_path):
    _damaged_store(tmp_path)
    code, err = _run_daemon(tmp_path)
    assert code != 0
    assert "integrity check failed" in err and "records and FTS rows differ by 1" in err
    assert " serving " not in err


def test_a_damaged_large_store_is_checked_while_serving_and_stops_the_daemon(tmp_path):
    _damaged_store(tmp_path)
    code, err = _run_daemon(tmp_path, PATTERN_INTEGRITY_WAIT_MB="0")  # every store is "large"
    assert " serving " in err  # it served first
    assert "integrity check failed" in err and "stopping" in err
    assert not (tmp_path / "daemon.json").exists()
