"""``toold acp`` driven by a foreign client: the TypeScript SDK from npm, run by node.

The SDK is installed by the fixture (``npm install``, cached in ~/.cache/toold/acp-node),
so the README's test command needs nothing more than node and npm on the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.acp.conftest import agent_env
from tests.agents.conftest import ModelServer, tool_results
from tests.environment import unavailable

SDK = "@agentclientprotocol/sdk"
SDK_VERSION = "2.4.0"
CLIENT = Path(__file__).with_name("node_client.mjs")
NOTES_SERVER = Path(__file__).with_name("notes_server.py")


@pytest.fixture(scope="module")
def node_client() -> Path:
    """The client script, next to an installed SDK (installed once, then cached)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        unavailable("node and npm are needed for the TypeScript ACP client")
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = home / "toold" / "acp-node"
    installed = folder / "node_modules" / SDK / "package.json"
    if not installed.exists() or json.loads(installed.read_text())["version"] != SDK_VERSION:
        folder.mkdir(parents=True, exist_ok=True)
        manifest = {"name": "toold-acp-node", "private": True, "type": "module"}
        (folder / "package.json").write_text(json.dumps(manifest), encoding="utf-8")
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", f"{SDK}@{SDK_VERSION}"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"npm install failed: {done.stderr[-2000:]}"
    script = folder / CLIENT.name
    script.write_bytes(CLIENT.read_bytes())  # ESM resolves the SDK from the script's folder
    return script


def drive(script: Path, workspace: Path, model: ModelServer, **plan: Any) -> dict[str, Any]:
    """Run the node client on ``plan``; its record of the session."""
    full = {
        "command": [sys.executable, "-m", "toold", "acp"],
        "cwd": str(workspace),
        "env": agent_env(model),
        "answers": [],
        **plan,
    }
    done = subprocess.run(
        ["node", str(script), json.dumps(full)],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    record: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return record


def of_kind(record: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [u for u in record["updates"] if u["sessionUpdate"] == kind]


def test_a_typescript_client_reads_and_edits_with_permissions(
    node_client: Path, model: ModelServer, workspace: Path
) -> None:
    (workspace / "notes.txt").write_text("alpha\n", encoding="utf-8")
    model.tool_use(("read_file", {"file_path": "notes.txt"}), text="Let me look.")
    model.tool_use(("write_file", {"file_path": "out.txt", "content": "alpha seen\n"}))
    model.tool_use(("write_file", {"file_path": "other.txt", "content": "no\n"}))
    model.text("Done: one file written, one refused.")
    record = drive(
        node_client,
        workspace,
        model,
        answers=["allow_once", "reject_once"],
        steps=[{"prompt": "look and write"}],
    )
    assert record["errors"] == []
    assert record["stops"] == ["end_turn"]
    assert record["initialize"]["protocolVersion"] == 1
    assert record["initialize"]["agentInfo"]["name"] == "toold"
    assert record["session"]["modes"]["currentModeId"] == "default"
    text = "".join(u["content"]["text"] for u in of_kind(record, "agent_message_chunk"))
    assert text == "Let me look.Done: one file written, one refused."
    calls = of_kind(record, "tool_call")
    assert [c["kind"] for c in calls] == ["read", "edit", "edit"]
    assert [p["toolCall"]["toolCallId"] for p in record["permissions"]] == [
        calls[1]["toolCallId"],
        calls[2]["toolCallId"],
    ]
    finals = {u["toolCallId"]: u for u in of_kind(record, "tool_call_update") if u.get("status")}
    assert finals[calls[0]["toolCallId"]]["status"] == "completed"
    written = finals[calls[1]["toolCallId"]]
    assert written["status"] == "completed"
    assert written["content"][0] == {
        "type": "diff",
        "path": str(workspace.resolve() / "out.txt"),
        "newText": "alpha seen\n",
    }
    assert finals[calls[2]["toolCallId"]]["status"] == "failed"
    assert (workspace / "out.txt").read_text(encoding="utf-8") == "alpha seen\n"
    assert not (workspace / "other.txt").exists()


def test_a_typescript_client_cancels_a_slow_command(
    node_client: Path, model: ModelServer, workspace: Path
) -> None:
    model.tool_use(("bash", {"command": "echo started; sleep 60"}))
    model.text("after the cancel")
    record = drive(
        node_client,
        workspace,
        model,
        steps=[
            {"setMode": "bypass"},
            {"prompt": "sleep", "cancelOn": "started"},
            {"prompt": "and now?"},
        ],
    )
    assert record["errors"] == []
    assert record["stops"] == ["cancelled", "end_turn"]
    call = of_kind(record, "tool_call")[0]
    assert call["kind"] == "execute"
    statuses = [u.get("status") for u in of_kind(record, "tool_call_update")]
    assert statuses[-1] == "failed"
    assert tool_results(model.wait_requests(2)[1])[0]["content"] == "Cancelled by the user."


def test_a_typescript_client_sees_the_plan_and_an_mcp_servers_tool(
    node_client: Path, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    model.tool_use(("todo_write", {"action": "add", "task": "Take a note"}))
    model.tool_use(("notes__add_note", {"text": "from node"}))
    model.tool_use(("todo_write", {"action": "update", "task_id": "t1", "status": "done"}))
    model.text("noted")
    server = {
        "name": "notes",
        "command": sys.executable,
        "args": [str(NOTES_SERVER)],
        "env": [{"name": "NOTES_FILE", "value": str(notes)}],
    }
    record = drive(
        node_client,
        workspace,
        model,
        answers=["allow_once"],
        mcpServers=[server],
        steps=[{"prompt": "plan and note"}],
    )
    assert record["errors"] == []
    assert record["stops"] == ["end_turn"]
    plans = [u["entries"] for u in of_kind(record, "plan")]
    assert plans == [
        [{"content": "Take a note", "priority": "medium", "status": "pending"}],
        [{"content": "Take a note", "priority": "medium", "status": "completed"}],
    ]
    assert [p["toolCall"]["title"] for p in record["permissions"]] == [
        "Notes: add note 'from node'"
    ]
    assert notes.read_text(encoding="utf-8") == "from node\n"
    assert tool_results(model.wait_requests(3)[2])[0]["content"] == "noted (1 notes)"
