"""One session's JSON-RPC 2.0 connection, owned outright: dispatch, requests, replies.

The framing (transport.py) hands each decoded message to ``dispatch``; handlers are
registered by method name (``on_request``, ``on_notification``) and take the raw JSON
params. Here live LSP's lifecycle rules (-32002 before ``initialize``, -32600 after
``shutdown``, ``exit`` always taken), the client's requests in flight (answered, or
-32800 once ``$/cancelRequest`` stopped them), the requests this side sends (their
futures completed by the client's responses, and only by responses to them), and the
JSON written back. A plain function runs at once (``initialize`` is answered before the
next message is read); a coroutine runs as a task in a copy of the dispatcher's context,
and that task writes its own answer (no further turn of the loop); a request stopped by
cancellation is answered by the task's done callback, so one cancelled before it began is
answered too.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import functools
import inspect
import json
import logging
import traceback
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from toold_protocol import errors

log = logging.getLogger(__name__)

MsgId = str | int
INITIALIZE, INITIALIZED, SHUTDOWN, EXIT = "initialize", "initialized", "shutdown", "exit"
CANCEL_REQUEST = "$/cancelRequest"
"""LSP's lifecycle methods, by name (lsprotocol's types module, 15 MiB and ~250 ms of
import, is not needed for five strings)."""
Handler = Callable[[Any], Any]
"""``handler(params)``: the raw JSON params; returns the result, or an awaitable of it."""
Registered = tuple[Handler, bool]
"""A handler, and whether it is a coroutine function (known once, when registered)."""
ANSWERS = (
    errors.INVALID_REQUEST,
    errors.METHOD_NOT_FOUND,
    errors.INVALID_PARAMS,
    errors.NOT_FOUND,
)
"""Error codes that are ordinary answers (bad params, an unknown job): logged at info."""


class ResponseError(Exception):
    """A JSON-RPC error: raised by a handler to answer with it, or the error the peer
    answered one of this side's requests with."""

    def __init__(self, message: str, code: int = errors.INTERNAL_ERROR, data: Any = None) -> None:
        super().__init__(message)
        self.message, self.code, self.data = message, code, data


class Writer(Protocol):
    """Where framed messages go (transport.FrameWriter)."""

    def write(self, data: bytes) -> None:
        """Queue bytes for the peer."""
        ...


