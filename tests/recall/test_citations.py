"""Citations through the service: written with memories, observations and lessons, checked at
recall (fresh / moved / changed / deleted), ranked and marked, kept true by verify, refreshed by
ingest, announced on the change stream, and refused outside the caller's allowed directories.
Real SQLite + Chroma in tmp_path, the deterministic hashing embedder."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from server.service.core.errors import AccessDenied, Conflict, InvalidInput, NotFound
from server.service.core.models import MemoryInput, RecallContextInput, RecallInput
from server.service.memories.changes import read_changes
from server.service.recalling import verify
from server.service.recalling.recall import recall
from server.service.transfers.workspace import ingest_workspace
from tests.mcp_util import FakeClock, clocked_service, identity_env, runtime_on

MOD = """import os


def alpha(x):
    return x + 1


def beta(y):
    total = y * 2
    return total


def gamma(z):
    return z - 1
"""


def write(path: Path, text: str) -> Path:
    """Write ``text`` with an mtime that is certainly new (some filesystems tick coarsely)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text, encoding="utf-8")
    if path.stat().st_mtime_ns == old:
        os.utime(path, ns=(old + 1_000_000, old + 1_000_000))
    return path


@pytest.fixture
def proj(tmp_path) -> Path:
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    write(root / "pkg" / "mod.py", MOD)
    write(root / "pkg" / "other.py", "def other():\n    return 42\n")
    return root


pytestmark = pytest.mark.backends("sqlite", "postgres")


@pytest.fixture
def svc(tmp_path, store_url):
    service = clocked_service(tmp_path / "home", FakeClock(), store_url)
    yield service
    if service.citations is not None:
        service.citations.close()
    service.engine.close()


def runtime(svc, tmp_path, proj, agent="a1", project="p1", **kw):
    env = identity_env(tmp_path / "home", project, agent, **kw)
    return runtime_on(svc, env, proj)


def remember(rt, content, citations=None, scope="private", category=None):
    item = MemoryInput(content=content, scope=scope, category=category, citations=citations)
    return rt.service.remember(rt.identity, item)


def cite(path, start=None, end=None):
    out = {"path": path}
    if start is not None:
        out.update(startLine=start, endLine=end or start)
    return out


def statuses(rt, *ids):
    got = rt.citations.states(rt.identity, list(ids))
    return [[c.status for c in got.get(i, [])] for i in ids]


# ---------------------------------------------------------------------- each status
def test_each_status_at_recall_with_ranking_and_marking(svc, tmp_path, proj):
    rt = runtime(svc, tmp_path, proj)
    write(proj / "pkg" / "gone.py", "def gone():\n    pass\n")
    texts = {
        "fresh": "widget alpha adds one to its input",
        "moved": "widget beta doubles its input",
        "changed": "widget gamma subtracts one from its input",
        "deleted": "widget gone does nothing at all",
    }
    ranges = {"fresh": (4, 5), "moved": (8, 10), "changed": (13, 14)}
    ids = {}
    for name, text in texts.items():
        c = cite("pkg/gone.py", 1, 2) if name == "deleted" else cite("pkg/mod.py", *ranges[name])
        res = remember(rt, text, [c])
        assert [s.status for s in res.citations] == ["fresh"]
        ids[name] = res.memoryId
    # beta moves down (a new function above it, alpha untouched), gamma changes, gone.py goes
    new = MOD.replace("\n\ndef beta", "\n\ndef helper():\n    return None\n\n\ndef beta")
    write(proj / "pkg" / "mod.py", new.replace("return z - 1", "return z - 2"))
    (proj / "pkg" / "gone.py").unlink()
    res = recall(svc, rt.identity, RecallInput(query="widget input", limit=10))
    by_id = {i.id: i for i in res.items}
    got = {name: [c.status for c in by_id[i].citations] for name, i in ids.items()}
    assert got == {"fresh": ["fresh"], "moved": ["moved"], "changed": ["changed"],
                   "deleted": ["deleted"]}  # fmt: skip
    moved = by_id[ids["moved"]].citations[0]
    assert (moved.startLine, moved.currentStartLine, moved.currentEndLine) == (8, 12, 14)
    # stale items rank lower: their score carries the citations factor
    for name in ("changed", "deleted"):
        item = by_id[ids[name]]
        assert item.explanation["boosts"]["citations"] < 0
    for name in ("fresh", "moved"):
        assert "citations" not in by_id[ids[name]].explanation["boosts"]
    assert "cited code changed since this was written (pkg/mod.py:13-14)" in res.text
    assert "pkg/gone.py:1-2: file deleted" in res.text
    # the note is in the provenance line the framing writes (never inside quoted data)
    notes = [ln for ln in res.text.splitlines() if "cited code changed" in ln]
    assert len(notes) == 2 and all(ln.startswith("— ") for ln in notes)
    assert by_id[ids["changed"]].provenance in notes[0] + notes[1]
    fresh_line = next(ln for ln in res.text.splitlines() if texts["fresh"] in ln)
    assert "cited code changed" not in fresh_line


