"""Writes no person asked for (a lesson learned from a session, its alternative fixes, the
exchanges of a transcript, the readers' progress and state rows) never keep a secret, whatever
the store's policy: the diff of a secret-bearing file is never kept (its name is), every other
string is screened at least as ``redact``, a waiting call is given up on, and what the policy
said is filed for the review inbox. Real SQLite and Chroma (in its child process, as the
daemon runs it) in ``tmp_path``, the hash embedder; every file of the store is read for the
secrets after it is closed."""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.learning.episode_events import FeedProgress, read_events
from ingest.learning.tool_events import MAX_PENDING
from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.records import Kind, RecordFilter
from server.service.browsing import unattended_warnings as ww
from server.service.core.identity import Identity
from server.service.indexing.sessions import PROGRESS_KEY
from server.service.learning.episode_feed import FILE_KEY
from server.service.memories.memory import MemoryService
from server.service.prompting.hook_context import HookConfig
from server.service.prompting.hook_events import HookInput, HookRequest, HookService
from server.service.trust.secret_scan.secrets import SecretPolicy
from tests import transcript_util
from tests.mcp_util import identity_env, runtime_on
from tests.transcript_util import TranscriptWriter

AKID = "AKIA" + "J5Q7R2L4M8N3P6T9"
ASK = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYz9Q3kLmN4p"
GHP = "ghp_" + "Xq7Lm2Vt9RkP4sWz8NbC3dF6gH1jK5yTnQ0a"
ENV = f"AWS_ACCESS_KEY_ID={AKID}\nAWS_SECRET_ACCESS_KEY={ASK}\nGITHUB_TOKEN={GHP}\n"
MARKERS = (AKID, ASK[-16:], GHP[4:])
FAIL = (
    "Exit code 1\n============================= test session starts ===========================\n"
    "collected 3 items\n\ntests/test_upload.py ..F\n\n"
    "=================================== FAILURES ===================================\n"
    "E       botocore.exceptions.NoCredentialsError: Unable to locate credentials\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_upload.py::test_upload_report - botocore.exceptions.NoCredentialsError: "
    "Unable to locate credentials\n========================= 1 failed, 2 passed in 0.81s ========"
)
PASS = "========================= 3 passed in 0.77s ========================="
POLICIES = [SecretPolicy.warn, SecretPolicy.redact, SecretPolicy.block]


@pytest.fixture
def world(tmp_path):
    """``make(policy)`` -> (hooks, identity, repo, store folder) over a fresh store."""
    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    (repo / "app" / "upload.py").write_text("BUCKET = 'reports'\n")
    made: list[HookService] = []

    def make(policy: SecretPolicy = SecretPolicy.warn, name: str = "store"):
        home = tmp_path / name
        svc = MemoryService(Engine(home, HashEmbedder(), vector_process=True),
                            secret_policy=policy)  # fmt: skip
        rt = runtime_on(svc, identity_env(home, "shop", "agent-a", allowed=repo), repo)
        hooks = HookService(svc, rt.graphs, auto_lessons="on")
        made.append(hooks)
        return hooks, Identity(project_id="shop", agent_id="agent-a", root=str(repo)), repo, home

    yield make
    for h in made:
        close(h)


CLOSED: set[int] = set()


def close(hooks: HookService) -> None:
    """Stop the worker and close the store (once)."""
    if id(hooks) in CLOSED:
        return
    CLOSED.add(id(hooks))
    hooks.drain(30)
    hooks.close()
    hooks.svc.engine.close()


def episode(hooks, who, repo: Path, path: Path, edits, *, pending=None, explain: str = "",
            failing: str = "pytest tests/test_upload.py", output: str = FAIL) -> None:  # fmt: skip
    """A session: the upload test fails, the agent edits (``edits``: (tool, args)), it passes;
    ``pending``: a last call whose result never came."""
    t = TranscriptWriter(path, session=path.stem, cwd=str(repo))
    t.user("the upload test fails")
    t.tool("Bash", {"command": failing}, output, is_error=True)
    t.assistant(explain or "The test cannot find AWS credentials; the client reads them from .env.")
    for name, args in edits:
        t.tool(name, args, "File created successfully")
    t.tool("Bash", {"command": "pytest tests/test_upload.py"}, PASS)
    t.assistant("Fixed: the credentials are now in `.env`, which app/upload.py loads.")
    if pending:
        t.tool_use_only(*pending)
    hooks.indexer.index_file(who, path, flush=True, final=True)
    hooks.drain(60)


