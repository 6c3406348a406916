"""The relevance harnesses for file localization and chat histories, on tiny fixtures of the
real data layouts (``relevance.py localize`` and ``relevance.py longmemeval``)."""

from __future__ import annotations

import gzip
import hashlib
import json
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest

from benchmarks import localize, longmemeval
from benchmarks.harness.data import load_longmemeval
from retrieval.embedding.embedder import HashEmbedder

SOURCE = '''"""Parsing of intervals."""


def parse_interval(text):
    """Parse an interval such as [1, 2) into its bounds and closedness."""
    left, right = text.strip("[]()").split(",")
    return float(left), float(right)
'''
TEST = """from intervals.parse import parse_interval


def test_parse_interval():
    assert parse_interval("[1, 2]") == (1.0, 2.0)
"""
OTHER = '''def render_matrix(rows):
    """Pretty-print a matrix of numbers."""
    return "\\n".join(" ".join(map(str, r)) for r in rows)
'''


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def write_localize(folder: Path) -> None:
    blobs = {_sha(t): t for t in (SOURCE, TEST, OTHER, SOURCE + "\n# fixed\n")}
    first = {"intervals/parse.py": _sha(SOURCE), "intervals/tests/test_parse.py": _sha(TEST),
             "printing/matrix.py": _sha(OTHER)}  # fmt: skip
    second = {**first, "intervals/parse.py": _sha(SOURCE + "\n# fixed\n")}
    del second["printing/matrix.py"]
    instances = [
        {"instance_id": "demo__intervals-12", "base_commit": "b", "files": second,
         "query": "parse_interval drops the closedness of a half-open interval like [1, 2)",
         "gold_files": ["intervals/parse.py"]},
        {"instance_id": "demo__intervals-3", "base_commit": "a", "files": first,
         "query": "Matrix printing: render_matrix puts no padding between columns",
         "gold_files": ["printing/matrix.py"]},
    ]  # fmt: skip
    with open(folder / "instances.jsonl", "w") as fh:
        fh.writelines(json.dumps(i) + "\n" for i in instances)
    with gzip.open(folder / "blobs.jsonl.gz", "wt") as fh:
        fh.writelines(json.dumps({"sha": s, "text": t}) + "\n" for s, t in blobs.items())


def test_localize_harness(tmp_path):
    write_localize(tmp_path)
    args = Namespace(dir=str(tmp_path), limit=0, details=True)
    res = localize.run(args, HashEmbedder(), ["lexical", "hybrid"])
    for name in ("lexical", "hybrid", "bm25_stdlib", "minilm_whole"):
        assert set(res[name]) == {"acc@1", "acc@5", "acc@10", "test_top1", "queries"}
        assert res[name]["queries"] == 2
    # instances run in the order of their number: the older snapshot first
    assert [i["instance_id"] for i in res["_instances"]] == [
        "demo__intervals-3",
        "demo__intervals-12",
    ]
    # the newer snapshot deleted printing/matrix.py: it is no longer among the files
    later = res["_instances"][1]["top5"]
    assert all("printing/matrix.py" not in files for files in later.values())
    # the issue names the source's function; its test is ranked below the source
    assert later["lexical"][0] == "intervals/parse.py"
    assert res["lexical"]["acc@1"] == 1.0 and res["lexical"]["test_top1"] == 0.0


def write_longmemeval(folder: Path) -> None:
    sessions = [
        {"session_id": "s1", "turns": [
            {"role": "user", "content": "I adopted a cat named Miso last week, any tips?"},
            {"role": "assistant", "content": "Congratulations! Give Miso a quiet room first."}]},
        {"session_id": "s2", "turns": [
            {"role": "user", "content": "What is a good recipe for lentil soup?"},
            {"role": "assistant", "content": ""},
            {"role": "assistant", "content": "Simmer red lentils with cumin and onion."}]},
        {"session_id": "s3", "turns": [
            {"role": "user", "content": "Recommend a hiking trail near Denver."},
            {"role": "assistant", "content": "Try the Mount Falcon trail."}]},
    ]  # fmt: skip
    dates = ["2023/05/20 (Sat) 07:47", "2023/05/21 (Sun) 09:00", "2023/05/22 (Mon) 10:30"]
    questions = [
        {"question_id": "q1", "question_type": "single-session-user",
         "question": "What is the name of the cat I adopted?", "answer": "Miso",
         "question_date": "2023/06/01 (Thu) 10:00", "haystack_session_ids": ["s1", "s2", "s3"],
         "haystack_dates": dates, "answer_session_ids": ["s1"], "answer_turns": [["s1", 0]]},
        {"question_id": "q2", "question_type": "single-session-assistant",
         "question": "Which spice did you suggest for my lentil soup?", "answer": "cumin",
         "question_date": "2023/06/01 (Thu) 10:00", "haystack_session_ids": ["s1", "s2", "s3"],
         "haystack_dates": dates, "answer_session_ids": ["s2"], "answer_turns": [["s2", 2]]},
        {"question_id": "q3_abs", "question_type": "single-session-user",
         "question": "What is my dog's name?", "answer": "unknown",
         "question_date": "2023/06/01 (Thu) 10:00", "haystack_session_ids": ["s1", "s2", "s3"],
         "haystack_dates": dates, "answer_session_ids": [], "answer_turns": []},
    ]  # fmt: skip
    with open(folder / "questions.jsonl", "w") as fh:
        fh.writelines(json.dumps(q) + "\n" for q in questions)
    with gzip.open(folder / "sessions.jsonl.gz", "wt") as fh:
        fh.writelines(json.dumps(s) + "\n" for s in sessions)