def test_the_stale_factor_lowers_the_score_and_reorders(svc, tmp_path, proj):
    rt = runtime(svc, tmp_path, proj)
    # two subjects (Alpha, Other): neither updates the other, whenever the first is indexed
    a = remember(rt, "Alpha reads the frobnicator setting", [cite("pkg/mod.py", 4, 5)]).memoryId
    b = remember(rt, "Other reads the frobnicator setting", [cite("pkg/other.py", 1, 2)]).memoryId
    write(proj / "pkg" / "mod.py", MOD.replace("x + 1", "x + 100"))
    query = RecallInput(query="frobnicator setting alpha", limit=5)
    svc.citations.stale_factor = 1.0  # first without the factor: a (more relevant) leads
    plain = {i.id: i for i in recall(svc, rt.identity, query).items}
    assert [c.status for c in plain[a].citations] == ["changed"]
    assert plain[a].score > plain[b].score
    assert all("citations" not in i.explanation["boosts"] for i in plain.values())
    svc.citations.stale_factor = 0.5
    res = recall(svc, rt.identity, query).items
    got = {i.id: i for i in res}
    assert got[a].score == pytest.approx(plain[a].score * 0.5, abs=1e-3)
    assert got[b].score == pytest.approx(plain[b].score, abs=1e-3)
    svc.citations.stale_factor = 0.01  # (fused scores are rank-based: a led by far)
    res = [i.id for i in recall(svc, rt.identity, query).items]
    assert res.index(b) < res.index(a)


def test_moved_stays_moved_until_confirmed_and_the_range_is_stored(svc, tmp_path, proj):
    rt = runtime(svc, tmp_path, proj)
    mid = remember(rt, "beta doubles", [cite("pkg/mod.py", 8, 10)]).memoryId
    write(proj / "pkg" / "mod.py", "# a comment\n" + MOD)
    assert statuses(rt, mid) == [["moved"]]
    stored = svc.citations.stored([mid])[mid][0]
    assert (stored.status, stored.currentStartLine, stored.currentEndLine) == ("moved", 9, 11)
    assert statuses(rt, mid) == [["moved"]]  # stat unchanged: same answer
    res = verify.confirm(svc, rt.identity, mid)
    c = res.memories[0].citations[0]
    assert (c.status, c.startLine, c.endLine) == ("fresh", 9, 11)


def test_whole_file_citations_are_fresh_until_the_file_changes(svc, tmp_path, proj):
    rt = runtime(svc, tmp_path, proj)
    mid = remember(rt, "other returns the answer", [cite("pkg/other.py")]).memoryId
    assert statuses(rt, mid) == [["fresh"]]
    write(proj / "pkg" / "other.py", "def other():\n    return 43\n")
    assert statuses(rt, mid) == [["changed"]]
    write(proj / "pkg" / "other.py", "def other():\n    return 42\n")
    assert statuses(rt, mid) == [["fresh"]]  # back as it was cited


