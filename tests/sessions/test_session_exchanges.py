"""The session indexer stores exchanges: the open one replaced as it grows, closed by the next
prompt, long ones in parts, nothing stored twice after a rewrite, the write policy per turn;
and the question that matches a problem finds the exchange that holds its fix."""

from __future__ import annotations

import json

import pytest

from retrieval.engine import Engine
from retrieval.records import Kind, RecordFilter
from server.service.core.identity import Identity
from server.service.indexing.sessions import SessionIndexer
from server.service.memories.memory import MemoryService
from server.service.prompting import hook_context as ar
from server.service.trust.secret_scan.secrets import SecretPolicy
from tests.transcript_util import TranscriptWriter

WHO = Identity(project_id="proj", agent_id="agent-1")
pytestmark = pytest.mark.backends("sqlite", "postgres")

FIX = ("Found it: the moto S3 mock server is shared between tests and never reset, so the "
       "multipart upload left over by test_upload_large is still pending when "
       "test_upload_timeout runs, and it waits on it until the timeout. Call mock_s3.reset() "
       "in the teardown fixture (conftest.py) so every test starts with an empty mock.")  # fmt: skip
QUESTION = "why does test_upload_timeout fail intermittently on CI?"


@pytest.fixture
def indexer(engine):
    return SessionIndexer(MemoryService(engine))


def stored(svc, who=WHO):
    f = RecordFilter(buckets=[who.bucket("private")], kinds=[Kind.turn])
    recs = svc.store.list(f)
    return sorted(recs, key=lambda r: (r.metadata["session"], r.metadata["turn"],
                                       r.metadata["part"]))  # fmt: skip


def words(n: int, word: str) -> str:
    return " ".join(f"{word}{i}" for i in range(n))


