"""A raw ACP v2 client over stdio for ``toold acp --protocol 2``, checking every message.

No SDK client speaks ACP v2 here (the Python SDK 0.12 and the TypeScript SDK are v1),
so this client writes and reads newline-delimited JSON-RPC itself. Every message toold
sends is validated twice: against toold's own models (toold.acp.v2, with no field they
do not know) and against the published v2 JSON Schema (``data/acp-v2-schema.json``,
see ``data/README.md``). Permission requests are answered from a script of option ids.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import BaseModel

from tests.acp.conftest import WAIT, Recorder
from toold.acp import v2

SCHEMA = json.loads((Path(__file__).parent / "data" / "acp-v2-schema.json").read_text())
RESULTS: dict[str, tuple[type[BaseModel], str]] = {
    "initialize": (v2.InitializeResponse, "InitializeResponse"),
    "session/new": (v2.NewSessionResponse, "NewSessionResponse"),
    "session/resume": (v2.ResumeSessionResponse, "ResumeSessionResponse"),
    "session/list": (v2.ListSessionsResponse, "ListSessionsResponse"),
    "session/close": (v2.Empty, "CloseSessionResponse"),
    "session/prompt": (v2.Empty, "PromptResponse"),
    "session/set_config_option": (v2.SetConfigOptionResponse, "SetSessionConfigOptionResponse"),
}
"""What each request of ours is answered with: toold's model and the schema's name."""


def schema_errors(definition: str, value: Any) -> list[str]:
    """Where ``value`` breaks the v2 schema's ``definition`` (none: it conforms)."""
    root = {"$schema": SCHEMA["$schema"], "$ref": f"#/$defs/{definition}", "$defs": SCHEMA["$defs"]}
    validator = jsonschema.Draft202012Validator(root)
    return [
        f"{definition}: {e.message} at {list(e.absolute_path)}"
        for e in validator.iter_errors(value)
    ]


def extras(model: Any, where: str = "") -> list[str]:
    """Fields a parsed model kept without knowing them (its ``model_extra``), anywhere in it."""
    found: list[str] = []
    if isinstance(model, BaseModel):
        found += [f"{where}.{key}" for key in model.model_extra or {}]
        for name in type(model).model_fields:
            found += extras(getattr(model, name), f"{where}.{name}")
    elif isinstance(model, list):
        for i, item in enumerate(model):
            found += extras(item, f"{where}[{i}]")
    return found


def check(model: type[BaseModel], definition: str, value: Any) -> list[str]:
    """Problems of one payload: by toold's model (strictly) and by the schema."""
    try:
        parsed = model.model_validate(value)
    except Exception as exc:  # the payload's problems are what the test reports
        return [f"{model.__name__}: {exc}"]
    return [f"{model.__name__} does not know {e}" for e in extras(parsed)] + schema_errors(
        definition, value
    )


def decoded(data: str) -> bytes:
    """A terminal's base64 bytes."""
    return base64.b64decode(data, validate=True)


class RawClient(Recorder):
    """One ACP connection to a ``toold acp`` process, speaking JSON lines (what it
    received, ``until`` and ``requests`` as tests/acp's Recorder keeps them)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        super().__init__()
        self.process = process
        self.invalid: list[str] = []
        self.version = 2
        """The version initialize negotiated: only a v2 connection's messages are checked."""
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[str, asyncio.Future[dict[str, Any]]]] = {}
        self._reader = asyncio.ensure_future(self._read())

    async def send(self, message: dict[str, Any]) -> None:
        """Write one message as a line."""
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        await self.process.stdin.drain()

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A request's whole answer message (``result`` or ``error``)."""
        number = next(self._ids)
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[number] = (method, answer)
        await self.send({"jsonrpc": "2.0", "id": number, "method": method, "params": params})
        return await asyncio.wait_for(answer, WAIT * 2)

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A request's result; AssertionError for an error answer."""
        answer = await self.call(method, params)
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification."""
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    # -- what toold sent ---------------------------------------------------------------
    def updates(  # a session may be named too
        self, kind: str | None = None, session: str | None = None
    ) -> list[dict[str, Any]]:
        """session/update ``update`` objects, optionally of one kind or session."""
        found = [
            m["params"]
            for m in self.received
            if m.get("method") == "session/update"
            and (session is None or m["params"]["sessionId"] == session)
        ]
        return [p["update"] for p in found if kind is None or p["update"]["sessionUpdate"] == kind]

    def states(self) -> list[tuple[str, str | None]]:
        """The state_updates: (state, stop reason)."""
        return [(u["state"], u.get("stopReason")) for u in self.updates("state_update")]

    def ended(self) -> bool:
        """Whether a turn ended (an idle state_update with a stop reason)."""
        return any(stop is not None for state, stop in self.states() if state == "idle")

    # -- reading -----------------------------------------------------------------------
    async def _read(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            message = json.loads(line)
            self.received.append(message)
            waiting = self._waiting.pop(message["id"], None) if "method" not in message else None
            result = message.get("result")
            if waiting is not None and waiting[0] == "initialize" and isinstance(result, dict):
                self.version = result.get("protocolVersion", 0)
            if self.version == 2:
                self.invalid += self._problems(message)
            if message.get("method") == "session/request_permission":
                await self._answer(message)
            elif waiting is not None:
                method, answer = waiting
                if "result" in message and self.version == 2:
                    model, definition = RESULTS[method]
                    self.invalid += check(model, definition, message["result"])
                if not answer.done():
                    answer.set_result(message)
            self._changed.set()

    def _problems(self, message: dict[str, Any]) -> list[str]:
        if message.get("jsonrpc") != "2.0":
            return [f"not JSON-RPC 2.0: {message}"]
        if "error" in message:
            return schema_errors("Error", message["error"])
        method = message.get("method")
        if method == "session/update":
            return check(v2.SessionNotification, "UpdateSessionNotification", message["params"])
        if method == "session/request_permission":
            params = message["params"]
            return check(v2.RequestPermissionRequest, "RequestPermissionRequest", params)
        if method is not None:
            return [f"toold sent {method}, which is no ACP v2 method of an agent"]
        return []

    async def _answer(self, message: dict[str, Any]) -> None:
        answer = self.answers.pop(0) if self.answers else "cancel"
        if answer == "error":  # a client that fails the request instead of answering it
            error = {"code": -32603, "message": "the client could not show the question"}
            await self.send({"jsonrpc": "2.0", "id": message["id"], "error": error})
            return
        outcome = (
            {"outcome": "cancelled"}
            if answer == "cancel"
            else {"outcome": "selected", "optionId": answer}
        )
        await self.send({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": outcome}})


@asynccontextmanager
async def v2_agent(workspace: Path, env: dict[str, str], *args: str) -> AsyncIterator[RawClient]:
    """``toold acp`` (with ``args``) as a subprocess; stderr to ``workspace/../agent.log``.
    The client's checks must all have passed when the block ends."""
    with (workspace.parent / "agent.log").open("ab") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "toold",
            "acp",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=log.fileno(),
            env=env,
            cwd=workspace,
            limit=1 << 24,
        )
        client = RawClient(process)
        try:
            yield client
        finally:
            assert process.stdin is not None
            process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), WAIT)
            except TimeoutError:
                process.kill()
                await process.wait()
            await client._reader
    assert client.invalid == [], client.invalid
