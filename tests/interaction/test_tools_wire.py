"""tools/list and tools/call on the wire, in process: each format's shape, aliases, errors
as results or as JSON-RPC errors, bash's exit code, progress, cancellation, a free loop.

Moved from tests/e2e and tests/inprocess: the same raw wire JSON through the daemon's own
session and transport (lsp_front.py), without a process start per test.
"""

from __future__ import annotations

import re

import pytest

from tests.interaction.lsp_front import InProcessDaemon
from tests.processes import process_alive, wait_gone

BASE = ["bash", "read_file", "write_file", "edit_file", "glob", "grep"]


def test_tools_list_native_by_default(client: InProcessDaemon) -> None:
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


def test_tools_list_anthropic_and_openai(client: InProcessDaemon) -> None:
    anthropic = client.call("tools/list", {"format": "anthropic"})["tools"]
    assert all(set(t) == {"name", "description", "input_schema"} for t in anthropic)
    openai = client.call("tools/list", {"format": "openai"})["tools"]
    assert all(t["type"] == "function" for t in openai)
    assert all(set(t["function"]) == {"name", "description", "parameters"} for t in openai)
    assert [t["name"] for t in anthropic] == [t["function"]["name"] for t in openai]


def test_tools_list_rejects_unknown_format(client: InProcessDaemon) -> None:
    reply = client.response(client.request("tools/list", {"format": "yaml"}))
    assert reply["error"]["code"] == -32602
    assert "format" in reply["error"]["message"]


def test_call_success_and_alias(client: InProcessDaemon) -> None:
    wrote = client.tool("write_file", file_path="notes/a.txt", content="alpha\nbeta\n")
    assert wrote == {"content": "Wrote 11 characters to notes/a.txt", "isError": False}
    via_alias = client.call(
        "tools/call", {"name": "file_read", "arguments": {"file_path": "notes/a.txt"}}
    )
    assert via_alias == {"content": "1: alpha\n2: beta", "isError": False}
    assert client.tool("glob", pattern="*.txt")["content"] == ["notes/a.txt", "src/helper.txt"]


def test_unknown_tool_is_invalid_params(client: InProcessDaemon) -> None:
    reply = client.response(client.request("tools/call", {"name": "nope", "arguments": {}}))
    assert reply["error"] == {"code": -32602, "message": "Unknown tool: nope"}


def test_bad_arguments_name_each_field(client: InProcessDaemon) -> None:
    result = client.tool("read_file", offset="x", extra=1)
    assert result["isError"] is True
    text = result["content"]
    assert "file_path: Field required" in text
    assert "offset:" in text
    assert "extra: unexpected argument" in text


def test_handler_exception_becomes_error_text(client: InProcessDaemon) -> None:
    result = client.tool("edit_file", file_path="src/main.py", old_text="absent", new_text="x")
    assert result == {"content": "Error: ValueError: old_text not found in file", "isError": True}
    escape = client.tool("read_file", file_path="../outside")
    assert escape["isError"] is True
    assert escape["content"].startswith("Error: PermissionError: Path '../outside' escapes")


def test_bash_reports_exit_code(client: InProcessDaemon) -> None:
    result = client.tool("bash", command="echo out; echo err >&2; exit 3")
    assert result == {
        "content": "Command failed with exit code 3\nout\nerr",
        "isError": False,
        "exitCode": 3,
    }
    assert client.tool("bash", command="true") == {"content": "", "isError": False, "exitCode": 0}


def test_progress_streams_bash_output(client: InProcessDaemon) -> None:
    msg_id = client.request(
        "tools/call",
        {
            "name": "bash",
            "arguments": {"command": "echo first; echo second"},
            "origin": "user",
            "workDoneToken": "tok-1",
        },
    )
    reply = client.response(msg_id)
    assert reply["result"]["content"] == "first\nsecond"
    progress = []
    while True:
        note = client.notification("$/progress", timeout=5)
        assert note["params"]["token"] == "tok-1"
        progress.append(note["params"]["value"])
        if note["params"]["value"]["kind"] == "end":
            break
    assert progress[0] == {"kind": "begin", "title": "bash", "cancellable": True}
    reported = "\n".join(v["message"] for v in progress if v["kind"] == "report")
    assert "first" in reported and "second" in reported
    assert progress[-1] == {"kind": "end", "message": "done"}


@pytest.mark.parametrize("how", ["$/cancelRequest", "window/workDoneProgress/cancel"])
def test_cancel_kills_the_whole_process_group(local_client: InProcessDaemon, how: str) -> None:
    client = local_client  # the child's pid ($!) is the host's outside a PID namespace
    msg_id = client.request(
        "tools/call",
        {
            "name": "bash",
            "arguments": {"command": "sleep 300 & echo child=$!; sleep 300", "timeout": 600},
            "origin": "user",
            "workDoneToken": "cancel-me",
        },
    )
    child = None
    while child is None:
        note = client.notification("$/progress")
        found = re.search(r"child=(\d+)", note["params"]["value"].get("message", ""))
        child = int(found.group(1)) if found else None
    assert process_alive(child)
    if how == "$/cancelRequest":
        client.notify(how, {"id": msg_id})
    else:  # the cancel button of the editor's progress notification
        client.notify(how, {"token": "cancel-me"})
    reply = client.response(msg_id)
    assert reply["error"]["code"] == -32800
    end = client.notification("$/progress")["params"]
    assert end == {"token": "cancel-me", "value": {"kind": "end", "message": "cancelled"}}
    wait_gone(child, "the background child", 20.0)


def test_event_loop_stays_free_during_a_long_call(client: InProcessDaemon) -> None:
    slow = client.request(
        "tools/call",
        {
            "name": "bash",
            "arguments": {"command": "echo started; sleep 10"},
            "origin": "user",
            "workDoneToken": "slow",
        },
    )
    client.next_message(
        lambda m: m.get("method") == "$/progress" and m["params"]["value"].get("kind") == "report"
    )
    fast = client.request(
        "tools/call", {"name": "read_file", "arguments": {"file_path": "src/main.py"}}
    )
    first = client.next_message(lambda m: "method" not in m and m.get("id") in (slow, fast))
    assert first["id"] == fast, "read_file waited for the running bash call"
    assert first["result"]["content"] == "1: print('needle')"
    client.notify("$/cancelRequest", {"id": slow})
    assert client.response(slow)["error"]["code"] == -32800


@pytest.mark.parametrize("token", [7, "str-token"])
def test_progress_token_types(client: InProcessDaemon, token: object) -> None:
    reply = client.response(
        client.request(
            "tools/call",
            {"name": "glob", "arguments": {"pattern": "*.py"}, "workDoneToken": token},
        )
    )
    assert reply["result"]["content"] == ["src/main.py"]
    begin = client.notification("$/progress")
    assert begin["params"] == {
        "token": token,
        "value": {"kind": "begin", "title": "glob", "cancellable": True},
    }
