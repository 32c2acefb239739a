"""The floor for bench.py: a bare Python stdio server, standard library only.

It speaks LSP base-protocol framing (``Content-Length`` headers) on stdio, answers
``bench/readFile`` (``{"path": "<absolute path>"}`` → ``{"text": ...}``) with one
``open().read()`` per call, and ``initialize``/``shutdown``/``exit`` just enough for the
bench's client. No asyncio, no pygls, no validation: the practical limit of any Python
daemon doing read_file's work, which toold's per-call figures are compared against.
Run as ``python tests/bench/floor_server.py``.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def read_frame(stream: Any) -> bytes | None:
    """The body of the next frame, or None at the end of the input."""
    length = -1
    while True:
        line = stream.readline()
        if not line:
            return None
        if line == b"\r\n":
            if length >= 0:
                return bytes(stream.read(length))
            continue
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)


def answer(message: dict[str, Any]) -> Any:
    """The result of one request."""
    method = message.get("method")
    if method == "bench/readFile":
        with open(message["params"]["path"], encoding="utf-8") as file:
            return {"text": file.read()}
    if method == "initialize":
        return {"capabilities": {}, "serverInfo": {"name": "floor", "version": "0"}}
    return None


def main() -> None:
    """Serve stdin/stdout until ``exit`` or the end of the input."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while (body := read_frame(stdin)) is not None:
        message = json.loads(body)
        if message.get("method") == "exit":
            return
        if "id" not in message:
            continue
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer(message)}
        data = json.dumps(reply, separators=(",", ":")).encode("utf-8")
        stdout.write(b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
        stdout.flush()


if __name__ == "__main__":
    main()
