"""A stock LSP client (pygls's LanguageClient) drives the daemon: proof of LSP compatibility."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient


async def _session(workspace: Path) -> tuple[object, object, object]:
    client = LanguageClient("pytest-client", "1")
    await client.start_io(sys.executable, "-m", "toold", "serve", cwd=os.fspath(workspace))
    try:
        init = await asyncio.wait_for(
            client.initialize_async(
                types.InitializeParams(
                    capabilities=types.ClientCapabilities(),
                    process_id=os.getpid(),
                    workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="ws")],
                )
            ),
            30,
        )
        client.initialized(types.InitializedParams())
        listed = await asyncio.wait_for(
            client.protocol.send_request_async("tools/list", {"format": "anthropic"}), 30
        )
        called = await asyncio.wait_for(
            client.protocol.send_request_async(
                "tools/call", {"name": "grep", "arguments": {"pattern": "needle"}}
            ),
            30,
        )
        await asyncio.wait_for(client.shutdown_async(None), 30)
        client.exit(None)
        return init, listed, called
    finally:
        await client.stop()


def test_pygls_language_client_round_trip(workspace: Path) -> None:
    init, listed, called = asyncio.run(_session(workspace))
    assert init.server_info is not None and init.server_info.name == "toold"  # type: ignore[attr-defined]
    names = [t.name for t in listed.tools]  # type: ignore[attr-defined]
    assert names[:2] == ["bash", "read_file"]
    assert list(called.content) == [  # type: ignore[attr-defined]
        "src/helper.txt:1:needle line",
        "src/main.py:1:print('needle')",
    ]
    assert called.isError is False  # type: ignore[attr-defined]
