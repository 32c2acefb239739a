"""No front end reaches a tool around the guard: the same deny rules refuse the same calls
through LSP tools/call (origin agent), ``toold call`` (origin user), the daemon's agent loop
(agent/run), a subagent of it, and the MCP bridge (``toold mcp``). The user's hooks run
under every front end too: a pre hook that exits 2 blocks the call, a post hook speaks.

Each front end first runs a control call the rules allow (so a front end that ran nothing
would fail here too), then the denied one; the audit log shows the guard's verdict for it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.agents.conftest import API_KEY, ModelServer, tool_results
from tests.security.conftest import DENIED, DaemonFactory, GuardedDaemon

DENY = ("bash(prefix:touch pwned*)", "read_file(secrets/key.txt)")
ALLOW = ("subagent",)


def _no_pwned(ws: Path, text: str) -> bool:
    return not (ws / "pwned").exists()


def _no_secret(ws: Path, text: str) -> bool:
    return "secret key" not in text


# tool: (allowed control call, denied call, the evidence that nothing leaked or ran)
ATTACKS: dict[str, tuple[dict[str, Any], dict[str, Any], Callable[[Path, str], bool]]] = {
    "bash": ({"command": "touch made"}, {"command": "touch pwned"}, _no_pwned),
    "read_file": ({"file_path": "a"}, {"file_path": "secrets/key.txt"}, _no_secret),
}

Outcome = tuple[str, bool]
"""The result's text and its isError flag, whatever the front end."""


@pytest.fixture(scope="module")
def model() -> Iterator[ModelServer]:
    server = ModelServer()
    yield server
    server.close()


@pytest.fixture
def daemon(daemon_for: DaemonFactory, model: ModelServer) -> GuardedDaemon:
    env = (("ANTHROPIC_API_KEY", API_KEY), ("ANTHROPIC_BASE_URL", model.url))
    return daemon_for("auto", allow=ALLOW, deny=DENY, extra_env=env)


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content)


def lsp(daemon: GuardedDaemon, model: ModelServer, tool: str, args: dict[str, Any]) -> Outcome:
    result = daemon.call(tool, args)
    return _text(result.get("content")), bool(result.get("isError"))


def cli(daemon: GuardedDaemon, model: ModelServer, tool: str, args: dict[str, Any]) -> Outcome:
    argv = [sys.executable, "-m", "toold", "call", tool, json.dumps(args), "--json"]
    argv += ["--workspace", str(daemon.workspace)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    result = json.loads(done.stdout)
    assert (done.returncode != 0) == result["isError"], done.stderr
    return _text(result["content"]), result["isError"]


def _agent_result(daemon: GuardedDaemon, model: ModelServer, answered_at: int) -> Outcome:
    seen = len(model.requests)
    reply = daemon.client.call("agent/run", {"prompt": "go"}, timeout=60)
    assert reply["text"] == "done"
    [result] = tool_results(model.wait_requests(seen + answered_at + 1)[seen + answered_at])
    return _text(result["content"]), bool(result.get("is_error"))


def agent(daemon: GuardedDaemon, model: ModelServer, tool: str, args: dict[str, Any]) -> Outcome:
    model.tool_use((tool, args))
    model.text("done")
    return _agent_result(daemon, model, 1)


def subagent(daemon: GuardedDaemon, model: ModelServer, tool: str, args: dict[str, Any]) -> Outcome:
    model.tool_use(("subagent", {"task": "go on"}))  # main
    model.tool_use((tool, args))  # the child
    model.text("child done")
    model.text("done")  # main again
    return _agent_result(daemon, model, 2)


def mcp_bridge(
    daemon: GuardedDaemon, model: ModelServer, tool: str, args: dict[str, Any]
) -> Outcome:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toold", "mcp", "--workspace", str(daemon.workspace)],
        # The SDK passes only PATH, HOME and the like: give the test's runtime folder, so
        # the engine this toold mcp attaches to is the suite's, stopped at its end.
        env=dict(os.environ),
    )

    async def main() -> types.CallToolResult:
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await asyncio.wait_for(session.call_tool(tool, args), 45)

    result = asyncio.run(main())
    [block] = result.content
    assert isinstance(block, types.TextContent)
    return block.text, result.is_error


FRONT_ENDS = {"lsp": lsp, "cli": cli, "agent": agent, "subagent": subagent, "mcp": mcp_bridge}


def _last_decision(workspace: Path, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    lines = (workspace / ".toold" / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    entries = [json.loads(line) for line in lines]
    # The guard judges validated arguments: defaults filled (bash's timeout).
    return [
        e
        for e in entries
        if e["event"] == "call" and e["tool"] == tool and args.items() <= e["arguments"].items()
    ][-1]


@pytest.mark.parametrize("tool", sorted(ATTACKS))
@pytest.mark.parametrize("front_end", sorted(FRONT_ENDS))
def test_a_deny_rule_holds_through_every_front_end(
    daemon: GuardedDaemon, model: ModelServer, front_end: str, tool: str
) -> None:
    run = FRONT_ENDS[front_end]
    allowed, denied, nothing_happened = ATTACKS[tool]
    daemon.damage()  # a failed case before this one may have left its traces

    text, is_error = run(daemon, model, tool, allowed)
    assert not is_error, text
    if tool == "bash":
        assert (daemon.workspace / "made").exists()
        (daemon.workspace / "made").unlink()

    text, is_error = run(daemon, model, tool, denied)
    assert is_error, text
    assert nothing_happened(daemon.workspace, text)
    if front_end == "mcp":
        assert text.startswith(f"Denied: {tool} needs the user's confirmation (deny rule")
    else:
        assert text == DENIED
    decision = _last_decision(daemon.workspace, tool, denied)
    assert decision["decision"] == "denied"
    assert "deny rule" in decision["reason"]
    assert daemon.damage() == []


HOOKS = """
[[hooks.pre_tool_use]]
matcher = "bash"
command = "grep -q pwned && { echo 'pwned is off limits' >&2; exit 2; }; exit 0"
[[hooks.post_tool_use]]
matcher = "bash"
command = "python3 -c 'import json,sys; print(\\"hook saw\\", json.load(sys.stdin)[\\"origin\\"])'"
"""


@pytest.fixture
def hooked(daemon_for: DaemonFactory, model: ModelServer) -> GuardedDaemon:
    env = (("ANTHROPIC_API_KEY", API_KEY), ("ANTHROPIC_BASE_URL", model.url))
    return daemon_for("auto", allow=ALLOW, extra_env=env, extra_config=HOOKS)


@pytest.mark.parametrize("front_end", sorted(FRONT_ENDS))
def test_hooks_run_under_every_front_end(
    hooked: GuardedDaemon, model: ModelServer, front_end: str
) -> None:
    run = FRONT_ENDS[front_end]
    hooked.damage()
    text, is_error = run(hooked, model, "bash", {"command": "touch made"})
    assert not is_error, text
    origin = "user" if front_end == "cli" else "agent"
    assert text.endswith(f"\n\nhook saw {origin}")
    (hooked.workspace / "made").unlink()

    text, is_error = run(hooked, model, "bash", {"command": "touch pwned"})
    assert is_error
    assert text == "Blocked by hook: pwned is off limits"
    assert not (hooked.workspace / "pwned").exists()
    assert hooked.damage() == []
