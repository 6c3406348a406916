"""Shared fixtures: real SQLite and real Chroma in ``tmp_path``; a deterministic hashing
embedder for unit tests; the packaged all-MiniLM-L6-v2 (loaded once per session, offline) for
anything about relevance."""

from __future__ import annotations

import os

# Before anything imports chromadb / huggingface: never reach the network, never phone home.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["ANONYMIZED_TELEMETRY"] = "False"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import itertools  # noqa: E402
from collections.abc import Callable  # noqa: E402
from datetime import UTC, datetime, timedelta  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from retrieval.embedding.embedder import HashEmbedder  # noqa: E402
from retrieval.engine import Engine  # noqa: E402
from retrieval.records import Record  # noqa: E402

PROJECT = "proj"
AGENT = "agent"
T0 = datetime(2024, 1, 1, tzinfo=UTC)


class CountingEmbedder:
    """Wraps an embedder and counts what it is asked to embed."""

    def __init__(self, inner=None) -> None:
        self.inner = inner or HashEmbedder()
        self.model_id = self.inner.model_id
        self.dimension = self.inner.dimension
        self.document_calls = 0
        self.documents = 0
        self.texts: list[str] = []  # every document text asked for, in order
        self.query_calls = 0

    def embed_query(self, text: str) -> np.ndarray:
        self.query_calls += 1
        return self.inner.embed_query(text)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        self.document_calls += 1
        self.documents += len(texts)
        self.texts.extend(texts)
        return self.inner.embed_documents(texts)

    def reset(self) -> None:
        self.document_calls = self.documents = self.query_calls = 0
        self.texts = []


@pytest.fixture
def open_engine(tmp_path, store_url) -> Callable[..., Engine]:
    """Factory: ``open_engine(embedder=..., path=..., **kw)``; every engine is closed at teardown.
    All engines of one test share ``tmp_path / "store"`` unless told otherwise, so a test can
    close one and reopen the same folder. In a module parametrized over ``backends`` the
    engines share the test's PostgreSQL database too (each folder is one node)."""
    opened: list[Engine] = []

    def _open(embedder=None, path=None, **kw) -> Engine:
        kw.setdefault("store_url", store_url)
        eng = Engine(path or tmp_path / "store", embedder, **kw)
        opened.append(eng)
        return eng

    yield _open
    for eng in opened:
        eng.close()


@pytest.fixture
def vector_index(monkeypatch) -> None:
    """Every store the test opens has its vector index from its first write (no exact scan of
    a small store: retrieval/vector/index_size.py): for tests of the index and its process.
    Processes the test starts inherit it."""
    monkeypatch.setenv("PATTERN_VECTOR_INDEX_FROM", "0")


@pytest.fixture
def engine(open_engine) -> Engine:
    """An engine over a fresh store with the deterministic hashing embedder."""
    return open_engine(HashEmbedder())


@pytest.fixture
def make_record() -> Callable[..., Record]:
    """Factory for records with sensible defaults; ``tags=`` and ``priority=`` go to metadata."""
    counter = itertools.count()

    def _make(content: str | None = None, *, tags=None, priority=None, **kw) -> Record:
        n = next(counter)
        metadata = dict(kw.pop("metadata", {}) or {})
        if tags is not None:
            metadata["tags"] = list(tags)
        if priority is not None:
            metadata["priority"] = priority
        kw.setdefault("project_id", PROJECT)
        kw.setdefault("agent_id", AGENT)
        kw.setdefault("created_at", T0 + timedelta(minutes=n))
        kw.setdefault("updated_at", kw["created_at"])
        return Record(
            content=content if content is not None else f"note number {n}", metadata=metadata, **kw
        )

    return _make


@pytest.fixture
def counting_embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture(scope="session")
def real_embedder():
    """The packaged all-MiniLM-L6-v2, loaded once for the whole session (offline)."""
    from retrieval.embedding.embedder import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder().load()


