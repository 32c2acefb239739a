"""A real HTTP server on 127.0.0.1 that speaks Anthropic's Messages API with scripted replies.

The daemon and the in-process tests reach it through the real ``anthropic`` SDK by
its base URL; nothing in the SDK is patched. Each test queues the replies it
wants; every request body (and its headers) is recorded so tests can assert on
exactly what the model was sent. A request with ``"stream": true`` is answered with
the Messages API's server-sent events (text in word-sized deltas).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

API_KEY = "test-key"
WAIT = 15.0

Reply = Callable[[dict[str, Any]], Any]
"""Content blocks, or ``{"content": [...], "stop_reason": ...}`` for another stop."""


class ModelServer:
    """Scripted Messages API: ``POST /v1/messages`` pops the next reply of the queue."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._script: deque[Reply | threading.Event] = deque()
        self._cond = threading.Condition()
        self._ids = itertools.count(1)
        self._holds: list[threading.Event] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """The base URL to give the SDK (it appends /v1/messages)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- scripting ---------------------------------------------------------------
    def reply(self, reply: Reply) -> None:
        """Queue a reply computed from the request body."""
        with self._cond:
            self._script.append(reply)

    def text(self, text: str) -> None:
        """Queue a final answer (stop_reason end_turn)."""
        self.reply(lambda _body: [{"type": "text", "text": text}])

    def tool_use(self, *calls: tuple[str, dict[str, Any]], text: str | None = None) -> None:
        """Queue one assistant turn asking for these tool calls (stop_reason tool_use)."""

        def build(_body: dict[str, Any]) -> list[dict[str, Any]]:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            for name, arguments in calls:
                call_id = f"toolu_{next(self._ids):04d}"
                blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": arguments})
            return blocks

        self.reply(build)

    def refuse(self) -> None:
        """Queue a refusal (stop_reason ``refusal``, no content)."""
        self.reply(lambda _body: {"content": [], "stop_reason": "refusal"})

    def hold(self) -> threading.Event:
        """The next request waits (unanswered) until the returned event is set."""
        gate = threading.Event()
        with self._cond:
            self._script.append(gate)
            self._holds.append(gate)
        return gate

    # -- observing ---------------------------------------------------------------
    def wait_requests(self, count: int, timeout: float = WAIT) -> list[dict[str, Any]]:
        """The recorded request bodies once there are at least ``count``."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.requests) >= count, timeout):
                raise TimeoutError(f"{len(self.requests)} model requests, expected {count}")
            return list(self.requests)

    def pending(self) -> int:
        """Replies still queued."""
        with self._cond:
            return len(self._script)

    def close(self) -> None:
        for gate in self._holds:
            gate.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    # -- serving -----------------------------------------------------------------
    def _next(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._cond:
            self.requests.append(body)
            self._cond.notify_all()
            step = self._script.popleft() if self._script else None
        if isinstance(step, threading.Event):
            step.wait(WAIT)
            with self._cond:
                step = self._script.popleft() if self._script else None
        if step is None or isinstance(step, threading.Event):
            return 400, _error("invalid_request_error", "the test scripted no more replies")
        content: Any = step(body)
        if isinstance(content, dict):  # a scripted stop reason (refuse)
            content, stop = content["content"], content["stop_reason"]
        else:
            stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        return 200, {
            "id": f"msg_{next(self._ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "unknown"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 7},
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path.split("?")[0] != "/v1/messages":
                    self._send(404, _error("not_found_error", f"no route {self.path}"))
                    return
                # SDK versions differ: x-api-key, or the key as a bearer token.
                keys = {self.headers.get("x-api-key"), self.headers.get("Authorization")}
                if not keys & {API_KEY, f"Bearer {API_KEY}"}:
                    self._send(401, _error("authentication_error", "invalid API key"))
                    return
                server.headers.append(dict(self.headers.items()))
                body = json.loads(raw)
                status, payload = server._next(body)
                if status == 200 and body.get("stream"):
                    self._send_events(payload)
                else:
                    self._send(status, payload)

            def _send_events(self, message: dict[str, Any]) -> None:
                data = "".join(
                    f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in _events(message)
                ).encode("utf-8")
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a cancelled agent/run)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def _events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A whole message as the stream of events the API sends for it."""
    start = {**message, "content": [], "stop_reason": None}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opening: dict[str, Any] = {"type": "text", "text": ""}
            words = block["text"].split(" ")
            pieces = [w + " " for w in words[:-1]] + words[-1:]
            deltas = [{"type": "text_delta", "text": piece} for piece in pieces if piece]
        else:
            opening = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        events.append({"type": "content_block_start", "index": index, "content_block": opening})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": 7},
        }
    )
    events.append({"type": "message_stop"})
    return events


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of a request's last message."""
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return []
    return [b for b in content if b.get("type") == "tool_result"]


def tool_names(body: dict[str, Any]) -> set[str]:
    """The tools a request offered the model."""
    return {t["name"] for t in body.get("tools", [])}


@pytest.fixture
def model() -> Iterator[ModelServer]:
    server = ModelServer()
    yield server
    server.close()
