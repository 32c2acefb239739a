"""``toold serve --max-message-bytes``: a frame over the cap is refused, the daemon serves on.

Spawned because it checks the command-line flag; the other malformed frames and messages
are tested in process (tests/interaction/test_bad_input.py).
"""

from __future__ import annotations

from pathlib import Path

from tests.e2e.wire import WireClient


def still_serving(client: WireClient) -> None:
    assert client.tool("read_file", file_path="src/main.py")["content"] == "1: print('needle')"


def error_without_id(client: WireClient) -> dict:
    return client.next_message(lambda m: "error" in m and m.get("id") is None)


def test_message_size_cap(workspace: Path) -> None:
    c = WireClient(workspace, "--max-message-bytes", "4096")
    try:
        c.initialize()
        c.send(
            {
                "jsonrpc": "2.0",
                "id": 1000,
                "method": "tools/call",
                "params": {
                    "name": "write_file",
                    "arguments": {"file_path": "big.txt", "content": "x" * 10_000},
                },
            }
        )
        reply = error_without_id(c)
        assert reply["error"]["code"] == -33001
        assert not (workspace / "big.txt").exists()
        still_serving(c)
    finally:
        c.close()
