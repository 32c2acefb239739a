"""ACP v1's subagent child sessions (issue 25), on the ACP Python SDK's client, through the
engine: a client that declares ``clientCapabilities.subagents`` sees a ``subagent`` call's
work under a child session of its own (one that does not sees the call only, as before:
test_acp_usage).

The SDK (0.12) has no model of ``clientCapabilities.subagents`` nor of ``subagent_update``:
the client sends its initialize through the SDK's connection as JSON, and the recorder
keeps every message as it arrived.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from acp import text_block
from acp.client.connection import ClientSideConnection
from acp.schema import PromptResponse

from tests.acp.conftest import Recorder, acp_agent, agent_env, run
from tests.acp.scripts import child_announced, child_idle, script
from tests.agents.conftest import ModelServer


async def initialize(conn: ClientSideConnection, subagents: bool) -> None:
    """initialize as JSON (the SDK's models drop ``subagents``)."""
    capabilities: dict[str, Any] = {"fs": {"readTextFile": False, "writeTextFile": False}}
    if subagents:
        capabilities["subagents"] = {}
    params = {"protocolVersion": 1, "clientCapabilities": capabilities}
    await conn._conn.send_request("initialize", params)


def updates_by_session(recorder: Recorder) -> list[tuple[str, dict[str, Any]]]:
    """Every session/update as (its sessionId, its update), in the order received."""
    return [
        (m["params"]["sessionId"], m["params"]["update"])
        for m in recorder.received
        if m.get("method") == "session/update"
    ]


def prompt_through(
    workspace: Path, model: ModelServer, recorder: Recorder, subagents: bool
) -> tuple[str, PromptResponse]:
    recorder.answers = ["allow_once", "allow_once"]  # the subagent call, then its write

    async def scenario() -> tuple[str, PromptResponse]:
        async with acp_agent(workspace, agent_env(model), recorder) as conn:
            await initialize(conn, subagents)
            session = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
            reply = await conn.prompt(session_id=session, prompt=[text_block("delegate it")])
            return session, reply

    return run(scenario)


def test_a_subagent_works_in_a_child_session_announced_on_its_parent(
    model: ModelServer, workspace: Path, recorder: Recorder
) -> None:
    script(model)
    parent, reply = prompt_through(workspace, model, recorder, subagents=True)
    assert reply.stop_reason == "end_turn"
    assert (workspace / "out.txt").read_text() == "42\n"
    seen = updates_by_session(recorder)
    announced = [u for s, u in seen if s == parent and u["sessionUpdate"] == "subagent_update"]
    assert len(announced) == 2
    child = announced[0]["sessionId"]
    assert child != parent
    call = next(u for s, u in seen if u["sessionUpdate"] == "tool_call")
    assert call["title"].startswith("Subagent") and call["toolCallId"] == "toolu_0001"
    assert announced == [child_announced(child), child_idle(child)]
    # Announced before anything of the child's, idle after the last of it.
    positions = [i for i, (s, _) in enumerate(seen) if s == child]
    first = seen.index((parent, announced[0]))
    last = seen.index((parent, announced[1]))
    assert positions and first < positions[0] and positions[-1] < last
    # The subagent's text and its write are the child's, not the parent's.
    of_child = [u for s, u in seen if s == child]
    text = "".join(
        u["content"]["text"] for u in of_child if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert text == "Writing.Wrote it."
    write = [u for u in of_child if u.get("toolCallId") == "toolu_0003"]
    assert write[0]["sessionUpdate"] == "tool_call" and write[0]["kind"] == "edit"
    assert write[-1]["status"] == "completed"
    assert write[-1]["content"][0]["type"] == "diff"
    of_parent = [u for s, u in seen if s == parent]
    assert all(u.get("toolCallId") != "toolu_0003" for u in of_parent)
    # The question about the subagent's write is asked in the child session.
    delegate, asked = recorder.requests("session/request_permission")
    assert delegate["sessionId"] == parent and delegate["toolCall"]["toolCallId"] == "toolu_0001"
    assert asked["sessionId"] == child and asked["toolCall"]["toolCallId"] == "toolu_0003"
    # usage_update is the parent's context; its sums count the subagent's responses.
    usage = [u for s, u in seen if u["sessionUpdate"] == "usage_update"]
    assert [s for s, u in seen if u["sessionUpdate"] == "usage_update"] == [parent, parent]
    assert [u["used"] for u in usage] == [12 + 7, 12 + 7]
    assert usage[-1]["_meta"]["toold"]["totalTokens"] == 4 * (12 + 7)


def test_cancelling_the_parent_ends_the_child_session_and_its_open_call(
    model: ModelServer, workspace: Path, recorder: Recorder
) -> None:
    script(model)
    recorder.answers = ["allow_once", "never"]  # the subagent's write is never answered

    async def scenario() -> tuple[str, PromptResponse]:
        async with acp_agent(workspace, agent_env(model), recorder) as conn:
            await initialize(conn, subagents=True)
            session = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
            turn = asyncio.ensure_future(
                conn.prompt(session_id=session, prompt=[text_block("delegate it")])
            )
            await recorder.until(
                lambda: len(recorder.requests("session/request_permission")) == 2,
                "the subagent's question",
            )
            await conn.cancel(session_id=session)
            return session, await turn

    parent, reply = run(scenario)
    assert reply.stop_reason == "cancelled"
    assert not (workspace / "out.txt").exists()
    seen = updates_by_session(recorder)
    announced = [u for s, u in seen if s == parent and u["sessionUpdate"] == "subagent_update"]
    child = announced[0]["sessionId"]
    assert announced[-1] == {
        "sessionUpdate": "subagent_update",
        "sessionId": child,
        "state": {"state": "idle"},
    }
    write = [u for s, u in seen if s == child and u.get("toolCallId") == "toolu_0003"]
    assert write[-1]["status"] == "failed"
    assert write[-1]["content"][0]["content"]["text"] == "Cancelled by the user."