def test_a_check_reads_a_file_only_when_its_stat_changed(svc, tmp_path, proj, monkeypatch):
    import server.service.recalling.citations as mod

    rt = runtime(svc, tmp_path, proj)
    path = proj / "pkg" / "mod.py"
    settled = time.time() - 60  # an mtime old enough to be trusted
    os.utime(path, (settled, settled))
    mid = remember(rt, "alpha adds one", [cite("pkg/mod.py", 4, 5)]).memoryId
    hashed = []
    real = mod.sha256_bytes
    monkeypatch.setattr(mod, "sha256_bytes", lambda data: hashed.append(1) or real(data))
    for _ in range(3):
        assert statuses(rt, mid) == [["fresh"]]
    assert hashed == []
    os.utime(path, (settled + 1, settled + 1))  # touched, same content: hashed once
    assert statuses(rt, mid) == [["fresh"]]
    assert statuses(rt, mid) == [["fresh"]]
    assert len(hashed) == 1


def test_the_ingest_files_table_replaces_hashing(svc, tmp_path, proj, monkeypatch):
    import server.service.recalling.citations as mod

    rt = runtime(svc, tmp_path, proj)
    mid = remember(rt, "alpha adds one", [cite("pkg/mod.py", 4, 5)], scope="team").memoryId
    path = write(proj / "pkg" / "mod.py", MOD + "\n# trailing comment\n")
    settled = time.time() - 60
    os.utime(path, (settled, settled))
    ingest_workspace(rt, rt.identity, proj)
    svc.citations.wait_idle(10)
    hashed = []
    real = mod.sha256_bytes
    monkeypatch.setattr(mod, "sha256_bytes", lambda data: hashed.append(1) or real(data))
    os.utime(path, (settled + 5, settled + 5))  # stat differs from the last check
    ingest_workspace(rt, rt.identity, proj)  # the files row now holds this stat and the sha
    svc.citations.wait_idle(10)
    hashed.clear()
    svc.citations._resolved.clear()
    assert statuses(rt, mid) == [["fresh"]]
    assert hashed == []  # the row's sha was used (the stat matched it)


# ---------------------------------------------------------------------- write paths and rules
def test_mentions_in_the_text_are_cited_when_the_file_exists(svc, tmp_path, proj):
    rt = runtime(svc, tmp_path, proj)
    res = remember(rt, "alpha is at pkg/mod.py:4-5; also see pkg/missing.py and /etc/hosts")
    assert [(c.path, c.startLine, c.endLine) for c in res.citations] == [("pkg/mod.py", 4, 5)]
    res = remember(rt, "see pkg/mod.py#L99 for more")  # out of range: not cited
    assert res.citations == []


def test_explicit_citations_outside_the_allowed_directories_are_refused(svc, tmp_path, proj):
    outside = write(tmp_path / "elsewhere" / "secret.py", "x = 1\n")
    rt = runtime(svc, tmp_path, proj)
    with pytest.raises(AccessDenied, match="outside the allowed directories"):
        remember(rt, "a note", [cite(str(outside))])
    with pytest.raises(AccessDenied):
        remember(rt, "a note", [cite("../elsewhere/secret.py")])
    (proj / "link.py").symlink_to(outside)  # a link out of the project does not get around it
    with pytest.raises(AccessDenied):
        remember(rt, "a note", [cite("link.py")])
    # mentioned in the text: simply not cited, the memory is stored
    res = remember(rt, f"compare with {outside} and link.py")
    assert res.citations == []


def test_pattern_allowed_dirs_widens_what_may_be_cited(tmp_path, proj):
    outside = write(tmp_path / "elsewhere" / "secret.py", "x = 1\n")
    svc = clocked_service(tmp_path / "home", FakeClock())
    try:
        wide = runtime(svc, tmp_path, proj, allowed=tmp_path)
        got = remember(wide, "ok", [cite(str(outside), 1)]).citations
        assert [(c.path, c.startLine) for c in got] == [("elsewhere/secret.py", 1)]
    finally:
        svc.citations.close()
        svc.engine.close()


