"""``toold acp`` driven by a foreign client: the TypeScript SDK from npm, run by node
(tests/acp/node_sdk.py installs it): permissions, cancel, the plan and a client's MCP server.
test_acp_node_v1.py has ACP v1's newer surface on the same client."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.acp.node_sdk import drive, of_kind
from tests.acp.node_sdk import node_client as node_client  # the fixture
from tests.agents.conftest import ModelServer, tool_results

NOTES_SERVER = Path(__file__).with_name("notes_server.py")


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
