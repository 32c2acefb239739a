"""Handler logic through the in-process daemon: tools/list, tools/call, todos, unknown methods.

Moved from tests/e2e (test_tools_wire, test_state, test_bad_input): the daemon under
test is the same ``create_server`` and framing transport, asserted on the same raw
wire JSON, without a process start per test.
"""

from __future__ import annotations

from pathlib import Path

from tests.inprocess.client import InProcessClient

BASE = ["bash", "read_file", "write_file", "edit_file", "glob", "grep"]


def still_serving(client: InProcessClient) -> None:
    assert client.tool("read_file", file_path="src/main.py")["content"] == "1: print('needle')"


def test_tools_list_native_by_default(client: InProcessClient) -> None:
    tools = client.call("tools/list", {})["tools"]
    names = [t["name"] for t in tools]
    assert names[:6] == BASE
    assert len(names) >= 18
    read = next(t for t in tools if t["name"] == "read_file")
    assert set(read) == {
        "name",
        "description",
        "parameters",
        "deferred",
        "aliases",
        "parallelSafe",
        "effectTags",
        "annotations",
    }
    assert read["annotations"]["readOnlyHint"] is True
    assert read["annotations"]["confirm"] == "never"
    assert read["parameters"]["type"] == "object"
    assert read["parameters"]["required"] == ["file_path"]
    assert "file_read" in read["aliases"]
    assert read["deferred"] is False
    todo = next(t for t in tools if t["name"] == "todo_write")
    assert todo["deferred"] is True
    edit = next(t for t in tools if t["name"] == "edit_file")
    assert edit["effectTags"] == ["filesystem:write"]
    assert edit["parallelSafe"] is False
    assert edit["annotations"]["confirm"] == "always"
    assert edit["annotations"]["writesPath"] is True


def test_tools_list_anthropic_and_openai(client: InProcessClient) -> None:
    anthropic = client.call("tools/list", {"format": "anthropic"})["tools"]
    assert all(set(t) == {"name", "description", "input_schema"} for t in anthropic)
    openai = client.call("tools/list", {"format": "openai"})["tools"]
    assert all(t["type"] == "function" for t in openai)
    assert all(set(t["function"]) == {"name", "description", "parameters"} for t in openai)
    assert [t["name"] for t in anthropic] == [t["function"]["name"] for t in openai]


def test_tools_list_rejects_unknown_format(client: InProcessClient) -> None:
    reply = client.response(client.request("tools/list", {"format": "yaml"}))
    assert reply["error"]["code"] == -32602
    assert "format" in reply["error"]["message"]


def test_call_success_and_alias(client: InProcessClient, workspace: Path) -> None:
    wrote = client.tool("write_file", file_path="notes/a.txt", content="alpha\nbeta\n")
    assert wrote == {"content": "Wrote 11 characters to notes/a.txt", "isError": False}
    via_alias = client.call(
        "tools/call", {"name": "file_read", "arguments": {"file_path": "notes/a.txt"}}
    )
    assert via_alias == {"content": "1: alpha\n2: beta", "isError": False}
    assert client.tool("glob", pattern="*.txt")["content"] == ["notes/a.txt", "src/helper.txt"]


def test_unknown_tool_is_invalid_params(client: InProcessClient) -> None:
    reply = client.response(client.request("tools/call", {"name": "nope", "arguments": {}}))
    assert reply["error"] == {"code": -32602, "message": "Unknown tool: nope"}


def test_bad_arguments_name_each_field(client: InProcessClient) -> None:
    result = client.tool("read_file", offset="x", extra=1)
    assert result["isError"] is True
    text = result["content"]
    assert "file_path: Field required" in text
    assert "offset:" in text
    assert "extra: unexpected argument" in text


def test_handler_exception_becomes_error_text(client: InProcessClient) -> None:
    result = client.tool("edit_file", file_path="src/main.py", old_text="absent", new_text="x")
    assert result == {"content": "Error: ValueError: old_text not found in file", "isError": True}
    escape = client.tool("read_file", file_path="../outside")
    assert escape["isError"] is True
    assert escape["content"].startswith("Error: PermissionError: Path '../outside' escapes")


def test_todo_write_pushes_todos_changed(client: InProcessClient) -> None:
    added = client.tool("todo_write", action="add", task="Create planner")
    assert added == {"content": "Added TODO t1 [normal]: Create planner", "isError": False}
    assert client.notification("todos/changed")["params"] == {
        "todos": [{"id": "t1", "task": "Create planner", "status": "pending", "priority": "normal"}]
    }
    bad = client.tool("todo_write", action="update", task_id="t7", status="done")
    assert bad == {"content": "Error: ValueError: Unknown TODO id: t7", "isError": True}
    client.tool("todo_write", action="update", task_id="t1", status="done")
    assert client.notification("todos/changed")["params"]["todos"][0]["status"] == "done"
    assert client.call("todos/list", {})["todos"][0]["status"] == "done"


def test_unknown_method_and_notification(client: InProcessClient) -> None:
    reply = client.response(client.request("tools/frobnicate", {}))
    assert reply["error"]["code"] == -32601
    client.notify("tools/frobnicated", {})  # unknown notifications are ignored
    still_serving(client)


def test_params_must_be_an_object(client: InProcessClient) -> None:
    reply = client.response(client.request("tools/call", ["read_file"]))
    assert reply["error"]["code"] == -32602
    assert "object" in reply["error"]["message"]
    missing = client.response(client.request("tools/call", {"arguments": {}}))
    assert missing["error"]["code"] == -32602
    assert "name" in missing["error"]["message"]