def test_missing_files_and_bad_ranges_are_clear_errors(svc, tmp_path, proj):
    rt = runtime(svc, tmp_path, proj)
    with pytest.raises(NotFound, match="no such file"):
        remember(rt, "a", [cite("pkg/nope.py", 1)])
    with pytest.raises(InvalidInput, match="outside the file"):
        remember(rt, "a", [cite("pkg/mod.py", 10, 99)])
    with pytest.raises(InvalidInput, match="not a file"):
        remember(rt, "a", [cite("pkg")])
    assert svc.store.reader.execute("SELECT count(*) FROM records").fetchone()[0] == 0


def test_a_remote_agent_without_a_root_cannot_cite(svc, tmp_path, proj):
    local = runtime(svc, tmp_path, proj)
    mid = remember(local, "beta", [cite("pkg/mod.py", 8, 10)], scope="team").memoryId
    remote = runtime(svc, tmp_path, proj, agent="r1")
    remote.identity = remote.identity.model_copy(update={"root": None})
    with pytest.raises(InvalidInput, match="no project folder"):
        remember(remote, "a", [cite("pkg/mod.py", 1)])
    assert remember(remote, "see pkg/mod.py:4").citations == []  # mentions: none
    # it sees the last known status, and no file is read for it
    write(proj / "pkg" / "mod.py", MOD.replace("y * 2", "y * 5"))
    assert statuses(remote, mid) == [["fresh"]]
    assert statuses(local, mid) == [["changed"]]
    assert statuses(remote, mid) == [["changed"]]


def test_update_memory_replaces_or_keeps_citations(svc, tmp_path, proj):
    rt = runtime(svc, tmp_path, proj)
    mid = remember(rt, "alpha", [cite("pkg/mod.py", 4, 5)]).memoryId
    res = svc.update_memory(rt.identity, mid, "alpha, and see pkg/other.py:1-2")
    assert [c.label for c in res.citations] == ["pkg/mod.py:4-5", "pkg/other.py:1-2"]
    res = svc.update_memory(rt.identity, mid, citations=[cite("pkg/mod.py", 8, 10)])
    assert [c.label for c in res.citations] == ["pkg/mod.py:8-10"]
    assert [c.label for c in svc.citations.stored([mid])[mid]] == ["pkg/mod.py:8-10"]


def test_bulk_share_and_forget_carry_citations(svc, tmp_path, proj):
    from server.service.memories.bulk import remember_bulk

    rt = runtime(svc, tmp_path, proj)
    res = remember_bulk(svc, rt.identity, [
        {"content": "one", "citations": [cite("pkg/mod.py", 4, 5)]},
        {"content": "two, see pkg/other.py:1"},
        {"content": "three"},
    ])  # fmt: skip
    got = svc.citations.stored(res.memoryIds)
    assert [len(got.get(i, [])) for i in res.memoryIds] == [1, 1, 0]
    shared = svc.share_learning(rt.identity, res.memoryIds[0])
    assert [c.label for c in svc.citations.stored([shared.memoryId])[shared.memoryId]] == [
        "pkg/mod.py:4-5"
    ]
    assert res.memoryIds[0] not in svc.citations.stored([res.memoryIds[0]])  # moved with it
    svc.forget(rt.identity, shared.memoryId)
    n = svc.store.reader.execute("SELECT count(*) FROM citations WHERE record_id=?",
                                 (shared.memoryId,)).fetchone()[0]  # fmt: skip
    assert n == 0


