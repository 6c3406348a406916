"""The memory service: identity, scopes, TTL, limits, access rules, secret scanning.

Nothing in this package imports `mcp`: the MCP tools in `server.mcp` are thin adapters.
"""
