"""Excerpts: a long record is quoted by the part the prompt is about, not by its start."""

from __future__ import annotations

import pytest

from retrieval.engine import content_spans, embed_views
from retrieval.fulltext.analyzer import query_terms
from retrieval.records import Record
from retrieval.vector.vectors import words_of
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from server.service.memories.memory import MemoryService
from server.service.prompting import hook_context as ar
from server.service.recalling import excerpts

WHO = Identity(project_id="proj", agent_id="agent-1")
FILLER = (
    "We went through the sprint board, moved the stale tickets to the backlog, argued about "
    "naming in the design review, and agreed to revisit the dashboard colours next month. "
)
ANSWER = (
    "The flaky upload test failed because the moto S3 mock server is shared between tests and "
    "never reset; the fix is to call mock_s3.reset() in the teardown fixture."
)


@pytest.mark.parametrize("context", ["", "a.py: def f", " ".join(f"c{i}" for i in range(50))])
@pytest.mark.parametrize("max_words,overlap", [(60, 16), (30, 0), (153, 20)])
def test_content_spans_are_the_embedded_windows(context, max_words, overlap):
    for n in (1, 29, 60, 61, 200, 457):
        rec = Record(project_id="p", agent_id="a", content=" ".join(f"w{i}" for i in range(n)),
                     context=context)  # fmt: skip
        views, spans = embed_views(rec, max_words, overlap), content_spans(rec, max_words, overlap)
        assert len(views) == len(spans)
        words = words_of(rec.content)
        for window, (a, b) in zip(views, spans, strict=True):
            assert window[-1][0].endswith(" ".join(words[a:b]))


def test_widen_grows_forward_keeps_spacing_and_marks_cuts():
    content = "one two three\nfour five six seven eight nine ten"
    # the match is "four five": the excerpt grows two words forward for one back
    out = excerpts.widen(content, (3, 5), max_chars=30)
    assert out.startswith("… ") and out.endswith(" …") and len(out) <= 30
    assert "four five six seven" in out and "\n" in out  # the line break is kept
    assert excerpts.widen(content, (0, 10), max_chars=1000) == content  # all of it: no marks
    cut = excerpts.widen("x" * 50 + " tail", (0, 1), max_chars=20)
    assert len(cut) <= 20 + len(" …")


def long_exchange() -> str:
    return (
        "User: why does test_upload_timeout fail on CI? " + FILLER * 6 + ANSWER + " " + FILLER * 3
    )


def test_excerpt_is_the_window_the_query_matches(engine):
    svc = MemoryService(engine)
    short = svc.remember(WHO, MemoryInput(content="the deploy runs on Fridays"))
    long = svc.remember(WHO, MemoryInput(content=long_exchange()))
    engine.sync()
    recs = engine.store.get([short.memoryId, long.memoryId])
    qvec = engine.embedder.embed_query("moto S3 mock server reset teardown fixture")
    assert excerpts.excerpt(engine, recs[short.memoryId], qvec, 200) is None  # fits whole
    got = excerpts.excerpt(engine, recs[long.memoryId], qvec, 400)
    assert got is not None and len(got) <= 400
    assert "mock_s3.reset()" in got  # the matching part, after the record's start
    assert got.startswith("User: why does test_upload_timeout fail") and " … " in got
    assert excerpts.excerpt(engine, recs[long.memoryId], None, 400) is None  # no query vector


def test_prompt_hook_quotes_the_answer_inside_a_long_record(engine):
    svc = MemoryService(engine)
    svc.remember(WHO, MemoryInput(content=long_exchange()))
    for i in range(4):
        svc.remember(WHO, MemoryInput(content=f"note {i}: " + FILLER * 5))
    engine.sync()
    cfg = ar.HookConfig(threshold=0.0, prompt_tokens=300)
    q = "moto S3 mock server never reset: which teardown fixture fix?"
    sel = ar.select_for_prompt(svc, WHO, q, config=cfg)
    assert "mock_s3.reset()" in sel.text  # the start of the record would not show it
    first = sel.picked[0]
    assert first.text is not None and "mock_s3.reset()" in first.text
    # without excerpts the same budget shows the record's start, cut: not the answer
    assert "mock_s3.reset()" not in ar._pack([(first.record, None)], 300)[1]


def exchange_record(engine, svc) -> Record:
    prompt = "Prompt: test_upload_timeout keeps failing on CI, can you look? " + FILLER * 3
    tools = "Tools: Bash(command=pytest tests/test_upload.py -q) → error: TimeoutError"
    reply = "Reply: Let me run the upload tests. " + FILLER * 2 + ANSWER + " " + FILLER * 2
    out = svc.remember(WHO, MemoryInput(content="\n".join([prompt, tools, reply])))
    engine.sync()
    return engine.store.get([out.memoryId])[out.memoryId]


def test_an_exchange_is_quoted_by_its_prompt_and_the_part_of_its_reply_that_matches(engine):
    svc = MemoryService(engine)
    rec = exchange_record(engine, svc)
    # the question matches the prompt; what the reader needs is in the reply
    for query in ("why does test_upload_timeout fail on CI?", "moto mock_s3 reset teardown"):
        got = excerpts.excerpt(engine, rec, engine.embedder.embed_query(query), 600)
        assert got is not None and len(got) <= 600, (query, len(got or ""))
        assert got.startswith("Prompt: test_upload_timeout keeps failing on CI")
        assert "\nReply:" in got or "… " in got.split("\n", 1)[1]
        assert "Tools:" not in got  # the tool line gives way before the reply does
    q = "moto mock_s3 reset"
    terms = frozenset(query_terms(q))
    got = excerpts.excerpt(engine, rec, engine.embedder.embed_query(q), 600, terms)
    assert "mock_s3.reset()" in got.split("\n", 1)[1]  # the reply's matching window
    assert len(got) <= 600
    # a reply that fits whole is quoted whole after the head
    short = svc.remember(WHO, MemoryInput(content="Prompt: " + FILLER * 6 + "\nReply: " + ANSWER))
    engine.sync()
    srec = engine.store.get([short.memoryId])[short.memoryId]
    got = excerpts.excerpt(engine, srec, engine.embedder.embed_query("flaky upload"), 400)
    assert got.endswith("Reply: " + ANSWER) and len(got) <= 400 and " …\nReply:" in got


def test_best_window_after_a_word_skips_the_windows_before_it(engine):
    svc = MemoryService(engine)
    rec = exchange_record(engine, svc)
    spans = engine.spans(rec)
    assert len(spans) > 2
    qvec = engine.embedder.embed_query("test_upload_timeout keeps failing on CI")
    first = spans[-1][0]
    span = excerpts.best_window(engine, rec, qvec, first=first)
    assert span is not None and span[1] > first
    assert excerpts.best_window(engine, rec, qvec, first=10**6) is None


def test_a_window_too_long_for_the_room_is_narrowed_to_its_query_terms():
    words = [f"w{i}" for i in range(40)]
    words[30:33] = ["mock_s3.reset()", "teardown", "fixture"]
    content = " ".join(words)
    terms = frozenset(query_terms("reset the teardown fixture"))
    got = excerpts.widen(content, (0, 40), 60, terms)
    assert "mock_s3.reset() teardown fixture" in got and len(got) <= 60
    assert excerpts.widen(content, (0, 40), 60).startswith("w0 ")  # no terms: its start
    hits = [False] * 10 + [True, True] + [False] * 10
    assert excerpts.narrow(hits, lambda lo, hi: hi - lo <= 4) in ((9, 13), (10, 14))
