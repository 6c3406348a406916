"""End to end, with the real model: ingest this repository, then ask questions about it.

The questions and their answers live in ``benchmarks/data/repo_questions.json`` (kept out of
the index by the repository's ``.patternignore``, so they cannot answer themselves);
``benchmarks/chunking.py`` runs the same set to choose chunk sizes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingest.pipeline import Ingestor
from retrieval.engine import Engine
from retrieval.records import Kind, RecordFilter

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = json.loads((ROOT / "benchmarks" / "data" / "repo_questions.json").read_text())

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def repo_engine(real_embedder, tmp_path_factory):
    engine = Engine(tmp_path_factory.mktemp("repo-store"), real_embedder)
    report = Ingestor(engine, "self", "tester").run(ROOT)
    assert report.files_indexed > 30 and not report.errors
    yield engine
    engine.close()


def top_files(engine: Engine, question: str, n: int = 3) -> list[str]:
    hits = engine.search(question, RecordFilter(kinds=[Kind.chunk]), k=30)
    return list(dict.fromkeys(h.record.metadata["path"] for h in hits))[:n]


@pytest.mark.parametrize("case", QUESTIONS, ids=[q["q"][:50] for q in QUESTIONS])
def test_question_finds_its_file_in_the_top_3(repo_engine, case):
    got = top_files(repo_engine, case["q"])
    assert set(got) & set(case["files"]), f"{case['q']!r}: want {case['files']}, got {got}"


def test_recall_shows_the_file_and_lines(repo_engine):
    from server.service.identity import Identity
    from server.service.memory import MemoryService
    from server.service.models import RecallInput
    from server.service.recall import recall

    who = Identity(project_id="self", agent_id="tester")
    res = recall(
        MemoryService(repo_engine),
        who,
        RecallInput(query="where is the fusion of lexical and vector scores done", kinds=["chunk"]),
    )
    locations = [i.location for i in res.items[:3]]
    assert any(loc.startswith(("retrieval/fusion.py:", "retrieval/hybrid.py:")) for loc in locations)
    assert res.text.count("[retrieval/") >= 1