def test_recall_context_carries_the_status(svc, tmp_path, proj):
    from server.service.recalling.context import recall_context

    rt = runtime(svc, tmp_path, proj)
    mid = remember(rt, "gamma subtracts one", [cite("pkg/mod.py", 13, 14)]).memoryId
    write(proj / "pkg" / "mod.py", MOD.replace("z - 1", "z - 9"))
    ctx = recall_context(svc, rt.identity, RecallContextInput())
    (m,) = [m for m in ctx.private if m.id == mid]
    assert [c.status for c in m.citations] == ["changed"]
    assert "cited code changed since this was written (pkg/mod.py:13-14)" in ctx.summary
    ctx = recall_context(svc, rt.identity, RecallContextInput(search="gamma subtracts"))
    assert [c.status for c in ctx.private[0].citations] == ["changed"]


def test_observations_and_lessons_cite_and_lessons_carry_the_status(svc, tmp_path, proj):
    rt = runtime(svc, tmp_path, proj)
    g = rt.graphs
    g.graph.create_entities(rt.identity, [{"name": "Mod", "entityType": "module"}])
    res = g.graph.add_observations(rt.identity, [
        {"entityName": "Mod", "contents": ["beta doubles", "see pkg/other.py:1-2"],
         "citations": [cite("pkg/mod.py", 8, 10)]},
    ])  # fmt: skip
    assert res.results[0].addedObservations == ["beta doubles", "see pkg/other.py:1-2"]
    obs = svc.store.reader.execute(
        "SELECT id, content FROM records WHERE kind='observation' ORDER BY rowid"
    ).fetchall()
    got = svc.citations.stored([r[0] for r in obs])
    assert [[c.label for c in got[r[0]]] for r in obs] == [
        ["pkg/mod.py:8-10"],
        ["pkg/mod.py:8-10", "pkg/other.py:1-2"],
    ]
    with pytest.raises(AccessDenied):
        g.graph.add_observations(
            rt.identity,
            [{"entityName": "Mod", "contents": ["x"], "citations": [cite("/etc/hosts")]}],
        )
    lesson = {
        "name": "BETA_OVERFLOW", "entityType": "lesson", "observations": ["fixed in beta"],
        "errorPattern": {"type": "OverflowError", "message": "beta overflowed", "context": "x"},
        "metadata": {"severity": "low", "environment": {}, "frequency": 1, "successRate": 1.0},
        "verificationSteps": [],
    }  # fmt: skip
    made = g.lessons.create_lesson(rt.identity, lesson, citations=[cite("pkg/mod.py", 8, 10)])
    assert [c.label for c in made.citations] == ["pkg/mod.py:8-10"]
    q = {"type": "OverflowError", "message": "beta overflowed"}
    before = g.lessons.find_similar_errors(rt.identity, q).lessons[0]
    assert [c.status for c in before.citations] == ["fresh"]
    write(proj / "pkg" / "mod.py", MOD.replace("y * 2", "y * 4"))
    after = g.lessons.find_similar_errors(rt.identity, q).lessons[0]
    assert [c.status for c in after.citations] == ["changed"]
    assert after.score == pytest.approx(before.score * svc.citations.stale_factor, abs=2e-4)


# ---------------------------------------------------------------------- change stream
def test_a_status_change_is_a_change_event_seen_by_who_may_see_the_record(svc, tmp_path, proj):
    a = runtime(svc, tmp_path, proj, agent="a1")
    b = runtime(svc, tmp_path, proj, agent="b1")
    mine = remember(a, "alpha (private)", [cite("pkg/mod.py", 4, 5)]).memoryId
    team = remember(a, "gamma (team)", [cite("pkg/mod.py", 13, 14)], scope="team").memoryId
    head_a = read_changes(svc, a.identity).next_cursor
    head_b = read_changes(svc, b.identity).next_cursor
    write(proj / "pkg" / "mod.py", "# moved down\n" + MOD.replace("z - 1", "z - 3"))
    recall(svc, a.identity, RecallInput(query="alpha gamma"))
    seen_a = read_changes(svc, a.identity, cursor=head_a).changes
    assert {(c.op, c.record_id) for c in seen_a} == {("citations", mine), ("citations", team)}
    (ev,) = [c for c in seen_a if c.record_id == team]
    assert [s.status for s in ev.citations] == ["changed"] and ev.record.id == team
    seen_b = read_changes(svc, b.identity, cursor=head_b).changes
    assert [(c.op, c.record_id) for c in seen_b] == [("citations", team)]
    # a second recall finds nothing new: no second event
    recall(svc, a.identity, RecallInput(query="alpha gamma"))
    assert len(read_changes(svc, a.identity, cursor=head_a).changes) == 2


