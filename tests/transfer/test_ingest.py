"""Workspace ingestion: walker rules, incremental pipeline, interruption, artifacts, recall.

Real SQLite + Chroma in tmp_path with the deterministic hashing embedder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ingest.workspace import filetable as ft
from ingest.workspace.artifacts import ArtifactStore, chunk_source
from ingest.workspace.pipeline import IngestOptions, Ingestor
from ingest.workspace.walker import Walker
from retrieval.embedding.embedder import HashEmbedder
from retrieval.records import Kind, RecordFilter

PROJECT, AGENT = "proj", "agent"
ROOT_DIR = Path(__file__).resolve().parents[2]


def write(root: Path, rel: str, text: str | bytes) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")
    return p


def age(path: Path, seconds: float = 10) -> None:
    """Backdate a file so the incremental check may trust its mtime (racy-clean rule)."""
    t = time.time() - seconds
    os.utime(path, (t, t))


def chunks(engine) -> list:
    return engine.store.list(RecordFilter(kinds=[Kind.chunk]), order="r.id")


def paths(engine) -> set[str]:
    return {r.metadata["path"] for r in chunks(engine)}


def lexical(engine, query: str) -> list[str]:
    hits = engine.search(query, RecordFilter(kinds=[Kind.chunk]), k=10, mode="lexical")
    return [h.record.metadata["path"] for h in hits]


def vector_count(engine) -> int:
    bucket = f"team/{PROJECT}"
    return engine.vectors.count(bucket, engine.embedder.model_id)


@pytest.fixture
def tree(tmp_path) -> Path:
    root = tmp_path / "ws"
    write(root, "README.md", "# Demo\n\nThe demo project explains pelicans.\n\n## Use\n\nRun it.\n")
    write(
        root, "src/app.py", "def fly():\n    '''Pelicans fly over the harbour.'''\n    return 1\n"
    )
    write(root, "src/util.py", "def helper():\n    return 'walrus'\n")
    write(root, "notes.txt", "Meeting notes about flamingos.\n\nSecond paragraph.\n")
    return root


@pytest.fixture
def ingestor(engine):
    return Ingestor(engine, PROJECT, AGENT)


# ---------------------------------------------------------------------------- walker
def test_gitignore_at_every_level_and_patternignore(tmp_path):
    root = tmp_path / "ws"
    write(root, ".gitignore", "*.log\nsecret/\n!keep.log\n")
    write(root, "a.log", "x")
    write(root, "keep.log", "kept")
    write(root, "secret/s.txt", "hidden")
    write(root, "sub/.gitignore", "local.txt\n!b.log\n")
    write(root, "sub/local.txt", "ignored here")
    write(root, "sub/b.log", "re-included by the deeper level")
    write(root, "sub/ok.txt", "fine")
    write(root, "other/local.txt", "not ignored: the rule is sub/'s")
    write(root, ".patternignore", "drafts/\n")
    write(root, "drafts/d.md", "draft")
    write(root, "node_modules/pkg/index.js", "module")
    write(root, "build/out.txt", "built")
    write(root, "package-lock.json", "{}")
    write(root, "app.min.js", "minified")
    result = Walker(root).walk()
    got = {c.rel for c in result.files}
    assert got == {"keep.log", "sub/b.log", "sub/ok.txt", "other/local.txt"}
    reasons = {s.rel: s.reason for s in result.skipped}
    assert reasons["package-lock.json"] == "lock file"
    assert "generated" in reasons["app.min.js"]


def test_ignore_files_above_a_sub_root_apply_inside_a_git_repository(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git" / "info").mkdir(parents=True)
    write(repo, ".git/info/exclude", "*.tmp\n")
    write(repo, ".gitignore", "*.gen.py\npkg/secret.txt\n")
    write(repo, "pkg/.gitignore", "local/\n")
    write(repo, "pkg/a.py", "a = 1")
    write(repo, "pkg/b.gen.py", "generated")
    write(repo, "pkg/secret.txt", "anchored rule of the repository root")
    write(repo, "pkg/x.tmp", "excluded by .git/info/exclude")
    write(repo, "pkg/local/l.txt", "ignored by pkg/.gitignore")
    assert {c.rel for c in Walker(repo / "pkg").walk().files} == {"a.py"}
    write(repo, ".gitignore", "*.gen.py\npkg/secret.txt\nvendor/\n")
    write(repo, "vendor/lib/v.py", "an ignored folder asked for explicitly is ingested")
    assert {c.rel for c in Walker(repo / "vendor" / "lib").walk().files} == {"v.py"}
    outside = tmp_path / "plain"  # no repository: only its own ignore files count
    write(outside, "x.tmp", "kept")
    assert {c.rel for c in Walker(outside).walk().files} == {"x.tmp"}


def test_symlink_outside_the_root_is_not_followed(tmp_path, engine, ingestor):
    outside = tmp_path / "outside"
    write(outside, "private.txt", "zebracorn password material")
    root = tmp_path / "ws"
    write(root, "inside.txt", "ordinary text about otters")
    write(root, "real/target.txt", "linked target about otters too")
    (root / "leak.txt").symlink_to(outside / "private.txt")
    (root / "leakdir").symlink_to(outside, target_is_directory=True)
    (root / "alias.txt").symlink_to(root / "real" / "target.txt")
    report = ingestor.run(root)
    reasons = {s.path: s.reason for s in report.skipped}
    assert reasons["leak.txt"] == "symlink pointing outside the root"
    assert "not followed" in reasons["leakdir"]
    assert not any("zebracorn" in r.content for r in chunks(engine))
    assert lexical(engine, "zebracorn") == []
    assert {"inside.txt", "real/target.txt", "alias.txt"} <= paths(engine)


def test_binary_and_oversized_files_are_skipped_with_a_reason(tmp_path, engine):
    root = tmp_path / "ws"
    write(root, "ok.txt", "small text file")
    write(root, "blob.dat2", b"\x00\x01\x02binary\x00")
    write(root, "latin1.txt", "caf\xe9".encode("latin-1"))
    write(root, "big.txt", "word " * 3000)
    write(root, "image.png", b"\x89PNG")
    report = Ingestor(engine, PROJECT, AGENT, IngestOptions(max_file_bytes=4096)).run(root)
    reasons = {s.path: s.reason for s in report.skipped}
    assert reasons["blob.dat2"].startswith("binary")
    assert reasons["latin1.txt"].startswith("binary")
    assert reasons["big.txt"].startswith("too large")
    assert reasons["image.png"].startswith("binary")
    assert paths(engine) == {"ok.txt"}
    # a rerun still reports them, without reading them again
    again = Ingestor(engine, PROJECT, AGENT, IngestOptions(max_file_bytes=4096)).run(root)
    assert {s.path for s in again.skipped} >= {"blob.dat2", "big.txt"}


def test_the_store_folder_inside_the_root_is_not_ingested(tmp_path, open_engine):
    root = tmp_path / "ws"
    write(root, "a.txt", "alpha text")
    engine = open_engine(HashEmbedder(), path=root / ".store-home")
    Ingestor(engine, PROJECT, AGENT).run(root)
    assert paths(engine) == {"a.txt"}


# ---------------------------------------------------------------------------- incremental
@pytest.mark.usefixtures("vector_index")  # the index, not the exact scan
def test_chunks_know_path_lines_and_sha(tree, engine, ingestor):
    report = ingestor.run(tree)
    assert report.files_indexed == 4 and not report.errors
    recs = chunks(engine)
    assert all(r.scope.value == "team" and r.category == "chunk" for r in recs)
    for r in recs:
        m = r.metadata
        lines = (tree / m["path"]).read_text().splitlines()
        assert r.content == "\n".join(lines[m["start_line"] - 1 : m["end_line"]])
        assert m["path"] in r.context
    assert vector_count(engine) == len(recs)
    # findable by path and by definition name
    assert "src/util.py" in lexical(engine, "util")
    assert "src/app.py" in lexical(engine, "fly")


def test_unchanged_tree_costs_no_embedding(tree, open_engine, counting_embedder):
    engine = open_engine(counting_embedder)
    ing = Ingestor(engine, PROJECT, AGENT)
    ing.run(tree)
    counting_embedder.reset()
    again = ing.run(tree)  # files just written: re-hashed (racy-clean rule), never re-embedded
    assert again.files_indexed == 0 and again.chunks_embedded == 0
    assert counting_embedder.documents == 0
    for p in tree.rglob("*"):
        if p.is_file():
            age(p)
    ing.run(tree)
    third = ing.run(tree)  # now trusted by stat alone
    assert third.files_unchanged == 4 and third.timings["read"] == 0.0
    assert counting_embedder.documents == 0


@pytest.mark.usefixtures("vector_index")  # the index, not the exact scan
def test_modified_file_replaces_its_chunks(tree, engine, ingestor):
    ingestor.run(tree)
    old = {r.id for r in chunks(engine) if r.metadata["path"] == "src/app.py"}
    write(tree, "src/app.py", "def swim():\n    '''Penguins swim under the ice.'''\n    return 2\n")
    report = ingestor.run(tree)
    assert report.files_indexed == 1 and report.chunks_removed == len(old)
    now = [r for r in chunks(engine) if r.metadata["path"] == "src/app.py"]
    assert not old & {r.id for r in now}
    assert lexical(engine, "pelicans harbour") == ["README.md"]  # only the README still says it
    assert lexical(engine, "penguins")[0] == "src/app.py"
    assert vector_count(engine) == len(chunks(engine))
    hits = engine.search("penguins swim ice", RecordFilter(kinds=[Kind.chunk]), k=1)
    assert hits[0].record.metadata["path"] == "src/app.py"


def test_changed_file_reuses_vectors_of_unchanged_chunks(tmp_path, open_engine, counting_embedder):
    root = tmp_path / "ws"
    parts = [f"def f{i}():\n    '''Function number {i} " + "text " * 60 + "'''\n" for i in range(5)]
    write(root, "m.py", "\n\n".join(parts))
    engine = open_engine(counting_embedder)
    ing = Ingestor(engine, PROJECT, AGENT)
    ing.run(root)
    n = len(chunks(engine))
    assert n >= 5
    parts[2] = "def f2():\n    return 'rewritten'\n"
    write(root, "m.py", "\n\n".join(parts))
    counting_embedder.reset()
    report = ing.run(root)
    assert report.chunks_embedded == 1
    # only the windows of the one changed chunk (its path and title in front) reach the model
    (changed,) = [c for c in chunks(engine) if "rewritten" in c.content]
    texts = counting_embedder.texts
    assert texts and all(t.startswith(changed.context + "\n") for t in texts)
    assert len(texts) == len(
        engine.store.embeddings([changed.id], engine.embedder.model_id)[changed.id]
    )


@pytest.mark.usefixtures("vector_index")  # the index, not the exact scan
def test_deleted_file_loses_its_chunks(tree, engine, ingestor):
    ingestor.run(tree)
    (tree / "notes.txt").unlink()
    report = ingestor.run(tree)
    assert report.files_removed == 1
    assert "notes.txt" not in paths(engine)
    assert lexical(engine, "flamingos") == []
    rows = ft.rows_under(engine.store.reader, f"team/{PROJECT}", str(tree.resolve()))
    assert str((tree / "notes.txt").resolve()) not in rows
    assert vector_count(engine) == len(chunks(engine))


def test_newly_ignored_file_loses_its_chunks(tree, engine, ingestor):
    ingestor.run(tree)
    write(tree, ".gitignore", "notes.txt\n")
    ingestor.run(tree)
    assert "notes.txt" not in paths(engine)


def test_file_that_becomes_binary_loses_its_chunks(tree, engine, ingestor):
    ingestor.run(tree)
    write(tree, "notes.txt", b"\x00\x00binary now")
    report = ingestor.run(tree)
    assert "notes.txt" not in paths(engine)
    assert any(s.path == "notes.txt" and s.reason.startswith("binary") for s in report.skipped)


# ---------------------------------------------------------------------------- artifacts
def test_artifacts_keep_each_version_once(tree, engine, ingestor):
    ingestor.run(tree)
    store = ArtifactStore(engine.home)
    rec = next(r for r in chunks(engine) if r.metadata["path"] == "src/app.py")
    sha = rec.metadata["sha256"]
    assert store.path(sha) == engine.home / "artifacts" / sha[:2] / sha
    assert store.get(sha) == (tree / "src/app.py").read_bytes()
    write(tree, "src/app.py", "def changed():\n    return 3\n")
    ingestor.run(tree)
    # the old version's text is still there, exactly, for the old chunk's line range
    assert chunk_source(store, rec.metadata) == rec.content
    before = len(store.all())
    ingestor.run(tree)
    assert len(store.all()) == before
    keep = ft.all_shas(engine.store.reader)
    assert store.prune(keep) == 1 and sha not in store.all()


# ---------------------------------------------------------------------------- interruption
KILL_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from retrieval.embedding.embedder import HashEmbedder
    from retrieval.engine import Engine
    from ingest.workspace.pipeline import IngestOptions, Ingestor

    class Slow(HashEmbedder):
        def embed_documents(self, texts):
            time.sleep(0.05)
            return super().embed_documents(texts)

    home, root = sys.argv[1], sys.argv[2]
    engine = Engine(home, Slow())
    opts = IngestOptions(embed_batch=8, max_batch_files=3)
    def progress(p):
        print(f"done {p.files_done}", flush=True)
    Ingestor(engine, "proj", "agent", opts).run(root, progress)
    print("finished", flush=True)
    """
)


