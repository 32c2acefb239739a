"""``toold mcp`` to a 2025-06-18 client, on the wire, and the audit of an asked call on
2026-07-28 (one line per call, with the user's answer).

The SDK's client always offers 2025-11-25 in ``initialize`` (and the 2025-11-25 shape of
the elicitation capability, ``{form, url}``), so the 2025-06-18 client here is a raw
JSON-RPC one over stdio: it sends ``protocolVersion: "2025-06-18"`` and that revision's
capability, ``elicitation: {}``, and checks what a 2025-06-18 client receives.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Literal

import mcp.types as types
import pytest
from mcp.client.client import Client
from mcp.client.context import ClientRequestContext

from tests.mcp.reading import audit
from tests.mcp.stdio import toold_mcp

OLD = "2025-06-18"
MODERN: Literal["2026-07-28"] = "2026-07-28"
WAIT = 60.0
"""Seconds a reply may take (a first start builds the engine): a hang fails, not blocks."""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


def write(name: str) -> dict[str, Any]:
    return {"file_path": name, "content": f"{name}\n"}


class User:
    """The SDK client's elicitation callback: answers ``answers`` in order, keeps what
    it was asked."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.asked.append(params)
        return types.ElicitResult(action="accept", content={"answer": self.answers.pop(0)})


class RawClient:
    """A 2025-06-18 MCP client speaking newline-delimited JSON-RPC to ``toold mcp``'s
    stdio; ``answers`` answer the server's ``elicitation/create`` requests, in order."""

    def __init__(self, process: asyncio.subprocess.Process, answers: list[dict[str, Any]]):
        self.process = process
        self.answers = answers
        self.asked: list[dict[str, Any]] = []
        """The params of every ``elicitation/create`` the server sent."""
        self.next_id = 0

    async def send(self, message: dict[str, Any]) -> None:
        """Write one JSON-RPC message."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        await self.process.stdin.drain()

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request; answer the server's requests until its response comes."""
        self.next_id += 1
        mine = self.next_id
        await self.send({"id": mine, "method": method, "params": params})
        assert self.process.stdout is not None
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), WAIT)
            assert line, "toold mcp closed its stdout"
            message = json.loads(line)
            if message.get("id") == mine and "method" not in message:
                return message
            if message.get("method") == "elicitation/create":
                self.asked.append(message["params"])
                await self.send({"id": message["id"], "result": self.answers.pop(0)})
            elif "method" in message and "id" in message:  # a request not expected here
                await self.send({"id": message["id"], "error": {"code": -32601, "message": "no"}})


async def old_session(workspace: Path, answers: list[dict[str, Any]]) -> list[Any]:
    """Initialize at 2025-06-18, list the tools, run a read, then two writes that ask."""
    server = toold_mcp(workspace)
    process = await asyncio.create_subprocess_exec(
        server.command,
        *server.args,
        env=server.env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    raw = RawClient(process, answers)
    try:
        init = await raw.request(
            "initialize",
            {
                "protocolVersion": OLD,
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "raw-2025-06-18", "version": "1"},
            },
        )
        await raw.send({"method": "notifications/initialized"})
        listed = await raw.request("tools/list", {})
        read = await raw.request("tools/call", {"name": "glob", "arguments": {"pattern": "*"}})
        writes = [
            await raw.request("tools/call", {"name": "write_file", "arguments": write(name)})
            for name in ("yes.txt", "no.txt")
        ]
    finally:
        assert process.stdin is not None
        process.stdin.close()
        await asyncio.wait_for(process.wait(), WAIT)
    return [init, listed, read, writes, raw.asked]


def test_a_2025_06_18_client_is_asked_through_elicitation(workspace: Path) -> None:
    (workspace / "seen.txt").write_text("seen\n", encoding="utf-8")
    accept = {"action": "accept", "content": {"answer": "allow"}}
    init, listed, read, writes, asked = asyncio.run(
        old_session(workspace, [accept, {"action": "decline"}])
    )
    assert init["result"]["protocolVersion"] == OLD
    assert "write_file" in {tool["name"] for tool in listed["result"]["tools"]}
    assert not read["result"].get("isError") and "seen.txt" in json.dumps(read["result"])
    allowed, declined = (answer["result"] for answer in writes)
    # Both questions went out in 2025-06-18's shape: message and requestedSchema (its
    # "mode" came with 2025-11-25 and is optional there, form by default).

    assert len(asked) == 2 and all(set(q) <= {"message", "requestedSchema", "mode"} for q in asked)
    assert all(q.get("mode", "form") == "form" for q in asked)
    assert asked[0]["message"].startswith("toold: the agent wants to run write_file {")
    assert "+++ b/yes.txt" in asked[0]["message"]
    types.ElicitRequestFormParams.model_validate(asked[0])
    assert not allowed.get("isError") and (workspace / "yes.txt").read_text() == "yes.txt\n"
    assert declined["isError"] and not (workspace / "no.txt").exists()
    assert declined["content"][0]["text"].startswith(
        "Denied: write_file was not allowed (no answer"
    )
    calls = [(e["decision"], e["verdict"]) for e in audit(workspace) if e["tool"] == "write_file"]
    assert calls == [("user-allowed", "allowed"), ("denied", "denied_by_user")]


def test_an_input_required_round_trip_is_one_audit_line_with_the_answer(
    workspace: Path,
) -> None:
    user = User("allow", "deny")

    async def main() -> list[types.CallToolResult]:
        async with Client(toold_mcp(workspace), mode=MODERN, elicitation_callback=user) as c:
            assert c.session.protocol_version == MODERN
            first = await c.session.call_tool(
                "write_file", write("unanswered.txt"), allow_input_required=True
            )
            assert isinstance(first, types.InputRequiredResult)  # asked, never answered
            return [await c.call_tool("write_file", write(n)) for n in ("yes.txt", "no.txt")]

    allowed, denied = asyncio.run(main())
    assert len(user.asked) == 2 and not allowed.is_error and denied.is_error
    lines = [e for e in audit(workspace) if e["tool"] == "write_file"]
    # The questions decided nothing: a call has the retry's line only, with the answer;
    # the question left unanswered has none (the call neither ran nor was refused).
    assert [(e["arguments"]["file_path"], e["decision"], e["verdict"]) for e in lines] == [
        ("yes.txt", "user-allowed", "allowed"),
        ("no.txt", "denied", "denied_by_user"),
    ]
    assert lines[0]["outcome"] == "ok" and lines[0]["reason"] == "write_file always asks"
    assert lines[1]["reason"] == "user denied (write_file always asks)"
