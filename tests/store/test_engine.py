"""The engine's write paths end to end: atomic units of work, many threads on one store,
deletions made while the model is not loaded."""

from __future__ import annotations

import threading

import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.errors import Conflict
from retrieval.records import RecordFilter, Scope

MODEL = HashEmbedder().model_id
pytestmark = [
    pytest.mark.backends("sqlite", "postgres"),
    pytest.mark.usefixtures("vector_index"),
]  # the index itself


def chroma_ids(eng, bucket) -> list[str]:
    return sorted(eng.vectors.ids(bucket, MODEL))


def test_apply_commits_adds_replacements_and_deletions_together(engine, make_record):
    keep, edit, drop = make_record("keep"), make_record("edit me"), make_record("drop me")
    engine.add([keep, edit, drop])
    new = make_record("brand new entry")
    done = engine.apply(
        add=[new],
        replace=[edit.model_copy(update={"content": "edited entry"})],
        delete=[drop.id],
    )
    assert [r.id for r in done.deleted] == [drop.id] and done.warnings == []
    assert {r.id for r in engine.store.list(RecordFilter())} == {keep.id, edit.id, new.id}
    assert engine.get(edit.id).content == "edited entry"
    assert engine.store.outbox() == []
    assert chroma_ids(engine, keep.bucket) == sorted([keep.id, edit.id, new.id])
    top = engine.search("edited entry", k=1, mode="vector")[0]
    assert top.record.id == edit.id and top.explanation.vector_similarity == pytest.approx(1.0)
    ops = engine.store.reader.execute("SELECT op FROM changes ORDER BY seq").fetchall()
    assert [r[0] for r in ops][-3:] == ["delete", "insert", "update"]


@pytest.mark.parametrize("where", ["check", "extra"])
def test_apply_aborted_by_its_hook_leaves_nothing(engine, make_record, where):
    keep, edit = make_record("keep this"), make_record("do not edit")
    engine.add([keep, edit])
    changes = engine.store.reader.execute("SELECT count(*) FROM changes").fetchone()[0]

    def refuse(conn):
        raise Conflict("revision moved", current_revision=7)

    with pytest.raises(Conflict):
        engine.apply(
            add=[make_record("never stored")],
            replace=[edit.model_copy(update={"content": "never edited"})],
            delete=[keep.id],
            **{where: refuse},
        )
    assert {r.content for r in engine.store.list(RecordFilter())} == {"keep this", "do not edit"}
    assert engine.store.reader.execute("SELECT count(*) FROM changes").fetchone()[0] == changes
    assert engine.store.outbox() == []
    assert chroma_ids(engine, keep.bucket) == sorted([keep.id, edit.id])
    assert engine.search("never stored", mode="lexical") == []
    assert engine.store.integrity_check() == []


def test_many_threads_write_and_search_one_engine(engine, make_record):
    n_writers, per_writer, batch = 4, 24, 4
    recs = [
        [make_record(f"writer {w} item {i} topic{w}x{i}") for i in range(per_writer)]
        for w in range(n_writers)
    ]
    errors: list[BaseException] = []
    done = threading.Event()

    def write(mine):
        try:
            for i in range(0, len(mine), batch):
                engine.add(mine[i : i + batch])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def search():
        try:
            while not done.is_set():
                for mode in ("lexical", "vector", "hybrid"):
                    engine.search("writer item topic", k=5, mode=mode)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    writers = [threading.Thread(target=write, args=(r,)) for r in recs]
    readers = [threading.Thread(target=search) for _ in range(2)]
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join(timeout=120)
    done.set()
    for t in readers:
        t.join(timeout=60)
    assert errors == []
    assert not any(t.is_alive() for t in writers + readers)

    total = n_writers * per_writer
    assert engine.store.count(RecordFilter()) == total
    assert engine.store.outbox() == []
    assert engine.store.integrity_check() == []
    assert len(chroma_ids(engine, recs[0][0].bucket)) == total
    for w, i in ((0, 0), (1, 7), (3, per_writer - 1)):
        rec = recs[w][i]
        assert engine.search(rec.content, k=1, mode="vector")[0].record.id == rec.id
        assert engine.search(f"topic{w}x{i}", k=1, mode="lexical")[0].record.id == rec.id


