"""The replication log: what one canonical transaction changed, as a replica re-applies it.

A committed transaction appends one row ``pm_log(seq, origin, entries, at)`` in the same
PostgreSQL transaction as its changes. ``entries`` lists, in execution order:

- ``["r", table, columns, rows]``: row images (every column) of rows the statement inserted or
  updated, as PostgreSQL returned them; a replica writes them with ``INSERT OR REPLACE``;
- ``["d", table, key columns, keys]``: the keys of rows the statement deleted;
- ``["s", sql, params]`` / ``["m", sql, [params, ...]]``: a statement on a node-local table (the
  vector outbox), in its SQLite text, run as is by every replica.

Row images make a replica equal to PostgreSQL whatever the two dialects would compute
differently (arithmetic, collation, ``OR REPLACE`` semantics): nothing is re-evaluated.
Values are JSON (bytes as ``{"b": base64}``: the stored vectors), zlib-compressed.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import zlib
from collections.abc import Iterable
from typing import Any

Entry = list


def _default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return {"b": base64.b64encode(bytes(value)).decode("ascii")}
    raise TypeError(f"cannot log a {type(value).__name__}")


def _hook(obj: dict) -> Any:
    if len(obj) == 1 and "b" in obj:
        return base64.b64decode(obj["b"])
    return obj


def encode(entries: list[Entry]) -> bytes:
    return zlib.compress(
        json.dumps(entries, default=_default, separators=(",", ":")).encode("utf-8"), 1
    )


def decode(blob: bytes) -> list[Entry]:
    return json.loads(zlib.decompress(blob).decode("utf-8"), object_hook=_hook)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def apply(conn: sqlite3.Connection, entries: Iterable[Entry]) -> set[str]:
    """Re-apply a transaction's entries inside the caller's SQLite transaction; returns the
    buckets of the records it wrote (the engine searches every bucket it knows)."""
    buckets: set[str] = set()
    for entry in entries:
        kind = entry[0]
        if kind == "r":
            _, table, cols, rows = entry
            marks = ",".join("?" * len(cols))
            conn.executemany(
                f"INSERT OR REPLACE INTO {_q(table)}({','.join(map(_q, cols))}) VALUES ({marks})",
                rows,
            )
            if table == "records" and "bucket" in cols:
                i = cols.index("bucket")
                buckets.update(r[i] for r in rows)
        elif kind == "d":
            _, table, cols, keys = entry
            where = " AND ".join(f"{_q(c)}=?" for c in cols)
            conn.executemany(f"DELETE FROM {_q(table)} WHERE {where}", keys)
        elif kind == "s":
            conn.execute(entry[1], entry[2])
        elif kind == "m":
            conn.executemany(entry[1], entry[2])
        else:  # pragma: no cover - a newer writer's entry kind
            raise ValueError(f"unknown log entry kind {kind!r}")
    return buckets


__all__ = ["apply", "decode", "encode"]
