"""The prompt hook in a young project, with the packaged model: each memory alone in its store (or
a past session indexed from a Claude Code transcript) is injected for a prompt that asks for it
in other words, and an unrelated prompt injects nothing; then all of them in one store."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from retrieval.engine import Engine
from retrieval.records import Record, RecordFilter, Scope
from server.service.core.identity import Identity
from server.service.indexing.sessions import SessionIndexer
from server.service.memories.memory import MemoryService
from server.service.prompting import hook_context as ar
from tests import transcript_util
from tests.sessions.test_session_exchanges import QUESTION, moto_transcript
from tests.transcript_util import TranscriptWriter

pytestmark = pytest.mark.slow
WHO = Identity(project_id="shop", agent_id="dev-agent")
# (scope, category, memory, a prompt asking for it in other words)
MEMORIES = [
    (
        "team",
        "decisions",
        "The payments service retries a declined card charge three times with "
        "exponential backoff starting at 200 ms.",
        "how many times do we retry a failed card payment?",
    ),
    (
        "team",
        "decisions",
        "Decision: the orders service uses PostgreSQL, not MongoDB, because "
        "refunds need multi-row transactions.",
        "which database did we pick for orders, and why?",
    ),
    (
        "team",
        "architecture",
        "Convention: every new API endpoint gets an OpenAPI example and a "
        "contract test under tests/contract/.",
        "what do I have to add when I create a new endpoint?",
    ),
    (
        "personal",
        "longterm",
        "The user prefers pnpm over npm and wants install commands shown without sudo.",
        "should I install the dependencies with npm?",
    ),
    (
        "team",
        "learnings",
        "Known error: pip fails with SSL CERTIFICATE_VERIFY_FAILED inside the "
        "corporate VPN; set PIP_CERT=/etc/ssl/certs/corp.pem before installing.",
        "pip install fails with certificate verify failed, what now?",
    ),
]
UNRELATED = ["center the login button horizontally with flexbox",
             "write a haiku about autumn leaves",
             "rename the variable tmp to buffer in utils/strings.py"]  # fmt: skip
EXPORT_FIX = ("The export loads every row with fetchall(), so a large tenant's rows all sit in "
              "memory at once. Stream them with a server-side cursor (itersize=5000) instead.")  # fmt: skip


def export_transcript(w: TranscriptWriter) -> None:
    w.user("the nightly export job gets killed on the biggest tenants")
    w.tool("Bash", {"command": "python -m jobs.export --tenant acme"},
           "Traceback (most recent call last):\n  ...\nMemoryError", is_error=True)  # fmt: skip
    w.assistant(EXPORT_FIX)


SESSIONS = [
    ("s-upload", moto_transcript, QUESTION, "mock_s3.reset()"),
    (
        "s-export",
        export_transcript,
        "the export crashes with MemoryError for big customers",
        "server-side cursor",
    ),
]


@pytest.fixture
def store(tmp_path, real_embedder, monkeypatch):
    # this year's timestamps, in the indexer's context format ("[20 November 2026 10:01]")
    monkeypatch.setattr(transcript_util, "T0", datetime(2026, 11, 20, 10, 1, tzinfo=UTC))
    engines = []

    def make(name: str):
        eng = Engine(tmp_path / name, real_embedder)
        engines.append(eng)
        return eng, MemoryService(eng)

    yield make
    for eng in engines:
        eng.close()


def remember(eng, scope: str, category: str, text: str) -> None:
    eng.add([Record(project_id=WHO.project_id, agent_id=WHO.agent_id, scope=Scope(scope),
                    category=category, content=text)])  # fmt: skip


def index(svc, tmp_path, session: str, write) -> None:
    w = TranscriptWriter(tmp_path / f"{session}.jsonl", session=session)
    write(w)
    SessionIndexer(svc).index_file(WHO, w.path, flush=True, final=True)


def injected(svc, prompt: str) -> str:
    return ar.select_for_prompt(svc, WHO, prompt, session="a-new-session").text


def quiet(svc) -> None:
    for prompt in UNRELATED:
        sel = ar.select_for_prompt(svc, WHO, prompt, session="a-new-session")
        assert sel.picked == [], (prompt, [(d.relevance, d.record.content[:60])
                                           for d in sel.decisions])  # fmt: skip


@pytest.mark.parametrize("memory", MEMORIES, ids=lambda m: m[3][:30])
def test_one_memory_in_a_young_project(store, memory):
    scope, category, text, prompt = memory
    eng, svc = store("one")
    remember(eng, scope, category, text)
    eng.wait_vectors(30)
    assert text in injected(svc, prompt)
    quiet(svc)


@pytest.mark.parametrize("session", SESSIONS, ids=lambda s: s[0])
def test_a_past_sessions_fix_asked_as_the_problem(store, tmp_path, session):
    name, write, prompt, fix = session
    eng, svc = store(name)
    index(svc, tmp_path, name, write)
    eng.wait_vectors(30)
    recs = svc.store.list(RecordFilter(buckets=WHO.visible_buckets()))
    assert recs and not any(r.metadata.get("suspicious") for r in recs), [
        (r.context, r.metadata.get("suspicious")) for r in recs]  # fmt: skip
    assert any(r.context.startswith("[20 November 2026") for r in recs)
    assert fix in injected(svc, prompt)
    quiet(svc)


def test_all_of_them_in_one_project(store, tmp_path):
    eng, svc = store("all")
    for scope, category, text, _ in MEMORIES:
        remember(eng, scope, category, text)
    for name, write, _, _ in SESSIONS:
        index(svc, tmp_path, name, write)
    eng.wait_vectors(30)
    for _, _, text, prompt in MEMORIES:
        assert text in injected(svc, prompt), prompt
    for _, _, prompt, fix in SESSIONS:
        assert fix in injected(svc, prompt), prompt
    quiet(svc)