# ---------------------------------------------------------------------- ingest hook
def test_an_ingest_rerun_updates_cited_files_in_the_background(svc, tmp_path, proj):
    rt = runtime(svc, tmp_path, proj)
    mid = remember(rt, "beta doubles", [cite("pkg/mod.py", 8, 10)], scope="team").memoryId
    ingest_workspace(rt, rt.identity, proj)
    svc.citations.wait_idle(10)
    head = read_changes(svc, rt.identity).next_cursor
    write(proj / "pkg" / "mod.py", MOD.replace("y * 2", "y * 7"))
    report = ingest_workspace(rt, rt.identity, proj)
    assert report.files_indexed == 1
    svc.citations.wait_idle(10)
    # no recall ran: the stored status was updated by the ingest hook, with its event
    assert [c.status for c in svc.citations.stored([mid])[mid]] == ["changed"]
    events = read_changes(svc, rt.identity, cursor=head).changes
    assert ("citations", mid) in [(c.op, c.record_id) for c in events]
    (proj / "pkg" / "mod.py").unlink()
    ingest_workspace(rt, rt.identity, proj)
    svc.citations.wait_idle(10)
    assert [c.status for c in svc.citations.stored([mid])[mid]] == ["deleted"]


def test_ingest_watch_updates_cited_files_in_the_background(svc, tmp_path, proj):
    import threading

    from server.service.transfers.workspace import watch_workspace

    rt = runtime(svc, tmp_path, proj)
    mid = remember(rt, "beta doubles", [cite("pkg/mod.py", 8, 10)], scope="team").memoryId
    reports, stop = [], threading.Event()
    thread = threading.Thread(
        target=watch_workspace, args=(rt, rt.identity, proj, reports.append),
        kwargs={"stop": stop}, daemon=True,
    )  # fmt: skip
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not reports and time.monotonic() < deadline:
            time.sleep(0.05)
        assert reports, "the first run did not finish"
        # the watcher may start after the first run: write until an event is seen
        status = None
        while time.monotonic() < deadline and status != "changed":
            write(proj / "pkg" / "mod.py", MOD.replace("y * 2", f"y * {int(time.time() * 10)}"))
            time.sleep(0.5)
            svc.citations.wait_idle(10)
            status = svc.citations.stored([mid])[mid][0].status
        assert status == "changed"  # found without any recall
    finally:
        stop.set()
        thread.join(timeout=15)
    assert not thread.is_alive()


