"""The store's disk fails under a daemon: it fills up (a small tmpfs filled to the last byte, or,
where none can be mounted, SQLite's own full-disk error injected), its folder turns read-only,
a page of its SQLite file is damaged. Nothing acknowledged is lost, a refused write says why at
once, health (or the refusing daemon) names the fault, and the store serves again once the
fault is gone."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys

import pytest

from tests.faults.harness import ROOT, issues_naming, wait_for

pytestmark = pytest.mark.slow

DEADLINE = 3.5
LEXICAL = {"PATTERN_EMBEDDER": "none"}  # no vector index to start and stop where it plays no part


def _mount(*args: str) -> bool:
    try:
        return subprocess.run(["mount", *args], capture_output=True).returncode == 0
    except OSError:  # no mount command
        return False


@pytest.fixture
def small_disk(tmp_path):
    """(store folder, daemon env, fill, free): a 32 MB tmpfs when this user may mount one,
    else a folder whose daemon fails SQLite writes as a full disk does while a switch file
    exists (tests/faults/shim; ``FAULTS_NO_MOUNT=1`` takes this path where a tmpfs could be
    mounted too)."""
    home = tmp_path / "home"
    home.mkdir()
    switch = tmp_path / "disk-is-full"
    mounted = (
        os.environ.get("FAULTS_NO_MOUNT") is None
        and os.geteuid() == 0
        and _mount("-t", "tmpfs", "-o", "size=32m", "tmpfs", str(home))
    )
    filler = home / "filler"

    def fill() -> None:
        if not mounted:
            switch.touch()
            return
        with open(filler, "wb") as fh:
            try:
                while True:
                    fh.write(bytes(1 << 20))
                    fh.flush()
            except OSError:
                pass

    def free() -> None:
        (filler if mounted else switch).unlink()

    yield home, ({} if mounted else {"FAULTS_FULL_FILE": str(switch)}), fill, free
    if mounted:
        subprocess.run(["umount", "-l", str(home)], capture_output=True)


def test_a_full_disk(small_disk, daemon_at):
    home, env, fill, free = small_disk
    d = daemon_at(home, env).start()
    kept = d.remember("the release train leaves on Thursdays at noon")
    wait_for(lambda: d.health()["pendingVectorWrites"] == 0, 30, "vectors applied")
    fill()
    err = d.error("remember", {"content": "written while the disk is full",
                               "scope": "team", "category": "decisions"}, timeout=DEADLINE)  # fmt: skip
    assert "[store_unavailable] the disk holding the store is full" in err
    assert "nothing was written" in err
    assert d.recall("release train Thursdays", DEADLINE)["items"][0]["id"] == kept
    h = d.health()
    assert h["status"] == "degraded"
    assert issues_naming(h, "writes are failing", "the disk holding the store is full")
    free()
    after = d.remember("written once space came back")
    assert not issues_naming(d.health(), "writes are failing")
    code = d.stop()
    assert code == 0, d.stderr()[-4000:]
    d.start()
    seen = d.visible_ids()
    assert {kept, after} <= seen and len(seen) == 2  # the refused write left nothing


@pytest.fixture
def read_only(tmp_path):
    """(make the folder read-only, make it writable again): a read-only bind mount for root
    (who writes through file modes; skipped where root may not mount), the write bits off
    otherwise."""
    state: dict = {}

    def on(home) -> None:
        state["home"] = home
        if os.geteuid() == 0:
            if not _mount("--bind", str(home), str(home)):
                pytest.skip("root that may not mount: file modes do not stop it writing")
            state["mounted"] = True
            assert _mount("-o", "remount,bind,ro", str(home))
            return
        state["modes"] = {p: p.stat().st_mode for p in [home, *home.rglob("*")]}
        for p in state["modes"]:
            p.chmod(p.stat().st_mode & ~0o222)

    def off() -> None:
        if state.pop("mounted", False):
            subprocess.run(["umount", str(state["home"])], check=True)
        for p, mode in state.pop("modes", {}).items():
            p.chmod(mode)

    yield on, off
    off()


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_read_only_store_folder(tmp_path, read_only, daemon_at):
    on, off = read_only
    d = daemon_at(tmp_path / "home", LEXICAL).start()
    ids = [d.remember("the canary takes five percent of traffic"),
           d.remember("postgres vacuum runs nightly at two")]  # fmt: skip
    assert d.stop() == 0
    before = _digest(d.home / "pattern.sqlite3")
    on(d.home)
    code, err = d.run_to_exit()
    assert code == 2 and "Traceback" not in err, err
    assert (
        "error [store_unavailable]: the store's folder or files cannot be written (read-only)"
        in err
    )
    # what an MCP client starting `pattern-memory serve` gets: the same sentence, exit 2
    serve = subprocess.run([sys.executable, "-m", "server.cli", "serve"], env=d.env,
                           input="", capture_output=True, text=True, timeout=60, cwd=ROOT)  # fmt: skip
    assert serve.returncode == 2 and "cannot be written (read-only)" in serve.stderr
    off()
    assert _digest(d.home / "pattern.sqlite3") == before
    d.start()
    assert set(ids) <= d.visible_ids()
    assert d.recall("canary traffic", DEADLINE)["items"][0]["id"] == ids[0]
    assert d.stop() == 0


def test_a_damaged_sqlite_page(tmp_path, daemon_at):
    d = daemon_at(tmp_path / "home", LEXICAL).start()
    ids = [
        d.remember(f"decision {i}: the billing service owns invoice numbering") for i in range(3)
    ]
    assert d.stop() == 0
    db = d.home / "pattern.sqlite3"
    with sqlite3.connect(db) as conn:  # the page of the records' id index
        (root,) = conn.execute("SELECT rootpage FROM sqlite_master "
                               "WHERE name = 'sqlite_autoindex_records_1'").fetchone()  # fmt: skip
        (size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    with open(db, "r+b") as fh:
        fh.seek((root - 1) * size + 8)  # past the page header: its cell pointers
        fh.write(bytes(range(64)))
    damaged = _digest(db)
    code, err = d.run_to_exit()
    assert code == 2 and "error [store_unavailable]: integrity check failed" in err, err
    assert "sqlite_autoindex_records_1" in err  # the damaged index, named
    assert _digest(db) == damaged  # the refusing daemon wrote nothing
    with sqlite3.connect(db, isolation_level=None) as conn:  # the repair docs/faults.md gives
        conn.execute("REINDEX")
    conn.close()
    d.start()
    assert set(ids) <= d.visible_ids()
    assert not issues_naming(d.health(), "store")
    assert d.stop() == 0
