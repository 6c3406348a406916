"""The daemons' bearer tokens in PostgreSQL (``pm_tokens``): one table for every node, so a
token made or revoked on one host holds on all of them. Hashes only, as in ``tokens.json``."""

from __future__ import annotations

import json

DDL = "CREATE TABLE IF NOT EXISTS pm_tokens(hash TEXT PRIMARY KEY, entry TEXT NOT NULL)"


def _connect(url: str):
    import psycopg

    return psycopg.connect(url, connect_timeout=10)


def load_tokens(url: str) -> dict[str, dict]:
    """{sha256 of the token: entry} (the same entries as ``tokens.json``)."""
    with _connect(url) as pg:
        pg.execute(DDL)
        rows = pg.execute("SELECT hash, entry FROM pm_tokens").fetchall()
    return {h: json.loads(e) for h, e in rows}


def save_tokens(url: str, data: dict[str, dict]) -> None:
    """Write every entry (tokens are never deleted, only revoked)."""
    with _connect(url) as pg:
        pg.execute(DDL)
        for h, e in data.items():
            pg.execute(
                "INSERT INTO pm_tokens(hash, entry) VALUES (%s, %s) ON CONFLICT (hash) "
                "DO UPDATE SET entry = EXCLUDED.entry",
                (h, json.dumps(e)),
            )


__all__ = ["load_tokens", "save_tokens"]