# ---------------------------------------------------------------------- verify
def test_verify_lists_with_a_diff_then_confirm_update_forget(svc, tmp_path, proj):
    rt = runtime(svc, tmp_path, proj)
    who = rt.identity
    fresh = remember(rt, "alpha adds one", [cite("pkg/mod.py", 4, 5)]).memoryId
    changed = remember(rt, "beta doubles", [cite("pkg/mod.py", 8, 10)]).memoryId
    other = remember(rt, "gamma subtracts one", [cite("pkg/mod.py", 13, 14)]).memoryId
    write(proj / "pkg" / "mod.py",
          "# header\n" + MOD.replace("y * 2", "y * 3").replace("z - 1", "z - 2"))  # fmt: skip
    listed = verify.list_stale(svc, who)
    assert listed.checked == 3
    assert {m.id for m in listed.memories} == {changed, other}
    (m,) = [m for m in listed.memories if m.id == changed]
    (d,) = m.diffs
    assert d.status == "changed" and d.current == "pkg/mod.py:9-11"
    assert "-    total = y * 2" in d.diff and "+    total = y * 3" in d.diff
    assert {m.id for m in verify.list_stale(svc, who, include_moved=True).memories} == {
        fresh,
        changed,
        other,
    }
    # confirm: still right, re-anchored to where the code is now
    res = verify.confirm(svc, who, changed)
    c = res.memories[0].citations[0]
    assert (c.status, c.startLine, c.endLine) == ("fresh", 9, 11)
    # update: new content, re-anchored, revision-checked
    with pytest.raises(Conflict):
        verify.update(svc, who, other, "gamma subtracts two", expected_revision=7)
    res = verify.update(svc, who, other, "gamma subtracts two", expected_revision=1)
    assert res.revision == 2
    assert [(c.status, c.startLine) for c in res.memories[0].citations] == [("fresh", 14)]
    assert svc.get_visible(who, other).content == "gamma subtracts two"
    # forget
    assert verify.forget(svc, who, fresh).deleted
    assert {m.id for m in verify.list_stale(svc, who, include_moved=True).memories} == set()


CREDENTIAL = "aws_secret_access_key = outside-the-project-do-not-print-0042"


def test_a_symlink_swapped_in_after_citing_is_never_followed(svc, tmp_path, proj):
    """A cited file replaced by a link to a file outside the allowed directories (the file
    itself, or a folder on its path): verify, recall's check, re-anchoring and the background
    refresh never read it, and nothing of it is shown."""
    outside = tmp_path / "outside"
    write(outside / "credentials", (CREDENTIAL + "\n") * 20)
    write(outside / "pkg" / "mod.py", (CREDENTIAL + "\n") * 20)
    rt = runtime(svc, tmp_path, proj)
    who = rt.identity
    by_file = remember(rt, "beta doubles", [cite("pkg/mod.py", 8, 10)]).memoryId
    by_dir = remember(rt, "other returns 42", [cite("pkg/other.py", 1, 2)]).memoryId
    target = proj / "pkg" / "mod.py"
    target.unlink()
    target.symlink_to(Path("..") / ".." / "outside" / "credentials")
    listed = verify.list_stale(svc, who)
    shown = listed.model_dump_json()
    assert "outside-the-project" not in shown
    assert statuses(rt, by_file) == [["deleted"]]
    # a folder on the path swapped for a link to a folder outside: not read either
    write(outside / "pkg" / "other.py", (CREDENTIAL + "\n") * 3)
    (proj / "pkg").rename(proj / "pkg-moved")
    (proj / "pkg").symlink_to(outside / "pkg", target_is_directory=True)
    assert "outside-the-project" not in verify.list_stale(svc, who).model_dump_json()
    assert "outside-the-project" not in str(rt.citations.reanchor(who, by_dir))
    rt.citations.refresh_paths([str(proj / "pkg" / "other.py")])
    assert "outside-the-project" not in verify.list_stale(svc, who).model_dump_json()
    # citing through the link now is refused like any path outside
    with pytest.raises(AccessDenied):
        remember(rt, "creds", [cite("pkg/other.py", 1, 1)])


def test_a_cited_file_is_read_up_to_the_cap(svc, tmp_path, proj, monkeypatch):
    """A file over the cap is refused at citing; a cited file that grew past it is not read
    whole by a check."""
    from server.service.recalling import citations

    rt = runtime(svc, tmp_path, proj)
    mid = remember(rt, "beta doubles", [cite("pkg/mod.py", 8, 10)]).memoryId
    monkeypatch.setattr(citations, "MAX_FILE_BYTES", 400)
    write(proj / "pkg" / "big.py", "x = 1\n" * 100)
    with pytest.raises(InvalidInput, match="limit is 400|too large"):
        remember(rt, "big", [cite("pkg/big.py", 1, 2)])
    reads: list[int] = []
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    write(proj / "pkg" / "mod.py", MOD.replace("y * 2", "y * 3") + "# pad\n" * 200)
    statuses(rt, mid)
    assert sum(reads) <= 401


