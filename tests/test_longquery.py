"""Long queries: windows, salience, and the ranker asking the salient sentence."""

from __future__ import annotations

from retrieval import longquery
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
    assert qv.vector == ["When did Caroline go to the LGBTQ support group?"]
    assert set(qv.lexical) == {"caroline", "lgbtq", "support", "group"}
    assert "export" not in qv.lexical and "2023" not in qv.lexical  # unknown to the store


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
