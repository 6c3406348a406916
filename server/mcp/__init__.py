"""The MCP face: the app (:mod:`.app`, which registers every tool) and the tools, one module per
domain (``<domain>_tools.py``), each a thin adapter over ``server.service``:

- ``memory_tools``: remember (+ task / learning / core), update-memory, commit-insight, forget,
  share-learning, remember-bulk, forget-bulk;
- ``recall_tools``: recall-context, recall;
- ``graph_tools``: the knowledge-graph tools; ``lesson_tools``: the lesson tools;
- ``verify_tools``: verify-memories (memories whose cited code changed);
- ``ingest_tools``: ingest_workspace; ``stream_tools``: changes, changes-ack, the
  ``pattern://changes`` resource and its subscriptions; ``admin_tools``: cleanup, export/import, pattern_health;
- ``review_tools``: list-proposals, review-proposal (the review inbox).

The tools' shared helpers are in :mod:`.toolset`; ``logging/setLevel`` in :mod:`.client_logging`.
"""
