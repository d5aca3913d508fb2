#!/usr/bin/env python3
"""An MCP stdio server built with the `mcp` PyPI package (FastMCP), for svc-mcp's tests."""
from mcp.server.fastmcp import FastMCP

server = FastMCP("snowpea-py-test")


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
