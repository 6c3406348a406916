"""The warnings of writes no person asked for, kept and shown: the review inbox lists them (a
private write's to its own agent only) and dismisses them through the dashboard's routes; a
kept warning names a secret's kind, never its value; one row per distinct warning, the newest
500 of a project. Also the rules that decide what such a write keeps of a file
(``trust.secret_files``), fuzzed. Real SQLite and Chroma in ``tmp_path``, the hash embedder."""

from __future__ import annotations

import base64
import time
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from retrieval.records import utcnow
from server.service.browsing import unattended_warnings as ww
from server.service.core.identity import Identity
from server.service.prompting.hook_events import HookService
from server.service.trust.secret_scan import secrets
from server.service.trust.secret_scan.secret_files import FOLDERS, secret_bearing, secret_text
from tests.transcript_util import TranscriptWriter
from tests.ui_util import XSS, UiHarness, csrf_of

GHP = "ghp_" + "Xq7Lm2Vt9RkP4sWz8NbC3dF6gH1jK5yTnQ0a"
AKID = "AKIA" + "J5Q7R2L4M8N3P6T9"
FAIL = (
    "Exit code 1\nE       app.db.PoolError: pool closed\n"
    "FAILED tests/test_db.py::test_pool - app.db.PoolError: pool closed\n1 failed in 0.1s"
)


@pytest.fixture
def ui(tmp_path):
    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    h = UiHarness(tmp_path / "store", env={"PATTERN_ALLOWED_DIRS": str(tmp_path)}, cwd=repo)
    h.repo = repo
    yield h
    h.close()


def learn_with_a_secret(h: UiHarness, who: Identity) -> None:
    """A session of ``who`` whose fix writes .env and whose words quote a token (warn policy)."""
    hooks = HookService(h.svc, h.rt.graphs, auto_lessons="on")
    try:
        w = TranscriptWriter(h.repo.parent / "s1.jsonl", session="s1", cwd=str(h.repo))
        w.user("the db test fails")
        w.tool("Bash", {"command": "pytest tests/test_db.py"}, FAIL, is_error=True)
        w.assistant(f"The pool needs the token {GHP} from .env.")
        w.tool("Write", {"file_path": str(h.repo / ".env"), "content": f"DB_TOKEN={GHP}\n"}, "ok")
        w.tool("Bash", {"command": "pytest tests/test_db.py"}, "1 passed in 0.1s")
        w.assistant("Fixed: .env holds the token now.")
        hooks.indexer.index_file(who, w.path, flush=True, final=True)
        hooks.drain(60)
    finally:
        hooks.close()


def test_the_inbox_lists_the_warnings_of_automatic_writes_and_dismisses_them(ui):
    owner_id = ui.rt.identity
    learn_with_a_secret(ui, owner_id.model_copy(update={"root": str(ui.repo)}))
    owner = ui.owner()
    page = owner.get("/ui/review")
    assert page.status_code == 200 and 'id="write-warnings"' in page.text
    assert "learned lesson" in page.text and "session exchange" in page.text
    assert "the diff of .env was not kept" in page.text and "github_token" in page.text
    assert "diff not kept (it holds secrets): <code>.env</code>" in page.text  # the lesson's card
    assert GHP not in page.text and GHP[4:12] not in page.text
    badge = owner.get("/ui/health").text  # the learned lesson and the warnings
    assert f'of automatic writes">{1 + ww.count(ui.svc, owner_id)}</span>' in badge

    token = ui.tokens.create("alice", "p1", label="alice")
    alice = ui.token_client(token)
    theirs = alice.get("/ui/review").text  # the team lesson's warnings, not owner's session's
    assert "learned lesson" in theirs and "session exchange" not in theirs

    listed = ww.listing(ui.svc, owner_id)
    first = listed[0]
    csrf = csrf_of(owner)
    assert owner.post("/ui/review/warnings", data={"id": first.id}).status_code == 403  # no CSRF
    r = owner.post("/ui/review/warnings", data={"csrf": csrf, "id": first.id})
    assert r.status_code == 303 and r.headers["location"].endswith("msg=warning-dismissed")
    assert first.id not in {w.id for w in ww.listing(ui.svc, owner_id)}
    gone = owner.post("/ui/review/warnings", data={"csrf": csrf, "id": first.id})
    assert gone.status_code == 404 and "dismissed already" in gone.text
    private = next(w for w in listed if w.scope == "private")
    alice_csrf = csrf_of(alice)  # another agent cannot dismiss owner's private warning
    assert alice.post("/ui/review/warnings",
                      data={"csrf": alice_csrf, "id": private.id}).status_code == 404  # fmt: skip
    r = owner.post("/ui/review/warnings", data={"csrf": csrf, "all": "1"})
    assert r.status_code == 303 and ww.listing(ui.svc, owner_id) == []
    assert 'id="write-warnings"' not in owner.get("/ui/review").text


