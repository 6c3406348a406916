"""A store is private to the user who owns it: its folders are created 0700 and its files 0600
(the SQLite file with its -wal and -shm, Chroma's folder, artifacts, the postings file, logs,
locks), whatever the process's umask; a daemon makes everything inside private, Chroma's own
files included. A store another user could read is reported by ``pattern_health`` with the
command that fixes it."""

from __future__ import annotations

import os
import shlex
import signal
import stat
import subprocess
from pathlib import Path

import pytest

from ingest.workspace.artifacts import ArtifactStore
from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.fulltext.lexical import LexicalIndex
from retrieval.records import RecordFilter
from server.http.daemon import read_info
from server.service.core.identity import Identity
from server.service.core.maintenance import health
from server.service.memories.memory import MemoryService
from tests.hooks.test_hooks import run_hook, wait_for
from tests.runtime.test_daemon import call
from tests.transcript_util import hook_input

WHO = Identity(project_id="proj", agent_id="agent-1")


@pytest.fixture
def loose_umask():
    """The usual default umask (022): files 0644 and folders 0755 unless made otherwise."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def modes(root: Path, deep: bool = True) -> dict[str, str]:
    """Every entry under ``root`` (``root`` itself as ``.``) -> its permission bits, octal."""
    out = {".": oct(stat.S_IMODE(root.stat().st_mode))}
    entries = root.rglob("*") if deep else root.iterdir()
    for p in entries:
        out[str(p.relative_to(root))] = oct(stat.S_IMODE(p.lstat().st_mode))
    return out


def loose(found: dict[str, str], root: Path) -> dict[str, str]:
    """The entries of ``found`` that are not private (folders 0700, files 0600)."""
    out = {}
    for name, mode in found.items():
        want = "0o700" if (root / name).is_dir() else "0o600"
        if mode != want:
            out[name] = mode
    return out


def test_an_engine_creates_its_store_private(tmp_path, loose_umask, make_record):
    home = tmp_path / "data" / "store"
    eng = Engine(home, HashEmbedder())
    try:
        eng.add([make_record("the staging database moved to eu-west-1")])
        ArtifactStore(home).put(b"cited lines\n")
        lx = LexicalIndex(eng.store, postings_min=0)
        lx.search("staging", RecordFilter(), 3)
        assert lx.postings.wait(30)
        lx.postings.save()
        found = modes(home, deep=False)
        found.update({f"artifacts/{k}": v for k, v in modes(home / "artifacts").items()})
        assert {"pattern.sqlite3-wal", "pattern.sqlite3-shm", "chroma"} <= set(found)
        assert any(name.endswith(".postings.npz") for name in found)
        assert loose(found, home) == {}
    finally:
        eng.close()


@pytest.mark.usefixtures("vector_index")  # the index, not the exact scan
def test_a_daemon_and_its_hooks_keep_everything_in_the_store_private(tmp_path, loose_umask):
    home = tmp_path / "cold"
    inp = hook_input("UserPromptSubmit", None, "p1", prompt="anything")
    run_hook(home, "UserPromptSubmit", inp, PATTERN_HOOK_DEADLINE="0.2", PATTERN_EMBEDDER="hash",
             PATTERN_BM25_MEMORY_MIN="0")  # fmt: skip
    assert (home / "hooks.log").exists()  # the deadline passed while the daemon started
    assert wait_for(lambda: read_info(home) is not None, 60)
    info = read_info(home)
    try:
        headers = {"Authorization": f"Bearer {info['secret']}", "X-Pattern-Project": "shop",
                   "X-Pattern-Agent": "dev-agent"}  # fmt: skip
        status, body = call(info, headers, "remember", {"content": "the cache lives in redis"})
        assert status == 200 and not body["result"]["isError"], body
        status, _ = call(info, headers, "recall", {"query": "where does the cache live"})
        assert status == 200
    finally:
        os.kill(info["pid"], signal.SIGTERM)
        assert wait_for(lambda: read_info(home) is None, 60)
    found = modes(home)
    assert {"daemon.log", "hooks.log", "pattern.sqlite3", "chroma"} <= set(found)
    assert any(name.startswith("chroma/") for name in found)
    assert loose(found, home) == {}


def test_health_reports_a_store_other_users_can_read_with_the_command_that_fixes_it(tmp_path):
    home = tmp_path / "old store"
    eng = Engine(home, HashEmbedder())
    try:
        svc = MemoryService(eng)
        assert not [i for i in health(svc, WHO).issues if "chmod" in i]
        os.chmod(home, 0o755)  # as an earlier version made it
        os.chmod(home / "pattern.sqlite3", 0o644)
        (issue,) = [i for i in health(svc, WHO).issues if "chmod" in i]
        assert "pattern.sqlite3" in issue and "0o644" in issue
        command = f"chmod -R go-rwx {shlex.quote(str(home))}"
        assert command in issue
        subprocess.run(command, shell=True, check=True)
        assert not [i for i in health(svc, WHO).issues if "chmod" in i]
    finally:
        eng.close()
