"""Lessons learned from episodes (``server/service/learning/auto_lessons.py``, ``episode_feed.py``,
``graph/learned.py``): what a lesson holds, one lesson per signature, review (accept, edit,
merge, reject), ``PATTERN_AUTO_LESSONS``, secrets. Real SQLite in ``tmp_path``, the hash
embedder; transcripts indexed by the session indexer as ``index-sessions`` does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graph.learned import LearnedLessons
from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.errors import InvalidInput
from server.service.core import envsettings
from server.service.core.config import Settings
from server.service.core.identity import Identity
from server.service.learning import failure_lessons as fl
from server.service.learning.episode_feed import STATE_KEY
from server.service.memories.memory import MemoryService
from server.service.prompting.hook_context import HookConfig
from server.service.prompting.hook_events import HookInput, HookRequest, HookService
from server.service.trust.secret_scan.secrets import SecretPolicy
from tests.mcp_util import identity_env, runtime_on
from tests.transcript_util import TranscriptWriter

FAIL = """Exit code 1
Traceback (most recent call last):
  File "{root}/app/db.py", line 12, in connect
    return Pool(port={port}).open()
app.db.PoolError: pool on port {port} closed at 0x7f3a{port}"""
OLD = "    return Pool(port=port).open()\n"
NEW = "    pool = Pool(port=port)\n    pool.reset()\n    return pool.open()\n"


@pytest.fixture
def world(tmp_path):
    """(hooks, identity, repo folder) over a fresh store; the repo holds app/db.py as fixed."""
    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    (repo / "app" / "db.py").write_text(f"def connect(port):\n{NEW}")
    (repo / "app" / "cfg.py").write_text("PORT = 5432\n")

    def make(mode: str = "on", secrets: SecretPolicy = SecretPolicy.warn):
        svc = MemoryService(Engine(tmp_path / f"store-{mode}-{secrets.value}", HashEmbedder()),
                            secret_policy=secrets)  # fmt: skip
        env = identity_env(tmp_path / "store", "shop", "dev", allowed=repo)
        rt = runtime_on(svc, env, repo)
        who = Identity(project_id="shop", agent_id="dev", root=str(repo))
        hooks = HookService(svc, rt.graphs, auto_lessons=mode)
        made.append(hooks)
        return hooks, who

    made: list[HookService] = []
    yield make, repo
    for h in made:
        h.close()
        h.svc.engine.close()


def fix_session(path: Path, repo: Path, session: str, *, port: int = 5432, file: str = "app/db.py",
                command: str = "pytest tests/test_db.py", secret: str = "") -> Path:  # fmt: skip
    w = TranscriptWriter(path, session=session, cwd=str(repo))
    w.user("the db tests fail, fix them")
    w.tool("Bash", {"command": secret + command}, FAIL.format(root=repo, port=port) + secret,
           is_error=True)  # fmt: skip
    w.assistant("The pool is reused after it was closed; it must be reset first.")
    w.tool("Edit", {"file_path": str(repo / file), "old_string": OLD, "new_string": NEW}, "updated")
    w.tool("Bash", {"command": f"{secret}python -m {command} -q"}, "= 3 passed in 0.21s =")
    w.assistant(f"Fixed: `pool.reset()` is called before `open()` in {file}.")
    return path


def learn(hooks: HookService, who: Identity, path: Path) -> None:
    hooks.indexer.index_file(who, path, flush=True, final=True)
    hooks.drain(30)


def lessons(hooks: HookService, who: Identity):
    return hooks.lessons.all_lessons(who.bucket("team"))


def test_a_lesson_from_an_episode_holds_the_error_fix_verification_provenance_and_citations(
    world, tmp_path
):
    make, repo = world
    hooks, who = make()
    learn(hooks, who, fix_session(tmp_path / "s1.jsonl", repo, "s1"))
    [lesson] = lessons(hooks, who)
    ep = lesson.errorPattern
    assert (ep.type, ep.message) == ("app.db.PoolError", "pool on port 5432 closed at 0x7f3a5432")
    assert ep.context == "pytest tests/test_db.py" and 'File "' in (ep.stackTrace or "")
    assert lesson.observations[0] == "Fixed: `pool.reset()` is called before `open()` in app/db.py."
    assert lesson.observations[1] == "Fixed by changing app/db.py."
    [step] = lesson.verificationSteps
    assert (
        step.command == "python -m pytest tests/test_db.py -q"
        and step.expectedOutput == "exit status 0"
    )
    learned = lesson.model_extra["learned"]
    assert learned["review"] == "pending" and learned["session"] == "s1"
    assert (
        learned["signature"]["normalized"]
        == "PoolError | pool on port <n> closed at <addr> | pytest test_db.py"
    )
    assert learned["repository"] == {"root": str(repo), "branch": "main"}
    assert (
        learned["failedAt"]
        and learned["passedAt"]
        and learned["failedCommand"].startswith("pytest")
    )
    assert (
        learned["fix"]["files"] == ["app/db.py"]
        and "+    pool.reset()" in learned["fix"]["hunks"][0]["diff"]
    )
    rec_id = hooks.svc.store.reader.execute("SELECT record_id FROM lessons").fetchone()[0]
    cites = hooks.svc.citations.states(who, [rec_id])[rec_id]  # the lines the edit wrote (and
    assert ("app/db.py", 2, 4, "fresh") in [  # the file, mentioned in the fix's words)
        (c.path, c.startLine, c.endLine, c.status) for c in cites
    ]
    (repo / "app" / "db.py").write_text("def connect(port):\n    return None\n")
    assert {c.status for c in hooks.svc.citations.states(who, [rec_id])[rec_id]} != {"fresh"}


def test_the_same_signature_adds_an_occurrence_or_an_alternative_never_a_duplicate(world, tmp_path):
    make, repo = world
    hooks, who = make()
    learn(hooks, who, fix_session(tmp_path / "s1.jsonl", repo, "s1"))
    learn(hooks, who, fix_session(tmp_path / "s2.jsonl", repo, "s2", port=6543))  # same fix
    [lesson] = lessons(hooks, who)
    assert lesson.metadata.frequency == 2 and lesson.model_extra["learned"]["occurrences"] == 2
    learn(hooks, who, fix_session(tmp_path / "s3.jsonl", repo, "s3", file="app/cfg.py"))
    [lesson] = lessons(hooks, who)
    alts = lesson.model_extra["learned"]["alternatives"]
    assert [a["files"] for a in alts] == [["app/cfg.py"]] and lesson.metadata.frequency == 2
    again = tmp_path / "s1-copy.jsonl"  # the same session read again: nothing changes
    again.write_text((tmp_path / "s1.jsonl").read_text())
    learn(hooks, who, again)
    assert lessons(hooks, who)[0].model_extra["learned"]["occurrences"] == 3


def test_review_accept_edit_merge_and_reject(world, tmp_path):
    make, repo = world
    hooks, who = make()
    learn(hooks, who, fix_session(tmp_path / "a.jsonl", repo, "a"))
    learn(
        hooks, who, fix_session(tmp_path / "b.jsonl", repo, "b", command="pytest tests/test_b.py")
    )
    learned = LearnedLessons(hooks.lessons)
    a, b = sorted(lesson.name for lesson in learned.pending(who))
    assert (
        learned.review(who, a, "accept", observations=["Reset the pool before opening it."])
        == "accepted"
    )
    got = hooks.lessons.get(who, a)
    assert got.observations == ["Reset the pool before opening it."]
    assert got.model_extra["learned"]["review"] == "accepted" and [
        x.name for x in learned.pending(who)
    ] == [b]
    learned.merge(who, b, a)
    [merged] = lessons(hooks, who)
    assert merged.name == a and merged.metadata.frequency == 2
    assert merged.model_extra["learned"]["alternatives"][0]["files"] == ["app/db.py"]
    learn(
        hooks, who, fix_session(tmp_path / "b2.jsonl", repo, "b2", command="pytest tests/test_b.py")
    )
    assert lessons(hooks, who)[0].model_extra["learned"]["occurrences"] == 3  # b's signature -> a
    assert learned.review(who, a, "reject", reason="a flaky pool, not a fix") == "rejected"
    assert lessons(hooks, who) == []
    learn(hooks, who, fix_session(tmp_path / "c.jsonl", repo, "c"))  # the rejected error again
    assert lessons(hooks, who) == []


def failure_hook(hooks, who, session: str, repo: Path) -> list[str]:
    inp = HookInput(session_id=session, cwd=str(repo), tool_name="Bash",
                    tool_input={"command": "pytest tests/test_db.py"}, tool_use_id=f"t-{session}",
                    error=FAIL.format(root=repo, port=7000))  # fmt: skip
    ans = hooks.handle(who, HookRequest(event="PostToolUseFailure", input=inp,
                                        config=HookConfig(lesson_threshold=0.0)))  # fmt: skip
    return ans.injected


def test_the_setting_off_review_on(world, tmp_path):
    make, repo = world
    off, who = make("off")
    learn(off, who, fix_session(tmp_path / "o.jsonl", repo, "o"))
    assert lessons(off, who) == [] and off.svc.store.meta(STATE_KEY + "o") is None
    review, who = make("review")
    learn(review, who, fix_session(tmp_path / "r.jsonl", repo, "r"))
    [lesson] = lessons(review, who)
    assert failure_hook(review, who, "q1", repo) == []  # learned, not injected until accepted
    assert fl.useful_lessons(review.svc, who, review.lessons, pending=False) == []
    LearnedLessons(review.lessons).review(who, lesson.name, "accept")
    assert len(failure_hook(review, who, "q2", repo)) == 1
    on, who = make("on")
    learn(on, who, fix_session(tmp_path / "n.jsonl", repo, "n"))
    assert len(failure_hook(on, who, "q3", repo)) == 1  # used at once


def test_the_setting_is_read_from_the_environment_on_by_default(tmp_path):
    assert Settings.from_env({}, cwd=tmp_path).auto_lessons == "on"
    assert Settings.from_env({"PATTERN_AUTO_LESSONS": " Review "}, cwd=tmp_path).auto_lessons == (
        "review"
    )
    with pytest.raises(InvalidInput, match="PATTERN_AUTO_LESSONS"):
        envsettings.check({"PATTERN_AUTO_LESSONS": "sometimes"})


@pytest.mark.parametrize("policy", [SecretPolicy.warn, SecretPolicy.redact, SecretPolicy.block])
def test_secrets_in_commands_and_outputs_are_redacted_at_least(world, tmp_path, policy):
    """Nobody reads a learned lesson's warnings: ``warn`` stores it redacted too."""
    make, repo = world
    hooks, who = make(secrets=policy)
    key = "AWS_ACCESS_KEY_ID=AKIAJ5Q7R2L4M8N3P6T9 "
    learn(hooks, who, fix_session(tmp_path / "k.jsonl", repo, "k", secret=key))
    found = lessons(hooks, who)
    if policy is SecretPolicy.block:
        assert found == []  # the lesson is refused, as any write holding a secret
    else:
        [lesson] = found
        assert "AKIAJ5Q7R2L4M8N3P6T9" not in json.dumps(lesson.model_dump(mode="json"))
        assert "[REDACTED" in lesson.model_extra["learned"]["failedCommand"]
    state = hooks.svc.store.meta(STATE_KEY + "k") or ""
    assert "AKIAJ5Q7R2L4M8N3P6T9" not in state


