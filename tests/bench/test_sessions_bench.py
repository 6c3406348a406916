"""``relevance.py locomo --via-sessions [--long-prompts] [--abstain]`` on a tiny conversation in
LoCoMo's layout: transcripts indexed into exchanges, questions asked through the prompt hook's
selection, evidence counted by the turns each exchange holds."""

from __future__ import annotations

from argparse import Namespace

from benchmarks import relevance, sessions_bench
from benchmarks.sessions_bench import unit_metrics
from retrieval.embedding.embedder import HashEmbedder


def sample(sid: str, a: str, b: str, topic: str, fact: str) -> dict:
    s1 = [
        {"speaker": a, "dia_id": "D1:1", "text": f"I started a new hobby: {topic}."},
        {"speaker": b, "dia_id": "D1:2", "text": "That sounds fun, how is it going?"},
        {"speaker": b, "dia_id": "D1:3", "text": "Tell me everything."},  # one reply, 2 entries
        {"speaker": a, "dia_id": "D1:4", "text": fact},
        {"speaker": b, "dia_id": "D1:5", "text": "Impressive progress!"},
    ]
    s2 = [
        {"speaker": a, "dia_id": "D2:1", "text": "The weather was grey all week."},
        {"speaker": b, "dia_id": "D2:2", "text": "Rainy weeks are good for reading."},
    ]
    return {
        "sample_id": sid,
        "conversation": {"speaker_a": a, "speaker_b": b,
                         "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": s1,
                         "session_2_date_time": "10:00 am on 20 May, 2023", "session_2": s2},
        "qa": [
            {"question": f"What did {a} achieve with {topic}?", "answer": fact,
             "evidence": ["D1:4"], "category": 4},
            {"question": f"How was the weather for {a}?", "answer": "grey",
             "evidence": ["D2:1"], "category": 4},
        ],
    }  # fmt: skip


DATA = [
    sample(
        "conv-1", "Caroline", "Melanie", "pottery", "Caroline fired her first vase in the kiln."
    ),
    sample("conv-2", "Jon", "Gina", "climbing", "Jon climbed a 6b route at the gym."),
]


def test_transcript_positions_follow_the_indexer():
    """Two ``speaker_b`` messages in a row are one assistant turn: both dia ids sit at its
    position, so an exchange's turn range names the LoCoMo turns it holds."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        mapping, texts = sessions_bench.transcripts(
            DATA[0], Path(tmp), relevance.locomo_sessions, relevance.locomo_date
        )
    s = "conv-1-s1"
    assert [mapping[(s, i)] for i in range(4)] == [["D1:1"], ["D1:2", "D1:3"], ["D1:4"], ["D1:5"]]
    assert texts[(s, 1)] == (
        "assistant",
        "Melanie: That sounds fun, how is it going?\n\nMelanie: Tell me everything.",
    )


def test_unit_metrics_count_exchanges():
    units = [["D1:1", "D1:2"], ["D3:1"], ["D1:4", "D1:5"]]
    m = unit_metrics(units, {"D1:4", "D1:2"})
    assert m["recall@5"] == 1.0 and m["mrr@10"] == 1.0
    assert unit_metrics(units, {"D1:4"})["mrr@10"] == 1 / 3
    assert unit_metrics(units, {"D9:9"})["recall@10"] == 0.0


def test_via_sessions_runs_on_a_tiny_conversation(capsys):
    args = Namespace(limit=0, long_prompts="", abstain=True)
    helpers = (relevance.locomo_sessions, relevance.locomo_date, relevance.evidence_ids)
    payload = sessions_bench.run(args, DATA, HashEmbedder(), helpers, relevance.summarize,
                                 relevance.format_table, relevance.LOCOMO_CATEGORIES)  # fmt: skip
    out = capsys.readouterr().out
    assert "indexed 6 exchange records from 14 LoCoMo turns" in out
    via = payload["via sessions"]
    assert via["queries"] == 4 and via["recall@10"] == 1.0  # 3 exchanges per conversation
    assert payload["long prompts"]["queries"] == 4
    abstain = payload["abstain"]
    assert abstain["questions"] == 4 and len(abstain["curve"]) == len(sessions_bench.THRESHOLDS)


def test_hiding_evidence_rebuilds_its_exchange_and_is_undone(tmp_path):
    helpers = (relevance.locomo_sessions, relevance.locomo_date)
    store = sessions_bench.SessionStore(DATA[:1], HashEmbedder(), tmp_path / "store",
                                        tmp_path / "transcripts", helpers)  # fmt: skip
    try:
        units = store.units_of("conv-1")
        before = sorted((r.id, r.content) for r in units)
        gone, rebuilt = sessions_bench.hidden_changes(store, "conv-1", units, {"D1:4"})
        assert [r.content for r in gone] == [
            "Prompt: Caroline: Caroline fired her first vase in the kiln.\n"
            "Reply: Melanie: Impressive progress!"
        ]
        assert [r.content for r in rebuilt] == ["Reply: Melanie: Impressive progress!"]
        assert rebuilt[0].metadata["turn"] == 3 and rebuilt[0].id != gone[0].id
        store.engine.apply(delete=[r.id for r in gone], add=rebuilt)
        assert "fired" not in " ".join(r.content for r in store.units_of("conv-1"))
        store.engine.apply(delete=[r.id for r in rebuilt], add=gone)
        assert sorted((r.id, r.content) for r in store.units_of("conv-1")) == before
    finally:
        store.close()
