"""ACP v2 (preview) behind ``toold acp --protocol 2`` (issue 25).

No SDK client speaks v2 here, so these tests drive toold with a raw JSON-RPC client over
stdio (tests/acp/v2_wire.py) against the scripted Messages API, and validate every
message toold sends against toold's v2 models and the published v2 JSON Schema
(tests/acp/data/). They run on the workspace's engine (the default path) and, where
said, with ``--no-daemon``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.acp.conftest import agent_env, run
from tests.acp.v2_wire import RawClient, decoded, v2_agent
from tests.agents.conftest import ModelServer

V2_INFO = {"name": "raw-v2", "title": "A raw v2 client", "version": "0.1"}


async def start(client: RawClient, workspace: Path) -> str:
    """initialize (v2) and session/new; the session id."""
    init = await client.request(
        "initialize", {"protocolVersion": 2, "info": V2_INFO, "capabilities": {}}
    )
    assert init["protocolVersion"] == 2
    session = await client.request("session/new", {"cwd": str(workspace)})
    return str(session["sessionId"])


def call_updates(client: RawClient, call_id: str) -> list[dict[str, Any]]:
    """The tool_call_updates of one call, in order."""
    return [u for u in client.updates("tool_call_update") if u["toolCallId"] == call_id]


@pytest.mark.parametrize("private", [False, True], ids=["engine", "no-daemon"])
def test_v2_is_negotiated_only_under_the_flag(workspace: Path, private: bool) -> None:
    env = agent_env(None, **({"TOOLD_NO_DAEMON": "1"} if private else {}))
    asked = {"protocolVersion": 2, "info": V2_INFO, "capabilities": {}}

    async def initialize(params: dict[str, Any], *args: str) -> dict[str, Any]:
        async with v2_agent(workspace, env, *args) as client:
            return await client.request("initialize", params)

    async def scenario() -> tuple[dict[str, Any], ...]:
        v1_asked = {"protocolVersion": 1, "clientCapabilities": {}}
        return await asyncio.gather(
            initialize(asked, "--protocol", "2"),
            initialize(asked),
            initialize(v1_asked, "--protocol", "2"),
        )

    v2_answer, refused, v1_answer = run(scenario)
    assert v2_answer["protocolVersion"] == 2
    assert v2_answer["info"]["name"] == "toold" and v2_answer["authMethods"] == []
    session = v2_answer["capabilities"]["session"]
    assert session["prompt"] == {"embeddedContext": {}}
    assert session["mcp"] == {"stdio": {}, "http": {}}
    # Without the flag a v2 client is answered v1 (it decides whether to go on), and a v1
    # client gets v1 with it: the same answer as before the preview.
    for answer in (refused, v1_answer):
        assert answer["protocolVersion"] == 1
        assert answer["agentCapabilities"]["loadSession"] is True
        assert "capabilities" not in answer


def test_a_turn_runs_bash_after_a_permission_and_ends_with_state_update(
    model: ModelServer, workspace: Path
) -> None:
    model.tool_use(("bash", {"command": "touch made.txt && echo made && echo twice"}))
    model.text("Made it.")

    async def scenario() -> tuple[RawClient, str, dict[str, Any]]:
        async with v2_agent(workspace, agent_env(model), "--protocol", "2") as client:
            session = await start(client, workspace)
            client.answers = ["allow_once"]
            prompt = [{"type": "text", "text": "make a file"}]
            ack = await client.request("session/prompt", {"sessionId": session, "prompt": prompt})
            await client.until(client.ended, "the turn's idle state_update")
        return client, session, ack

    client, session, ack = run(scenario)
    assert ack == {}  # the answer only acknowledges; the turn ends with a state_update
    assert (workspace / "made.txt").exists()
    kinds = [u["sessionUpdate"] for u in client.updates(session=session)]
    assert kinds[-1] == "state_update"
    assert client.states() == [
        ("running", None),
        ("requires_action", None),
        ("running", None),
        ("idle", "end_turn"),
    ]
    user = client.updates("user_message")
    assert user[0]["content"] == [{"type": "text", "text": "make a file"}]
    assert kinds.index("user_message") < kinds.index("state_update")

    # The permission request: v2's title and description, the call as its subject.
    (asked,) = client.requests("session/request_permission")
    assert asked["title"].startswith("Allow Run `touch made.txt")
    assert asked["description"].startswith("toold asks because:")
    call = asked["subject"]["toolCall"]
    assert asked["subject"]["type"] == "tool_call" and call["status"] == "pending"

    # One tool call, upserted by id: created pending, then in_progress, then completed.
    updates = call_updates(client, call["toolCallId"])
    assert updates[0]["title"] == call["title"] and updates[0]["kind"] == "execute"
    statuses = [u["status"] for u in updates if "status" in u]
    assert statuses == ["pending", "in_progress", "completed"]
    assert all("title" not in u for u in updates[1:])  # omitted: unchanged
    terminal_id = updates[-1]["content"][0]["terminalId"]
    assert updates[-1]["content"] == [{"type": "terminal", "terminalId": terminal_id}]

    # Its output: a display terminal (command, cwd, output bytes, exit status).
    terminals = [u for u in client.updates("terminal_update") if u["terminalId"] == terminal_id]
    assert terminals[0]["command"].startswith("touch made.txt")
    assert terminals[0]["cwd"] == str(workspace)
    assert terminals[-1]["exitStatus"] == {"exitCode": 0}
    chunks = [
        decoded(u["data"])
        for u in client.updates("terminal_output_chunk")
        if u["terminalId"] == terminal_id
    ]
    # Streamed as it ran (a line at a time), so no snapshot replaces it at the end.
    assert b"".join(chunks) == b"made\ntwice\n"
    assert all("output" not in u for u in terminals)

    # The model's text is one message: its chunks share one messageId.
    text = client.updates("agent_message_chunk")
    assert "".join(u["content"]["text"] for u in text) == "Made it."
    assert len({u["messageId"] for u in text}) == 1
    assert text[0]["messageId"] != user[0]["messageId"]


def test_a_client_that_answers_a_question_with_an_error_is_denied_and_the_turn_goes_on(
    model: ModelServer, workspace: Path
) -> None:
    """A JSON-RPC error for session/request_permission is no approval: the call is refused,
    the state leaves requires_action at once, and the turn ends as usual. The client's
    info carries no version (read leniently: toold needs only the name)."""
    model.tool_use(("bash", {"command": "touch made.txt"}))
    model.text("Could not.")

    async def scenario() -> RawClient:
        async with v2_agent(workspace, agent_env(model), "--protocol", "2") as client:
            init = await client.request(
                "initialize", {"protocolVersion": 2, "info": {"name": "bare"}, "capabilities": {}}
            )
            assert init["protocolVersion"] == 2
            session = (await client.request("session/new", {"cwd": str(workspace)}))["sessionId"]
            client.answers = ["error"]
            prompt = [{"type": "text", "text": "make a file"}]
            await client.request("session/prompt", {"sessionId": session, "prompt": prompt})
            await client.until(client.ended, "the turn's idle state_update")
        return client

    client = run(scenario)
    assert not (workspace / "made.txt").exists()
    assert client.states() == [
        ("running", None),
        ("requires_action", None),
        ("running", None),
        ("idle", "end_turn"),
    ]
    statuses = [u["status"] for u in client.updates("tool_call_update") if "status" in u]
    assert statuses[-1] == "failed"


def test_cancel_ends_the_turn_with_stop_reason_cancelled_without_a_daemon(
    model: ModelServer, workspace: Path
) -> None:
    (workspace / "toold.toml").write_text('[execution]\ntool_runner = "local"\n')
    model.tool_use(("bash", {"command": "echo started; sleep 60"}))
    model.text("Still here.")
    env = agent_env(model, TOOLD_NO_DAEMON="1")

    async def scenario() -> tuple[RawClient, str, dict[str, Any]]:
        async with v2_agent(workspace, env, "--protocol", "2") as client:
            session = await start(client, workspace)
            mode = {"sessionId": session, "configId": "mode", "type": "id", "value": "bypass"}
            options = await client.request("session/set_config_option", mode)
            prompt = [{"type": "text", "text": "sleep"}]
            await client.request("session/prompt", {"sessionId": session, "prompt": prompt})
            await client.until(
                lambda: any(
                    b"started" in decoded(u["data"])
                    for u in client.updates("terminal_output_chunk")
                ),
                "the command's first output",
            )
            await client.notify("session/cancel", {"sessionId": session})
            await client.until(client.ended, "the cancelled turn's idle state_update")
        return client, session, options

    client, _, options = run(scenario)
    assert options["configOptions"][0]["currentValue"] == "bypass"
    changed = client.updates("config_option_update")
    assert changed[-1]["configOptions"][0]["currentValue"] == "bypass"
    assert client.states()[-1] == ("idle", "cancelled")
    (call_id,) = {u["toolCallId"] for u in client.updates("tool_call_update")}
    statuses = [u["status"] for u in call_updates(client, call_id) if "status" in u]
    assert statuses == ["pending", "cancelled"]  # bypass: it ran unasked; v1 says failed
    terminal = [u for u in client.updates("terminal_update") if "exitStatus" in u]
    assert len(terminal) == 1  # the terminal is told its command ended
    assert client.requests("session/request_permission") == []  # bypass: nothing asked


def test_sessions_are_listed_closed_and_resumed_with_or_without_a_replay(
    model: ModelServer, workspace: Path
) -> None:
    model.text("Blue, noted.")
    model.text("It was blue.")

    async def scenario() -> tuple[RawClient, RawClient, str, dict[str, Any], dict[str, Any]]:
        env = agent_env(model)
        async with v2_agent(workspace, env, "--protocol", "2") as first:
            session = await start(first, workspace)
            prompt = [{"type": "text", "text": "remember blue"}]
            await first.request("session/prompt", {"sessionId": session, "prompt": prompt})
            await first.until(first.ended, "the first turn's end")
            await first.request("session/close", {"sessionId": session})
            gone = await first.call("session/prompt", {"sessionId": session, "prompt": prompt})
            listed = await first.request("session/list", {"cwd": str(workspace)})
            replay = {"sessionId": session, "cwd": str(workspace), "replayFrom": {"type": "start"}}
            await first.request("session/resume", replay)
        async with v2_agent(workspace, env, "--protocol", "2") as later:
            await later.request(
                "initialize", {"protocolVersion": 2, "info": V2_INFO, "capabilities": {}}
            )
            await later.request("session/resume", {"sessionId": session, "cwd": str(workspace)})
            again = [{"type": "text", "text": "which colour?"}]
            await later.request("session/prompt", {"sessionId": session, "prompt": again})
            await later.until(later.ended, "the resumed turn's end")
            # Nothing scripted: the model fails after the prompt was accepted.
            await later.request("session/prompt", {"sessionId": session, "prompt": again})
            await later.until(lambda: len(later.states()) == 5, "the failed turn's end")
        return first, later, session, gone, listed

    first, later, session, gone, listed = run(scenario)
    assert "create one with session/new" in gone["error"]["message"]
    assert [s["sessionId"] for s in listed["sessions"]] == [session]
    assert listed["sessions"][0]["title"].startswith("remember blue")
    # replayFrom start: the conversation again as messages (with ids), then idle.
    kinds = [u["sessionUpdate"] for u in first.updates()]
    replayed = kinds[kinds.index("user_message_chunk") :]
    assert replayed[:2] == ["user_message_chunk", "agent_message_chunk"]
    assert replayed[-1] == "state_update"
    (said,) = first.updates("user_message_chunk")
    assert said["content"]["text"] == "remember blue" and said["messageId"]
    assert first.updates("state_update")[-1] == {"sessionUpdate": "state_update", "state": "idle"}
    # Without replayFrom: no replay, the state, and the next prompt goes on from it.
    assert later.updates("user_message_chunk") == []
    assert later.states() == [
        ("idle", None),
        ("running", None),
        ("idle", "end_turn"),
        ("running", None),
        ("idle", "end_turn"),
    ]
    (failed,) = later.updates("agent_message")  # why the last turn ended without an answer
    assert failed["content"][0]["text"].startswith("toold: the model could not answer")
    assert "remember blue" in str(model.wait_requests(2)[1]["messages"])