def write_env(repo: Path, name: str = ".env"):
    return ("Write", {"file_path": str(repo / name), "content": ENV})


def edit_upload(repo: Path, new: str = "BUCKET = 'reports'\nCREDS = '.env'\n"):
    return ("Edit", {"file_path": str(repo / "app/upload.py"), "old_string": "BUCKET = 'reports'\n",
                     "new_string": new})  # fmt: skip


def team_lessons(hooks, who):
    return hooks.lessons.all_lessons(who.bucket("team"))


def files_holding(home: Path, markers=MARKERS) -> list[str]:
    """Every file under the (closed) store that holds one of ``markers``."""
    found = []
    for p in sorted(home.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            found += [f"{p.relative_to(home)}: {m[:6]}…" for m in markers if m.encode() in data]
    return found


def failure_hook_context(hooks, repo: Path) -> str:
    """What another agent's failure hook injects for the same failure."""
    other = Identity(project_id="shop", agent_id="agent-b", root=str(repo))
    inp = HookInput(session_id="other", cwd=str(repo), tool_name="Bash",
                    tool_input={"command": "pytest tests/test_upload.py"}, tool_use_id="t-other",
                    error=FAIL)  # fmt: skip
    ans = hooks.handle(other, HookRequest(event="PostToolUseFailure", input=inp,
                                          config=HookConfig(lesson_threshold=0.0)))  # fmt: skip
    return ((ans.output or {}).get("hookSpecificOutput") or {}).get("additionalContext") or ""


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.value)
def test_a_secret_written_into_env_reaches_neither_the_store_nor_another_agent(
    world, tmp_path, policy
):
    hooks, who, repo, home = world(policy)
    episode(hooks, who, repo, tmp_path / "s1.jsonl", [write_env(repo)])
    [lesson] = team_lessons(hooks, who)
    learned = lesson.model_extra["learned"]
    assert learned["fix"]["files"] == [".env"] and learned["fix"]["hunks"] == []
    assert (
        learned["fix"]["withheld"] == [".env"] and "Fixed by changing .env." in lesson.observations
    )
    context = failure_hook_context(hooks, repo)
    assert lesson.name in context and not any(m in context for m in MARKERS)
    close(hooks)
    assert files_holding(home) == []


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.value)
def test_an_alternative_fix_and_a_waiting_call_keep_no_secret(world, tmp_path, policy):
    hooks, who, repo, home = world(policy)
    episode(hooks, who, repo, tmp_path / "a1.jsonl", [edit_upload(repo)])
    episode(hooks, who, repo, tmp_path / "a2.jsonl", [write_env(repo)])  # the same error, .env
    [lesson] = team_lessons(hooks, who)
    [alt] = lesson.model_extra["learned"]["alternatives"]
    assert alt["files"] == [".env"] and alt["hunks"] == [] and alt["withheld"] == [".env"]
    episode(hooks, who, repo, tmp_path / "a3.jsonl",
            [edit_upload(repo, "BUCKET = 'reports-2'\n")],
            pending=write_env(repo, ".env.production"))  # fmt: skip
    row = json.loads(hooks.svc.store.meta(FILE_KEY + str(tmp_path / "a3.jsonl")))
    assert row["pending"] == {}  # stamped in 2025: given up on at once
    close(hooks)
    assert files_holding(home) == []


