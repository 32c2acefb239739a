"""Calls to an MCP server an ACP client joined: progress resets the idle limit, and the
hard ceiling holds (a real stdio server, tests/acp/notes_server.py, through the SDK)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from acp.schema import EnvVariable, McpServerStdio

from toold.acp.mcp_servers import start_servers
from toold.config import LimitsConfig

SERVER = Path(__file__).with_name("notes_server.py")


def _calls(tmp_path: Path, limits: LimitsConfig, *calls: dict[str, float]) -> list[str]:
    """Each call's text through a started link (its tool ``notes__work``)."""

    async def main() -> list[str]:
        server = McpServerStdio(
            name="notes",
            command=sys.executable,
            args=[str(SERVER)],
            env=[EnvVariable(name="NOTES_FILE", value=str(tmp_path / "notes.txt"))],
        )
        links, tools = await start_servers([server], tmp_path)
        try:
            links[0].limits = lambda: limits
            work = next(t for t in tools if t.name == "notes__work")
            return [str(await work.run(call)) for call in calls]
        finally:
            for link in links:
                await link.close()

    return asyncio.run(main())


def test_progress_resets_the_idle_limit_and_silence_ends_the_call(tmp_path: Path) -> None:
    limits = LimitsConfig(idle_timeout=0.6, mcp_call_timeout=30)
    steady, silent, quick = _calls(
        tmp_path,
        limits,
        {"seconds": 2.0, "steps": 10},  # a progress every 0.2 s, for 2 s: it completes
        {"seconds": 20.0, "steps": 1},  # silent: stopped after 0.6 s
        {"seconds": 0.1, "steps": 1},  # the server still serves calls after a stopped one
    )
    assert steady == "worked 2 s"
    assert silent == (
        "Error: notes's work timed out after 0.6 seconds without progress (limits.idle_timeout)"
    )
    assert quick == "worked 0.1 s"


def test_the_ceiling_holds_whatever_the_progress(tmp_path: Path) -> None:
    limits = LimitsConfig(idle_timeout=5, mcp_call_timeout=1)
    (ended,) = _calls(tmp_path, limits, {"seconds": 20.0, "steps": 100})
    assert ended == "Error: notes's work timed out after 1 seconds (limits.mcp_call_timeout)"