def snapshot(engine) -> tuple[set, dict]:
    recs = {
        (r.id, r.metadata["path"], r.metadata["start_line"], r.metadata["end_line"], r.content,
         r.metadata["sha256"])
        for r in chunks(engine)
    }  # fmt: skip
    rows = ft.rows_under(engine.store.reader, f"team/{PROJECT}", "/")
    return recs, {p: (r.sha256, r.chunks, r.state) for p, r in rows.items()}


@pytest.mark.usefixtures("vector_index")  # the index, not the exact scan
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "Ctrl-C"])
def test_killed_run_then_rerun_equals_an_uninterrupted_run(tmp_path, open_engine, sig):
    root = tmp_path / "ws"
    for i in range(60):
        write(root, f"pkg/mod{i:02}.py", f"def f{i}():\n    '''Doc {i}.'''\n    return {i}\n")
    home = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(ROOT_DIR)}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(home), str(root)],
        stdout=subprocess.PIPE, text=True, env=env, cwd=str(ROOT_DIR),
    )  # fmt: skip
    try:
        for line in proc.stdout:
            if line.startswith("done") and 12 <= int(line.split()[1]) < 60:
                proc.send_signal(sig)
                break
            assert not line.startswith("finished"), "the run ended before it could be killed"
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode != 0

    killed = open_engine(HashEmbedder(), path=home)
    partial, _ = snapshot(killed)
    assert 0 < len(partial) < 60
    assert killed.store.integrity_check() == []
    report = Ingestor(killed, PROJECT, AGENT).run(root)
    assert report.files_indexed == 60 - len({p for _, p, *_ in partial})

    clean = open_engine(HashEmbedder(), path=tmp_path / "clean")
    Ingestor(clean, PROJECT, AGENT).run(root)
    assert snapshot(killed) == snapshot(clean)
    assert vector_count(killed) == vector_count(clean) == 60