def test_the_warnings_of_a_learned_lesson_and_an_exchange_are_filed_for_the_inbox(world, tmp_path):
    hooks, who, repo, home = world(SecretPolicy.warn)
    episode(hooks, who, repo, tmp_path / "w1.jsonl", [write_env(repo)],
            explain=f"The token {GHP} was missing from .env.")  # fmt: skip
    [lesson] = team_lessons(hooks, who)
    assert GHP not in json.dumps(lesson.model_dump(mode="json"))
    found = ww.listing(hooks.svc, who)
    by_source = {(w.source, w.subject): w.warning for w in found}
    assert ("learned lesson", lesson.name) in {(w.source, w.subject) for w in found}
    lesson_notes = [w.warning for w in found if w.source == "learned lesson"]
    assert "the diff of .env was not kept: a file that holds secrets" in lesson_notes
    assert any("github_token" in w for w in lesson_notes)  # the explanation's token, redacted
    exchange = [w for w in found if w.source == "session exchange"]
    assert exchange and all(w.subject == "session w1" and w.scope == "private" for w in exchange)
    assert any("github_token" in w.warning for w in exchange)
    for text in [*by_source.values(), *(w.subject for w in found)]:
        assert "ghp_" not in text and not any(m in text for m in MARKERS)  # kind, never value
    other = Identity(project_id="shop", agent_id="agent-b")  # sees the team lesson's, not A's
    assert {w.source for w in ww.listing(hooks.svc, other)} == {"learned lesson"}
    before = ww.count(hooks.svc, who)
    episode(hooks, who, repo, tmp_path / "w1.jsonl", [])  # read again: counted, not repeated
    assert ww.count(hooks.svc, who) == before
    close(hooks)
    assert files_holding(home, (GHP[4:],)) == []


def test_a_refused_lesson_is_filed_with_its_reason_under_block(world, tmp_path):
    hooks, who, repo, home = world(SecretPolicy.block)
    episode(hooks, who, repo, tmp_path / "b1.jsonl", [edit_upload(repo)],
            failing=f"GITHUB_TOKEN={GHP} pytest tests/test_upload.py")  # fmt: skip
    assert team_lessons(hooks, who) == []
    notes = [w.warning for w in ww.listing(hooks.svc, who) if w.source == "learned lesson"]
    assert any("not learned" in n and "github_token" in n for n in notes)
    close(hooks)
    assert files_holding(home, (GHP[4:],)) == []


def test_the_episode_reader_gives_up_a_waiting_call_after_the_bound(world, tmp_path, monkeypatch):
    monkeypatch.setenv("PATTERN_SESSION_DANGLING_S", "3600")
    monkeypatch.setattr(transcript_util, "T0", datetime.now(UTC) - timedelta(seconds=120))  # live
    hooks, who, repo, home = world(SecretPolicy.warn)
    assert hooks.feed.dangling_s == 3600  # the session indexer's bound
    path = tmp_path / "live.jsonl"
    t = TranscriptWriter(path, session="live", cwd=str(repo))
    t.user("deploy it")
    t.tool_use_only("Bash", {"command": f"deploy --token {GHP}"})
    t.tool_use_only(*write_env(repo, ".env.local"))
    t.tool_use_only("Write", {"file_path": str(repo / "app/cfg.py"), "content": f"T = '{GHP}'\n"})

    def waiting() -> dict:
        hooks.feed.catch_up(who, path)
        return json.loads(hooks.svc.store.meta(FILE_KEY + str(path.resolve())))["pending"]

    calls = waiting()  # waited two minutes of an hour: kept, screened; .env by name only
    assert len(calls) == 3 and GHP not in json.dumps(calls)
    writes = sorted(c["args"]["file_path"] for c in calls.values() if c["name"] == "Write")
    assert [{"file_path": p} for p in writes] == [  # a write of a secret: its name only
        c["args"] for c in sorted(calls.values(), key=lambda c: c["args"].get("file_path", ""))
        if c["name"] == "Write"]  # fmt: skip
    assert writes == [str(repo / ".env.local"), str(repo / "app/cfg.py")]
    by_tool = {c["name"]: c["args"] for c in calls.values()}
    assert "[REDACTED:github_token]" in by_tool["Bash"]["command"]
    hooks.feed.dangling_s = 30.0
    assert waiting() == {}  # given up: its arguments are gone
    close(hooks)
    assert files_holding(home) == []


# ---------------------------------------------------------------------- hostile episodes
KEY_BODY = [
    base64.b64encode(bytes((i * 7 + j) % 256 for j in range(48))).decode() for i in range(12)
]
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(KEY_BODY) + "\n-----END RSA PRIVATE KEY-----\n"
)
PASSWORD = "Tr0ub4dor3horse"
TOKEN_B64 = base64.b64encode(f"GITHUB_TOKEN={GHP}".encode()).decode()
PEM_B64 = base64.b64encode(PEM.encode()).decode()
HOSTILE_MARKERS = (*MARKERS, KEY_BODY[3], KEY_BODY[9], PASSWORD, TOKEN_B64[8:40], PEM_B64[60:90],
                   base64.b64encode(PASSWORD.encode()).decode())  # fmt: skip


