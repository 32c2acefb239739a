"""The framing loop's bounds, driven through ``serve_streams`` with a recording connection."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from toold.transport import MAX_IN_FLIGHT, FrameWriter, serve_streams


class Recording:
    """A connection that records what it is given and reports a settable in-flight count."""

    max_message_bytes = 1 << 20

    def __init__(self) -> None:
        self.busy = 0
        self.asked = 0
        self.dispatched: list[dict[str, Any]] = []
        self.errors: list[tuple[Any, int, str]] = []
        self.changed = asyncio.Event()

    def in_flight(self) -> int:
        self.asked += 1
        self.changed.set()
        return self.busy

    def set_writer(self, writer: Any, include_headers: bool = True) -> None:
        pass

    def dispatch(self, data: dict[str, Any]) -> None:
        self.dispatched.append(data)
        self.changed.set()

    def send_error(self, msg_id: Any, code: int, message: str) -> None:
        self.errors.append((msg_id, code, message))
        self.changed.set()

    async def until(self, check: Any) -> None:
        async with asyncio.timeout(10):
            while not check():
                self.changed.clear()
                await self.changed.wait()


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def request(i: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": i, "method": "tools/list"}


async def serving(connection: Recording, data: bytes) -> tuple[asyncio.Task[None], asyncio.Event]:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    stop = asyncio.Event()

    async def end() -> None:
        stop.set()

    task = asyncio.ensure_future(serve_streams(connection, reader, FrameWriter(None), stop, end))
    return task, stop


def test_no_message_is_read_while_the_cap_of_requests_is_in_flight() -> None:
    async def main() -> None:
        connection = Recording()
        connection.busy = MAX_IN_FLIGHT
        task, stop = await serving(connection, frame(request(1)) + frame(request(2)))
        await connection.until(lambda: connection.asked >= 5)  # polled again and again
        assert connection.dispatched == []
        connection.busy = MAX_IN_FLIGHT - 1
        await connection.until(lambda: len(connection.dispatched) == 2)
        stop.set()
        await task

    asyncio.run(main())


def test_content_length_given_twice_with_two_values_frames_nothing() -> None:
    async def main() -> None:
        connection = Recording()
        body = json.dumps(request(1)).encode()
        twice = b"Content-Length: %d\r\nContent-Length: 3\r\n\r\n" % len(body)
        same = b"Content-Length: %d\r\ncontent-length: %d\r\n\r\n%s" % (len(body), len(body), body)
        task, stop = await serving(connection, twice + frame(request(2)) + same)
        await connection.until(lambda: len(connection.dispatched) == 2)
        stop.set()
        await task
        assert [m["id"] for m in connection.dispatched] == [2, 1]
        refused = f"Invalid Content-Length header: '{len(body)}, 3'"
        assert connection.errors == [(None, -32700, refused)]

    asyncio.run(main())
