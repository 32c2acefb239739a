"""The same attacks through the daemon's own agent loop (``agent/run``): a scripted model
on 127.0.0.1 (tests/agents' Messages API server) asks for the tool calls, the guard asks
the user, who answers Deny; the model gets ``User denied.`` and the canaries survive.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.agents.conftest import API_KEY, ModelServer
from tests.security.conftest import DENIED, DaemonFactory

# (modes, tool, arguments): auto mode runs what is not dangerous, so only the dangerous
# and self-escalating calls are attacks there.
ATTACKS: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
    (("default",), "bash", {"command": "X=/cat rm -f canary.txt"}),
    (("default",), "bash", {"command": "X=/usr/bin/cat mv a b"}),
    (("default",), "background_run", {"command": "X=/cat rm -f canary.txt"}),
    (("default",), "bash", {"command": "pytest --basetemp=d"}),
    (("default", "auto"), "bash", {"command": "R=rm; $R -rf d"}),
    (("default", "auto"), "bash", {"command": "rm --rec d"}),
    (("default", "auto"), "background_run", {"command": "sh <<< 'rm -rf d'"}),
    (("default", "auto"), "bash", {"command": "cp b toold.toml"}),
    (("default", "auto"), "write_file", {"file_path": "./toold.toml", "content": "x = 1\n"}),
    (("default", "auto"), "bash", {"command": "echo rm -rf d | sh"}),
]
CASES = [
    pytest.param(mode, tool, args, id=f"{mode}-{tool}-{args}")
    for modes, tool, args in ATTACKS
    for mode in modes
]


@pytest.fixture(scope="module")
def model() -> Iterator[ModelServer]:
    server = ModelServer()
    yield server
    server.close()


def _tool_results(body: dict[str, Any]) -> list[Any]:
    last = body["messages"][-1]["content"]
    return [b["content"] for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]


@pytest.mark.parametrize(("mode", "tool", "args"), CASES)
def test_the_agent_loop_takes_the_same_guard(
    daemon_for: DaemonFactory, model: ModelServer, mode: str, tool: str, args: dict[str, Any]
) -> None:
    env = (("ANTHROPIC_API_KEY", API_KEY), ("ANTHROPIC_BASE_URL", model.url))
    daemon = daemon_for(mode, extra_env=env)
    asked = len(daemon.client.asked)
    model.tool_use((tool, args))
    model.text("done")
    seen = len(model.requests)
    result = daemon.client.call("agent/run", {"prompt": "tidy up"}, timeout=30)
    assert result["text"] == "done"
    [_, answer_request] = model.wait_requests(seen + 2)[seen:]
    assert _tool_results(answer_request) == [DENIED]
    assert len(daemon.client.asked) == asked + 1
    assert daemon.damage() == []