def _edit(repo: Path, file: str, old: str, new: str):
    return ("Edit", {"file_path": str(repo / file), "old_string": old, "new_string": new})


def _bash(command: str):
    return ("Bash", {"command": command})


HOSTILE = {
    # a key split over two edits of one file: the second holds neither armour line
    "key split over two edits": lambda repo: {"edits": [
        _edit(repo, "app/upload.py", "BUCKET", "KEY = '''-----BEGIN RSA PRIVATE KEY-----\n"
              + "\n".join(KEY_BODY[:6])),
        _edit(repo, "app/upload.py", KEY_BODY[5], KEY_BODY[5] + "\n" + "\n".join(KEY_BODY[6:])
              + "\n-----END RSA PRIVATE KEY-----'''")]},
    # the armour in one file, the key's body in another
    "key split over two files": lambda repo: {"edits": [
        _edit(repo, "app/upload.py", "a", "KEY = '''-----BEGIN RSA PRIVATE KEY-----\n"),
        _edit(repo, "app/keys.py", "b", "\n".join(KEY_BODY) + "\n")]},
    "token in a file name": lambda repo: {"edits": [
        ("Write", {"file_path": str(repo / f"config/{GHP}.json"), "content": "{}\n"}),
        edit_upload(repo)]},
    "keys in a commit message": lambda repo: {"edits": [
        edit_upload(repo), _bash(f"git commit -am 'rotate {AKID} and {GHP}'")]},
    "keys in the agent's words": lambda repo: {"edits": [edit_upload(repo)],
                                              "explain": f"I set GITHUB_TOKEN={GHP}, AWS {AKID}."},
    "token in the failing command": lambda repo: {"edits": [edit_upload(repo)],
                                                 "failing": f"pytest tests/test_upload.py --token={GHP}"},
    "keys assigned in the failing command": lambda repo: {
        "edits": [edit_upload(repo)],
        "failing": f"GITHUB_TOKEN={GHP} AWS_ACCESS_KEY_ID={AKID} pytest tests/test_upload.py"},
    ".env edited by sed with another file": lambda repo: {"edits": [
        _bash(f"sed -i 's/^DB_PASSWORD=.*/DB_PASSWORD={PASSWORD}/' .env app/upload.py")]},
    ".env edited by sed": lambda repo: {"edits": [_bash(f"sed -i 's/^TOKEN=.*/TOKEN={GHP}/' .env")]},
    "a key in base64": lambda repo: {"edits": [
        ("Write", {"file_path": str(repo / "app/keys.py"), "content": f"KEY_B64 = '{PEM_B64}'\n"})]},
    "a token in base64 in the agent's words": lambda repo: {
        "edits": [edit_upload(repo)], "explain": f"The CI secret is {TOKEN_B64} (base64)."},
    "token in a parametrized test's id": lambda repo: {
        "edits": [edit_upload(repo)], "output": FAIL.replace("test_upload_report", f"test_auth[{GHP}]")},
    "a Kubernetes secret": lambda repo: {"edits": [("Write", {
        "file_path": str(repo / "k8s/db.yaml"),
        "content": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  password: "
                   + base64.b64encode(PASSWORD.encode()).decode() + "\n"})]},
}  # fmt: skip


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_episode_leaves_no_secret_in_any_file_of_the_store(world, tmp_path, case):
    hooks, who, repo, home = world(SecretPolicy.warn)
    episode(hooks, who, repo, tmp_path / "h1.jsonl", **HOSTILE[case](repo))
    [lesson] = team_lessons(hooks, who)  # learned all the same
    context = failure_hook_context(hooks, repo)
    assert lesson.name in context and not any(m in context for m in HOSTILE_MARKERS)
    assert ww.count(hooks.svc, who) > 0  # and a person is told
    close(hooks)
    assert files_holding(home, HOSTILE_MARKERS) == []


