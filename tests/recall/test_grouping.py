"""Files, not chunks: chunk hits grouped per file, and a test file below the source it tests."""

from __future__ import annotations

import pytest

from ingest.workspace.pipeline import Ingestor
from retrieval.ranking import grouping
from retrieval.records import Kind, RecordFilter
from server.service.core.identity import Identity
from server.service.core.models import RecallInput
from server.service.memories.memory import MemoryService
from server.service.recalling.recall import recall


@pytest.mark.parametrize(
    "path",
    ["tests/test_upload.py", "sympy/core/tests/test_numbers.py", "pkg/upload_test.go",
     "src/test/java/org/x/UploadTest.java", "web/upload.spec.ts", "conftest.py",
     "app/__tests__/upload.js", "TestUpload.java"],
)  # fmt: skip
def test_test_paths(path):
    assert grouping.is_test_path(path)


@pytest.mark.parametrize(
    "path",
    ["sympy/core/numbers.py", "src/upload.py", "contest.py", "testimony/notes.md",
     "src/attestation.py", "latest.py"],
)  # fmt: skip
def test_source_paths(path):
    assert not grouping.is_test_path(path)


@pytest.mark.parametrize(
    "query",
    ["why does test_upload_timeout fail on CI?", "UploadTest breaks since the last release",
     "add a test for the parser", "the unit tests are slow", "tests fail after the upgrade",
     "where is the pytest fixture for the database?", "which tests cover retries?"],
)  # fmt: skip
def test_queries_about_tests(query):
    assert grouping.about_tests(query)


@pytest.mark.parametrize(
    "query",
    ["Rational.__floordiv__ gives the wrong result; I tested it on 1.2",
     "simplify() hangs on nested radicals", "the latest release breaks imports",
     "Testing is hard, but: why is the retry delay 200 ms?"],
)  # fmt: skip
def test_queries_not_about_tests(query):
    assert not grouping.about_tests(query)


def test_group_score_is_best_plus_a_share_of_the_next():
    items = [("a", 0.9), ("a", 0.5), ("a", 0.4), ("a", 0.3), ("b", 0.95)]
    groups = grouping.group(items, key=lambda i: i[0], score=lambda i: i[1])
    by = {g.key: g for g in groups}
    # only the top 3 members count: 0.9 + 0.1 * (0.5 + 0.4)
    assert by["a"].score == pytest.approx(0.99)
    assert by["b"].score == pytest.approx(0.95)
    assert [g.key for g in groups] == ["a", "b"]
    assert [m[1] for m in by["a"].members] == [0.9, 0.5, 0.4, 0.3]


def test_group_factor_scales_the_group():
    items = [("tests/test_a.py", 1.0), ("a.py", 0.85)]
    prior = grouping.test_prior("how is a computed?")
    groups = grouping.group(items, key=lambda i: i[0], score=lambda i: i[1], factor=prior)
    assert [g.key for g in groups] == ["a.py", "tests/test_a.py"]
    assert groups[1].score == pytest.approx(grouping.TEST_FACTOR)
    about = grouping.test_prior("which tests cover a?")
    groups = grouping.group(items, key=lambda i: i[0], score=lambda i: i[1], factor=about)
    assert [g.key for g in groups] == ["tests/test_a.py", "a.py"]


BODY = '''
def charge_with_retry(card, amount):
    """Retry a declined card charge three times with exponential backoff from 200 ms."""
    for attempt in range(3):
        if gateway.charge(card, amount):
            return True
        sleep(0.2 * 2 ** attempt)
    return False
'''


TEST = """
def test_charge_with_retry(declined_card):
    assert not charge_with_retry(declined_card, 10)
"""


@pytest.fixture
def workspace_engine(engine, tmp_path):
    ws = tmp_path / "ws"
    (ws / "payments").mkdir(parents=True)
    (ws / "tests").mkdir()
    (ws / "payments" / "retry.py").write_text(BODY)
    # nearly the same words (not a near-duplicate, which recall would drop)
    (ws / "tests" / "test_retry.py").write_text(BODY + TEST)
    (ws / "payments" / "refunds.py").write_text(
        "def refund(order):\n    return ledger.undo(order)\n"
    )
    ingestor = Ingestor(engine, "shop", "dev")
    assert ingestor.run(ws).files_indexed == 3
    return engine, ingestor


