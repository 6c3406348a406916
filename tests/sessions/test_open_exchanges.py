"""An exchange is searchable from the moment its prompt is sent: the prompt hook stores the
user's part at once (before the client writes it to its transcript, before any tool call it
starts has a result), and the session indexer completes that same record when the answer
arrives: one record, the same id, whatever comes first."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from retrieval.records import Kind, RecordFilter
from server.service.core.identity import Identity
from server.service.graphs.graph_services import graph_services
from server.service.memories.memory import MemoryService
from server.service.prompting.hook_events import HookRequest, HookService
from tests import transcript_util
from tests.transcript_util import TranscriptWriter, hook_input

WHO = Identity(project_id="proj", agent_id="agent-1")
REPORT = "the nightly invoice export crashes with a quota error on the billing table"


@pytest.fixture
def hooks(engine):
    svc = MemoryService(engine)
    out = HookService(svc, graph_services(svc))
    yield out
    out.close()


@pytest.fixture
def live(monkeypatch):
    """Transcript entries stamped now (a live session: a waiting call is not given up yet)."""
    monkeypatch.setattr(transcript_util, "T0", datetime.now(UTC) - timedelta(seconds=5))


def stored(svc) -> list:
    f = RecordFilter(buckets=[WHO.bucket("private")], kinds=[Kind.turn])
    return sorted(svc.store.list(f), key=lambda r: (r.metadata["turn"], r.metadata["part"]))


def send(hooks: HookService, event: str, path, **fields) -> None:
    """A hook event as the client sends it, and the background indexing it queued."""
    hooks.handle(WHO, HookRequest.model_validate(
        {"event": event, "input": hook_input(event, path, **fields)}))  # fmt: skip
    hooks.drain(30)


def found(svc, query: str) -> list[str]:
    hits = svc.engine.search(query, RecordFilter(buckets=[WHO.bucket("private")]), k=3,
                             mode="lexical")  # fmt: skip
    return [h.record.content for h in hits]


def test_the_prompt_is_stored_when_sent_and_completed_in_place(hooks, tmp_path, live):
    svc = hooks.svc
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.user("what does the export job do?")
    w.assistant("It writes the day's invoices to the billing bucket.")
    send(hooks, "Stop", w.path)
    send(hooks, "UserPromptSubmit", w.path, prompt=REPORT)  # not in the transcript yet
    first = stored(svc)[-1]
    assert first.content == f"Prompt: {REPORT}" and first.metadata["turn"] == 2
    assert found(svc, "invoice export quota error")[0] == first.content  # searchable now
    w.user(REPORT)
    w.assistant("Let me run it to see the error.")
    tid = w.tool_use_only("Bash", {"command": "python export.py --table billing"})
    send(hooks, "Stop", w.path)  # the call waits for its result (a permission prompt)
    recs = stored(svc)
    assert len(recs) == 2 and recs[-1].id == first.id
    assert recs[-1].content == f"Prompt: {REPORT}\nReply: Let me run it to see the error."
    w.tool_result(tid, "QuotaExceeded: billing table export limit", is_error=True)
    w.assistant("The export hits the table's quota; raise it or export in pages.")
    send(hooks, "Stop", w.path)
    recs = stored(svc)
    assert len(recs) == 2 and recs[-1].id == first.id
    assert "Tools: Bash(command=python export.py --table billing) → error" in recs[-1].content
    assert recs[-1].content.endswith("Reply: Let me run it to see the error.\n\nThe export hits "
                                     "the table's quota; raise it or export in pages.")  # fmt: skip


def test_the_first_prompt_of_a_session_is_stored_before_its_transcript_exists(hooks, tmp_path):
    path = tmp_path / "new.jsonl"
    send(hooks, "UserPromptSubmit", path, prompt=REPORT)
    (first,) = stored(hooks.svc)
    assert first.content == f"Prompt: {REPORT}"
    w = TranscriptWriter(path)
    w.user(REPORT)
    w.assistant("Looking at the export job.")
    send(hooks, "Stop", path)
    (rec,) = stored(hooks.svc)
    assert rec.id == first.id and rec.content.endswith("Reply: Looking at the export job.")


def test_a_prompt_already_in_the_transcript_is_not_stored_twice(hooks, tmp_path, live):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    w.user(REPORT)  # the client wrote it before the hook's run
    send(hooks, "UserPromptSubmit", w.path, prompt=REPORT)
    w.assistant("Looking at the export job.")
    send(hooks, "Stop", w.path)
    (rec,) = stored(hooks.svc)
    assert rec.content == f"Prompt: {REPORT}\nReply: Looking at the export job."


def test_the_same_prompt_twice_makes_two_exchanges(hooks, tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    for answer in ("Ran the tests: 3 failures.", "Ran them again: all pass."):
        send(hooks, "UserPromptSubmit", w.path, prompt="run the tests")
        w.user("run the tests")
        w.assistant(answer)
        send(hooks, "Stop", w.path)
    assert [r.content for r in stored(hooks.svc)] == [
        "Prompt: run the tests\nReply: Ran the tests: 3 failures.",
        "Prompt: run the tests\nReply: Ran them again: all pass.",
    ]


def test_a_prompt_that_never_reaches_the_transcript_leaves_nothing_behind(hooks, tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    send(hooks, "UserPromptSubmit", w.path, prompt="drop the production database")  # refused
    send(hooks, "UserPromptSubmit", w.path, prompt=REPORT)  # by another hook of the client
    w.user(REPORT)
    w.assistant("Looking at the export job.")
    send(hooks, "Stop", w.path)
    assert [r.content for r in stored(hooks.svc)] == [
        f"Prompt: {REPORT}\nReply: Looking at the export job."
    ]


def test_a_transcript_read_again_after_a_rewrite_keeps_the_same_records(hooks, tmp_path):
    w = TranscriptWriter(tmp_path / "s.jsonl")
    for prompt in ("run the tests", REPORT):
        send(hooks, "UserPromptSubmit", w.path, prompt=prompt)
        w.user(prompt)
        w.assistant(f"Done: {prompt}.")
        send(hooks, "Stop", w.path)
    before = {r.id: r.content for r in stored(hooks.svc)}
    entries = [json.loads(line) for line in w.path.read_text().splitlines()]
    w.path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries))
    report = hooks.indexer.index_file(WHO, w.path, flush=True)
    assert report.restarted and (report.added, report.updated) == (0, 0)
    assert {r.id: r.content for r in stored(hooks.svc)} == before
