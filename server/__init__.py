"""pattern-memory MCP server and CLI."""