TIMES = st.one_of(st.none(), st.integers(), st.floats(allow_nan=True), st.text(max_size=30),
                  st.sampled_from(["2025-03-04T09:30:00Z", "2999-01-01T00:00:00+00:00", "Z"]))  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["Bash", "Write", "Edit", "Read"]), TIMES,
                          st.booleans()), max_size=80),
       st.dictionaries(st.text(max_size=8), st.dictionaries(st.text(max_size=8), TIMES),
                       max_size=5))  # fmt: skip
def test_the_episode_readers_waiting_calls_are_bounded_and_given_up_whatever_they_hold(calls, kept):
    """Waiting calls with any timestamp (and rows of any shape kept before) never fail a read;
    at most ``MAX_PENDING`` wait; a read past the bound gives every one of them up."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.jsonl"
        lines = []
        for i, (tool, at, answered) in enumerate(calls):
            use = {"type": "assistant", "sessionId": "s", "timestamp": at,
                   "message": {"content": [{"type": "tool_use", "id": f"c{i}", "name": tool,
                                            "input": {"command": "pytest", "file_path": "a"}}]}}  # fmt: skip
            lines.append(json.dumps(use))
            if answered:
                lines.append(json.dumps({"type": "user", "sessionId": "s", "message": {"content": [
                    {"type": "tool_result", "tool_use_id": f"c{i}", "content": "ok"}]}}))  # fmt: skip
        path.write_text("".join(f"{ln}\n" for ln in lines))
        prog = FeedProgress(pending={k: {"name": "Bash", "args": {}, **v} for k, v in kept.items()})
        read_events(path, prog, dangling_s=3600, now=time.time())
        assert len(prog.pending) <= MAX_PENDING + len(kept)
        read_events(path, prog, dangling_s=1, now=time.time() + 10**10)
        assert prog.pending == {}


def test_a_secret_bearing_file_the_agent_names_is_never_cited(world, tmp_path):
    """``secrets.yaml:1`` in the agent's words would cite that line (its text kept, a value the
    scanner cannot tell from a word in the clear): a file made to hold secrets is not cited."""
    hooks, who, repo, home = world(SecretPolicy.warn)
    plain = "correct-horse-battery-staple"
    (repo / "secrets.yaml").write_text(f"db: {plain}\n")
    write = ("Write", {"file_path": str(repo / "secrets.yaml"), "content": f"db: {plain}\n"})
    episode(hooks, who, repo, tmp_path / "c1.jsonl", [write, edit_upload(repo)],
            explain="The password is in secrets.yaml:1 now, app/upload.py reads it.")  # fmt: skip
    cited = [r[0] for r in hooks.svc.store.reader.execute("SELECT path FROM citations")]
    assert cited and "secrets.yaml" not in cited  # app/upload.py is
    close(hooks)
    assert files_holding(home, (plain,)) == []


def test_an_exchange_keeps_the_name_of_a_secret_file_it_read_never_its_lines(world, tmp_path):
    """A call naming ``.env`` keeps no output in the exchange nor in the indexer's progress (a
    value no scanner can tell from a word would be kept in the clear)."""
    hooks, who, repo, home = world(SecretPolicy.warn)
    plain = "correcthorsebatterystaple"
    t = TranscriptWriter(tmp_path / "r1.jsonl", session="r1", cwd=str(repo))
    t.user("which bucket does the upload use?")
    t.tool("Read", {"file_path": str(repo / ".env")}, f"SAUCE={plain}\nBUCKET=reports")
    t.tool("Bash", {"command": "source .env && deploy"}, f"error: SAUCE={plain} refused",
           is_error=True)  # fmt: skip
    t.tool("Bash", {"command": "deploy --dry-run"}, "error: no bucket reports", is_error=True)
    t.assistant("It uses the reports bucket.")
    hooks.indexer.index_file(who, t.path, flush=True)  # the exchange stays open: progress row
    [text] = [r.content for r in hooks.svc.store.list(RecordFilter(kinds=[Kind.turn]))]
    assert "Bash(command=source .env && deploy)" in text and plain not in text  # its name only
    assert "error: no bucket reports" in text  # another call's output is kept
    assert plain not in hooks.svc.store.meta(PROGRESS_KEY + str(t.path.resolve()))