def test_longmemeval_harness(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    write_longmemeval(data)
    qs, sessions = load_longmemeval(data)
    assert [q["question_id"] for q in qs] == ["q1", "q2"]  # abstention skipped
    # the empty assistant turn is not read: the data's turn 2 is the indexer's position 1
    assert longmemeval.answer_positions(qs[1], sessions) == {("s2", 1)}
    res = longmemeval.run(
        Namespace(dir=str(data), limit=0), HashEmbedder(), ["lexical", "hybrid", "main"]
    )
    # newest_first needs answer sessions of two dates (knowledge-update questions)
    expected = set(longmemeval.METRICS) - {"newest_first"} | {"queries", "types"}
    assert set(res["lexical"]) == expected and res["lexical"]["queries"] == 2
    assert {t: v["queries"] for t, v in res["main"]["types"].items()} == {
        q["question_type"]: 1 for q in qs
    }
    # the exchange (question and answer together) is the unit: both questions find it first
    assert res["lexical"]["turn_recall_any@5"] == 1.0
    assert res["lexical"]["session_recall_any@5"] == 1.0
    for name in ("bm25_stdlib_turns", "minilm_turns"):
        assert res[name]["queries"] == 2
    assert res["bm25_stdlib_sessions"]["session_recall_any@5"] == 1.0


def test_unit_holds_answer_by_turn_range():
    answers = {("s2", 3)}
    assert longmemeval.holds({"session": "s2", "turn": 2, "last_turn": 4}, answers)
    assert not longmemeval.holds({"session": "s2", "turn": 4, "last_turn": 5}, answers)
    assert not longmemeval.holds({"session": "s1", "turn": 2, "last_turn": 4}, answers)


def test_the_scale_curve_is_drawn_from_its_published_json(tmp_path):
    from benchmarks import scale

    pytest.importorskip("matplotlib", reason="matplotlib comes with the dev extra")
    out = tmp_path / "curve.png"
    published = Path(__file__).resolve().parents[2] / "benchmarks/published/scale-curve.json"
    assert scale.main(["--replot", str(published), "--plot", str(out)]) == 0
    png = out.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000


def test_update_sentences_finds_the_true_pair_and_counts_the_wrong_ones():
    from benchmarks.lab import update_sentences as us

    sessions = {
        "old": [{"role": "user", "content": "I currently have three bikes. I like tea a lot."},
                {"role": "assistant", "content": "Nice, I have no bikes."}],
        "new": [{"role": "user", "content": "I'll actually have four bikes with me."}],
        "other": [{"role": "user", "content": "I like tea a lot, my friend."}],
    }  # fmt: skip
    q = {"haystack_session_ids": ["old", "new", "other"],
         "answer_turns": [["old", 0], ["new", 0]]}  # fmt: skip
    sents = us.sentences(q, sessions)
    assert [(s, i) for s, i, _ in sents] == [("old", 0), ("old", 0), ("new", 0), ("other", 0)]
    # the bikes sentences are 0.6 apart, the two tea sentences 0.9 (a wrong pair)
    vecs = np.array([[1, 0, 0], [0, 1, 0], [0.6, 0, 0.8], [0, 0.9, 0.435889894]])
    true, wrong = us.pairs(q, sents, vecs @ vecs.T, rule=False)
    assert true == pytest.approx(0.6)
    assert sorted(np.round(wrong, 2)) == [0.0, 0.35, 0.9]
    rows = us.table([(true, wrong)])
    at = {r["threshold"]: r for r in rows}
    assert at[0.6]["true_linked"] == 1.0 and at[0.6]["wrong_per_haystack_median"] == 1
    assert at[0.65]["true_linked"] == 0.0
    # the rule keeps pairs sharing an uncommon word ("bikes"); "tea" is common, so the wrong
    # pair goes
    true, wrong = us.pairs(q, sents, vecs @ vecs.T, rule=True)
    assert true == pytest.approx(0.6) and len(wrong) == 0