def test_sync_never_clears_the_outbox_rows_of_an_open_transaction(engine, make_record):
    """sync on one thread while another thread's write transaction is still open: the rows of
    that transaction are not committed, so sync must neither apply nor clear them."""
    rec = make_record("written by a slow transaction")
    inserted, release = threading.Event(), threading.Event()

    def slow_writer():
        with engine.store.transaction() as conn:
            engine.store.insert(conn, [rec])
            inserted.set()
            release.wait(30)

    writer = threading.Thread(target=slow_writer)
    writer.start()
    assert inserted.wait(30)
    syncer = threading.Thread(target=engine.sync)
    syncer.start()
    syncer.join(timeout=2)  # it may finish, or wait for the writer's lock to clear rows
    release.set()
    writer.join(30)
    syncer.join(30)
    assert not writer.is_alive() and not syncer.is_alive()
    # the committed row is still owed to Chroma (or was applied): never silently dropped
    engine.sync()
    assert engine.store.outbox() == []
    assert chroma_ids(engine, rec.bucket) == [rec.id]


def test_a_deletion_made_while_the_model_loads_reaches_chroma_later(open_engine, make_record):
    gone, stays = make_record("obsolete runbook"), make_record("current runbook", scope=Scope.team)
    open_engine(HashEmbedder()).add([gone, stays])
    eng = open_engine()  # same folder, no model yet
    assert [r.id for r in eng.delete([gone.id])] == [gone.id]
    assert [h.record.id for h in eng.search("runbook")] == [stays.id]  # lexical meanwhile
    eng.set_embedder(HashEmbedder())
    assert chroma_ids(eng, gone.bucket) == []
    assert chroma_ids(eng, stays.bucket) == [stays.id]
    assert [h.record.id for h in eng.search("obsolete runbook", mode="vector")] == [stays.id]


def test_content_without_words_is_stored_and_searchable(engine, make_record):
    rec = make_record("!!! ??? ...")
    engine.add([rec])
    assert engine.get(rec.id).content == "!!! ??? ..."
    for mode in ("lexical", "vector", "hybrid"):
        engine.search("!!!", mode=mode)  # must not raise
    assert engine.store.outbox() == []


def test_add_in_several_batches_embeds_ahead_and_keeps_committed_batches(open_engine, make_record):
    """Engine.add embeds batch j+1 on a look-ahead thread while batch j is written; every
    batch is still its own transaction: a failure in a later batch keeps the earlier ones and
    leaves nothing of the failing one."""
    from tests.conftest import CountingEmbedder

    class FailOnThird(CountingEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.threads: set[str] = set()

        def embed_documents(self, texts):
            self.threads.add(threading.current_thread().name)
            if self.document_calls == 2:
                self.document_calls += 1
                raise RuntimeError("model crashed")
            return super().embed_documents(texts)

    emb = FailOnThird()
    eng = open_engine(emb)
    recs = [make_record(f"pipelined note {i} about widgets") for i in range(10)]
    with pytest.raises(RuntimeError, match="model crashed"):
        eng.add(recs, batch=3)
    assert any(name.startswith("embed-ahead") for name in emb.threads)
    stored = eng.store.get([r.id for r in recs])
    assert set(stored) == {r.id for r in recs[:6]}  # batches 1 and 2 committed, 3 and 4 not
    hits = eng.search("pipelined widgets", RecordFilter(), k=10, mode="vector")
    assert {h.record.id for h in hits} == {r.id for r in recs[:6]}
    assert not [t for t in threading.enumerate() if t.name.startswith("embed-ahead")]

    ok = [make_record(f"second lot {i}") for i in range(7)]
    assert eng.add(ok, batch=2) == ok
    assert set(eng.store.get([r.id for r in ok])) == {r.id for r in ok}


def test_closing_an_engine_stops_its_lexical_threads(open_engine, make_record):
    """A process that opens and closes stores (tests, the benchmarks, a cluster node that
    rejoins) keeps no threads of a closed one."""
    import threading

    def lexical_threads() -> int:
        return sum(t.name.startswith("lexical") for t in threading.enumerate())

    before = lexical_threads()
    eng = open_engine()
    eng.add([make_record("refund retries back off"), make_record("deploys run on fridays")])
    assert eng.search("refund retries", k=2)
    assert lexical_threads() > before  # the search ran its lexical side on a worker thread
    eng.close()
    assert lexical_threads() == before
