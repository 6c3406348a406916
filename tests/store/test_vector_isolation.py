"""The process that writes a store's HNSW files never held a text: every engine runs its index
in a child forked by a clean spawner, which has none of its opener's environment, working
folder (``.env``), file descriptors or memory, and whose ``malloc`` hands out zeroed memory."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.records import RecordFilter, Scope
from retrieval.vector import vector_spawner
from retrieval.vector.vector_process import VectorProcess
from retrieval.vector.vectors import VectorItem
from server.service.core.runtime import Runtime

ROOT = str(Path(__file__).resolve().parents[2])
TOKEN = "gh" + "p_" + "Yq4Lm2Vt9RkP4sWz8NbC3dF6gH1jK5yTnQ0b"  # split: no literal credential
DOTENV = "gl" + "pat-" + "Dz8Kq2Wm5Xv7Bn1Lt4Pc"
pytestmark = [
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc"),
    pytest.mark.usefixtures("vector_index"),
]  # the index itself


def wait_until(condition, timeout: float = 30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if value := condition():
            return value
        time.sleep(0.05)
    return None


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def test_an_engine_runs_its_store_index_in_a_child_even_when_asked_not_to(tmp_path, caplog):
    for kw in ({}, {"vector_process": False}):
        eng = Engine(tmp_path / f"store{len(kw)}", HashEmbedder(), **kw)
        try:
            assert isinstance(eng.vectors, VectorProcess)
        finally:
            eng.close()
    assert "vector_process=False is not honoured" in caplog.text
    env = {"PATTERN_HOME": str(tmp_path / "rt"), "PATTERN_EMBEDDER": "hash",
           "PATTERN_VECTOR_PROCESS": "0"}  # fmt: skip
    rt = Runtime.start(env, tmp_path, background=False)
    try:
        assert isinstance(rt.engine.vectors, VectorProcess)
    finally:
        rt.close()


PROBE = """
import json, os, sys
from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.records import Record
held = open(".env")  # a secret file the opener holds open while the child starts
eng = Engine(sys.argv[1], HashEmbedder())
eng.add([Record(content="a note " + os.environ["GITHUB_TOKEN"], project_id="p", agent_id="a")])
child = eng.vectors._proc.pid
spawner = int(open(f"/proc/{child}/stat").read().split(") ", 1)[1].split()[1])

def seen(pid):
    fds = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            fds[fd] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass
    limits = [l for l in open(f"/proc/{pid}/limits") if l.startswith("Max core file size")]
    return {"environ": open(f"/proc/{pid}/environ", "rb").read().decode(),
            "cmdline": open(f"/proc/{pid}/cmdline", "rb").read().decode(),
            "cwd": os.readlink(f"/proc/{pid}/cwd"), "fds": fds, "core": limits[0].split()[4:6],
            "threads": len(os.listdir(f"/proc/{pid}/task"))}

