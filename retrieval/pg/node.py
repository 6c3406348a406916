"""What the canonical writer and the replica need from their cluster node, as protocols.

:class:`~.cluster.Cluster` builds a :class:`~.canonical.Canonical` and a
:class:`~.replica.Replica` around itself and hands itself in; both only see it through
:class:`ClusterNode`, so neither imports the cluster module (the cluster imports them).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from .catalog import Catalog
from .dialect import Dialect


class ReplicaLink(Protocol):
    """The replica as the canonical writer drives it after a commit."""

    last_error: str | None

    def catch_up(
        self,
        through: int | None = None,
        own: tuple[int, Sequence] | None = None,
        pg: Any = None,
        known_head: int | None = None,
    ) -> int: ...

    def catch_up_quietly(self) -> None: ...


class ClusterNode(Protocol):
    """One node of the cluster: its pool, schema, identity, log and replica."""

    store: Any
    catalog: Catalog
    dialect: Dialect
    node_id: str
    cluster_id: str
    pool: Any
    replica: ReplicaLink

    def connect(self, autocommit: bool = False) -> Any: ...

    def getconn(self) -> Any: ...

    def putconn(self, pg: Any, *, rollback: bool = False, broken: bool = False) -> None: ...

    def translate_error(self, exc: Exception) -> Exception: ...

    def horizon(self, pg: Any) -> int: ...

    def log_after(
        self, applied: int, n: int, upto: int | None, pg: Any = None
    ) -> tuple[list[tuple[int, list]], int, bool]: ...

    def snapshot(self) -> AbstractContextManager[tuple[Any, int]]: ...