def test_the_open_exchange_is_replaced_as_it_grows(indexer, tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.user("the deploy script hangs at the migration step")
    assert indexer.index_file(WHO, w.path, flush=True).added == 1
    (first,) = stored(indexer.svc)
    assert first.content == "Prompt: the deploy script hangs at the migration step"
    w.tool("Bash", {"command": "./deploy.sh staging"}, "Error: lock timeout on table users",
           is_error=True)  # fmt: skip
    report = indexer.index_file(WHO, w.path, flush=True)
    assert (report.added, report.updated) == (0, 1)
    w.assistant("A long-running transaction holds the lock; the migration waits for it.")
    report = indexer.index_file(WHO, w.path, flush=True)
    assert (report.added, report.updated) == (0, 1)
    (rec,) = stored(indexer.svc)  # the same record, replaced: no duplicate
    assert rec.id == first.id and rec.revision == 3
    assert (rec.metadata["turn"], rec.metadata["last_turn"]) == (0, 2)
    assert "Tools: Bash(command=./deploy.sh staging) → error: Error: lock timeout" in rec.content
    assert rec.content.endswith("Reply: A long-running transaction holds the lock; the migration "
                                "waits for it.")  # fmt: skip
    hits = indexer.svc.engine.search(
        "migration lock", RecordFilter(buckets=[WHO.bucket("private")])
    )
    assert [h.record.id for h in hits] == [rec.id]  # one vector, one posting list entry


def test_the_next_prompt_closes_the_exchange(indexer, tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.user("rename the config flag")
    w.assistant("Renamed --cfg to --config everywhere.")
    indexer.index_file(WHO, w.path, flush=True)
    (closed,) = stored(indexer.svc)
    w.user("now update the docs")
    indexer.index_file(WHO, w.path, flush=True)
    state = indexer.progress(str(w.path.resolve())).sessions["sess-1"]
    assert [t.text for t in state.open] == ["now update the docs"]  # only the new one is open
    assert state.open_ids != [closed.id]
    w.assistant("Updated README.md and docs/cli.md.")
    w.tool("Read", {"file_path": "docs/cli.md"}, "# CLI\n...")
    report = indexer.index_file(WHO, w.path, flush=True)
    assert (report.added, report.updated) == (0, 1)  # the new exchange grew; the closed one not
    recs = stored(indexer.svc)
    assert [r.metadata["turn"] for r in recs] == [0, 2]
    assert recs[0].id == closed.id and recs[0].revision == 1
    assert recs[1].content == ("Prompt: now update the docs\nTools: Read(file_path=docs/cli.md)\n"
                               "Reply: Updated README.md and docs/cli.md.")  # fmt: skip


def test_a_rerun_after_a_rewrite_stores_nothing_twice(indexer, tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    for i in range(3):
        w.user(f"question {i} about the parser")
        w.tool("Grep", {"pattern": f"parse_{i}"}, f"src/parser.py:{i}")
        w.assistant(f"answer {i}: the parser handles it in parse_{i}")
    indexer.index_file(WHO, w.path, flush=True)
    before = {r.id: r.content for r in stored(indexer.svc)}
    assert len(before) == 3
    entries = [json.loads(line) for line in w.path.read_text().splitlines()]
    w.path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries))
    report = indexer.index_file(WHO, w.path, flush=True)  # every line changed its bytes
    assert report.restarted and (report.added, report.updated, report.existing) == (0, 0, 3)
    assert {r.id: r.content for r in stored(indexer.svc)} == before


def test_a_long_exchange_is_stored_in_parts_and_shrinks_back(indexer, tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.user("explain the billing pipeline end to end please")
    w.assistant("Here is the whole pipeline. " + words(1100, "s"))
    assert indexer.index_file(WHO, w.path, flush=True).added == 3
    parts = stored(indexer.svc)
    assert [(r.metadata["part"], r.metadata["parts"]) for r in parts] == [(0, 3), (1, 3), (2, 3)]
    assert all(len(r.content.split()) <= 500 for r in parts)
    assert parts[0].context == "[4 March 2025 09:30]"
    assert parts[1].context == ("[4 March 2025 09:30]\n"
                                "Prompt: explain the billing pipeline end to end please")  # fmt: skip
    # the answer comes: the earlier text shrinks to its first sentence, one part is left
    w.assistant("In short: invoices are built nightly and charged at 6 am.")
    indexer.index_file(WHO, w.path, flush=True)
    (rec,) = stored(indexer.svc)
    assert rec.id == parts[0].id and rec.metadata["parts"] == 1
    assert rec.content.endswith("Reply: Here is the whole pipeline.\n\n"
                                "In short: invoices are built nightly and charged at 6 am.")  # fmt: skip


def test_parts_beyond_a_rewritten_shorter_exchange_are_removed(indexer, tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.user("explain the billing pipeline end to end please")
    w.assistant("Here is the whole pipeline. " + words(1100, "s"))
    w.user("thanks")
    indexer.index_file(WHO, w.path, flush=True)
    assert len(stored(indexer.svc)) == 4
    lines = w.path.read_text().splitlines(keepends=True)
    w.path.write_text(lines[0] + lines[2].replace("thanks", "thanks a lot"))  # reply gone
    report = indexer.index_file(WHO, w.path, flush=True)
    assert report.restarted
    recs = stored(indexer.svc)
    assert [(r.metadata["turn"], r.metadata["part"], r.metadata["parts"]) for r in recs] == [
        (0, 0, 1),
        (1, 0, 1),
    ]
    assert recs[0].content == "Prompt: explain the billing pipeline end to end please"


def test_write_policy_block_leaves_a_secret_turn_out_of_its_exchange(engine, tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.user("why can't the worker reach the bucket?")
    w.tool("Bash", {"command": "env | grep AWS"},
           "Error: AccessDenied\nwith AWS_ACCESS_KEY_ID=AKIAQ3ZXMPL7ZK2M4PQR", is_error=True)  # fmt: skip
    w.assistant("The worker's role lacks s3:GetObject; add it to the policy.")
    idx = SessionIndexer(MemoryService(engine, secret_policy=SecretPolicy.block))
    report = idx.index_file(WHO, w.path, flush=True)
    assert report.withheld == 1 and report.added == 1
    (rec,) = stored(idx.svc)
    assert "AKIA" not in rec.content + rec.context and "env | grep" not in rec.content
    assert rec.content == ("Prompt: why can't the worker reach the bucket?\n"
                           "Reply: The worker's role lacks s3:GetObject; add it to the policy.")  # fmt: skip
    assert (rec.metadata["turn"], rec.metadata["last_turn"]) == (0, 2)  # the turns it spans


def moto_transcript(w: TranscriptWriter) -> None:
    w.user("test_upload_timeout keeps failing on CI, can you look?")
    w.tool("Bash", {"command": "pytest tests/test_upload.py -q"},
           "..F.\nFAILED tests/test_upload.py::test_upload_timeout - botocore.exceptions."
           "ReadTimeoutError: Read timeout on endpoint URL\n1 failed, 3 passed in 31.02s",
           is_error=True)  # fmt: skip
    w.tool("Read", {"file_path": "tests/conftest.py"}, "import pytest\nfrom moto import mock_s3\n")
    w.assistant(FIX)
    w.user("ok, make the change")
    w.tool("Edit", {"file_path": "tests/conftest.py"}, "The file was updated.")
    w.assistant("Done: the s3 fixture now calls mock_s3.reset() after each test.")


def noise_transcript(w: TranscriptWriter) -> None:
    w.user("the dark mode toggle forgets its state after a reload")
    w.assistant("The theme is kept in component state only; store it in localStorage and read "
                "it on start.")  # fmt: skip
    w.user("the CI badge in the README points at the old pipeline")
    w.assistant("Updated the badge URL to the new workflow file.")
    w.user("add pagination to the orders endpoint")
    w.tool("Edit", {"file_path": "api/orders.py"}, "The file was updated.")
    w.assistant("GET /orders now takes limit and cursor; the default page is 50.")


def assert_fix_is_found(svc: MemoryService, mode: str) -> None:
    f = RecordFilter(buckets=WHO.visible_buckets())
    hits = svc.engine.search(QUESTION, f, k=3, mode=mode)
    assert hits and "mock_s3.reset()" in hits[0].record.content, [h.record.content for h in hits]
    assert hits[0].record.content.startswith("Prompt: test_upload_timeout keeps failing on CI")


def index_moto(svc: MemoryService, tmp_path) -> None:
    moto = TranscriptWriter(tmp_path / "a.jsonl", session="s-upload")
    moto_transcript(moto)
    noise = TranscriptWriter(tmp_path / "b.jsonl", session="s-misc")
    noise_transcript(noise)
    indexer = SessionIndexer(svc)
    for w in (moto, noise):
        indexer.index_file(WHO, w.path, flush=True)


def test_the_question_finds_the_exchange_with_the_fix_lexically(engine, tmp_path):
    svc = MemoryService(engine)
    index_moto(svc, tmp_path)
    assert_fix_is_found(svc, "lexical")


@pytest.mark.slow
def test_the_question_finds_the_exchange_with_the_fix(real_embedder, tmp_path):
    """The packaged model: the hybrid search, and the prompt hook of another session, bring back
    the exchange whose reply holds the fix, though the question shares few words with it."""
    eng = Engine(tmp_path / "store", real_embedder)
    try:
        svc = MemoryService(eng)
        index_moto(svc, tmp_path)
        eng.wait_vectors(30)
        assert_fix_is_found(svc, "hybrid")
        sel = ar.select_for_prompt(svc, WHO, QUESTION, session="a-new-session")
        assert sel.picked and "mock_s3.reset()" in sel.picked[0].record.content
        assert "mock_s3.reset()" in sel.text and "exchange of session s-upload" in sel.text
    finally:
        eng.close()