def test_a_file_that_grows_after_its_stat_is_not_read_past_the_cap(tmp_path, monkeypatch):
    """The size seen by ``fstat`` is not trusted: at most the cap (+1 byte to notice) is read,
    and the file is refused."""
    from ingest.workspace import walker

    big = write(tmp_path / "grows.txt", "y" * 10_000)
    real_fstat = os.fstat

    def small(fd):  # the file grew right after it was opened
        st = real_fstat(fd)
        return os.stat_result((*st[:6], 10, *st[7:]))

    reads: list[bytes] = []
    real_read = os.read
    monkeypatch.setattr(os, "fstat", small)
    monkeypatch.setattr(os, "read", lambda fd, n: reads.append(real_read(fd, n)) or reads[-1])
    with pytest.raises(ValueError, match="too large"):
        walker.read_bytes(big, tmp_path, 100)
    assert sum(map(len, reads)) <= 101


def test_verify_acts_only_on_your_own_memories(svc, tmp_path, proj):
    a = runtime(svc, tmp_path, proj, agent="a1")
    b = runtime(svc, tmp_path, proj, agent="b1")
    team = remember(a, "beta", [cite("pkg/mod.py", 8, 10)], scope="team").memoryId
    write(proj / "pkg" / "mod.py", MOD.replace("y * 2", "y * 3"))
    assert verify.list_stale(svc, b.identity).memories == []
    for action in ("confirm", "forget"):
        with pytest.raises(AccessDenied):
            verify.verify(svc, b.identity, action, team)
    with pytest.raises(InvalidInput, match="needs a memoryId"):
        verify.verify(svc, a.identity, "confirm")


def test_the_cli_verify_command(svc, tmp_path, proj, monkeypatch, capsys):
    import json

    from server.cli import main

    rt = runtime(svc, tmp_path, proj)
    mid = remember(rt, "beta doubles", [cite("pkg/mod.py", 8, 10)]).memoryId
    write(proj / "pkg" / "mod.py", MOD.replace("y * 2", "y * 3"))
    svc.citations.close()
    svc.engine.close()
    env = identity_env(tmp_path / "home", "p1", "a1")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(proj)
    assert main(["verify"]) == 0
    out = capsys.readouterr().out
    assert "1 stale of 1 memories" in out and "+    total = y * 3" in out
    assert main(["verify", "--confirm", mid, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["memories"][0]["citations"][0]["status"] == "fresh"
    assert main(["verify", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["memories"] == []
    assert main(["verify", "--forget", mid]) == 0
    assert "deleted" in capsys.readouterr().out


def test_the_hooks_carry_the_status(svc, tmp_path, proj):
    """The UserPromptSubmit and SessionStart selections (server/service/prompting/hook_context.py) check
    citations like recall: a stale item's provenance line says so and its relevance is lowered
    by the same factor."""
    from server.service.prompting import hook_context as ar

    rt = runtime(svc, tmp_path, proj)
    mid = remember(rt, "frobnicator gamma subtracts one", [cite("pkg/mod.py", 13, 14)],
                   scope="personal", category="core").memoryId  # fmt: skip
    cfg = ar.HookConfig(threshold=0.0)
    before = ar.select_for_prompt(svc, rt.identity, "frobnicator gamma", config=cfg)
    assert before.ids == [mid] and "cited code changed" not in before.text
    write(proj / "pkg" / "mod.py", MOD.replace("return z - 1", "return z - 2"))
    after = ar.select_for_prompt(svc, rt.identity, "frobnicator gamma", config=cfg)
    note = "cited code changed since this was written (pkg/mod.py:13-14)"
    assert after.ids == [mid] and note in after.text
    factor = svc.citations.stale_factor
    assert after.picked[0].relevance == pytest.approx(before.picked[0].relevance * factor)
    assert note in ar.briefing(svc, rt.identity).text
