"""ACP v1's ``usage_update`` (issue 25), on the ACP Python SDK's client, through the engine,
against a Messages API that reports known token counts: ``used`` and ``size``, and the
session's sums in ``_meta.toold``.

The client declares no ``subagents`` capability: the subagent's responses count in the
sums, but it gets no child session (test_acp_subagents has the one that does)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp import text_block
from acp.schema import PromptResponse

from tests.acp.conftest import Recorder, acp_agent, agent_env, run, start_session
from tests.acp.scripts import MeteredModel, update


def test_each_response_of_the_session_sends_usage_update_with_the_sessions_sums(
    metered: MeteredModel, workspace: Path, recorder: Recorder
) -> None:
    """Four responses in the first turn: the main agent's two and, between them, an
    explore subagent's two (it reads a file)."""
    first = {
        "input_tokens": 100,
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 50,
    }
    second = {"input_tokens": 300, "cache_read_input_tokens": 1100}
    third = {"input_tokens": 20}
    sub_first, sub_second = {"input_tokens": 60}, {"input_tokens": 80}
    metered.usages.extend([first, sub_first, sub_second, second, third])
    metered.tool_use(("subagent", {"task": "Read src/helper.txt", "agent_type": "explore"}))
    metered.tool_use(("read_file", {"file_path": "src/helper.txt"}))
    metered.text("It holds a needle.")
    metered.text("The helper holds a needle.")
    metered.text("Still a needle.")
    recorder.answers = ["allow_once"]  # the subagent call (its reads ask nothing)

    async def scenario() -> tuple[PromptResponse, list[dict[str, Any]], PromptResponse]:
        async with acp_agent(workspace, agent_env(metered), recorder) as conn:
            session = await start_session(conn, workspace)
            reply = await conn.prompt(session_id=session, prompt=[text_block("what is there?")])
            seen = recorder.updates("usage_update")
            again = await conn.prompt(session_id=session, prompt=[text_block("and now?")])
            return reply, seen, again

    reply, seen, again = run(scenario)
    assert reply.stop_reason == again.stop_reason == "end_turn"
    # One usage_update per response of the main agent, before the prompt's answer: the
    # context it left (the subagent's context is its own), and the sums so far, the
    # subagent's responses included.
    responses = (first, sub_first, sub_second, second)
    assert seen == [update(first, first), update(second, *responses)]
    # The next prompt's: what the context holds now, the sums go on.
    assert recorder.updates("usage_update")[2:] == [update(third, *responses, third)]
    # Without clientCapabilities.subagents: no child session, every update the session's.
    sessions = {m["params"]["sessionId"] for m in recorder.received if "params" in m}
    assert len(sessions) == 1
    assert recorder.updates("subagent_update") == []