def test_one_ingestion_at_a_time(tree, engine, ingestor):
    from ingest.workspace.pipeline import IngestLock
    from retrieval.errors import Conflict

    with IngestLock(engine.home):
        with pytest.raises(Conflict):
            ingestor.run(tree)
    ingestor.run(tree)


# ---------------------------------------------------------------------------- service, recall
def test_recall_and_recall_context_show_chunks_as_path_lines(tree, tmp_path, engine):
    from server.service.core.identity import Identity
    from server.service.core.models import MemoryInput, RecallContextInput, RecallInput
    from server.service.memories.memory import MemoryService
    from server.service.recalling.context import recall_context
    from server.service.recalling.recall import recall

    svc = MemoryService(engine)
    who = Identity(project_id=PROJECT, agent_id=AGENT)
    Ingestor(engine, PROJECT, AGENT).run(tree)
    svc.remember(who, MemoryInput(content="Flamingos are pink because of their diet."))
    res = recall(svc, who, RecallInput(query="flamingos", budget=2000))
    kinds = {i.kind for i in res.items}
    assert kinds == {"memory", "chunk"}
    chunk = next(i for i in res.items if i.kind == "chunk")
    assert chunk.location == "notes.txt:1-3"
    assert "— file notes.txt:1-3 · team · by agent" in res.text
    assert "> Meeting notes about flamingos." in res.text
    ctx = recall_context(svc, who, RecallContextInput(search="flamingos"))
    assert ctx.chunks and ctx.chunks[0]["location"] == "notes.txt:1-3"
    assert "Meeting notes" in ctx.chunks[0]["content"]
    assert any("Flamingos" in m.content for m in ctx.private)
    assert recall_context(svc, who, RecallContextInput()).chunks == []