@pytest.mark.parametrize("policy", [SecretPolicy.redact, SecretPolicy.block])
def test_an_occurrence_and_an_alternative_fix_pass_the_write_policy(world, tmp_path, policy):
    make, repo = world
    hooks, who = make(secrets=policy)
    learn(hooks, who, fix_session(tmp_path / "s1.jsonl", repo, "s1"))
    [lesson] = lessons(hooks, who)
    block = dict(lesson.model_extra["learned"])
    token = "ghp_" + "Xq7Lm2Vt9RkP4sWz8NbC3dF6gH1jK5yTnQ0a"
    other = {**block, "episodes": ["e-2"], "session": f"s2 {token}", "passedAt": "2025-03-05",
             "fix": {"explanation": f"export GITHUB_TOKEN={token}", "files": ["app/cfg.py"],
                     "hunks": [{"path": "app/cfg.py", "diff": f"+TOKEN = '{token}'"}]}}  # fmt: skip
    learned = LearnedLessons(hooks.lessons)
    new = {**lesson.model_dump(mode="json", exclude={"learned"}), "learned": other}
    if policy is SecretPolicy.block:  # refused, as the same strings in a new lesson would be
        with pytest.raises(InvalidInput, match="credentials"):
            learned.learn(who, new, "team")
        return
    assert learned.learn(who, new, "team").action == "alternative"
    (extra,) = hooks.svc.store.reader.execute("SELECT extra FROM lessons").fetchone()
    assert token not in extra and "[REDACTED:github_token]" in extra
    [alt] = json.loads(extra)["lesson"]["learned"]["alternatives"]
    assert alt["files"] == ["app/cfg.py"] and token not in json.dumps(alt)