class JsonRpcConnection:
    """JSON-RPC over one connection, with LSP's lifecycle rules."""

    def __init__(self, encode: Callable[[Any], Any] | None = None) -> None:
        """``encode`` turns a value json cannot (an lsprotocol type) into one it can."""
        self.max_message_bytes = errors.MAX_MESSAGE_BYTES
        """The framing's cap on one message (the transport reads it per message)."""
        self.initialized = False
        """``initialize`` was answered: every request is admitted from now on."""
        self.shutting_down = False
        self._encode_other = encode
        # One encoder for every message: json.dumps with these options builds one per call.
        self._encoder = json.JSONEncoder(default=self._encode, allow_nan=False)
        self._writer: Writer | None = None
        self._requests: dict[str, Registered] = {}
        self._notifications: dict[str, Handler] = {}
        self._initialize_seen = False
        self._running: dict[MsgId, tuple[str, asyncio.Future[Any]]] = {}
        """The client's requests admitted and not answered yet: id → (method, future)."""
        self._sent: dict[MsgId, asyncio.Future[Any]] = {}
        """Requests sent to the client and not answered: id → future."""

    def on_request(self, method: str, handler: Handler) -> None:
        """Answer requests for ``method`` with ``handler``."""
        self._requests[method] = (handler, inspect.iscoroutinefunction(handler))

    def on_notification(self, method: str, handler: Handler) -> None:
        """Take notifications for ``method`` with ``handler``."""
        self._notifications[method] = handler

    def set_writer(self, writer: Writer) -> None:
        """Where replies go from now on (the transport calls it when serving starts)."""
        self._writer = writer

    # -- incoming ----------------------------------------------------------------
    def dispatch(self, data: dict[str, Any]) -> None:
        """Route one JSON-RPC 2.0 message (a dict the transport has checked)."""
        method = data.get("method")
        if method is None:
            self._take_response(data)
        elif "id" not in data:
            self._take_notification(method, data.get("params"))
        elif self._admit(data["id"], method):
            self._start_request(data["id"], method, data.get("params"))

    def _admit(self, msg_id: MsgId, method: str) -> bool:
        """Lifecycle rules for a request: -32600 after shutdown, -32002 before initialize."""
        if self.shutting_down:
            self.send_error(msg_id, errors.INVALID_REQUEST, "Server is shutting down")
            return False
        if method == INITIALIZE:
            if self._initialize_seen:
                self.send_error(msg_id, errors.INVALID_REQUEST, "initialize may only be sent once")
                return False
            self._initialize_seen = True
            return True
        if not self.initialized:
            self.send_error(msg_id, errors.SERVER_NOT_INITIALIZED, "Server not initialized")
            return False
        if method == SHUTDOWN:
            self.shutting_down = True  # requests after it are refused, even while it runs
        return True

    def _start_request(self, msg_id: MsgId, method: str, params: Any) -> None:
        registered = self._requests.get(method)
        if registered is None:
            log.info("request %r: unknown method %r", msg_id, method)
            self.send_error(msg_id, errors.METHOD_NOT_FOUND, f"Method Not Found: {method}")
            return
        handler, is_coroutine = registered
        answer = functools.partial(self._answer, msg_id, method)
        if is_coroutine:
            # The task copies the dispatcher's context itself; it answers when it returns
            # or raises, and takes ``answer`` off its callbacks, so a finished request
            # costs no further turn of the loop. Cancelled, it leaves ``answer`` in place.
            serve = self._serve(msg_id, method, handler, params, answer)
            task = asyncio.get_running_loop().create_task(serve)
            self._running[msg_id] = (method, task)
            task.add_done_callback(answer)
            return
        future = contextvars.copy_context().run(_run, handler, params)
        self._running[msg_id] = (method, future)
        if future.done():
            answer(future)
        else:
            future.add_done_callback(answer)

    async def _serve(
        self,
        msg_id: MsgId,
        method: str,
        handler: Handler,
        params: Any,
        answer: Callable[[asyncio.Future[Any]], None],
    ) -> None:
        """Run a coroutine handler and answer with its result or its error."""
        try:
            result = await handler(params)
        except Exception as exc:
            self._answered(msg_id, answer)
            self._answer_error(msg_id, method, exc)
            return
        self._answered(msg_id, answer)
        self._answer_result(msg_id, method, result)

    def _answered(self, msg_id: MsgId, answer: Callable[[asyncio.Future[Any]], None]) -> None:
        """The running task answers its request itself: no done callback, not in flight."""
        task = asyncio.current_task()
        assert task is not None
        task.remove_done_callback(answer)
        if self._running.get(msg_id, (None, task))[1] is task:
            self._running.pop(msg_id, None)

    def _take_notification(self, method: str, params: Any) -> None:
        if method != EXIT and (self.shutting_down or not self.initialized):
            when = "during shutdown" if self.shutting_down else "before initialize"
            log.warning("dropping %s received %s", method, when)
            return
        if method == CANCEL_REQUEST:
            target = params.get("id") if isinstance(params, dict) else None
            if not isinstance(target, (str, int)) or isinstance(target, bool):
                log.warning("dropping $/cancelRequest without a valid id: %r", params)
                return
            self._cancel(target)
            return
        handler = self._notifications.get(method)
        if handler is None:
            log.warning("ignoring notification for unknown method %r", method)
            return
        future = contextvars.copy_context().run(_run, handler, params)
        if future.done():
            _log_failure(method, future)
        else:
            future.add_done_callback(functools.partial(_log_failure, method))

    def _cancel(self, msg_id: MsgId) -> None:
        """``$/cancelRequest``: the request is answered -32800 once it has stopped."""
        running = self._running.get(msg_id)
        if running is None:
            log.warning("cancel notification for unknown request %r", msg_id)
        elif running[1].cancel():
            log.info("cancelled request %r", msg_id)

    def _take_response(self, data: dict[str, Any]) -> None:
        msg_id = data["id"]
        # Only ids of requests this side sent: a client's "response" must never
        # complete one of its own requests' futures.
        future = self._sent.pop(msg_id, None) if isinstance(msg_id, (str, int)) else None
        if future is None:
            log.warning("ignoring a response to unknown request %r", msg_id)
            return
        # Also during the shutdown grace: a call received before shutdown may be waiting
        # for this answer (a permission prompt) to finish.
        if future.done():  # given up on (timed out): the answer is too late
            return
        error = data.get("error")
        if error is None:
            future.set_result(data.get("result"))
        elif isinstance(error, dict) and isinstance(error.get("code"), int):
            message = error.get("message")
            text = message if isinstance(message, str) else "error"
            future.set_exception(ResponseError(text, error["code"], error.get("data")))
        else:  # a malformed answer: the request got none
            log.warning("undecodable response to %r: %r", msg_id, error)
            future.set_exception(ResponseError(f"Undecodable response: {error!r}"))

    def _answer(self, msg_id: MsgId, method: str, future: asyncio.Future[Any]) -> None:
        """Answer a request once its future is done: a plain handler's, or a task stopped
        before it could answer (cancelled, even before it began)."""
        if self._running.get(msg_id, (None, future))[1] is future:
            self._running.pop(msg_id, None)
        if future.cancelled():
            self.send_error(
                msg_id, errors.REQUEST_CANCELLED, f'Request with id "{msg_id}" is canceled'
            )
            return
        exc = future.exception()
        if exc is None:
            self._answer_result(msg_id, method, future.result())
        else:
            self._answer_error(msg_id, method, exc)

    def _answer_result(self, msg_id: MsgId, method: str, result: Any) -> None:
        if method == INITIALIZE:
            self.initialized = True
        self.send_json({"jsonrpc": "2.0", "id": msg_id, "result": result})

    def _answer_error(self, msg_id: MsgId, method: str, exc: BaseException) -> None:
        """An error answer; internal errors keep their traceback in the log, not on the wire."""
        if isinstance(exc, ResponseError):
            if method == INITIALIZE and exc.code == errors.INVALID_PARAMS:
                # Params that do not decode: as if it was never sent, the client may retry.
                self._initialize_seen = False
            level = logging.INFO if exc.code in ANSWERS else logging.ERROR
            log.log(level, "request %r (%s): %s", msg_id, method, exc.message)
            error: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if exc.data is not None and exc.code != errors.INTERNAL_ERROR:
                error["data"] = exc.data
        else:
            log.error("request %r (%s) failed", msg_id, method, exc_info=exc)
            text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            error = {"code": errors.INTERNAL_ERROR, "message": text}
        self.send_json({"jsonrpc": "2.0", "id": msg_id, "error": error})

    # -- requests in flight --------------------------------------------------------
    def in_flight(self) -> int:
        """The client's requests admitted and not answered yet (the transport caps them)."""
        return len(self._running)

    def pending_requests(
        self, *, with_shutdown: bool = False
    ) -> dict[MsgId, tuple[str, asyncio.Future[Any]]]:
        """The client's requests still running: id → (method, future)."""
        skip = {INITIALIZE} if with_shutdown else {INITIALIZE, SHUTDOWN}
        return {
            msg_id: (method, future)
            for msg_id, (method, future) in self._running.items()
            if method not in skip and not future.done()
        }

    async def cancel_requests(self, timeout: float = 5.0) -> None:
        """Cancel the requests whose handlers still run (their process groups die)."""
        tasks = [f for _, f in self._running.values() if isinstance(f, asyncio.Task)]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    # -- outgoing ----------------------------------------------------------------
    def send_json(self, payload: dict[str, Any]) -> None:
        """Write one message; values json cannot encode go through ``encode``."""
        writer = self._writer
        if writer is None:
            log.error("no transport to send %s", payload.get("method") or payload.get("id"))
            return
        try:
            body = self._encoder.encode(payload).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as exc:
            log.error("cannot encode a message: %s", exc)
            if "id" in payload and "method" not in payload:
                message = f"Unencodable result: {exc}"
                self.send_error(payload["id"], errors.INTERNAL_ERROR, message)
            return
        writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    def send_error(self, msg_id: MsgId | None, code: int, message: str) -> None:
        """Write a JSON-RPC error response (``msg_id`` None when the id is unknown)."""
        error = {"code": code, "message": message}
        self.send_json({"jsonrpc": "2.0", "id": msg_id, "error": error})

    def _encode(self, value: Any) -> Any:
        if isinstance(value, enum.Enum):
            return value.value
        if self._encode_other is not None:
            return self._encode_other(value)
        raise TypeError(f"{type(value).__name__} is not JSON")

    def notify(self, method: str, params: Any | None = None) -> None:
        """Send a notification."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send_json(message)

    def send_request(self, method: str, params: Any | None = None) -> asyncio.Future[Any]:
        """Send a request to the client (on the loop); the future holds its raw result, or
        a ResponseError. Cancel it to give up: a late answer is then ignored."""
        msg_id = str(uuid.uuid4())
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._sent[msg_id] = future
        future.add_done_callback(lambda _: self._sent.pop(msg_id, None))
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send_json(message)
        return future


def _run(handler: Handler, params: Any) -> asyncio.Future[Any]:
    """Start ``handler``: a coroutine as a task, anything else at once."""
    if inspect.iscoroutinefunction(handler):
        return asyncio.ensure_future(handler(params))
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    try:
        result = handler(params)
    except Exception as exc:
        future.set_exception(exc)
        return future
    if inspect.isawaitable(result):
        return asyncio.ensure_future(result)
    future.set_result(result)
    return future


def _log_failure(method: str, future: asyncio.Future[Any]) -> None:
    """A notification's handler failed: nobody waits for an answer, so log it."""
    if not future.cancelled() and (exc := future.exception()) is not None:
        log.error("notification %s failed", method, exc_info=exc)
