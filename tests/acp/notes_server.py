"""A tiny MCP server for the ACP tests: ``add_note`` appends to NOTES_FILE.

``python notes_server.py`` serves stdio; ``python notes_server.py http PORT`` serves
streamable HTTP on 127.0.0.1:PORT/mcp.
"""

from __future__ import annotations

import os
import sys
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
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
