"""The ACP session: the ACP SDK's client connection to ``TooldAgent``, in memory or spawned.

ACP has no tools/list or tools/call: a model decides. So the session scripts the model
(tests/agents' Messages API server) and sends a prompt: to list, the model answers with
text and the session reads the tools the agent offered it; to call, the model asks for
one tool call and the session reads the call's last ``tool_call_update`` (its status and
``rawOutput``), which is what an editor shows. The client dismisses every permission
request (tests/acp's ``Recorder`` answers "cancelled"): nobody is there to allow a call.

In memory, the SDK's agent side runs ``TooldAgent`` on one end of a message pair and
its client side on the other. Each message is passed through JSON on the way, so both
sides see what a wire would carry; the line framing is tests/acp's (it needs a process).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

from acp import connect_to_agent, run_agent, text_block
from acp.client.connection import ClientSideConnection
from acp.interfaces import Agent, Client

from tests.acp.conftest import Recorder, acp_agent, agent_env, start_session
from tests.agents.conftest import ModelServer
from tests.interaction.loop import Loop
from tests.interaction.sessions import Result, as_text, job_in_text
from toold.acp.agent import TooldAgent

STOP_S = 20.0
ENDED = ("completed", "failed")


class MessagePipe:
    """One end of an in-memory message pair: what one end sends, the other receives."""

    def __init__(
        self,
        inbox: asyncio.Queue[dict[str, Any] | None],
        outbox: asyncio.Queue[dict[str, Any] | None],
    ) -> None:
        self._inbox, self._outbox = inbox, outbox

    async def send(self, message: dict[str, Any]) -> None:
        """Queue a copy of ``message`` as JSON would carry it."""
        await self._outbox.put(json.loads(json.dumps(message)))

    async def receive(self) -> dict[str, Any] | None:
        """The next message; None once the other end closed."""
        return await self._inbox.get()

    async def close(self) -> None:
        """End of input for the other end."""
        self._outbox.put_nowait(None)


def message_pair() -> tuple[MessagePipe, MessagePipe]:
    """Two linked ends (the SDK takes any object with send, receive and close)."""
    left: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    right: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    return MessagePipe(left, right), MessagePipe(right, left)


@asynccontextmanager
async def in_memory(recorder: Recorder) -> AsyncIterator[ClientSideConnection]:
    """``TooldAgent`` served by the SDK on one end of a pair, the client on the other."""
    agent_end, client_end = message_pair()
    agent = TooldAgent()
    serving = asyncio.ensure_future(run_agent(cast(Agent, agent), agent_end))
    conn = connect_to_agent(cast(Client, recorder), client_end, observers=[recorder.observe])
    try:
        yield conn
    finally:
        await client_end.close()
        try:
            await asyncio.wait_for(serving, STOP_S)
        finally:
            await agent.aclose()
            await conn.close()


def call_of(received: list[dict[str, Any]]) -> Result:
    """The first tool call among these messages, as its last update left it."""
    updates = [m["params"]["update"] for m in received if m.get("method") == "session/update"]
    calls = [u for u in updates if u["sessionUpdate"] == "tool_call"]
    assert calls, f"the agent announced no tool call: {updates}"
    call_id = calls[0]["toolCallId"]
    ended = [
        u
        for u in updates
        if u["sessionUpdate"] == "tool_call_update"
        and u["toolCallId"] == call_id
        and u.get("status") in ENDED
    ]
    assert ended, f"tool call {call_id} never ended: {updates}"
    last = ended[-1]
    if "rawOutput" in last:
        text = as_text(last["rawOutput"])
    else:  # a call refused before it ran: the text shown is all there is
        shown = [c["content"].get("text", "") for c in last.get("content") or []]
        text = "\n".join(t for t in shown if t)
    is_error = last["status"] == "failed"
    return Result(text=text, is_error=is_error, job_id=None if is_error else job_in_text(text))


class AcpClientSession:
    """Tool listing and tool calls through prompts to an ACP agent."""

    def __init__(self, transport: str, workspace: Path, model: ModelServer) -> None:
        """Connect (in memory for ``acp``, spawned for ``acp-process``), open a session."""
        self.transport = transport
        self.model = model
        self.recorder = Recorder()
        self.loop = Loop()
        try:
            if transport == "acp-process":
                env = agent_env(model, TOOLD_NO_DAEMON=os.environ.get("TOOLD_NO_DAEMON", "1"))
                opener = acp_agent(workspace, env, self.recorder)
            else:
                opener = in_memory(self.recorder)
            self.conn = self.loop.enter(opener)
            self.session_id = self.loop.run(lambda: start_session(self.conn, workspace))
        except BaseException:
            self.loop.close()
            raise

    def _turn(self, text: str) -> list[dict[str, Any]]:
        """One prompt to its end; the messages the agent sent during it."""
        before = len(self.recorder.received)

        async def prompt() -> str:
            reply = await self.conn.prompt(session_id=self.session_id, prompt=[text_block(text)])
            return reply.stop_reason

        stop = self.loop.run(prompt)
        assert stop == "end_turn", stop
        return self.recorder.received[before:]

    def tools(self) -> list[str]:
        """The tools the agent offered its model for a turn."""
        seen = len(self.model.requests)
        self.model.text("Listed.")
        self._turn("Which tools do you have?")
        request = self.model.wait_requests(seen + 1)[seen]
        return [t["name"] for t in request["tools"]]

    def call(self, name: str, arguments: dict[str, Any]) -> Result:
        """A turn in which the model calls ``name`` once; that call's end as a Result."""
        self.model.tool_use((name, arguments))
        self.model.text("Done.")
        return call_of(self._turn(f"Call {name}."))

    def close(self) -> None:
        """Disconnect; the agent closes its sessions (an in-memory one) or exits."""
        self.loop.close()
