"""floor_server.py's work on asyncio, as toold is built: for rpcpath.py.

stdin and stdout are pipes watched by the event loop (``connect_read_pipe``,
``connect_write_pipe``), frames are read through a ``StreamReader`` and each request runs
as a task that writes its own answer (``--inline``: served in the read loop, no task).
``bench/readFile`` is floor_server.py's own ``answer``; no validation, no gateway.
What it costs over the floor is the event loop's, which any asyncio daemon pays.
Run as ``python tests/bench/asyncio_floor_server.py [--inline]``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from floor_server import answer  # the floor's own work, unchanged


async def serve(inline: bool) -> None:
    """Serve stdin/stdout until ``exit`` or the end of the input."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    output, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout.buffer)
    tasks: set[asyncio.Task[None]] = set()

    async def reply(message: dict[str, Any]) -> None:
        data = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": answer(message)})
        body = data.encode("utf-8")
        output.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    while True:
        length = -1
        while (line := await reader.readline()) != b"\r\n":
            if not line:
                return
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        message = json.loads(await reader.readexactly(length))
        if message.get("method") == "exit":
            return
        if "id" not in message:
            continue
        if inline:
            await reply(message)
        else:
            task = loop.create_task(reply(message))
            tasks.add(task)
            task.add_done_callback(tasks.discard)


if __name__ == "__main__":
    asyncio.run(serve("--inline" in sys.argv[1:]))
