"""The calculator's three tools: plain Python functions (AutoGen wraps them as FunctionTools; the MCP
server in `mcp_server.py` serves the same three)."""

from __future__ import annotations


def add(a: int, b: int) -> int:
    """Add b to a."""
    return a + b


def sub(a: int, b: int) -> int:
    """Subtract b from a."""
    return a - b


def mul(a: int, b: int) -> int:
    """Multiply a by b."""
    return a * b


TOOLS = {"add": add, "sub": sub, "mul": mul}
