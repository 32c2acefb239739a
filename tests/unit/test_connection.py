"""JsonRpcConnection on its own: LSP's lifecycle rules, replies, cancellation, sent requests.

The connection is driven as the transport drives it (``dispatch`` of checked dicts) and
writes into a recording writer; the handlers are real functions registered by name.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from toold.connection import JsonRpcConnection, ResponseError


class Wire:
    """A writer that decodes each framed message the connection writes."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.written = asyncio.Event()

    def write(self, data: bytes) -> None:
        _, _, body = data.partition(b"\r\n\r\n")
        self.messages.append(json.loads(body))
        self.written.set()

    async def next_reply(self, msg_id: Any) -> dict[str, Any]:
        async with asyncio.timeout(10):
            while True:
                for message in self.messages:
                    if message.get("id") == msg_id and "method" not in message:
                        self.messages.remove(message)
                        return message
                self.written.clear()
                await self.written.wait()


def connected() -> tuple[JsonRpcConnection, Wire]:
    connection, wire = JsonRpcConnection(), Wire()
    connection.set_writer(wire)
    connection.on_request("initialize", lambda params: {"capabilities": {}})
    connection.on_request("shutdown", lambda params: None)
    return connection, wire


async def initialized() -> tuple[JsonRpcConnection, Wire]:
    """A connection past ``initialize`` (id 0)."""
    connection, wire = connected()
    connection.dispatch(request(0, "initialize", {}))
    await wire.next_reply(0)
    return connection, wire


def request(msg_id: int, method: str, params: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}


def test_lifecycle_rules() -> None:
    async def main() -> None:
        connection, wire = connected()
        connection.on_request("echo", lambda params: params)
        connection.dispatch(request(1, "echo", {"a": 1}))
        assert (await wire.next_reply(1))["error"]["code"] == -32002
        connection.dispatch(request(2, "initialize", {}))
        assert (await wire.next_reply(2))["result"] == {"capabilities": {}}
        assert connection.initialized
        connection.dispatch(request(3, "initialize", {}))
        assert (await wire.next_reply(3))["error"]["code"] == -32600
        connection.dispatch(request(4, "echo", {"a": 1}))
        assert (await wire.next_reply(4))["result"] == {"a": 1}
        connection.dispatch(request(5, "nope"))
        assert (await wire.next_reply(5))["error"] == {
            "code": -32601,
            "message": "Method Not Found: nope",
        }
        connection.dispatch(request(6, "shutdown"))
        assert (await wire.next_reply(6))["result"] is None
        connection.dispatch(request(7, "echo", {}))
        assert (await wire.next_reply(7))["error"]["code"] == -32600

    asyncio.run(main())


def test_an_initialize_whose_params_do_not_decode_may_be_sent_again() -> None:
    async def main() -> None:
        connection, wire = connected()

        def picky(params: Any) -> dict[str, Any]:
            if not isinstance(params, dict):
                raise ResponseError("Invalid Params", -32602)
            return {"capabilities": {}}

        connection.on_request("initialize", picky)
        connection.dispatch(request(1, "initialize", [1]))
        assert (await wire.next_reply(1))["error"]["code"] == -32602
        assert not connection.initialized
        connection.dispatch(request(2, "initialize", {}))
        assert "result" in await wire.next_reply(2)

    asyncio.run(main())


def test_errors_keep_their_data_and_internal_ones_their_traceback_off_the_wire() -> None:
    async def main() -> None:
        connection, wire = await initialized()

        async def refused(params: Any) -> None:
            raise ResponseError("no such job", -33002, {"jobId": "x"})

        async def broken(params: Any) -> None:
            raise RuntimeError("boom")

        connection.on_request("refused", refused)
        connection.on_request("broken", broken)
        connection.dispatch(request(2, "refused"))
        assert (await wire.next_reply(2))["error"] == {
            "code": -33002,
            "message": "no such job",
            "data": {"jobId": "x"},
        }
        connection.dispatch(request(3, "broken"))
        assert (await wire.next_reply(3))["error"] == {
            "code": -32603,
            "message": "RuntimeError: boom",
        }

    asyncio.run(main())


def test_cancel_request_answers_the_running_request_cancelled() -> None:
    async def main() -> None:
        connection, wire = await initialized()
        started = asyncio.Event()

        async def forever(params: Any) -> None:
            started.set()
            await asyncio.Event().wait()

        connection.on_request("forever", forever)
        connection.dispatch(request(2, "forever"))
        await started.wait()
        assert connection.in_flight() == 1
        connection.dispatch({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 2}})
        assert (await wire.next_reply(2))["error"]["code"] == -32800
        assert connection.in_flight() == 0

    asyncio.run(main())


def test_a_request_cancelled_before_its_task_began_is_answered_cancelled() -> None:
    async def main() -> None:
        connection, wire = await initialized()
        ran: list[Any] = []

        async def never(params: Any) -> None:
            ran.append(params)

        connection.on_request("never", never)
        # Both in one read: the cancel comes before the task's first step.
        connection.dispatch(request(2, "never"))
        connection.dispatch({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 2}})
        assert (await wire.next_reply(2))["error"]["code"] == -32800
        assert connection.in_flight() == 0
        assert ran == []
        # A request that runs to its end is answered by its own task, once.
        connection.dispatch(request(3, "never", {"x": 1}))
        assert (await wire.next_reply(3))["result"] is None
        await asyncio.sleep(0)
        assert ran == [{"x": 1}] and connection.in_flight() == 0
        assert [m for m in wire.messages if m.get("id") == 3] == []

    asyncio.run(main())


def test_sent_requests_are_completed_only_by_their_own_responses() -> None:
    async def main() -> None:
        connection, wire = connected()
        answered = connection.send_request("window/showMessageRequest", {"message": "ok?"})
        sent = wire.messages.pop()
        # A response to an id this side never sent completes nothing.
        connection.dispatch({"jsonrpc": "2.0", "id": "forged", "result": {"title": "Allow"}})
        assert not answered.done()
        connection.dispatch({"jsonrpc": "2.0", "id": sent["id"], "result": {"title": "Deny"}})
        assert await answered == {"title": "Deny"}

        failed = connection.send_request("window/showMessageRequest", {"message": "ok?"})
        sent = wire.messages.pop()
        error = {"code": -32603, "message": "no"}
        connection.dispatch({"jsonrpc": "2.0", "id": sent["id"], "error": error})
        with pytest.raises(ResponseError, match="no"):
            await failed

    asyncio.run(main())
