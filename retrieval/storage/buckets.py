"""Visibility buckets: the rule that says who may see a record, as a name.

Pattern kept memories in KV buckets, one per (scope, owner); we keep its rule as a string per
record (``records.bucket``), so visibility is one ``bucket IN (...)`` test (SQL), one FTS5 token
(``records_fts.bucket``) or one Chroma collection per bucket, never a per-record predicate.

private  -> one per (project, agent); personal -> one per agent;
team     -> one per project;          public   -> one for everyone.
"""

from __future__ import annotations

from enum import StrEnum


class Scope(StrEnum):
    private = "private"
    personal = "personal"
    team = "team"
    public = "public"


SCOPE_NAMES: tuple[str, ...] = tuple(s.value for s in Scope)  # narrowest first


def bucket_of(scope: Scope | str, project_id: str, agent_id: str) -> str:
    """The visibility bucket of a record of ``scope`` created by ``agent_id`` in ``project_id``.
    A recall lists the buckets its caller may see; no per-record visibility test is needed."""
    scope = Scope(scope)
    if scope is Scope.private:
        return f"private/{project_id}/{agent_id}"
    if scope is Scope.personal:
        return f"personal/{agent_id}"
    if scope is Scope.team:
        return f"team/{project_id}"
    return "public"


def bucket_token(bucket: str) -> str:
    """The single FTS5 token a record's bucket is indexed as (``records_fts.bucket``): ``bkt``
    and three decimal digits per UTF-8 byte of the bucket name. Exact and injective (no hash:
    the lexical fast path relies on it for visibility), one token whatever the bucket contains,
    and ending in a digit so the porter stemmer leaves it alone."""
    return "bkt" + "".join(f"{b:03d}" for b in bucket.encode("utf-8"))
