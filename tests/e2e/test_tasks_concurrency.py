""".tasks.json under concurrent daemons and a daemon killed mid-burst.

Spawned because it is about processes: two daemons writing one file, and SIGKILL.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from tests.e2e.wire import WireClient

BURST = 100
WAIT_S = 60.0


def send_burst(client: WireClient, tag: str, count: int) -> list[Any]:
    """Pipeline ``count`` task_create requests without waiting; returns their ids."""
    return [
        client.request(
            "tools/call",
            {"name": "task_create", "arguments": {"title": f"{tag} {i}"}, "origin": "user"},
        )
        for i in range(count)
    ]


def created_id(reply: dict[str, Any]) -> str:
    result = reply["result"]
    assert result["isError"] is False, result
    return result["content"]["id"]


def tasks_on_disk(workspace: Path) -> dict[str, Any]:
    return json.loads((workspace / ".tasks.json").read_text(encoding="utf-8"))["tasks"]


def test_two_daemons_creating_200_tasks_lose_none(workspace: Path) -> None:
    """Two processes writing one file (``--no-daemon``: editors on the default path share
    one engine; a private daemon or a second user of the folder is another process)."""
    clients = [WireClient(workspace, "--no-daemon"), WireClient(workspace, "--no-daemon")]
    try:
        for client in clients:
            client.initialize()
        bursts = [send_burst(c, f"daemon{n}", BURST) for n, c in enumerate(clients)]
        ids = [
            created_id(client.response(msg_id, timeout=WAIT_S))
            for client, burst in zip(clients, bursts, strict=True)
            for msg_id in burst
        ]
    finally:
        for client in clients:
            client.close()
    assert len(set(ids)) == 2 * BURST
    on_disk = tasks_on_disk(workspace)
    assert set(on_disk) == set(ids)
    titles = sorted(t["title"] for t in on_disk.values())
    assert titles == sorted(f"daemon{n} {i}" for n in range(2) for i in range(BURST))


def test_sigkill_mid_burst_keeps_every_acknowledged_write(workspace: Path) -> None:
    """The process that writes is killed (``--no-daemon``: on the default path a killed
    relay leaves its engine serving; tests/engine kill engines)."""
    client = WireClient(workspace, "--no-daemon")
    try:
        client.initialize()
        burst = send_burst(client, "burst", 300)
        acknowledged = [
            created_id(client.response(msg_id, timeout=WAIT_S)) for msg_id in burst[:20]
        ]
        client.proc.send_signal(signal.SIGKILL)
        assert client.proc.wait(timeout=WAIT_S) == -signal.SIGKILL
        # Responses the daemon wrote before it died are acknowledged writes too.
        for msg_id in burst[20:]:
            try:
                acknowledged.append(created_id(client.response(msg_id, timeout=WAIT_S)))
            except EOFError:
                break
    finally:
        client.close()
    assert len(acknowledged) < len(burst), "the daemon finished the burst before the kill"

    on_disk = tasks_on_disk(workspace)  # valid JSON, not a torn write
    assert set(acknowledged) <= set(on_disk)

    # A new daemon reads the same file and clears the temp file a killed write may leave.
    again = WireClient(workspace)
    try:
        again.initialize()
        listed = {t["id"] for t in again.call("tasks/list", {})["tasks"]}
        assert listed == set(on_disk)
        assert again.tool("task_create", title="after the crash")["isError"] is False
    finally:
        again.close()
    assert [p.name for p in workspace.iterdir() if p.name.endswith(".tmp")] == []
