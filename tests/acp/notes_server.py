"""A tiny MCP server for the ACP tests: ``add_note`` appends to NOTES_FILE; ``work`` takes
time, with or without progress.

``python notes_server.py`` serves stdio; ``python notes_server.py http PORT`` serves
streamable HTTP on 127.0.0.1:PORT/mcp.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("notes")


@server.tool()
def add_note(text: str) -> str:
    """Append a line to the notes file and say how many notes there are."""
    path = Path(os.environ["NOTES_FILE"])
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    count = len(path.read_text(encoding="utf-8").splitlines())
    return f"noted ({count} notes)"


@server.tool()
async def work(seconds: float, steps: int, ctx: Context) -> str:
    """Take ``seconds`` in ``steps`` equal pauses, reporting progress after each
    (``steps`` 1: one silent pause)."""
    for step in range(steps):
        await anyio.sleep(seconds / steps)
        if steps > 1:
            await ctx.report_progress(step + 1, steps)
    return f"worked {seconds:g} s"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
