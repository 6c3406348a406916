"""An import keeps forward references: a relation to an entity in neither the graph nor the
source is kept pending (counted, out of every read of the graph, no entity made up for it) and
becomes a relation when that entity is created, by a later import or by an agent. Real SQLite,
the hashing embedder, a real basic-memory note whose relations all name notes of another
folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graph import pending_rows
from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from server.cli import main
from server.service.core.identity import Identity
from server.service.graphs.graph_services import graph_services
from server.service.memories.memory import MemoryService
from server.service.transfers.import_write import import_items, import_source
from server.service.trust.policy import WritePolicy
from server.service.trust.secret_scan.secrets import SecretPolicy

DATA = Path(__file__).parents[1] / "data" / "import"
NOTE = DATA / "basic-memory-note"
ME = Identity(project_id="proj", agent_id="agent")
SECRET = "gh" + "p_" + "Xq7Lm2Vt9RkP4sWz8NbC3dF6gH1jK5yTnQ0a"
REFUND = {("Refund Policy", "Payment Retries", "relates_to"),
          ("Refund Policy", "Dana Ortiz", "owned_by"), ("Refund Policy", "shop-api", "part_of")}  # fmt: skip


@pytest.fixture
def store(tmp_path):
    opened = []

    def make(policy: WritePolicy | None = None):
        svc = MemoryService(Engine(tmp_path / f"s{len(opened)}", HashEmbedder()), policy=policy)
        opened.append(svc)
        return svc, graph_services(svc)

    yield make
    for svc in opened:
        svc.engine.close()


def triples(graphs) -> set[tuple[str, str, str]]:
    return {(r.from_, r.to, r.relationType) for r in graphs.graph.read_graph(ME, "team").relations}


def waiting(graphs) -> set[tuple[str, str, str]]:
    return set(pending_rows.of(graphs.graph.reader, ME.bucket("team")))


def test_a_note_linking_notes_of_another_folder_keeps_its_relations_pending(store):
    svc, graphs = store()
    res = import_source(svc, graphs, ME, "basic-memory", NOTE)
    assert res.created == {"memory": 1, "entity": 1, "observation": 3} and res.skipped == {}
    assert res.pending == 3
    graph = graphs.graph.read_graph(ME, "team")
    assert [e.name for e in graph.entities] == ["Refund Policy"]  # no entity made up
    assert graph.relations == []
    assert waiting(graphs) == REFUND


def test_pending_relations_become_relations_when_their_notes_are_imported(store):
    svc, graphs = store()
    import_source(svc, graphs, ME, "basic-memory", NOTE)
    res = import_source(svc, graphs, ME, "basic-memory", DATA / "basic-memory")
    assert REFUND <= triples(graphs)
    assert res.pending == 2  # the other folder's own forward references
    assert waiting(graphs) == {("Payment Retries", "Payment Gateway", "depends_on"),
                               ("Checkout Flow", "Order States", "links_to")}  # fmt: skip


def test_the_other_order_makes_the_relations_at_once(store):
    svc, graphs = store()
    import_source(svc, graphs, ME, "basic-memory", DATA / "basic-memory")
    res = import_source(svc, graphs, ME, "basic-memory", NOTE)
    assert res.pending == 0 and res.created["relation"] == 3 and REFUND <= triples(graphs)


def test_a_pending_relation_resolves_when_an_agent_creates_the_entity(store):
    svc, graphs = store()
    import_source(svc, graphs, ME, "basic-memory", DATA / "basic-memory")
    assert ("Payment Retries", "Payment Gateway", "depends_on") not in triples(graphs)
    graphs.graph.create_entities(ME, [{"name": "Payment Gateway", "entityType": "service"}])
    assert ("Payment Retries", "Payment Gateway", "depends_on") in triples(graphs)
    assert waiting(graphs) == {("Checkout Flow", "Order States", "links_to")}


def test_a_second_run_keeps_one_row_and_a_dry_run_writes_none(store):
    svc, graphs = store()
    dry = import_source(svc, graphs, ME, "basic-memory", NOTE, dry_run=True)
    assert dry.pending == 3 and waiting(graphs) == set()
    import_source(svc, graphs, ME, "basic-memory", NOTE)
    again = import_source(svc, graphs, ME, "basic-memory", NOTE)
    assert again.pending == 3 and again.created == {}
    rows = svc.store.reader.execute("SELECT count(*) FROM pending_relations").fetchone()[0]
    assert rows == 3


def test_deleting_an_entity_or_a_relation_drops_what_is_pending_on_it(store):
    svc, graphs = store()
    import_source(svc, graphs, ME, "basic-memory", NOTE)
    graphs.graph.delete_relations(
        ME, [{"from": "Refund Policy", "to": "shop-api", "relationType": "part_of"}]
    )
    assert len(waiting(graphs)) == 2
    graphs.graph.delete_entities(ME, ["Refund Policy"])
    assert waiting(graphs) == set()
    import_source(svc, graphs, ME, "basic-memory", DATA / "basic-memory")
    assert not {t for t in triples(graphs) if t[0] == "Refund Policy"}  # nothing came back


def test_a_pending_relation_is_screened_like_any_stored_text(store):
    from ingest.importers.items import EntityItem, RelationItem

    items = [
        EntityItem(sourceId="e", name="Deploy", entityType="process"),
        RelationItem(
            sourceId="r", **{"from": "Deploy"}, to=f"token {SECRET}", relationType="uses"
        ),  # fmt: skip
    ]
    svc, graphs = store()  # the default policy: an import redacts, whatever the store says
    res = import_items(svc, graphs, ME, "memory-jsonl", items)
    assert res.pending == 1 and res.warningCount >= 1
    [(_, to, _)] = waiting(graphs)
    assert SECRET not in to and "[REDACTED:" in to
    svc, graphs = store(WritePolicy(secrets=SecretPolicy.block))
    res = import_items(svc, graphs, ME, "memory-jsonl", items)
    assert res.pending == 0 and res.skipped == {"secret (PATTERN_SECRET_POLICY=block)": 1}
    assert waiting(graphs) == set()


def test_the_command_reports_the_pending_relations(tmp_path, monkeypatch, capsys):
    for key, value in {"PATTERN_HOME": str(tmp_path / "home"), "PATTERN_EMBEDDER": "hash",
                       "PATTERN_PROJECT_ID": "proj", "PATTERN_AGENT_ID": "agent"}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    assert main(["import-from", "basic-memory", str(NOTE), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "pending: 3 relations to entities in neither the graph nor the source" in out
    assert main(["import-from", "basic-memory", str(NOTE), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pending"] == 3
