"""The service's ground: its error tree, models, identity and ids, scopes and limits, settings, the running service, bearer tokens, maintenance, the demo.

Imports: `server.service.trust`, `server.service.*` builders at runtime only, `graph`, `ingest`, `retrieval`.
"""
