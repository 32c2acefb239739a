"""A tiny stdio MCP server for the ACP tests: ``add_note`` appends to NOTES_FILE."""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")


@server.tool()
def add_note(text: str) -> str:
    """Append a line to the notes file and say how many notes there are."""
    path = Path(os.environ["NOTES_FILE"])
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    count = len(path.read_text(encoding="utf-8").splitlines())
    return f"noted ({count} notes)"


if __name__ == "__main__":
    server.run()
