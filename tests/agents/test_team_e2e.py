"""A team round trip between two editors of one workspace, on the default path: both
attach to the workspace's one engine.

Editor B spawns the teammate; editor A registers it, sees it running, sends it a request
and gets the reply, which also reaches A's editor as team/message. When B's session ends
its teammate stops with it (tests/engine/test_team_sessions.py: mid-turn, and its
background subagents). The teammate's model is the scripted Messages API server on
127.0.0.1, reached through the real SDK.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agents.conftest import API_KEY, ModelServer, tool_results
from tests.e2e.wire import WireClient
from tests.waiting import wait_until


@pytest.fixture
def daemons(tmp_path: Path, model: ModelServer) -> Iterator[tuple[WireClient, WireClient]]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env |= {"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": model.url}
    pair = (WireClient(workspace, env=env), WireClient(workspace, env=env))
    for client in pair:
        client.initialize(rootUri=workspace.as_uri())
    yield pair
    for client in pair:
        client.close()


def test_team_round_trip_between_two_editors(
    daemons: tuple[WireClient, WireClient], model: ModelServer
) -> None:
    a, b = daemons
    registered = a.call(
        "team/register", {"name": "alice", "role": "reviewer", "systemPrompt": "Be brief."}
    )
    assert registered == {
        "name": "alice",
        "role": "reviewer",
        "systemPrompt": "Be brief.",
        "providerConfig": {},
        "running": False,
    }
    spawn = {"name": "team_spawn", "arguments": {"name": "alice"}, "origin": "user"}
    assert b.call("tools/call", spawn)["content"] == "Spawned teammate alice (reviewer)"
    assert b.call("tools/call", spawn)["content"] == "Teammate alice is already running."
    listed = a.tool("team_list")["content"]
    assert [(t["name"], t["running"]) for t in listed] == [("alice", True)]

    model.text("LGTM from alice")
    sent = a.tool("team_send", to_agent="alice", content="please review src/")
    assert sent == {"content": "Reply from alice: LGTM from alice", "isError": False}
    request = model.wait_requests(1)[0]
    assert request["messages"][0] == {"role": "user", "content": "please review src/"}
    assert "teammate alice" in str(request["system"]) and "Be brief." in str(request["system"])
    tools = {t["name"] for t in request["tools"]}
    assert "team_send" in tools and "team_spawn" not in tools and "team_register" not in tools

    note = a.notification("team/message")["params"]["message"]
    assert note["from"] == "alice" and note["to"] == "main"
    assert note["type"] == "response" and note["content"] == "LGTM from alice"
    assert len(note["id"]) == 12 and note["inReplyTo"]

    assert b.close() == 0  # the teammate stops with B's session and releases its lock
    wait_until(lambda: not a.tool("team_list")["content"][0]["running"], "alice to stop", 20)
    assert a.tool("team_send", to_agent="alice", content="x")["content"] == (
        "Teammate alice is not running. Start it with team_spawn first."
    )


def test_unknown_teammate_is_an_error(daemons: tuple[WireClient, WireClient]) -> None:
    a, _ = daemons
    result = a.tool("team_send", to_agent="nobody", content="hi")
    assert result == {"content": "Error: ValueError: Unknown teammate: nobody", "isError": True}


def test_a_teammate_starts_a_conversation(
    daemons: tuple[WireClient, WireClient], model: ModelServer, tmp_path: Path
) -> None:
    """alice tells main something on her own, asks bob, and answers with bob's reply."""
    a, _ = daemons
    for name in ("alice", "bob"):
        a.call("team/register", {"name": name, "role": "dev"})
        spawn = {"name": "team_spawn", "arguments": {"name": name}, "origin": "user"}
        assert a.call("tools/call", spawn)["isError"] is False
    model.tool_use(("team_send", {"to_agent": "main", "content": "heads-up: starting"}))
    model.tool_use(("team_send", {"to_agent": "bob", "content": "is src/ tested?"}))
    model.text("yes, by bob")  # bob's turn
    model.text("bob says: yes, by bob")  # alice's last turn

    sent = a.tool("team_send", to_agent="alice", content="ask bob about tests")
    assert sent == {"content": "Reply from alice: bob says: yes, by bob", "isError": False}

    first, second, bobs, last = model.wait_requests(4)
    assert "team_send" in {t["name"] for t in first["tools"]}
    [to_main] = tool_results(second)
    assert (
        to_main["content"] == "Sent to main: the user sees it in the editor (no reply is awaited)."
    )
    assert "is_error" not in to_main
    assert bobs["messages"][0] == {"role": "user", "content": "is src/ tested?"}
    assert "teammate bob" in str(bobs["system"])
    [from_bob] = tool_results(last)
    assert from_bob["content"] == "Reply from bob: yes, by bob"

    # The editor sees alice's own message, then her reply, as team/message.
    heads_up = a.notification("team/message")["params"]["message"]
    assert (heads_up["from"], heads_up["to"], heads_up["type"]) == ("alice", "main", "message")
    assert heads_up["content"] == "heads-up: starting" and "inReplyTo" not in heads_up
    reply = a.notification("team/message")["params"]["message"]
    assert (reply["from"], reply["type"], reply["content"]) == (
        "alice",
        "response",
        "bob says: yes, by bob",
    )
    # bob's answer went to alice's mailbox, not to main.
    mailbox = (tmp_path / "ws" / ".toold" / "mailboxes" / "alice.jsonl").read_text()
    assert '"from": "bob"' in mailbox and '"inReplyTo"' in mailbox


def test_main_cannot_message_itself(daemons: tuple[WireClient, WireClient]) -> None:
    a, _ = daemons
    result = a.tool("team_send", to_agent="main", content="hi")
    assert result == {
        "content": "main cannot message itself; name another agent in to_agent.",
        "isError": True,
    }