def test_a_kept_warning_names_the_kind_and_is_escaped(ui):
    who = ui.rt.identity
    ww.file(ui.svc, who, "learned lesson", f"lesson {XSS}",
            [f"redacted a github_token ({GHP[:4]}…) from the content", f"saw {AKID} in {XSS}"])  # fmt: skip
    [a, b] = sorted(ww.listing(ui.svc, who), key=lambda w: w.warning)
    assert a.warning == "redacted a github_token from the content"
    assert AKID not in b.warning and "[REDACTED:aws_access_key_id]" in b.warning
    page = ui.owner().get("/ui/review").text
    assert XSS not in page and "&lt;script&gt;" in page


def test_warnings_are_counted_once_each_and_bounded_per_project(ui, monkeypatch):
    who, other = ui.rt.identity, Identity(project_id="p2", agent_id="owner")
    for _ in range(3):
        ww.file(ui.svc, who, "session exchange", "session s1", ["redacted a github_token"])
    [w] = ww.listing(ui.svc, who)
    assert w.count == 3 and w.at >= w.firstAt
    ww.file(ui.svc, other, "session exchange", "session s9", ["another project's"])
    ww.file(ui.svc, other, "session exchange", "session s10", [f"w{i}" for i in range(120)])
    listed = ww.listing(ui.svc, other, limit=200)  # one write: at most 50, the rest counted
    assert len(listed) == 1 + ww.MAX_PER_WRITE
    assert "and 71 more warnings of the same write" in {w.warning for w in listed}
    monkeypatch.setattr(ww, "MAX_PER_PROJECT", 20)
    t0 = utcnow()
    for i in range(30):
        monkeypatch.setattr(ui.svc, "clock", lambda i=i: t0 + timedelta(seconds=i + 1))
        ww.file(ui.svc, who, "learned lesson", f"lesson L{i}", [f"warning {i}"], scope="team")
    kept = ww.listing(ui.svc, who, limit=100)
    assert len(kept) == 20 and kept[0].subject == "lesson L29" and kept[-1].subject == "lesson L10"
    assert ww.count(ui.svc, other) == 51  # the other project's are its own


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=200), st.sampled_from(["", GHP, AKID, "DB_PASSWORD=Zq8vR2mLp4xT"]))
def test_a_kept_warning_never_holds_what_the_scanner_finds(text, secret):
    kept = ww.clean(f"{text} ({secret[:4]}…) {secret} {text}", ww.TEXT_CHARS)
    assert secrets.scan(kept) == [] and (not secret or secret.split("=")[-1] not in kept)
    assert "\n" not in kept and len(kept) <= ww.TEXT_CHARS


SECRET_FILES = [".env", ".env.production", "config/.env.local", ".envrc", "certs/server.pem",
                "deploy.key", "id_rsa", "/home/u/.ssh/id_ed25519", "C:\\Users\\u\\.aws\\credentials",
                "credentials.json", "secrets.yaml", "k8s/secrets/db", ".netrc", "store.p12"]  # fmt: skip
PLAIN_FILES = ["app/env.py", "environment.yml", "README.md", "id_rsa.pub", "keys.py",
               "docs/secrets-management.md", "src/credentials_test.py", "monkey.py", ""]  # fmt: skip


def test_secret_bearing_files_by_name_and_folder():
    assert [p for p in SECRET_FILES if not secret_bearing(p)] == []
    assert [p for p in PLAIN_FILES if secret_bearing(p)] == []


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=120), st.sampled_from([".env", ".ENV.prod", "id_ecdsa", "x.PEM"]))
def test_secret_bearing_reads_any_path_and_keeps_to_the_last_name(prefix, name):
    folder = prefix.replace("\\", "/").rsplit("/", 1)[0]
    assume(not any(p.lower() in FOLDERS for p in folder.split("/")))
    assert secret_bearing(f"{folder}/{name}") is True
    # every .env* holds secrets; a private key's .pub does not, nor does a .pem.pub
    assert secret_bearing(f"{folder}/{name}.pub") is name.lower().startswith(".env")
    assert isinstance(secret_bearing(prefix), bool)


@settings(max_examples=40, deadline=None)
@given(st.binary(min_size=0, max_size=300), st.integers(0, 3))
def test_a_secret_in_base64_is_found_even_with_a_word_glued_in_front(noise, glue):
    blob = base64.b64encode(noise + f"\nGITHUB_TOKEN={GHP}\n".encode()).decode()
    assert secret_text("abc"[:glue] + blob)
    assert secret_text(base64.b64encode(blob.encode()).decode())  # twice encoded


def test_a_secret_in_base64_behind_many_decoys_is_found():
    decoys = " ".join(base64.b64encode(bytes([i]) * 30).decode() for i in range(100))
    token = base64.b64encode(f"GITHUB_TOKEN={GHP}".encode()).decode()
    assert secret_text(f"{decoys} {token}") and not secret_text(decoys)


def test_reading_a_large_text_for_secrets_is_bounded():
    runs = ("QUJD" * 20 + " ") * 12_000  # about 1 MB of base64 runs with nothing in them
    t0 = time.perf_counter()
    assert secret_text(runs) is False
    assert time.perf_counter() - t0 < 5.0
