"""The calculator's tools served over MCP (stdio): `python mcp_server.py`.

The agent's `--tools mcp` variant starts it through AutoGen's `McpWorkbench` (one server per runner
process, shared by that process's rollouts)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mcp.server.fastmcp import FastMCP  # noqa: E402
from tools import add, mul, sub  # noqa: E402

server = FastMCP("calculator", log_level="WARNING")
for function in (add, sub, mul):
    server.tool()(function)

if __name__ == "__main__":
    server.run("stdio")