from retrieval.vector import vector_spawner
start_dir = vector_spawner._current[1].start_dir
print(json.dumps({"child": seen(child), "spawner": seen(spawner), "start_dir": start_dir}))
eng.close()
"""


def test_the_child_and_its_spawner_have_nothing_of_their_openers_environment(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / ".env").write_text(f"SERVICE_TOKEN={DOTENV}\nGITHUB_TOKEN={TOKEN}\n")
    store = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": ROOT, "GITHUB_TOKEN": TOKEN, "EXTRA_SECRET": DOTENV}
    out = subprocess.run([sys.executable, "-c", PROBE, str(store)], cwd=project, env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    expected = vector_spawner.child_env()
    for who in ("child", "spawner"):
        what = seen[who]
        # the loader splits GLIBC_TUNABLES in place at its colons: joined again here
        raw = what["environ"].replace("\0glibc.", ":glibc.")
        environ = dict(e.split("=", 1) for e in raw.split("\0") if e)
        assert environ.keys() == expected.keys(), who
        assert {k: v for k, v in environ.items() if k != "PYTHONPATH"} == {
            k: v for k, v in expected.items() if k != "PYTHONPATH"}, who  # fmt: skip
        assert TOKEN not in what["environ"] and DOTENV not in what["environ"], who
        argv = what["cmdline"].split("\0")
        assert argv[1:4] == ["-P", "-m", "retrieval.vector.vector_spawner"] and argv[4].isdigit(), (
            who
        )
        assert len(argv) == 6, who  # no path, no text among its arguments
        assert what["core"] == ["0", "0"], who  # no core file: nothing of its memory on disk
        mine = [t for t in what["fds"].values() if t.startswith(str(tmp_path))]
        allowed = (f"{store / 'chroma'}/", f"{store / 'chroma'}.lock")
        assert all(t.startswith(allowed) for t in mine), (who, mine)  # nothing of the opener's
    assert seen["child"]["cwd"] == str(store / "chroma")  # a .env there would be the store's
    assert seen["spawner"]["cwd"] == "/"  # it imported Chroma in an empty folder, now gone
    assert seen["spawner"]["threads"] == 1  # a fork copies one thread: no lock held by another
    assert not os.path.exists(seen["start_dir"])


HEADER = struct.Struct("<iQQQQ")  # hnswlib's header: version, offset, max_elements, count, size


def tails(chroma: Path) -> dict[str, int]:
    """{collection: bytes past the written elements of data_level0.bin and length.bin that are
    not zero}."""
    out = {}
    for data in chroma.glob("*/data_level0.bin"):
        _v, _o, _max, count, size = HEADER.unpack(
            (data.parent / "header.bin").read_bytes()[: HEADER.size]
        )
        level0 = np.frombuffer(data.read_bytes()[count * size :], np.uint8)
        length = np.frombuffer((data.parent / "length.bin").read_bytes()[count * 4 :], np.uint8)
        out[data.parent.name] = int(np.count_nonzero(level0) + np.count_nonzero(length))
    return out


def test_new_collections_hold_zeros_where_no_vector_was_written(tmp_path, make_record):
    eng = Engine(tmp_path / "store", HashEmbedder())
    try:
        for i in range(16):  # each a new bucket: a new collection, written before it is filled
            junk = [f"recall the token {TOKEN} of round {i} " * (60 + j) for j in range(200)]
            eng.search(" ".join(junk[:3]), k=3)
            del junk
            eng.add([make_record(f"berth {i} note {k}", agent_id=f"agent-{i}") for k in range(3)])
    finally:
        eng.close()
    found = tails(tmp_path / "store" / "chroma")
    assert len(found) == 16 and found == dict.fromkeys(found, 0)


def test_engines_of_one_process_over_one_store_share_its_child(tmp_path, make_record):
    first = Engine(tmp_path / "store", HashEmbedder())
    second = Engine(tmp_path / "store", HashEmbedder())
    try:
        assert first.vectors is second.vectors
        rec = make_record("pilot ladder inspection")
        first.add([rec])
        first.close()
        f = RecordFilter(buckets=[rec.bucket])
        hits = second.search("pilot ladder inspection", f, k=1, mode="vector")
        assert [h.record.id for h in hits] == [rec.id]  # closing one left the child to the other
    finally:
        second.close()
    assert second.vectors._proc.wait(30) == 0


def test_a_killed_spawner_takes_its_children_and_the_index_comes_back(tmp_path):
    vp = VectorProcess(str(tmp_path / "chroma"))
    try:
        vec = np.ones(64, np.float32)
        vp.upsert("team/p", "m", [VectorItem("r1", 0, vec)])
        child = vp._proc.pid
        spawner = int(Path(f"/proc/{child}/stat").read_text().split(") ", 1)[1].split()[1])
        os.kill(spawner, signal.SIGKILL)
        assert wait_until(lambda: not alive(child), 10), "the child outlived its spawner"
        assert wait_until(lambda: vp.restarts == 1 and vp.wait_ready(0.1), 60)
        assert vp.query(["team/p"], "m", vec, 1) == [("r1", pytest.approx(1.0))]
        assert vp._proc.pid != child
    finally:
        vp.close()


def test_an_idle_spawner_leaves_and_the_next_store_starts_another(tmp_path, monkeypatch):
    monkeypatch.setattr(vector_spawner, "IDLE_S", 0.2)
    vp = VectorProcess(str(tmp_path / "a" / "chroma"))
    assert vp.wait_ready(60)
    spawner = vector_spawner._current[1]
    vp.close()
    assert wait_until(lambda: spawner.proc.poll() is not None, 10), "the spawner stayed"
    again = VectorProcess(str(tmp_path / "b" / "chroma"))
    try:
        assert again.wait_ready(60) and vector_spawner._current[1] is not spawner
    finally:
        again.close()


LEAVE = """
import os, sys
from retrieval.vector.vector_process import VectorProcess
vp = VectorProcess(sys.argv[1])
vp.wait_ready(60)
child = vp._proc.pid
spawner = int(open(f"/proc/{child}/stat").read().split(") ", 1)[1].split()[1])
print(child, spawner, flush=True)
os._exit(0)  # the opener dies without closing anything
"""


def test_the_child_and_the_spawner_leave_when_their_opener_dies(tmp_path):
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-c", LEAVE, str(tmp_path / "chroma")], env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    child, spawner = map(int, out.stdout.split())
    assert wait_until(lambda: not alive(child) and not alive(spawner), 30)


def test_the_child_is_given_ids_and_vectors_only(tmp_path, make_record, monkeypatch):
    sent = []
    real = VectorProcess._call
    monkeypatch.setattr(
        VectorProcess, "_call", lambda self, m, *a: (sent.append((m, a)), real(self, m, *a))[1]
    )
    eng = Engine(tmp_path / "store", HashEmbedder())
    try:
        rec = make_record("harbour master on duty", scope=Scope.team, metadata={"note": "x y z"})
        eng.add([rec])
        eng.search("harbour master", k=1, mode="vector")
        eng.delete([rec.id])
    finally:
        eng.close()
    words = {"harbour", "master", "duty", "x y z", "note"}
    for method, args in sent:
        flat = json.dumps(args, default=lambda o: o.__dict__ if hasattr(o, "__dict__") else
                          o.tolist())  # fmt: skip
        assert not any(w in flat for w in words), (method, flat[:300])
    upserted = [it for m, a in sent if m == "upsert" for it in a[2]]
    assert [it.record_id for it in upserted] == [rec.id] and upserted[0].metadata == {}


START_IN = """
import os, sys
from server.http.daemonfiles import spawn_daemon
spawn_daemon(sys.argv[1], dict(os.environ))
"""


@pytest.mark.slow
def test_a_daemon_started_in_a_project_imports_nothing_from_it(tmp_path):
    """The hook client and the bridge start the daemon in the project's folder: a package of
    the project named like one of ours (``server/``) must not be what the daemon runs."""
    project, home = tmp_path / "project", tmp_path / "store"
    (project / "server").mkdir(parents=True)
    (project / "server" / "__init__.py").write_text("raise SystemExit('the project ran')\n")
    env = {**os.environ, "PATTERN_HOME": str(home), "PATTERN_EMBEDDER": "hash",
           "PYTHONPATH": ROOT}  # fmt: skip
    subprocess.run([sys.executable, "-P", "-c", START_IN, str(home)], cwd=project, env=env,
                   check=True, timeout=60)  # fmt: skip
    from server.http.daemon import read_info

    info = wait_until(lambda: read_info(home), 60)
    try:
        assert info, (home / "daemon.log").read_text() if (home / "daemon.log").exists() else ""
    finally:
        if info:
            os.kill(info["pid"], signal.SIGTERM)
            wait_until(lambda: not alive(info["pid"]), 30)
