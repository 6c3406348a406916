"""The settings variables of the environment, read and checked with the standard library only.

:class:`~server.service.core.config.Settings` is built from these; ``pattern-memory serve``'s
bridge runs :func:`check` before it answers its client (a bad value is refused at once, with
the same message, instead of by a daemon that never starts), without importing pydantic.
"""

from __future__ import annotations

from collections.abc import Mapping

from retrieval.pg import polling
from retrieval.vector import across, index_size
from server.service.core.errors import InvalidInput

EMBEDDERS = ("sentence-transformers", "hash", "none")
TRUE = ("1", "true", "yes", "on")


def store_url(env: Mapping[str, str]) -> str | None:
    """``PATTERN_STORE_URL``: a ``postgresql://`` URL (or libpq conninfo) makes PostgreSQL the
    canonical store; unset (or ``sqlite``) keeps the folder's SQLite store alone."""
    url = (env.get("PATTERN_STORE_URL") or "").strip()
    if not url or url.lower() == "sqlite":
        return None
    if not (url.startswith(("postgresql://", "postgres://")) or "dbname=" in url):
        raise InvalidInput(
            "PATTERN_STORE_URL must be a postgresql:// URL (or a libpq conninfo with dbname=)"
        )
    return url


def embedder(env: Mapping[str, str]) -> str:
    name = env.get("PATTERN_EMBEDDER", "sentence-transformers").strip().lower()
    if name not in EMBEDDERS:
        raise InvalidInput(f"PATTERN_EMBEDDER={name!r}: use sentence-transformers, hash or none")
    return name


def vector_writes(env: Mapping[str, str]) -> str:
    writes = env.get("PATTERN_VECTOR_WRITES", "background").strip().lower()
    if writes not in ("background", "inline"):
        raise InvalidInput(f"PATTERN_VECTOR_WRITES={writes!r}: use background or inline")
    return writes


def vector_process(env: Mapping[str, str]) -> bool:
    process = env.get("PATTERN_VECTOR_PROCESS", "1").strip().lower()
    if process not in (*TRUE, "0", "false", "no", "off"):
        raise InvalidInput(f"PATTERN_VECTOR_PROCESS={process!r}: use 1 or 0")
    return process in TRUE


def vector_index_from(env: Mapping[str, str]) -> int:
    """``PATTERN_VECTOR_INDEX_FROM``: the stored windows from which a store gets its vector
    index (below, its vectors are scanned exactly; retrieval/vector/index_size.py)."""
    try:
        return index_size.index_from(env)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


def vector_across_from(env: Mapping[str, str]) -> int:
    """``PATTERN_VECTOR_ACROSS_FROM``: the buckets from which every vector is also kept in one
    collection across them (retrieval/vector/across.py; ``0``: never)."""
    try:
        return across.across_from(env)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


def pg_poll_seconds(env: Mapping[str, str]) -> float:
    """``PATTERN_PG_POLL_MS``: a PostgreSQL replica's polling fallback, in seconds
    (retrieval/pg/polling.py)."""
    return polling.poll_seconds(env)


def chroma_port(env: Mapping[str, str]) -> int:
    try:
        return int(env.get("PATTERN_CHROMA_PORT", "8000"))
    except ValueError:
        raise InvalidInput("PATTERN_CHROMA_PORT must be a number") from None


AUTO_LESSONS = ("off", "review", "on")
AUTO_LESSONS_DEFAULT = "on"  # docs/lessons.md, "Turning it off": why on


def auto_lessons(env: Mapping[str, str]) -> str:
    """``PATTERN_AUTO_LESSONS``: ``off`` (no lessons learned from episodes, no outcomes
    counted), ``review`` (learned, injected by the hooks once a person accepts them) or ``on``
    (learned and used at once; the default)."""
    mode = (env.get("PATTERN_AUTO_LESSONS") or AUTO_LESSONS_DEFAULT).strip().lower()
    if mode not in AUTO_LESSONS:
        raise InvalidInput(f"PATTERN_AUTO_LESSONS={mode!r}: use off, review or on")
    return mode


UPDATE_JUDGES = ("off", "sampling")


def update_judge(env: Mapping[str, str]) -> str:
    """``PATTERN_UPDATE_JUDGE``: ``off`` (the default: a write shows its candidates and the
    agent decides) or ``sampling`` (where the client supports MCP sampling, its model judges
    each candidate and a clear yes links it; docs/time.md)."""
    mode = (env.get("PATTERN_UPDATE_JUDGE") or "off").strip().lower()
    if mode not in UPDATE_JUDGES:
        raise InvalidInput(f"PATTERN_UPDATE_JUDGE={mode!r}: use off or sampling")
    return mode


def check(env: Mapping[str, str]) -> None:
    """Raise :class:`InvalidInput` for the first bad value, as ``Settings.from_env`` would."""
    embedder(env)
    auto_lessons(env)
    update_judge(env)
    vector_writes(env)
    vector_process(env)
    vector_index_from(env)
    vector_across_from(env)
    pg_poll_seconds(env)
    chroma_port(env)
    store_url(env)
