"""Relevance with the real model (packaged all-MiniLM-L6-v2, offline): meaning beats keywords
for paraphrases, keywords beat meaning for identifiers, and hybrid gets both right."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.engine import Engine
from retrieval.records import Record, RecordFilter, Scope

pytestmark = pytest.mark.slow

CORPUS = {
    "revenue": "Quarterly revenue dropped sharply because customers cancelled their subscriptions.",
    "cat": "The cat slept on the warm windowsill all afternoon.",
    "npe": "FooService.start() threw a NullPointerException when the config file was missing.",
    "ise": "BarService crashed with an IllegalStateException during startup.",
    "oom": "The JVM ran out of heap memory while loading the nightly batch.",
    "flight": "Our flight to Lisbon was delayed by three hours due to fog.",
    "dentist": "Remember to book a dentist appointment for next Tuesday.",
    "python": "Use a virtual environment so each project keeps its own dependencies.",
    "soup": "Simmer the tomato soup for twenty minutes, then blend until smooth.",
    "garden": "Water the tomatoes early in the morning before the sun gets hot.",
    "football": "The home team scored twice in the final ten minutes to win the match.",
    "piano": "She practises piano scales for an hour every evening.",
    "mortgage": "The bank raised the interest rate on our home loan again.",
    "hiking": "The trail climbs steeply through pine forest to a glacier lake.",
    "vaccine": "The clinic offers free flu shots to everyone over sixty-five.",
    "git": "Rebase the feature branch onto main before opening the pull request.",
    "postgres": "Add an index on the orders table to speed up the nightly report query.",
    "meeting": "The design review moved from Thursday to Friday morning.",
    "rain": "Heavy rain flooded the underpass near the railway station.",
    "novel": "The novel follows two sisters who inherit a vineyard in Tuscany.",
    "bike": "The rear brake pads on my bicycle squeal when it is wet.",
    "coffee": "Grind the beans just before brewing for a stronger espresso.",
    "moving": "We are moving to a bigger apartment at the end of the month.",
    "printer": "The office printer jams whenever someone uses thick paper.",
    "telescope": "Through the telescope we could see the rings of Saturn.",
    "ssl": "The TLS certificate for the staging server expires next week.",
    "dog": "The puppy chewed through the living room sofa cushions.",
    "recycling": "Glass bottles go in the green bin; paper goes in the blue one.",
    "k8s": "Scale the deployment to five replicas before the traffic spike.",
    "exam": "He studied chemistry all night before the final exam.",
}

# No query word (after stopwords and stemming) occurs anywhere in the corpus.
PARAPHRASES = {
    "revenue": "why did the company earn less money this period",
    "cat": "kitty napping by a sunny pane",
    "flight": "plane trip postponed because of poor visibility",
    "vaccine": "elderly people can be immunised against influenza at no charge",
    "dog": "young hound destroyed the couch",
}


@pytest.fixture(scope="module")
def real_engine(real_embedder, tmp_path_factory):
    eng = Engine(tmp_path_factory.mktemp("relevance"), real_embedder)
    recs = {
        key: Record(project_id="proj", agent_id="agent", scope=Scope.team, content=text)
        for key, text in CORPUS.items()
    }
    eng.add(list(recs.values()))
    yield eng, {k: r.id for k, r in recs.items()}
    eng.close()


def ids(eng, query, mode, k=5):
    return [h.record.id for h in eng.search(query, RecordFilter(), k=k, mode=mode)]


def test_the_real_model_is_loaded(real_embedder, real_engine):
    eng, _ = real_engine
    assert real_embedder.model_id == "all-MiniLM-L6-v2"
    assert real_embedder.dimension == 384
    v = real_embedder.embed_query("hello")
    assert v.shape == (384,) and abs(float(v @ v) - 1.0) < 1e-4
    assert eng.store.count(RecordFilter()) == len(CORPUS)


@pytest.mark.parametrize("key", sorted(PARAPHRASES))
def test_a_paraphrase_is_found_by_meaning_not_by_keywords(real_engine, key):
    eng, rec = real_engine
    query = PARAPHRASES[key]
    assert ids(eng, query, "lexical", k=len(CORPUS)) == []  # not one shared term
    assert ids(eng, query, "vector", k=1) == [rec[key]]
    assert ids(eng, query, "hybrid", k=1) == [rec[key]]


@pytest.mark.parametrize(
    ("query", "key"),
    [
        ("NullPointerException FooService", "npe"),
        ("IllegalStateException", "ise"),
        ("BarService", "ise"),
    ],
)
def test_an_identifier_is_found_by_keywords(real_engine, query, key):
    eng, rec = real_engine
    assert ids(eng, query, "lexical", k=1) == [rec[key]]
    assert ids(eng, query, "hybrid", k=1) == [rec[key]]


def test_hybrid_hits_explain_themselves(real_engine):
    eng, rec = real_engine
    hits = eng.search("NullPointerException FooService", RecordFilter(), k=5, mode="hybrid")
    assert len(hits) == 5
    top = hits[0]
    assert top.record.id == rec["npe"]
    e = top.explanation
    assert e.mode == "hybrid"
    assert e.lexical_rank == 1 and e.lexical_score > 0
    assert e.vector_rank is not None and 0.0 < e.vector_similarity <= 1.0
    assert e.fused_score == pytest.approx(top.score, abs=1e-4)
    for h in hits:
        assert h.explanation.lexical_score is not None  # completed from bm25 (0 = no match)
        assert -1.0 <= h.explanation.vector_similarity <= 1.0
        assert h.explanation.vector_rank >= 1
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # the other exception report is nearer in meaning than, say, the soup recipe
    sims = {h.record.id: h.explanation.vector_similarity for h in hits}
    soup = eng.search(CORPUS["soup"], RecordFilter(), k=1, mode="vector")[0]
    assert soup.record.id == rec["soup"] and soup.explanation.vector_similarity > 0.99
    assert rec["ise"] in sims


def test_paraphrase_similarity_is_meaningful(real_embedder):
    q = real_embedder.embed_query(PARAPHRASES["revenue"])
    docs = real_embedder.embed_documents([CORPUS["revenue"], CORPUS["soup"], CORPUS["piano"]])
    sims = docs @ q
    assert sims[0] > 0.3
    assert sims[0] > sims[1] + 0.15 and sims[0] > sims[2] + 0.15


def test_the_query_fast_path_gives_the_vectors_of_sentence_transformers_encode(real_embedder):
    from retrieval.embedding.embedder import torch_model_path
    from retrieval.embedding.onnx_model import load_sentence_transformer

    texts = ["why does the daemon refuse a second owner?", "NullPointerException in parser"]
    st_model = load_sentence_transformer(torch_model_path())  # the reference, on torch
    for text in texts:
        fast = real_embedder._encode_query(text)
        reference = st_model.encode([text], normalize_embeddings=True)[0]
        assert fast.shape == reference.shape
        assert float(fast @ reference) > 0.999  # the packaged graph's int8-stored weights
    # documents (data-parallel workers) and queries share that forward pass
    docs = real_embedder.embed_documents(texts * 20)
    assert np.allclose(docs[0], real_embedder._encode_query(texts[0]), atol=1e-5)
