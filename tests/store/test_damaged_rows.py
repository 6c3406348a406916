"""One bad record never fails a query: a row of ``records`` that cannot be read (a kind or
scope no version wrote, a date that is not one, a category or text that is not text, a
missing value in any column) is left out of every read, logged once, and the other records
answer: ``store.get``/``list``, recall through a real MCP client session, ``open_nodes``,
``read_graph``, ``recall-context``, the dashboard's pages and ``pattern-memory stats``. The rows
are damaged with raw SQL, as a foreign tool, a disk error or an older version could leave them.
Real SQLite and Chroma in ``tmp_path``, the hashing embedder."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graph.models import EntityInput
from retrieval.ranking import guard
from retrieval.records import Record, RecordFilter
from retrieval.storage.store import COLUMNS, SQLiteStore
from server.cli import main
from server.service.core.models import MemoryInput
from tests.mcp_util import in_process
from tests.ui_util import UiHarness

HEALTHY = "Deploys need a green main branch and a release note."
DAMAGE = {
    "kind": "UPDATE records SET kind='bogus' WHERE id=?",
    "scope": "UPDATE records SET scope='galaxy' WHERE id=?",
    "created": "UPDATE records SET created_at='May 0000' WHERE id=?",
    "updated": "UPDATE records SET updated_at=20240101 WHERE id=?",
    "expires": "UPDATE records SET expires_at='never' WHERE id=?",
    "category": "UPDATE records SET category=x'00ff' WHERE id=?",
    "content": "UPDATE records SET content=x'fffe' WHERE id=?",
    "metadata": "UPDATE records SET metadata='{not json' WHERE id=?",
    "revision": "UPDATE records SET revision='first' WHERE id=?",
}


def without_not_null(db: Path) -> sqlite3.Connection:
    """A connection to ``db`` whose ``records`` table no longer refuses NULLs (as a store
    written by a foreign tool may): its schema text rewritten, then read again."""
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA writable_schema=ON")
    sql = con.execute("SELECT sql FROM sqlite_master WHERE name='records'").fetchone()[0]
    con.execute(
        "UPDATE sqlite_master SET sql=? WHERE name='records'",
        (sql.replace(" NOT NULL", ""),),
    )
    version = con.execute("PRAGMA schema_version").fetchone()[0]
    con.execute(f"PRAGMA schema_version={version + 1}")
    con.execute("PRAGMA writable_schema=OFF")
    con.close()
    return sqlite3.connect(db, isolation_level=None)


@pytest.fixture
def damaged(tmp_path):
    """A store (a real runtime and its dashboard) holding healthy memories and observations
    beside one damaged memory per kind of damage, one with NULL content and one damaged
    observation."""
    h = UiHarness(tmp_path / "store", env={"PATTERN_ALLOWED_DIRS": str(tmp_path)})
    who, svc = h.rt.identity, h.svc
    h.healthy = svc.remember(who, MemoryInput(content=HEALTHY, scope="team")).memoryId
    h.bad = {
        what: svc.remember(who, MemoryInput(content=f"Deploys {what} note {i}", scope="team"))
        .memoryId for i, what in enumerate([*DAMAGE, "null"])
    }  # fmt: skip
    h.rt.graphs.graph.create_entities(who, [EntityInput(
        name="billing", entityType="service",
        observations=["charges cards nightly", "Deploys the billing job at night"])])  # fmt: skip
    svc.engine.wait_vectors(30)
    con = without_not_null(h.home / "pattern.sqlite3")
    for what, sql in DAMAGE.items():
        con.execute(sql, (h.bad[what],))
    con.execute("UPDATE records SET content=NULL WHERE id=?", (h.bad["null"],))
    con.execute("UPDATE records SET created_at='garbage', content=NULL WHERE "
                "kind='observation' AND content LIKE 'Deploys the billing%'")  # fmt: skip
    con.close()
    yield h
    h.close()


def test_store_reads_leave_out_a_row_that_cannot_be_read_and_log_it_once(damaged, caplog):
    guard._logged.clear()
    store = damaged.svc.store
    ids = [damaged.healthy, *damaged.bad.values()]

    def logged() -> list[str]:
        return [r.getMessage() for r in caplog.records if "record row" in r.getMessage()]

    # metadata that is not JSON loses only the metadata: the record is read without it
    kept = {damaged.healthy, damaged.bad["metadata"]}
    with caplog.at_level(logging.WARNING, logger="retrieval.ranking.guard"):
        got = store.get(ids)
        first = logged()
        for _ in range(3):
            assert set(store.get(ids)) == kept
            listed = {r.id for r in store.list(RecordFilter(include_expired=True))}
    assert set(got) == kept and got[damaged.bad["metadata"]].metadata == {}
    assert kept <= listed and not (set(damaged.bad.values()) - kept) & listed
    # one line per error type (never one per row, nor per read), naming no text
    assert 1 <= len(first) <= 3 and logged() == first, logged()
    assert all("Deploys" not in line for line in first)


def test_recall_and_the_graph_tools_answer_through_an_mcp_session(damaged):
    with in_process(damaged.rt) as client:
        found = client.ok("recall", {"query": "deploys release note", "budget": 2000})
        assert damaged.healthy in {i["id"] for i in found["items"]}
        assert HEALTHY in found["text"]
        nodes = client.ok("open_nodes", {"names": ["billing"]})
        assert nodes["entities"][0]["observations"] == ["charges cards nightly"]
        assert client.ok("read_graph", {})["entities"][0]["name"] == "billing"
        ctx = client.ok("recall-context", {"limit": 50})
        assert damaged.healthy in {m["id"] for m in ctx["team"]}
        assert client.ok("search_nodes", {"query": "billing"})["entities"]
        page = client.ok("changes", {"cursor": 0, "limit": 100})  # the stream reads around it
        assert damaged.healthy in json.dumps(page)
        # a record that cannot be read is not found, in one clear line
        assert "[not_found]" in client.error("forget", {"memoryId": damaged.bad["kind"]})
        # a memory read without its damaged metadata can be edited (its metadata starts anew)
        edit = {"memoryId": damaged.bad["metadata"], "content": "Deploys wait for the freeze."}
        assert client.ok("update-memory", edit)["revision"] == 2
        assert client.ok("export-memories", {"outputPath": "all.json"})["exported"] >= 2
        # deleting an entity deletes its observation that cannot be read too
        client.ok("delete_entities", {"entityNames": ["billing"]})
        assert client.ok("open_nodes", {"names": ["billing"]})["entities"] == []
    left = damaged.svc.store.reader.execute(
        "SELECT count(*) FROM records WHERE entity_name='billing'").fetchone()[0]  # fmt: skip
    assert left == 0


def test_the_dashboard_lists_and_searches_around_a_damaged_row(damaged):
    c = damaged.owner()
    page = c.get("/ui/memories?scope=team")
    assert page.status_code == 200 and "green main branch" in page.text
    search = c.get("/ui/", params={"q": "deploys"})
    assert search.status_code == 200 and "green main branch" in search.text
    assert c.get(f"/ui/memory/{damaged.bad['kind']}").status_code == 404
    entity = c.get("/ui/graph/entity", params={"name": "billing", "scope": "team"})
    assert entity.status_code == 200 and "charges cards nightly" in entity.text
    assert c.get("/ui/health").status_code == 200


def test_stats_answers_over_a_damaged_store(damaged, monkeypatch, capsys):
    home = damaged.home
    damaged.close()
    for key, value in {"PATTERN_HOME": str(home), "PATTERN_EMBEDDER": "hash",
                       "PATTERN_PROJECT_ID": "p1", "PATTERN_AGENT_ID": "owner"}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    assert main(["stats"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] in ("ok", "degraded")


# ---------------------------------------------------------------------------- any damage
VALUES = st.one_of(
    st.none(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=True),
    st.text(max_size=40), st.binary(max_size=40),
    st.sampled_from(["memory", "team", "private", "2024-01-01T00:00:00.000000Z", "{}", "[]",
                     "9999-99-99T99:99:99.999999Z", "0000-01-01T00:00:00.000000Z"]),
)  # fmt: skip
COLUMN_NAMES = [c.strip() for c in COLUMNS.split(",") if c.strip() != "id"]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(damage=st.dictionaries(st.sampled_from(COLUMN_NAMES), VALUES, min_size=1))
def test_a_row_damaged_in_any_columns_never_fails_a_read(tmp_path_factory, damage):
    folder = tmp_path_factory.mktemp("rows")
    store = SQLiteStore(folder / "pattern.db")
    good = Record(project_id="p", agent_id="a", content="healthy", scope="team")
    bad = Record(project_id="p", agent_id="a", content="to be damaged", scope="team")
    with store.transaction() as conn:
        store.insert(conn, [good, bad])
    con = without_not_null(folder / "pattern.db")
    sets = ", ".join(f"{col}=?" for col in damage)
    con.execute(f"UPDATE records SET {sets} WHERE id=?", [*damage.values(), bad.id])
    con.close()
    try:
        got = store.get([good.id, bad.id])
        assert got[good.id].content == "healthy"
        listed = store.list(RecordFilter(include_expired=True), order="r.rowid")
        assert good.id in {r.id for r in listed}
        for rec in [*got.values(), *listed]:  # whatever is read is a whole record
            assert isinstance(rec.content, str) and rec.created_at.tzinfo is not None
    finally:
        store.close()
