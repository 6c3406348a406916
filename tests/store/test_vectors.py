"""The Chroma side: collections per (bucket, model), windows, the outbox, reindex, and an engine
that starts without an embedding model."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import BARE_VIEW_WEIGHT, embed_views
from retrieval.errors import NotFound
from retrieval.records import RecordFilter, Scope
from retrieval.vector.vector_process import VectorProcess
from retrieval.vector.vectors import VectorItem, collection_name, windows

pytestmark = pytest.mark.usefixtures("vector_index")  # tests of the vector index itself

MODEL = HashEmbedder().model_id


def vector_ids(eng, query, k=10, **f):
    return [h.record.id for h in eng.search(query, RecordFilter(**f), k=k, mode="vector")]


def chroma_ids(eng, bucket, model=MODEL) -> list[str]:
    return sorted(eng.vectors.ids(bucket, model))


def outbox_size(eng) -> int:
    return len(eng.store.outbox())


# ---------------------------------------------------------------------- collections per bucket
def test_one_collection_per_bucket_and_model(engine, make_record):
    mine = make_record("deploy the canary release on friday")
    team = make_record("deploy the canary release on friday", scope=Scope.team)
    public = make_record("deploy the canary release on friday", scope=Scope.public)
    engine.add([mine, team, public])
    assert chroma_ids(engine, mine.bucket) == [mine.id]
    assert chroma_ids(engine, team.bucket) == [team.id]
    assert chroma_ids(engine, "public") == [public.id]
    names = {collection_name(b, MODEL) for b in (mine.bucket, team.bucket, "public")}
    names.add(collection_name(mine.bucket, "another-model"))
    assert len(names) == 4
    assert engine.vectors.buckets(MODEL) == sorted([mine.bucket, team.bucket, "public"])
    assert engine.vectors.buckets("another-model") == []
    engine.close()
    chroma = sqlite3.connect(f"file:{engine.home / 'chroma' / 'chroma.sqlite3'}?mode=ro", uri=True)
    try:
        stored = {row[0] for row in chroma.execute("SELECT name FROM collections")}
    finally:
        chroma.close()
    assert stored == names - {collection_name(mine.bucket, "another-model")}


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_a_bucket_limited_search_never_returns_another_buckets_record(engine, make_record, mode):
    query = "deploy the canary release on friday"
    mine = make_record("weekly notes: canary went fine")
    others = [
        make_record(query, scope=Scope.team),
        make_record(query, scope=Scope.public),
        make_record(query, agent_id="someone-else"),
        make_record(query, project_id="other-project"),
    ]
    engine.add([mine, *others])
    hits = engine.search(query, RecordFilter(buckets=[mine.bucket]), k=10, mode=mode)
    assert [h.record.id for h in hits] == [mine.id]
    # and across two buckets, exactly those two
    hits = engine.search(query, RecordFilter(buckets=[mine.bucket, "public"]), k=10, mode=mode)
    assert {h.record.id for h in hits} == {mine.id, others[1].id}
    assert len(engine.search(query, k=10, mode=mode)) == 5  # no filter: every bucket


def test_vector_index_query_takes_the_best_window_per_record(tmp_path):
    index = VectorProcess(str(tmp_path / "chroma"))
    try:
        emb = HashEmbedder()
        a, b, c = emb.embed_documents(["red apples", "green pears", "blue plums"])
        index.upsert(
            "b1",
            "m",
            [
                VectorItem("r1", 0, a, {"kind": "memory"}),
                VectorItem("r1", 1, b, {"kind": "memory"}),
                VectorItem("r2", 0, c, {"kind": "memory"}),
            ],
        )
        index.upsert("b2", "m", [VectorItem("r3", 0, b, {"kind": "memory"})])
        assert index.count("b1", "m") == 3 and index.count("b1", "other") == 0
        got = index.query(["b1"], "m", b, 5)
        assert [rid for rid, _ in got] == ["r1", "r2"]
        assert got[0][1] == pytest.approx(1.0, abs=1e-5)
        got = dict(index.query(["b1", "b2", "missing-bucket"], "m", b, 5))
        assert got.keys() == {"r1", "r2", "r3"}
        index.delete("b1", "m", ["r1"])
        assert index.count("b1", "m") == 1
        index.drop_model("m")
        assert index.count("b1", "m") == 0 and index.count("b2", "m") == 0
    finally:
        index.close()


def test_n_results_means_n_records_even_when_each_has_many_windows(tmp_path):
    index = VectorProcess(str(tmp_path / "chroma"))
    try:
        emb = HashEmbedder()
        items = []
        for r in range(12):  # 12 records x 10 windows: the best 5 windows may be one record's
            vecs = emb.embed_documents([f"topic {r} part {w} shared words" for w in range(10)])
            items += [VectorItem(f"r{r}", w, v, {"kind": "memory"}) for w, v in enumerate(vecs)]
        index.upsert("b1", "m", items)
        q = emb.embed_query("topic 3 part 4 shared words")
        got = index.query(["b1"], "m", q, 5)
        assert len(got) == 5 and len({rid for rid, _ in got}) == 5
        assert got[0][0] == "r3"
        assert len(index.query(["b1"], "m", q, 50)) == 12  # fewer records than asked: all
    finally:
        index.close()


# ---------------------------------------------------------------------- windows
def words(n: int, prefix: str = "w") -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


def test_short_text_is_one_window_unchanged():
    text = "  keeps   its\nwhitespace  "
    assert windows(text, 10, 3) == [text]
    assert windows(words(10), 10, 3) == [words(10)]


@pytest.mark.parametrize(
    ("n", "size", "overlap"),
    [(11, 10, 0), (25, 10, 3), (100, 7, 2), (30, 10, 9), (12, 10, 16), (30, 10, 10), (50, 1, 0)],
)
def test_windows_cover_every_word_with_the_given_overlap(n, size, overlap):
    text = words(n)
    got = [w.split() for w in windows(text, size, overlap)]
    assert len(got) > 1
    assert all(0 < len(w) <= size for w in got)
    assert got[0] == text.split()[:size]
    assert got[-1][-1] == f"w{n - 1}"  # the tail is never dropped
    flat = [int(x[1:]) for w in got for x in w]
    assert set(flat) == set(range(n))
    effective = min(overlap, size - 1)
    for prev, nxt in zip(got, got[1:], strict=False):
        if len(prev) == size:
            assert prev[size - effective :] == nxt[:effective]
    assert len(got) == -(-(n - effective) // (size - effective))  # no redundant window


def test_a_long_record_is_several_windows_and_found_by_its_later_part(open_engine, make_record):
    eng = open_engine(HashEmbedder(), window_words=20, window_overlap=4)
    tail = "zeppelin hangar blueprint"
    long = make_record(words(90, "filler") + " " + tail)
    eng.add([long, make_record("zeppelin rides are fun"), make_record("an unrelated note")])

    n_windows = len(windows(long.content, 20, 4))
    assert n_windows == 6
    assert len(chroma_ids(eng, long.bucket)) == n_windows + 2
    assert eng.store.embeddings([long.id], MODEL)[long.id].shape == (n_windows, 64)
    hits = eng.search(tail, k=3, mode="vector")
    assert hits[0].record.id == long.id

    # the same record embedded as one window scores much lower: the windows are what find it
    single = open_engine(HashEmbedder(), path=eng.home.parent / "single", window_words=10_000)
    single.add([long.model_copy()])
    one = single.search(tail, k=1, mode="vector")[0].explanation.vector_similarity
    assert hits[0].explanation.vector_similarity > one + 0.2


def test_delete_removes_every_window(open_engine, make_record):
    eng = open_engine(HashEmbedder(), window_words=10, window_overlap=2)
    long, other = make_record(words(60)), make_record(words(60, "x"))
    eng.add([long, other])
    assert len([i for i in chroma_ids(eng, long.bucket) if i.startswith(long.id)]) > 2
    eng.delete([long.id])
    assert [i for i in chroma_ids(eng, long.bucket) if i.startswith(long.id)] == []
    assert any(i.startswith(other.id) for i in chroma_ids(eng, long.bucket))
    assert long.id not in vector_ids(eng, words(10))
    assert outbox_size(eng) == 0


def test_shortening_a_record_drops_its_extra_windows(open_engine, make_record):
    eng = open_engine(HashEmbedder(), window_words=10, window_overlap=2)
    rec = make_record(words(60))
    eng.add([rec])
    assert len(chroma_ids(eng, rec.bucket)) > 2
    eng.update(rec.model_copy(update={"content": "now a short note about otters"}))
    assert chroma_ids(eng, rec.bucket) == [rec.id]
    assert vector_ids(eng, "otters short note") == [rec.id]
    sim = eng.search("now a short note about otters", mode="vector")[0].explanation
    assert sim.vector_similarity == pytest.approx(1.0, abs=1e-3)


# ---------------------------------------------------------------------- moves and edits
def test_a_scope_change_moves_the_vectors_to_the_new_bucket(engine, make_record):
    rec = make_record("release checklist for the mobile app")
    engine.add([rec])
    old_bucket = rec.bucket
    moved = rec.model_copy(update={"scope": Scope.team})
    engine.update(moved)
    assert chroma_ids(engine, old_bucket) == []
    assert chroma_ids(engine, moved.bucket) == [rec.id]
    assert vector_ids(engine, "release checklist", buckets=[moved.bucket]) == [rec.id]
    assert vector_ids(engine, "release checklist", buckets=[old_bucket]) == []
    engine.delete([rec.id])
    assert chroma_ids(engine, old_bucket) == chroma_ids(engine, moved.bucket) == []
    assert outbox_size(engine) == 0


def test_an_edit_made_while_the_model_is_loading_is_embedded_afresh(open_engine, make_record):
    rec = make_record("apples oranges pears")
    open_engine(HashEmbedder()).add([rec])
    eng = open_engine()  # same folder, model not loaded yet
    eng.update(rec.model_copy(update={"content": "bananas kiwis mangoes"}))
    eng.set_embedder(HashEmbedder())
    hit = eng.search("bananas kiwis mangoes", k=1, mode="vector")[0]
    assert hit.record.id == rec.id
    assert hit.explanation.vector_similarity == pytest.approx(1.0, abs=1e-3)


# ---------------------------------------------------------------------- outbox replay
def test_rows_committed_without_sync_are_replayed_when_the_engine_reopens(open_engine, make_record):
    first = open_engine(HashEmbedder())
    rec = make_record("lighthouse maintenance schedule")
    with first.store.transaction() as conn:  # the write commits; the process "dies" before sync
        first.store.insert(conn, [rec])
    first._buckets.add(rec.bucket)
    assert outbox_size(first) == 1
    assert vector_ids(first, "lighthouse maintenance schedule") == []
    first.close()

    again = open_engine(HashEmbedder())
    assert outbox_size(again) == 0
    assert vector_ids(again, "lighthouse maintenance schedule") == [rec.id]
    assert chroma_ids(again, rec.bucket) == [rec.id]


def test_a_failed_chroma_write_is_replayed_at_the_next_start(open_engine, make_record, monkeypatch):
    eng = open_engine(HashEmbedder())
    real = VectorProcess.upsert

    def down(self, *a, **kw):
        raise RuntimeError("chroma went away")

    monkeypatch.setattr(VectorProcess, "upsert", down)
    rec = make_record("quarterly tax filing reminder")
    eng.add([rec])  # committed: no error (the background retry keeps failing here)
    # committed in SQLite, found lexically, its vector still owed
    assert eng.get(rec.id).content == rec.content
    assert [h.record.id for h in eng.search("tax filing", mode="lexical")] == [rec.id]
    assert outbox_size(eng) == 1
    assert eng.store.embeddings([rec.id], MODEL).keys() == {rec.id}
    eng.close()  # stops the retry timer
    monkeypatch.setattr(VectorProcess, "upsert", real)

    again = open_engine(HashEmbedder())
    assert outbox_size(again) == 0
    assert vector_ids(again, "quarterly tax filing reminder") == [rec.id]


def test_sync_collapses_repeated_writes_of_one_record(open_engine, make_record):
    eng = open_engine()  # no model: outbox rows accumulate
    rec = make_record("version one")
    eng.add([rec])
    eng.update(rec.model_copy(update={"content": "version two"}))
    eng.update(rec.model_copy(update={"content": "version three"}))
    gone = make_record("short lived")
    eng.add([gone])
    eng.delete([gone.id])
    assert outbox_size(eng) == 5
    assert eng.sync() == 0  # nothing to do without a model
    eng.set_embedder(HashEmbedder())
    assert outbox_size(eng) == 0
    assert chroma_ids(eng, rec.bucket) == [rec.id]
    assert vector_ids(eng, "version three")[0] == rec.id


# ---------------------------------------------------------------------- reindex
def test_reindex_rebuilds_chroma_from_sqlite_without_embedding(
    open_engine, make_record, counting_embedder
):
    eng = open_engine(counting_embedder, window_words=10, window_overlap=2)
    recs = [make_record(f"topic {i} " + words(25, f"t{i}x")) for i in range(5)]
    recs.append(make_record("harbor crane inspection", scope=Scope.team))
    eng.add(recs)
    assert counting_embedder.document_calls == 1
    windows_before = {b: chroma_ids(eng, b) for b in (recs[0].bucket, recs[-1].bucket)}

    eng.vectors.drop_model(MODEL)  # Chroma lost (or a stale one): nothing to find
    assert vector_ids(eng, "harbor crane inspection") == []
    # a stray vector of a record SQLite does not know must not survive the rebuild
    eng.vectors.upsert(
        recs[0].bucket,
        MODEL,
        [VectorItem("ghost", 0, eng.embedder.embed_query("harbor crane"), {})],
    )

    counting_embedder.reset()
    assert eng.reindex()[0] == len(recs)  # (records indexed, orphan vectors removed)
    assert counting_embedder.document_calls == 0 and counting_embedder.documents == 0
    assert {b: chroma_ids(eng, b) for b in windows_before} == windows_before
    assert vector_ids(eng, "harbor crane inspection")[0] == recs[-1].id


def test_reindex_needs_a_model(open_engine, make_record):
    eng = open_engine()
    eng.add([make_record("no model yet")])
    with pytest.raises(NotFound):
        eng.reindex()


# ---------------------------------------------------------------------- no model yet
def test_a_store_without_embedder_writes_and_searches_lexically(open_engine, make_record):
    eng = open_engine()
    rec = make_record("NullPointerException in FooService.start")
    other = make_record("the cafeteria menu for tuesday")
    eng.add([rec, other])
    for mode in ("hybrid", "vector", "lexical"):
        hits = eng.search("FooService NullPointerException", mode=mode)
        assert [h.record.id for h in hits] == [rec.id]
        e = hits[0].explanation
        assert e.vector_similarity is None and e.vector_rank is None
        assert e.lexical_rank == 1 and e.lexical_score is not None
        if mode == "lexical":
            assert e.mode == "lexical"
        else:
            assert "not ready" in e.mode
    assert outbox_size(eng) == 2

    eng.set_embedder(HashEmbedder())
    assert outbox_size(eng) == 0
    assert eng.store.embeddings([rec.id, other.id], MODEL).keys() == {rec.id, other.id}
    hits = eng.search("the cafeteria menu for tuesday", k=1, mode="vector")
    assert [h.record.id for h in hits] == [other.id]
    assert hits[0].explanation.mode == "vector"
    assert hits[0].explanation.vector_similarity == pytest.approx(1.0, abs=1e-3)
    hybrid = eng.search("FooService NullPointerException", k=2, mode="hybrid")
    assert hybrid[0].record.id == rec.id and hybrid[0].explanation.mode == "hybrid"
    assert hybrid[0].explanation.vector_similarity is not None


def test_a_reopened_engine_searches_every_bucket_it_holds(open_engine, make_record):
    recs = [make_record("shared wiki page", scope=s) for s in Scope]
    open_engine(HashEmbedder()).add(recs)
    again = open_engine(HashEmbedder())
    assert set(vector_ids(again, "shared wiki page")) == {r.id for r in recs}


def test_changing_the_embedding_model_re_embeds_existing_records(tmp_path):
    from retrieval.embedding.embedder import HashEmbedder
    from retrieval.engine import Engine
    from retrieval.records import Record

    eng = Engine(tmp_path, HashEmbedder(32))
    rec = Record(project_id="p", agent_id="a", content="blue whales sing long songs")
    eng.add([rec])
    eng.close()
    eng = Engine(tmp_path, HashEmbedder(48))  # another model id: hash-48
    try:
        assert eng.store.get_one(rec.id).embedding_model == "hash-48"
        assert eng.store.embeddings([rec.id], "hash-48")[rec.id].shape[1] == 48
        hits = eng.search("blue whales songs", k=1, mode="vector")
        assert [h.record.id for h in hits] == [rec.id]
    finally:
        eng.close()
    eng = Engine(tmp_path, HashEmbedder(48))  # the same model again: nothing is queued
    try:
        assert eng.store.outbox() == []
    finally:
        eng.close()
    eng = Engine(tmp_path, HashEmbedder(32))  # and back: queued and indexed again
    try:  # (from the hash-32 vectors still stored in SQLite: no re-embedding needed)
        hits = eng.search("blue whales songs", k=1, mode="vector")
        assert [h.record.id for h in hits] == [rec.id]
        assert eng.store.outbox() == []
    finally:
        eng.close()


def test_the_model_change_scan_skips_a_store_attached_to_the_same_model(tmp_path, monkeypatch):
    from retrieval.embedding.embedder import HashEmbedder
    from retrieval.engine import Engine
    from retrieval.records import Record

    eng = Engine(tmp_path, HashEmbedder(32))
    eng.add([Record(project_id="p", agent_id="a", content="kept")])
    eng.close()
    scans = []
    real = Engine._queue_other_models

    def spy(self, model_id):
        scans.append(self.store.meta("attached_model"))
        return real(self, model_id)

    monkeypatch.setattr(Engine, "_queue_other_models", spy)
    eng = Engine(tmp_path, HashEmbedder(32))
    eng.close()
    assert scans == ["hash-32"]  # asked, and the marker says the model is the same


# ---------------------------------------------------------------------- views
def test_embed_views_without_context_are_the_content_windows(make_record):
    rec = make_record(words(50))
    assert embed_views(rec, 20, 4) == [[(w, 1.0)] for w in windows(rec.content, 20, 4)]


def test_a_short_turn_with_a_long_context_gets_a_bare_view_too(make_record):
    turn = make_record("Caroline: I went to the pride parade", context=words(30, "ctx"))
    views = embed_views(turn, 40, 4)
    assert len(views) == 1
    (led, w1), (bare, w2) = views[0]
    assert led.endswith("\n" + turn.content) and led.startswith("ctx0 ctx1")
    assert bare == turn.content
    assert w1 == pytest.approx(1 - BARE_VIEW_WEIGHT) and w2 == pytest.approx(BARE_VIEW_WEIGHT)


def test_a_long_chunk_repeats_its_short_context_in_every_window(make_record):
    chunk = make_record(words(100), context="docs/guide.md > Install")
    views = embed_views(chunk, 40, 4)
    assert len(views) > 2
    assert all(len(v) == 1 and v[0][0].startswith("docs/guide.md > Install\n") for v in views)
    covered = " ".join(v[0][0].split("\n", 1)[1] for v in views).split()
    assert set(covered) == set(chunk.content.split())


def test_the_stored_vector_of_a_two_view_window_is_their_normalised_weighted_sum(
    open_engine, make_record
):
    emb = HashEmbedder()
    eng = open_engine(emb, window_words=40)
    turn = make_record("Melanie: we painted a sunrise", context=words(30, "ctx"))
    eng.add([turn])
    stored = eng.store.embeddings([turn.id], MODEL)[turn.id]
    (led, w1), (bare, w2) = embed_views(turn, 40, 16)[0]
    want = w1 * emb.embed_query(led) + w2 * emb.embed_query(bare)
    want /= np.linalg.norm(want)
    assert stored.shape == (1, 64)
    assert np.allclose(stored[0], want, atol=1e-5)
