"""ACP v1's ``usage_update`` and the prompt's ``usage`` (issue 25), on the ACP Python SDK's
client, through the engine, against a Messages API that reports known token counts."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from acp.schema import PromptResponse

from tests.acp.conftest import Recorder, acp_agent, agent_env, run, start_session
from tests.agents.conftest import ModelServer

STREAMED_OUTPUT = 7
"""Output tokens of a streamed reply: the scripted server's ``message_delta`` reports 7,
and the SDK takes the delta's count over the start's."""


class MeteredModel(ModelServer):
    """The scripted Messages API whose replies report the queued usages, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.usages: deque[dict[str, int]] = deque()
        self._lock = threading.Lock()

    def _next(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        status, payload = super()._next(body)
        with self._lock:
            if status == 200 and self.usages:
                payload["usage"] = {"output_tokens": STREAMED_OUTPUT, **self.usages.popleft()}
        return status, payload


@pytest.fixture
def metered() -> Iterator[MeteredModel]:
    server = MeteredModel()
    yield server
    server.close()


def context(usage: dict[str, int]) -> int:
    """What a response leaves in the context: all it read, cached or not, and wrote."""
    return sum(usage.values()) + STREAMED_OUTPUT


def test_each_response_sends_usage_update_and_the_prompt_answers_the_turns_sums(
    metered: MeteredModel, workspace: Path, recorder: Recorder
) -> None:
    first = {
        "input_tokens": 100,
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 50,
    }
    second = {"input_tokens": 300, "cache_read_input_tokens": 1100}
    third = {"input_tokens": 20}
    metered.usages.extend([first, second, third])
    metered.tool_use(("read_file", {"file_path": "src/helper.txt"}))
    metered.text("The helper holds a needle.")
    metered.text("Still a needle.")

    async def scenario() -> tuple[PromptResponse, list[dict[str, Any]], PromptResponse]:
        async with acp_agent(workspace, agent_env(metered), recorder) as conn:
            session = await start_session(conn, workspace)
            reply = await conn.prompt(session_id=session, prompt=[text_block("what is there?")])
            seen = recorder.updates("usage_update")
            again = await conn.prompt(session_id=session, prompt=[text_block("and now?")])
            return reply, seen, again

    reply, seen, again = run(scenario)
    assert reply.stop_reason == "end_turn"
    # One usage_update per response, before the prompt's answer: the context it left.
    assert seen == [
        {"sessionUpdate": "usage_update", "used": context(first), "size": 200_000},
        {"sessionUpdate": "usage_update", "used": context(second), "size": 200_000},
    ]
    assert reply.usage is not None
    assert reply.usage.model_dump(exclude_none=True) == {
        "input_tokens": 400,
        "output_tokens": 2 * STREAMED_OUTPUT,
        "cached_read_tokens": 2100,
        "cached_write_tokens": 50,
        "total_tokens": context(first) + context(second),
    }
    # The next prompt's usage is its own turn's; the update says what the context holds now.
    assert again.usage is not None and again.usage.input_tokens == 20
    assert again.usage.total_tokens == context(third)
    assert recorder.updates("usage_update")[-1]["used"] == context(third)
