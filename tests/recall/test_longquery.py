"""Long queries: windows, salience, and the ranker asking the salient sentence."""

from __future__ import annotations

import pytest

from retrieval.ranking import longquery
from retrieval.records import RecordFilter

WRAPPER = (
    "I'm writing up the weekly recap and the export script printed this on the last run:\n"
    "[export] 2023-08-14 10:02:11 INFO loaded 412 messages from archive chat_2023.db\n"
    "[export] 2023-08-14 10:02:12 WARN 3 attachments missing, keeping thumbnails only\n"
    "Ignore the warning, the thumbnails are fine for this, and the weekly recap can wait a "
    "little. {question} Answer in one or two sentences, say which conversation it came from, "
    "and if the chats do not say it, tell me that instead of guessing, then suggest a heading."
)


def test_windows_are_sentences_and_lines():
    text = "First line here now.\nSecond one, a bit longer than that? ok.\n" + " ".join(
        f"w{i}" for i in range(70)
    )
    wins = longquery.windows(text, size=32)
    assert wins[0] == "First line here now."
    assert wins[1] == "Second one, a bit longer than that?"
    assert wins[2].startswith("ok. w0 w1")  # too short alone: joins the next piece
    assert [len(w.split()) for w in wins[2:]] == [32, 32, 7]


def test_short_queries_are_their_own_view():
    qv = longquery.views("where is the retry logic", lambda ts: dict.fromkeys(ts, 1), 10)
    assert qv.lexical is None and qv.vector == ["where is the retry logic"]


def test_the_covered_question_wins_over_known_but_scattered_words():
    prompt = WRAPPER.replace("{question}", "When did Caroline go to the LGBTQ support group?")
    known = {"caroline": 40, "lgbtq": 3, "support": 20, "group": 30, "weekly": 5, "recap": 2,
             "warning": 4, "thumbnails": 1, "conversation": 6, "sentences": 2, "heading": 2}  # fmt: skip

    def probe(terms):  # one record holds caroline + lgbtq + support + group; wrapper words are
        together = {"caroline", "lgbtq", "support", "group"}  # spread over different records
        return sum(3.0 for t in terms if t in together) or 2.0

    qv = longquery.views(prompt, lambda ts: {t: known.get(t, 0) for t in ts}, 1000, probe=probe)
    question = "When did Caroline go to the LGBTQ support group?"
    # the whole prompt and its salient sentence, which stands out among the windows
    assert qv.vector == [prompt, question] and qv.salient == question
    assert qv.gap > longquery.GAP_HI
    assert set(qv.salient_terms) == {"caroline", "lgbtq", "support", "group"}
    assert set(qv.lexical) == set(known)  # every known term of the prompt
    assert "export" not in qv.lexical and "2023" not in qv.lexical  # unknown to the store


def test_a_long_query_keeps_its_rarest_known_terms():
    report = " ".join(f"term{i}" for i in range(120)) + " broker"
    dfs = {f"term{i}": 1 + i for i in range(120)} | {"broker": 500}
    qv = longquery.views(report, lambda ts: {t: dfs.get(t, 0) for t in ts}, 1000, max_terms=10)
    assert qv.lexical == [f"term{i}" for i in range(10)]


@pytest.mark.parametrize(
    ("gap", "gain", "weight"),
    [(0.0, -0.05, 0.0), (0.9, -0.05, 1.0), (0.0, 0.2, 1.0), (0.35, 0.0, 0.5), (0.1, 0.05, 0.5)],
)
def test_salient_weight_ramps(gap, gain, weight):
    assert longquery.salient_weight(gap, gain) == pytest.approx(weight)


def test_ranker_asks_the_salient_sentence(engine, make_record):
    facts = [
        "Caroline: I went to the LGBTQ support group yesterday, it was powerful.",
        "Melanie: I painted a lake at sunrise last week.",
        "Caroline: The adoption agency called about the interview.",
        "Melanie: My kids love dinosaurs and the natural history museum.",
    ]
    filler = [f"Melanie: we talked about weekly plans number {i} and a recap of things" for i in range(40)]  # fmt: skip
    engine.add([make_record(t) for t in facts + filler])
    f = RecordFilter(buckets=[make_record("x").bucket])
    question = "When did Caroline go to the LGBTQ support group?"
    prompt = WRAPPER.replace("{question}", question)
    assert longquery.is_long(prompt)
    top = engine.search(prompt, f, 3)[0].record.content
    assert top == facts[0]
    engine.ranker.config.long_queries = False  # the whole prompt: the wrapper's words win
    assert engine.search(prompt, f, 1)[0].record.content != facts[0]
    engine.ranker.config.long_queries = True
    short = [h.record.id for h in engine.search(question, f, 10)]
    engine.ranker.config.long_queries = False
    assert [h.record.id for h in engine.search(question, f, 10)] == short  # short: unchanged


def test_a_pasted_report_is_asked_whole(engine, make_record):
    """A bug report is evidence from every sentence: the earlier report sharing most of them
    ranks first, not the record that matches one sentence best (asked by its most salient
    sentence alone, the one-liner would win)."""
    sentences = [
        "The broker stops dispatching messages after a network partition heals.",
        "Consumers on the durable topic reconnect but receive nothing.",
        "The journal shows the checkpoint thread blocked on the index lock.",
        "Restarting the broker clears it until the next failover.",
        "We run the shared file system master slave setup with two nodes.",
        "Log level debug shows repeated lease renewal warnings every second.",
    ]
    duplicate = " ".join(s.replace(".", "") for s in sentences[1:]) + " seen on 5.4 as well"
    one_liner = "Messages stop after a partition, on 5.8."
    filler = [
        f"Unrelated ticket {i} about the web console layout and its colours" for i in range(30)
    ]
    engine.add([make_record(t) for t in [duplicate, one_liner, *filler]])
    f = RecordFilter(buckets=[make_record("x").bucket])
    report = " ".join(sentences)
    assert longquery.is_long(report)
    top = [h.record.content for h in engine.search(report, f, 3)]
    assert top[0] == duplicate