def test_ingest_path_must_be_inside_the_allowed_directories(tmp_path):
    from server.service.core.errors import AccessDenied, InvalidInput
    from server.service.transfers.workspace import check_root

    allowed = tmp_path / "allowed"
    (allowed / "sub").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    assert check_root(allowed / "sub", [allowed]) == (allowed / "sub").resolve()
    with pytest.raises(AccessDenied, match="outside the allowed directories"):
        check_root(tmp_path / "elsewhere", [allowed])
    with pytest.raises(AccessDenied):
        check_root(allowed / ".." / "elsewhere", [allowed])
    with pytest.raises(InvalidInput):
        check_root(allowed / "missing", [allowed])


def test_cli_ingest(tree, tmp_path, monkeypatch, capsys):
    from server.cli import main

    home = tmp_path / "home"
    monkeypatch.setenv("PATTERN_HOME", str(home))
    monkeypatch.setenv("PATTERN_EMBEDDER", "hash")
    monkeypatch.setenv("PATTERN_PROJECT_ID", "cliproj")
    monkeypatch.setenv("PATTERN_AGENT_ID", "cliagent")
    monkeypatch.setenv("PATTERN_ALLOWED_DIRS", str(tmp_path))
    assert main(["ingest", str(tree), "--json"]) == 0
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert report["files_indexed"] == 4 and report["chunks_added"] > 0
    assert "ingest:" in out.err  # not a terminal: plain progress lines
    assert main(["ingest", str(tree), "--project", "other"]) == 0
    assert "4 indexed" in capsys.readouterr().out  # another project: its own chunks
    monkeypatch.setenv("PATTERN_ALLOWED_DIRS", str(tree / "src"))
    assert main(["ingest", str(tree)]) == 2
    assert "outside the allowed directories" in capsys.readouterr().err


