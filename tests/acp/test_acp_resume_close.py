"""ACP v1's ``session/close`` and ``session/resume`` (issue 25), on the ACP Python SDK's
client, through the engine (the default path)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp.schema import ClientCapabilities

from tests.acp.conftest import Recorder, acp_agent, agent_env, run
from tests.agents.conftest import ModelServer


def test_a_closed_session_is_gone_and_resumes_in_another_process_without_a_replay(
    model: ModelServer, workspace: Path, recorder: Recorder
) -> None:
    model.text("First answer.")
    model.text("Second answer.")
    later = Recorder()

    async def scenario() -> tuple[Any, str, Any, str]:
        env = agent_env(model)
        async with acp_agent(workspace, env, recorder) as conn:
            init = await conn.initialize(
                protocol_version=1, client_capabilities=ClientCapabilities()
            )
            session = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
            await conn.prompt(session_id=session, prompt=[text_block("remember blue")])
            await conn.close_session(session_id=session)
            with pytest.raises(RequestError) as closed:
                await conn.prompt(session_id=session, prompt=[text_block("again")])
        async with acp_agent(workspace, env, later) as conn:
            await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
            resumed = await conn.resume_session(
                session_id=session, cwd=str(workspace), mcp_servers=[]
            )
            reply = await conn.prompt(session_id=session, prompt=[text_block("which colour?")])
        return init.agent_capabilities.session_capabilities, str(closed.value), resumed, reply

    capabilities, closed, resumed, reply = run(scenario)
    assert capabilities.close is not None and capabilities.resume is not None
    assert "create one with session/new" in closed
    assert resumed.modes.current_mode_id == "default"
    assert reply.stop_reason == "end_turn"
    # No replay: the client already shows the conversation; the model gets all of it.
    assert later.updates("user_message_chunk") == []
    assert later.text() == "Second answer."
    second = model.wait_requests(2)[1]
    assert "remember blue" in str(second["messages"][0])
    assert "which colour?" in str(second["messages"][-1])