def test_search_files_groups_chunks_and_prefers_the_source(workspace_engine):
    engine, ingestor = workspace_engine
    f = RecordFilter(buckets=[ingestor.bucket], kinds=[Kind.chunk])
    files = engine.search_files("how many times is a declined card charge retried?", f, k=3)
    keys = [g.key for g in files]
    assert keys[:2] == ["payments/retry.py", "tests/test_retry.py"]
    assert len(keys) == len(set(keys))  # one entry per file
    assert files[1].score < files[0].score
    raw = {g.key: g.score for g in grouping.group(
        engine.search("how many times is a declined card charge retried?", f, 200),
        key=lambda h: h.record.metadata["path"], score=lambda h: h.score)}  # fmt: skip
    assert files[1].score == pytest.approx(grouping.TEST_FACTOR * raw["tests/test_retry.py"])
    assert files[0].score == pytest.approx(raw["payments/retry.py"])
    # about tests: no prior
    q = "which tests cover the declined card charge retry?"
    about = {g.key: g.score for g in engine.search_files(q, f, k=3)}
    raw = {g.key: g.score for g in grouping.group(
        engine.search(q, f, 200), key=lambda h: h.record.metadata["path"],
        score=lambda h: h.score)}  # fmt: skip
    assert about == pytest.approx(raw)


def test_recall_over_a_workspace_puts_source_before_tests(workspace_engine):
    engine, _ = workspace_engine
    svc = MemoryService(engine)
    who = Identity(project_id="shop", agent_id="dev")
    res = recall(svc, who, RecallInput(query="how is a declined card charge retried?"))
    paths = [i.location.split(":")[0] for i in res.items if i.kind == "chunk"]
    assert paths.index("payments/retry.py") < paths.index("tests/test_retry.py")
    test_item = next(i for i in res.items if i.location.startswith("tests/test_retry.py"))
    assert test_item.explanation["boosts"]["test_file"] < 0
    res = recall(svc, who, RecallInput(query="what does test_retry check?"))
    test_item = next(i for i in res.items if i.location.startswith("tests/test_retry.py"))
    assert "test_file" not in test_item.explanation["boosts"]


@pytest.mark.parametrize(
    "query,names",
    [
        ("ccode(sinc(x)) doesn't work", {"ccode", "sinc"}),
        ("the LatexPrinter in sympy.printing.latex is wrong", {"latexprinter", "sympy",
                                                               "printing", "latex"}),
        ("`Mul` and parse_expr break on latex.py", {"mul", "parse_expr", "latex"}),
        ("the printer is wrong, e.g. for x", set()),  # prose is not code
        ("it(is) a b.c", set()),  # parts shorter than three characters do not count
    ],
)  # fmt: skip
def test_code_names(query, names):
    assert grouping.code_names(query) == names


def test_defined_names_and_path_stem():
    assert grouping.defined_names("def Printer._print_Add, class Foo") == {"_print_add", "foo"}
    assert grouping.defined_names("Installation") == set()  # a markdown heading defines nothing
    assert grouping.path_stem("sympy/printing/latex.py") == "latex"
    prior = grouping.name_prior("latex(x) is wrong", {"a/printer.py": {"latex"}})
    assert prior("sympy/printing/latex.py") == prior("a/printer.py") == 1 + grouping.NAME_BOOST
    assert prior("a/other.py") == 1.0


CALLER = """
def close_order(order):
    if order.partial:
        return refund(order)
    refund(order)
    refund(order.shipping)
    return order
"""


def test_the_file_defining_a_called_name_scores_more(workspace_engine, tmp_path):
    engine, ingestor = workspace_engine
    ws = tmp_path / "ws"
    (ws / "orders.py").write_text(CALLER)
    ingestor.run(ws)
    f = RecordFilter(buckets=[ingestor.bucket], kinds=[Kind.chunk])
    q = "refund(order) returns None for a partial order"
    raw = {g.key: g.score for g in grouping.group(
        engine.search(q, f, 200), key=lambda h: h.record.metadata["path"],
        score=lambda h: h.score)}  # fmt: skip
    files = {g.key: g.score for g in engine.search_files(q, f, k=5)}
    assert files["payments/refunds.py"] == pytest.approx(
        (1 + grouping.NAME_BOOST) * raw["payments/refunds.py"]
    )
    assert files["orders.py"] == pytest.approx(raw["orders.py"])  # it calls refund only
    assert list(files.values()) == sorted(files.values(), reverse=True)
    svc = MemoryService(engine)
    res = recall(svc, Identity(project_id="shop", agent_id="dev"), RecallInput(query=q))
    item = next(i for i in res.items if i.location.startswith("payments/refunds.py"))
    assert item.explanation["boosts"]["code_name"] > 0
    caller = next(i for i in res.items if i.location.startswith("orders.py"))
    assert "code_name" not in caller.explanation["boosts"]
