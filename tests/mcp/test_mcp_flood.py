"""``toold mcp`` and a client that sends without reading: bounded work, every answer later.

Raw JSON lines on the real process's pipes (the SDK's client always reads). The daemon's
stdin pipe is watched with FIONREAD: once it stays full the daemon has stopped reading.
"""

from __future__ import annotations

import fcntl
import json
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path
from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

from tests.waiting import wait_until
from toold.bridge.inflight import MAX_IN_FLIGHT, capped

CALLS = 1500


def unread(fd: int) -> int:
    """Bytes written to a pipe and not read yet."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def calls_run(workspace: Path) -> int:
    log = workspace / ".toold" / "audit.jsonl"
    if not log.exists():
        return 0
    lines = log.read_text(encoding="utf-8").splitlines()
    return sum(json.loads(line)["event"] == "call" for line in lines)


def line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message) + "\n").encode("utf-8")


def test_a_client_that_does_not_read_stops_being_read_and_gets_every_answer_later(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "big.txt").write_text(("x" * 99 + "\n") * 600, encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "toold", "mcp", "--workspace", str(workspace)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        init = {"protocolVersion": "2025-06-18", "capabilities": {}}
        init["clientInfo"] = {"name": "flood", "version": "1"}
        proc.stdin.write(line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}))
        proc.stdin.flush()
        first = proc.stdout.readline()
        assert json.loads(first)["id"] == 0, first
        proc.stdin.write(line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        call = {"name": "read_file", "arguments": {"file_path": "big.txt", "limit": 1000}}
        requests = b"".join(
            line({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": call})
            for i in range(1, CALLS + 1)
        )
        writer = threading.Thread(target=proc.stdin.write, args=(requests,), daemon=True)
        writer.start()
        wait_until(lambda: calls_run(workspace) >= MAX_IN_FLIGHT, "the first calls", 60)
        # Not read any more: the pipe into the daemon fills and stays full.
        wait_until(lambda: unread(proc.stdin.fileno()) > 32768, "the daemon to stop reading", 30)
        assert writer.is_alive()
        assert calls_run(workspace) <= MAX_IN_FLIGHT + 8
        answered = set()
        while len(answered) < CALLS:
            reply = json.loads(proc.stdout.readline())
            assert not reply["result"].get("isError"), reply
            answered.add(reply["id"])
        assert answered == set(range(1, CALLS + 1))
        writer.join(timeout=10)
    finally:
        proc.kill()
        proc.wait(timeout=10)
        proc.stdin.close()
        proc.stdout.close()


def request(i: int) -> SessionMessage:
    return SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=i, method="ping"))


def test_past_the_cap_no_request_reaches_the_server_until_one_is_answered() -> None:
    async def main() -> list[Any]:
        client_out, stdin = anyio.create_memory_object_stream[SessionMessage | Exception](100)
        stdout, client_in = anyio.create_memory_object_stream[SessionMessage](100)
        cancel = JSONRPCNotification(
            jsonrpc="2.0", method="notifications/cancelled", params={"requestId": "1"}
        )
        for message in [request(0), request(1), SessionMessage(cancel), *map(request, (2, 3, 4))]:
            client_out.send_nowait(message)
        async with (
            client_out,
            client_in,
            capped(stdin, stdout, cap=3) as (reads, writes),
            reads,
            writes,
        ):
            got = [(await reads.receive()).message for _ in range(5)]  # type: ignore[union-attr]
            await anyio.wait_all_tasks_blocked()
            # 0, 2 and 3 are unanswered (1 was cancelled): the fifth request waits.
            assert reads.statistics().tasks_waiting_send == 0
            await writes.send(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=0, result={})))
            assert (await client_in.receive()).message.id == 0  # type: ignore[union-attr]
            got.append((await reads.receive()).message)  # type: ignore[union-attr]
        return [getattr(m, "id", getattr(m, "method", None)) for m in got]

    order = anyio.run(main)
    assert order == [0, 1, "notifications/cancelled", 2, 3, 4]
