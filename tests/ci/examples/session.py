"""Write a framed JSON-RPC session to stdout: python session.py | toold serve --workspace ."""

import json
import sys


def send(message: dict[str, object]) -> None:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


def call(msg_id: int, tool: str, **arguments: object) -> None:
    params = {"name": tool, "arguments": arguments, "origin": "user"}
    send({"id": msg_id, "method": "tools/call", "params": params})


send({"id": 1, "method": "initialize", "params": {"capabilities": {}}})
send({"method": "initialized", "params": {}})
call(2, "bash", command="sleep 1; echo hi")
call(3, "read_file", file_path="a.txt")
send({"id": 4, "method": "shutdown"})
send({"method": "exit"})