def test_mcp_tool_reports_progress(tree, tmp_path):
    from functools import partial

    from retrieval.engine import Engine
    from server.service.core.config import Settings
    from server.service.core.identity import identity_from_env
    from server.service.core.runtime import Runtime
    from server.service.memories.memory import MemoryService
    from tests.mcp_util import in_process

    env = {"PATTERN_HOME": str(tmp_path / "home"), "PATTERN_EMBEDDER": "hash",
           "PATTERN_PROJECT_ID": PROJECT, "PATTERN_AGENT_ID": AGENT,
           "PATTERN_ALLOWED_DIRS": str(tree)}  # fmt: skip
    settings = Settings.from_env(env, tree)
    rt = Runtime(
        settings, identity_from_env(env, tree), MemoryService(Engine(settings.home, HashEmbedder()))
    )
    rt.model_ready.set()
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    with in_process(rt) as client:
        raw = client.portal.call(
            partial(client.client.call_tool, "ingest_workspace", {"path": str(tree)},
                    progress_callback=on_progress)
        )  # fmt: skip
        assert not raw.is_error, raw
        data = raw.structured_content
        assert data["files_indexed"] == 4
        assert seen and seen[-1][0] == seen[-1][1] == 4 and "chunks" in seen[-1][2]
        err = client.error("ingest_workspace", {"path": str(tmp_path)})
        assert "access_denied" in err
        res = client.ok("recall", {"query": "pelicans harbour", "kinds": ["chunk"]})
        assert res["items"][0]["location"].startswith(("src/app.py:", "README.md:"))
    rt.engine.close()


class Watching:
    """``watch`` on a thread; its reports arrive on a queue. Every wait has a deadline."""

    def __init__(self, ingestor, root, **kw) -> None:
        import queue
        import threading

        from ingest.workspace.watch import watch

        self.reports: queue.Queue = queue.Queue()
        self.stop = threading.Event()
        self.errors: list[BaseException] = []

        def run() -> None:
            try:
                watch(ingestor, root, self.reports.put, stop=self.stop, debounce_ms=200, **kw)
            except BaseException as exc:  # surfaced by wait_until
                self.errors.append(exc)
                self.reports.put(None)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def next_report(self, deadline: float):
        import queue

        try:
            report = self.reports.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError("no ingest report before the deadline") from None
        assert not self.errors, self.errors
        return report

    def wait_until(self, condition, deadline: float):
        """Take reports until ``condition()`` holds after one (fails at the deadline)."""
        while not condition():
            self.next_report(deadline)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()


def test_watch_reindexes_changed_files(tree, engine, ingestor):
    watching = Watching(ingestor, tree)
    try:
        deadline = time.monotonic() + 30
        assert watching.next_report(deadline).files_indexed == 4  # watching since before it
        write(tree, "src/new.py", "def narwhal():\n    return 'tusk'\n")
        (tree / "notes.txt").unlink()
        watching.wait_until(
            lambda: "src/new.py" in paths(engine) and "notes.txt" not in paths(engine), deadline
        )
    finally:
        watching.close()


def test_watch_sees_a_change_made_during_the_first_run(tree, engine, ingestor):
    """The watcher starts before the first run: a file rewritten after the first run has read
    it (here: when that run reports it is done) is indexed by the next run. Watching only after
    the first run lost this change for good."""
    changed = []

    def progress(p) -> None:
        if p.phase == "done" and not changed:
            write(tree, "src/util.py", "def helper():\n    return 'narwhal tusk'\n")
            changed.append(True)

    watching = Watching(ingestor, tree, progress=progress)
    try:
        deadline = time.monotonic() + 30
        first = watching.next_report(deadline)
        assert first.files_indexed == 4 and changed
        assert lexical(engine, "narwhal") == []  # the first run read the old text
        watching.wait_until(lambda: lexical(engine, "narwhal") == ["src/util.py"], deadline)
    finally:
        watching.close()
