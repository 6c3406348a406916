"""The MCP tools, one module per domain, each a thin adapter over ``server.service``:

- ``memories``: remember (+ task / learning / core), update-memory, commit-insight, forget,
  share-learning, remember-bulk, forget-bulk;
- ``recall``: recall-context, recall;
- ``graph``: the knowledge-graph tools; ``lessons``: the lesson tools;
- ``verify``: verify-memories (memories whose cited code changed);
- ``ingest``: ingest_workspace; ``stream``: changes, changes-ack, the ``pattern://changes``
  resource and its subscriptions; ``admin``: cleanup, export/import, pattern_health;
- ``review``: list-proposals, review-proposal (the review inbox).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import SubscriptionBus

from . import admin, graph, ingest, lessons, memories, recall, review, stream, verify

DOMAINS = (memories, recall, graph, lessons, ingest, admin, verify, review)


def register_all(server: MCPServer, bus: SubscriptionBus) -> None:
    """Every tool, resource and subscription handler of pattern-memory on ``server``."""
    for domain in DOMAINS:
        domain.tools.register(server)
    stream.register(server, bus)