# ---------------------------------------------------------------------- test order
# With several workers and ``--dist loadfile`` a test file runs whole on one worker, and files are
# handed out in collection order (``--no-loadscope-reorder`` in pyproject.toml: xdist's own
# order, most tests first, ran the files of few but slow tests last, one alone on a worker while
# the other idled). Here the files of slow tests (the real model, a pip install, daemons) come
# first, those of fewest tests first (a file of two slow tests is a pip install or a model
# export), so they run beside each other; then the rest, most tests first, so the many short
# files fill the time left.
#
# The files of browser tests come last of all: Playwright's sync API leaves an event loop in its
# thread, which a later test file's anyio.run would meet in the same worker; handed out last,
# no file follows them there, and they run in the time the other workers finish theirs.
def pytest_collection_modifyitems(config, items):
    browser = {item.path for item in items if item.get_closest_marker("browser")}
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    count: dict = {}
    for item in items:
        count[item.path] = count.get(item.path, 0) + 1

    def order(item):
        if item.path in browser:
            return (2, 0)
        return (0, count[item.path]) if item.path in slow else (1, -count[item.path])

    items.sort(key=order)


# ---------------------------------------------------------------------- storage backends
# A module opts in with ``pytestmark = pytest.mark.backends("sqlite", "postgres")``: every test
# in it that uses ``store_url`` (directly or through ``open_engine``/``engine``) runs once per
# backend. PostgreSQL is a real server: ``PATTERN_TEST_POSTGRES_URL`` when given (a database
# the tests may create databases from), else a pgserver started once per session.
def pytest_generate_tests(metafunc):
    marker = metafunc.definition.get_closest_marker("backends")
    if marker is not None and "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", list(marker.args), indirect=True)


@pytest.fixture
def backend(request) -> str:
    return getattr(request, "param", "sqlite")


@pytest.fixture(scope="session")
def pg_admin():
    """(admin conninfo, make_url(dbname)) of a real PostgreSQL server."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    given = os.environ.get("PATTERN_TEST_POSTGRES_URL")
    server = None
    if given:
        admin = given
    else:
        import tempfile
        import warnings

        with warnings.catch_warnings():  # platformdirs: XDG_RUNTIME_DIR is not set
            warnings.simplefilter("ignore")
            import pgserver

            # not under pytest's 0700 basetemp: as root, pgserver runs postgres as its own user
            pgdata = tempfile.mkdtemp(prefix="pattern-pg-")
            server = pgserver.get_server(pgdata, cleanup_mode="delete")
        admin = server.get_uri()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("SELECT 1")

    def url_of(dbname: str) -> str:
        return make_conninfo(admin, **{**conninfo_to_dict(admin), "dbname": dbname})

    yield admin, url_of, server
    if server is not None:
        server.cleanup()


@pytest.fixture(scope="session")
def _pg_databases(pg_admin):
    """Databases made once per session and emptied for each test that uses them (creating a
    database costs ~1 s here, emptying one a few ms)."""
    import psycopg

    admin, url_of, _ = pg_admin
    made: list[str] = []
    yield made, admin, url_of
    with psycopg.connect(admin, autocommit=True) as conn:
        for name in made:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def empty_pg_database(databases, name: str) -> str:
    """The conninfo of database ``name``, created once per session and emptied now."""
    import psycopg

    made, admin, url_of = databases
    if name not in made:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
    url = url_of(name)
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        )]  # fmt: skip
        if tables:
            conn.execute("TRUNCATE " + ", ".join(f'"{t}"' for t in tables))
            conn.execute("ALTER SEQUENCE IF EXISTS pm_log_seq RESTART")
    return url


@pytest.fixture
def new_pg_database(_pg_databases):
    """Factory: an empty database (its conninfo), a different one on each call in a test."""
    counter = itertools.count()

    def _make() -> str:
        return empty_pg_database(_pg_databases, f"pm_test_{os.getpid()}_{next(counter)}")

    return _make


@pytest.fixture
def store_url(backend, request) -> str | None:
    """None for SQLite alone, else a fresh PostgreSQL database for this test."""
    if backend == "sqlite":
        return None
    return request.getfixturevalue("new_pg_database")()
