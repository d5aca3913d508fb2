#!/usr/bin/env python3
"""An MCP stdio server built with the `mcp` PyPI package, for svc-mcp's tests.

mcp 2.x renamed FastMCP to MCPServer (mcp.server.mcpserver); 1.x has mcp.server.fastmcp.
Both keep the decorator API used here, so the server runs with either major version.
"""
try:
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server

server = Server("snowpea-py-test")


@server.tool()
def add(a: int, b: int) -> str:
    """Adds two integers."""
    return str(a + b)


@server.tool()
def shout(text: str) -> str:
    """Upper-cases text."""
    return text.upper()


if __name__ == "__main__":
    server.run()
