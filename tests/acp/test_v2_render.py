"""The v2 rendering of a session's events (toold.acp.v2_client), event by event, each
update checked against the published v2 schema. What a process shows end to end is in
test_acp_v2.py; these are the shapes its turns do not all reach (diffs, plans, signals)."""

from __future__ import annotations

import base64
from typing import Any, cast

from acp import start_tool_call, update_agent_message_text, update_plan, update_tool_call
from acp.connection import Connection
from acp.helpers import update_available_commands, update_current_mode
from acp.schema import FileEditToolCallContent, UsageUpdate

from tests.acp.v2_wire import schema_errors
from toold.acp import v2
from toold.acp.updates import CommandEvent, commands, plan_entries
from toold.acp.v2_client import V2Client


def rendered(client: V2Client, event: Any) -> list[dict[str, Any]]:
    """The updates one event becomes, as JSON, each valid by the v2 schema."""
    updates = [v2.dump(u) for u in client.render("s1", event)]
    for update in updates:
        assert (
            schema_errors("UpdateSessionNotification", {"sessionId": "s1", "update": update}) == []
        )
    return updates


def client() -> V2Client:
    """A renderer (rendering sends nothing: no connection is used)."""
    return V2Client(cast(Connection, None))


def test_message_chunks_share_an_id_until_something_else_is_shown() -> None:
    renderer = client()
    first = rendered(renderer, update_agent_message_text("Hel"))
    second = rendered(renderer, update_agent_message_text("lo"))
    rendered(renderer, start_tool_call("c1", "Read a.txt", kind="read", status="pending"))
    third = rendered(renderer, update_agent_message_text("Done"))
    assert first[0]["messageId"] == second[0]["messageId"] != third[0]["messageId"]
    assert second[0] == {
        "sessionUpdate": "agent_message_chunk",
        "messageId": first[0]["messageId"],
        "content": {"type": "text", "text": "lo"},
    }


def test_a_tool_call_update_carries_only_what_changed_and_diffs_become_git_patches() -> None:
    renderer = client()
    (created,) = rendered(
        renderer, start_tool_call("c1", "Edit a.txt", kind="edit", status="pending")
    )
    assert created == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "title": "Edit a.txt",
        "kind": "edit",
        "status": "pending",
    }
    change = FileEditToolCallContent(
        type="diff", path="/w/a.txt", old_text="one\ntwo\n", new_text="one\n2\n"
    )
    added = FileEditToolCallContent(type="diff", path="/w/b.txt", old_text=None, new_text="new")
    (done,) = rendered(
        renderer, update_tool_call("c1", status="completed", content=[change, added])
    )
    assert set(done) == {"sessionUpdate", "toolCallId", "status", "content"}
    modified, new = done["content"]
    assert modified["changes"] == [{"operation": "modify", "path": "/w/a.txt", "fileType": "text"}]
    assert modified["patch"]["text"] == (
        "diff --git /w/a.txt /w/a.txt\n--- /w/a.txt\n+++ /w/a.txt\n"
        "@@ -1,2 +1,2 @@\n one\n-two\n+2\n"
    )
    assert new["changes"][0]["operation"] == "add"
    assert new["patch"]["text"].endswith(
        "--- /dev/null\n+++ /w/b.txt\n@@ -0,0 +1 @@\n+new\n\\ No newline at end of file\n"
    )


def test_a_quiet_command_gets_its_output_as_a_snapshot_and_a_killed_one_its_signal() -> None:
    renderer = client()
    end = update_tool_call("c1", status="completed")
    event = CommandEvent("c1", "true; ls", "/w", end, exited=True, exit_code=0, output="a\nb\n")
    ref, opened, exited, final = rendered(renderer, event)
    terminal_id = ref["content"][0]["terminalId"]
    assert opened == {
        "sessionUpdate": "terminal_update",
        "terminalId": terminal_id,
        "command": "true; ls",
        "cwd": "/w",
    }
    assert base64.b64decode(exited["output"]["data"]) == b"a\nb\n"
    assert exited["exitStatus"] == {"exitCode": 0}
    assert final["content"] == [{"type": "terminal", "terminalId": terminal_id}]
    printed = CommandEvent("c2", "sleep 9", "/w", update_tool_call("c2"), printed="z\n")
    chunk = rendered(renderer, printed)[-1]
    assert chunk["sessionUpdate"] == "terminal_output_chunk"
    killed = CommandEvent("c2", "sleep 9", "/w", end, exited=True, exit_code=-9)
    assert rendered(renderer, killed)[0]["exitStatus"] == {"exitCode": None, "signal": "SIGKILL"}


def test_plans_commands_modes_and_usage_in_their_v2_shapes() -> None:
    renderer = client()
    todos = [{"task": "write tests", "status": "in_progress", "priority": "high"}]
    (plan,) = rendered(renderer, update_plan(plan_entries(todos)))
    assert plan["plan"] == {
        "type": "items",
        "planId": "todos",
        "entries": [{"content": "write tests", "priority": "high", "status": "in_progress"}],
    }
    skills = [{"name": "debugging", "description": "Find the bug"}]
    (listed,) = rendered(renderer, update_available_commands(commands(skills)))
    assert listed["availableCommands"][0]["input"] == {
        "type": "text",
        "hint": "what to do with this skill",
    }
    (mode,) = rendered(renderer, update_current_mode("plan"))
    option = mode["configOptions"][0]
    assert (option["configId"], option["category"], option["currentValue"]) == (
        "mode",
        "mode",
        "plan",
    )
    usage = UsageUpdate(session_update="usage_update", used=19, size=200000)
    assert rendered(renderer, usage) == [
        {"sessionUpdate": "usage_update", "used": 19, "size": 200000}
    ]
