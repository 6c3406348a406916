"""Tools built when first used (``server.mcp.toolset.LazyTools``): a tool whose build fails is
left out and named, and every other tool is still listed and called."""

from __future__ import annotations

import logging

from mcp.server.mcpserver import MCPServer

from server.mcp.toolset import lazy_tools


def good(x: int) -> int:
    """A tool that builds."""
    return x + 1


def bad(x: NoSuchType) -> int:  # noqa: F821 - an annotation that cannot be resolved
    """A tool whose arguments' model cannot be built."""
    return 0


def test_a_broken_tool_is_left_out_and_the_others_still_list(caplog):
    server = MCPServer(name="t")
    manager = lazy_tools(server)
    server.add_tool(good, name="good")
    server.add_tool(bad, name="bad")
    server.add_tool(good, name="after")
    with caplog.at_level(logging.ERROR, logger="server.mcp.toolset"):
        names = [t.name for t in manager.list_tools()]
        again = [t.name for t in manager.list_tools()]
    assert names == again == ["good", "after"]
    assert set(manager.broken) == {"bad"}
    assert sum("bad" in r.getMessage() for r in caplog.records) == 1  # logged once
    assert manager.get_tool("bad") is None
    assert manager.get_tool("good") is not None
