"""Text analysis for the lexical index: identifiers, stopwords, FTS5 query quoting."""

from __future__ import annotations

import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.fulltext.analyzer import STOPWORDS, fts_or_query, identifier_parts, query_terms
from retrieval.records import Record, RecordFilter


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("NullPointerException", "null pointer exception"),
        ("getHTTPResponse", "get http response"),
        ("XMLHttpRequest2", "xml http request 2"),
        ("utf8Decoder", "utf 8 decoder"),
        ("org.jfree.chart.ChartPanel", "chart panel"),
        ("call FooService.startAll() now", "foo service start all"),
        # nothing to add: FTS5 itself splits on '_' and '.', and plain words are one part
        ("snake_case_name", ""),
        ("org.jfree.chart", ""),
        ("lower UPPER Capitalized 1234", ""),
        ("", ""),
    ],
)
def test_identifier_parts(text, parts):
    assert identifier_parts(text) == parts


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        (
            "What is the NullPointerException in FooService?",
            [
                "nullpointerexception",
                "null",
                "pointer",
                "exception",
                "fooservice",
                "foo",
                "service",
            ],
        ),
        ("getHTTPResponse", ["gethttpresponse", "get", "http", "response"]),
        ("snake_case", ["snake", "case"]),
        ("org.jfree.chart.Foo", ["org", "jfree", "chart", "foo"]),
        ("cache Cache CACHE cache", ["cache"]),  # lower-cased, de-duplicated, in order
        ("a b 7 x", ["7"]),  # single letters go, digits stay
        ("the and of it, or not", []),  # only stopwords
        ('"NEAR(alpha* beta)" AND -gamma', ["near", "alpha", "beta", "gamma"]),
    ],
)
def test_query_terms(query, terms):
    assert query_terms(query) == terms


def test_query_terms_are_capped():
    words = [f"w{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(50)]  # waa wab ...
    assert query_terms(" ".join(words), max_terms=5) == words[:5]
    query = " ".join(words)
    assert len(query_terms(query)) == 32


def test_stopwords_are_lower_case_function_words():
    assert {"the", "and", "or", "not", "is"} <= STOPWORDS
    assert not {"near", "error", "null", "python"} & STOPWORDS
    assert all(w == w.lower() for w in STOPWORDS)


def test_fts_query_quotes_every_term():
    assert fts_or_query(["alpha", "near"]) == '"alpha" OR "near"'
    assert fts_or_query(['say"what']) == '"say""what"'
    assert fts_or_query(["one"]) == '"one"'


# ---------------------------------------------------------------------- through the engine
HOSTILE = [
    'alpha"beta',
    '"alpha',
    'alpha"',
    "NEAR(alpha beta, 2)",
    "alpha NEAR beta",
    "alpha*",
    "*",
    "**alpha**",
    "(((alpha",
    "alpha)))",
    "alpha AND OR NOT beta",
    "AND",
    "OR alpha",
    "NOT alpha",
    "content:alpha",
    "terms : alpha",
    "{content context}: alpha",
    "^alpha",
    "-alpha +beta",
    "alpha'; DROP TABLE records; --",
    "alpha\x00beta",
    "alpha\nbeta\t",
    "ünïcödé alpha",
    "中文 alpha",
    "alpha 🙂",
    "",
    "   ",
    "?!.,;:",
]


@pytest.fixture(scope="module")
def small_engine(tmp_path_factory):
    texts = {
        "alpha": "alpha beta gamma",
        "near": "we live near the river",
        "npe": "FooService threw NullPointerException at startup",
        "http": "call getHTTPResponse before parsing the body",
        "snake": "the read_config_file helper returns a dict",
        "dotted": "plots come from org.jfree.chart.JFreeChart",
        "ptr": "pointer arithmetic in C is error prone",
    }
    recs = {k: Record(project_id="proj", agent_id="agent", content=t) for k, t in texts.items()}
    engine = Engine(tmp_path_factory.mktemp("analyzer"), HashEmbedder())
    engine.add(list(recs.values()))
    yield engine, {k: r.id for k, r in recs.items()}
    engine.close()


@pytest.mark.parametrize("query", HOSTILE)
@pytest.mark.parametrize("mode", ["lexical", "vector", "hybrid"])
def test_hostile_queries_never_raise(small_engine, query, mode):
    engine, ids = small_engine
    hits = engine.search(query, RecordFilter(), k=5, mode=mode)
    if "alpha" in query and mode != "vector":
        # quoting, not an error swallowed somewhere, is why this works
        assert hits and hits[0].record.id == ids["alpha"]


@pytest.mark.parametrize("query", [q for q in HOSTILE if "alpha" in q])
def test_hostile_query_match_expressions_are_valid_fts(small_engine, query):
    engine, ids = small_engine
    expr = engine.lexical.match_expr(query)
    rows = engine.store.reader.execute(
        "SELECT rowid FROM records_fts WHERE records_fts MATCH ?", (expr,)
    ).fetchall()
    assert rows  # would raise sqlite3.OperationalError on a syntax error


@pytest.mark.parametrize(
    ("query", "key"),
    [
        ("null pointer", "npe"),
        ("NullPointerException", "npe"),
        ("nullpointerexception", "npe"),
        ("FooService", "npe"),
        ("foo service", "npe"),
        ("http response", "http"),
        ("getHTTPResponse", "http"),
        ("config file", "snake"),
        ("read_config_file", "snake"),
        ("jfree", "dotted"),
        ("org.jfree.chart", "dotted"),
        ("JFreeChart", "dotted"),
        ("near the river", "near"),
        ("NEAR", "near"),
    ],
)
def test_identifiers_and_operator_words_are_found_lexically(small_engine, query, key):
    engine, ids = small_engine
    hits = engine.search(query, RecordFilter(), k=3, mode="lexical")
    assert hits and hits[0].record.id == ids[key]
    assert hits[0].explanation.lexical_rank == 1
    assert hits[0].explanation.lexical_score > 0


def test_stopword_only_query_finds_nothing_lexically(small_engine):
    engine, _ = small_engine
    assert engine.search("the and of it", RecordFilter(), mode="lexical") == []
    assert engine.lexical.match_expr("the and of it") is None


def test_stemming_matches_inflections(small_engine):
    engine, ids = small_engine
    hits = engine.search("living rivers", RecordFilter(), mode="lexical")
    assert [h.record.id for h in hits] == [ids["near"]]
