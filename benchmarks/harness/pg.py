"""A PostgreSQL for benchmarks: the URL given, or a temporary pgserver (PostgreSQL 16 in a
wheel) started in a temporary folder and removed afterwards."""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager


def _with_db(url: str, name: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    return make_conninfo(url, **{**conninfo_to_dict(url), "dbname": name})


@contextmanager
def postgres(url: str | None = None) -> Iterator:
    """Yields ``fresh(name) -> conninfo`` of an empty database ``name`` (dropped first).
    ``url``: an existing server's admin URL (``postgres`` database); None or "pgserver": a
    temporary pgserver."""
    import psycopg

    server = None
    if not url or url == "pgserver":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver

            server = pgserver.get_server(tempfile.mkdtemp(prefix="pm-bench-pg-"),
                                         cleanup_mode="delete")  # fmt: skip
        url = server.get_uri()

    def fresh(name: str) -> str:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        return _with_db(url, name)

    try:
        yield fresh
    finally:
        if server is not None:
            server.cleanup()
