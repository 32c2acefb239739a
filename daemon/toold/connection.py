"""One session's JSON-RPC connection: admission, dispatch and replies, owned here.

pygls's LanguageServerProtocol supplies LSP's built-in methods (initialize's
capabilities, progress, text documents), the feature table ``fm`` that
``server.feature`` fills and lsprotocol's converter. What a message goes through
between the framing (transport.py) and a handler is toold's own, through pygls's
public names only: LSP's lifecycle rules (-32002 before initialize, -32600 after
shutdown), the client's requests in flight, the requests sent to the client, and
the JSON written back. Handlers run as pygls runs them: a coroutine as a task, a
plain function or a generator's steps at once (``initialize`` is answered before
the next message is read).
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
from collections.abc import Callable, Generator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from toold_protocol import errors

if TYPE_CHECKING:
    from cattrs import Converter
    from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)

MsgId = str | int
ANSWERS = (
    errors.INVALID_REQUEST,
    errors.METHOD_NOT_FOUND,
    errors.INVALID_PARAMS,
    errors.NOT_FOUND,
)
"""Error codes that are ordinary answers (bad params, an unknown job): logged at info."""


class TooldProtocol(LanguageServerProtocol):
    """LSP over one connection: toold's admission, request table and replies."""

    def __init__(self, server: LanguageServer, converter: Converter) -> None:
        super().__init__(server, converter)
        self.converter = converter
        self.max_message_bytes = errors.MAX_MESSAGE_BYTES
        """The framing's cap on one message (the transport reads it per message)."""
        self.initialized = False
        self.shutting_down = False
        self.experimental: Any = None
        """``capabilities.experimental`` of initialize's answer (the server fills it)."""
        self._initialize_seen = False
        self._running: dict[MsgId, tuple[str, asyncio.Future[Any]]] = {}
        """The client's requests admitted and not answered yet: id → (method, future)."""
        self._sent: dict[MsgId, tuple[Future[Any], Any]] = {}
        """Requests sent to the client and not answered: id → (future, response type)."""

    # -- incoming ----------------------------------------------------------------
    def dispatch(self, data: dict[str, Any]) -> None:
        """Route one JSON-RPC 2.0 message (a dict the transport has checked)."""
        method = data.get("method")
        if method is None:
            self._take_response(data)
        elif "id" not in data:
            self._take_notification(method, data)
        elif self._admit(data["id"], method):
            contextvars.copy_context().run(self._start_request, data["id"], method, data)

    def _admit(self, msg_id: MsgId, method: str) -> bool:
        """Lifecycle rules for a request: -32600 after shutdown, -32002 before initialize."""
        if self.shutting_down:
            self.send_error(msg_id, errors.INVALID_REQUEST, "Server is shutting down")
            return False
        if method == types.INITIALIZE:
            if self._initialize_seen:
                self.send_error(msg_id, errors.INVALID_REQUEST, "initialize may only be sent once")
                return False
            return True
        if not self.initialized:
            self.send_error(msg_id, errors.SERVER_NOT_INITIALIZED, "Server not initialized")
            return False
        return True

    def _start_request(self, msg_id: MsgId, method: str, data: dict[str, Any]) -> None:
        try:
            params = self.structure_message(data).params
        except JsonRpcException as exc:
            self.send_error(msg_id, exc.code, exc.message or "Invalid params")
            return
        handler = self._handler(method)
        if handler is None:
            log.info("request %r: unknown method %r", msg_id, method)
            self.send_error(msg_id, errors.METHOD_NOT_FOUND, f"Method Not Found: {method}")
            return
        future = self._execute(handler, (params,))
        self._running[msg_id] = (method, future)
        if future.done():
            self._answer(msg_id, method, future)
        else:
            future.add_done_callback(functools.partial(self._answer, msg_id, method))

    def _take_notification(self, method: str, data: dict[str, Any]) -> None:
        if method != types.EXIT and (self.shutting_down or not self.initialized):
            when = "during shutdown" if self.shutting_down else "before initialize"
            log.warning("dropping %s received %s", method, when)
            return
        if method == types.CANCEL_REQUEST:
            params = data.get("params")
            target = params.get("id") if isinstance(params, dict) else None
            if not isinstance(target, (str, int)) or isinstance(target, bool):
                log.warning("dropping $/cancelRequest without a valid id: %r", params)
                return
            self._cancel(target)
            return
        try:
            params = self.structure_message(data).params
        except JsonRpcException as exc:
            log.warning("dropping undecodable notification %s: %s", method, exc)
            return
        handler = self._handler(method)
        if handler is None:
            log.warning("ignoring notification for unknown method %r", method)
            return
        future = contextvars.copy_context().run(self._execute, handler, (params,))
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
        # Only ids of requests this daemon sent: a client's "response" must never
        # complete one of its own requests' futures.
        sent = self._sent.pop(msg_id, None) if isinstance(msg_id, (str, int)) else None
        if sent is None:
            log.warning("ignoring a response to unknown request %r", msg_id)
            return
        future, response_type = sent
        # Also during the shutdown grace: a call received before shutdown may be waiting
        # for this answer (a permission prompt) to finish.
        if future.done():  # given up on (timed out): the answer is too late
            return
        try:
            if "error" in data:
                error = self.converter.structure(data["error"], types.ResponseError)
                future.set_exception(JsonRpcException.from_error(error))
            elif response_type is None:
                future.set_result(data.get("result"))
            else:
                future.set_result(self.converter.structure(data, response_type).result)
        except Exception as exc:  # a malformed answer: the request got none
            log.warning("undecodable response to %r: %s", msg_id, exc)
            future.set_exception(JsonRpcException(f"Undecodable response: {exc}"))

    def structure_message(self, data: dict[str, Any]) -> Any:
        """Raw JSON params for methods without an LSP type (toold's, unknown ones)."""
        method = data.get("method")
        if isinstance(method, str) and self.get_message_type(method) is None:
            if "id" in data:
                return JsonRPCRequestMessage(
                    id=data["id"], method=method, jsonrpc="2.0", params=data.get("params")
                )
            return JsonRPCNotification(method=method, jsonrpc="2.0", params=data.get("params"))
        return super().structure_message(data)

    # -- running handlers ----------------------------------------------------------
    def _handler(self, method: str) -> Callable[..., Any] | None:
        """pygls's built-in method (which calls the server's own, if any) or the server's."""
        return self.fm.builtin_features.get(method) or self.fm.features.get(method)

    def _execute(
        self, handler: Callable[..., Any], args: tuple[Any, ...], kwargs: Any = None
    ) -> asyncio.Future[Any]:
        """Start ``handler``: a coroutine as a task, anything else at once."""
        if inspect.iscoroutinefunction(handler):
            return asyncio.ensure_future(handler(*args, **(kwargs or {})))
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        try:
            result = handler(*args, **(kwargs or {}))
        except Exception as exc:
            future.set_exception(exc)
            return future
        if inspect.isgenerator(result):
            self._step(result, future, None)
        elif inspect.isawaitable(result):
            return asyncio.ensure_future(result)
        else:
            future.set_result(result)
        return future

    def _step(
        self,
        gen: Generator[Any, Any, Any],
        result: asyncio.Future[Any],
        previous: asyncio.Future[Any] | None,
    ) -> None:
        """Run a generator handler on: each ``yield (handler, args, kwargs)`` is executed
        and its result sent back in (pygls's built-ins are written this way)."""
        if result.done():  # cancelled meanwhile
            return
        try:
            value = None if previous is None else previous.result()
            handler, args, kwargs = gen.send(value)
        except StopIteration as stop:
            result.set_result(stop.value)
            return
        except asyncio.CancelledError:
            result.cancel()
            return
        except Exception as exc:
            result.set_exception(exc)
            return
        inner = self._execute(handler, tuple(args or ()), kwargs)
        if inner.done():
            self._step(gen, result, inner)
        else:
            inner.add_done_callback(functools.partial(self._step, gen, result))

    def _answer(self, msg_id: MsgId, method: str, future: asyncio.Future[Any]) -> None:
        """Answer a request once its handler is done; internal errors keep their
        traceback in the log, not on the wire."""
        if self._running.get(msg_id, (None, future))[1] is future:
            self._running.pop(msg_id, None)
        if future.cancelled():
            self.send_error(
                msg_id, errors.REQUEST_CANCELLED, f'Request with id "{msg_id}" is canceled'
            )
            return
        exc = future.exception()
        if exc is None:
            self.send_json({"jsonrpc": "2.0", "id": msg_id, "result": future.result()})
            return
        if isinstance(exc, JsonRpcException):
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

    def in_flight(self) -> int:
        """The client's requests admitted and not answered yet (the transport caps them)."""
        return len(self._running)

    def pending_requests(self, *, with_shutdown: bool = False) -> dict[Any, tuple[str, Any]]:
        """The client's requests still running: id → (method, future)."""
        skip = {types.INITIALIZE} if with_shutdown else {types.INITIALIZE, types.SHUTDOWN}
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
        """Write one message; LSP's attrs types inside go through lsprotocol's converter."""
        writer = self.writer
        if writer is None:
            log.error("no transport to send %s", payload.get("method") or payload.get("id"))
            return
        try:
            body = json.dumps(payload, default=self._encode, allow_nan=False).encode("utf-8")
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
        if hasattr(value, "__attrs_attrs__"):
            return self.converter.unstructure(value)
        if isinstance(value, enum.Enum):
            return value.value
        raise TypeError(f"{type(value).__name__} is not JSON")

    def notify(self, method: str, params: Any | None = None) -> None:
        """Send a notification."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send_json(message)

    def send_request(
        self,
        method: str,
        params: Any | None = None,
        callback: Callable[[Any], None] | None = None,
        msg_id: MsgId | None = None,
    ) -> Future[Any]:
        """Send a request to the client; the future holds its answer (pygls's
        ``send_request_async`` and the ``window_*_async`` helpers come through here)."""
        msg_id = str(uuid.uuid4()) if msg_id is None else msg_id
        future: Future[Any] = Future()
        self._sent[msg_id] = (future, self.get_result_type(method))
        # Given up on (a timeout cancels it): forget it, a late answer is ignored.
        future.add_done_callback(lambda _: self._sent.pop(msg_id, None))
        if callback is not None:
            future.add_done_callback(
                lambda f: None if f.cancelled() or f.exception() else callback(f.result())
            )
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send_json(message)
        return future

    # -- LSP's lifecycle -----------------------------------------------------------
    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Any:
        """pygls's initialize, plus ``experimental`` (toold's methods) in the capabilities."""
        self._initialize_seen = True
        result = yield from super().lsp_initialize(params)
        result.capabilities.experimental = self.experimental
        self.initialized = True
        return result

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Any:
        """Refuse requests from now on, then run the server's ``shutdown`` handler (it
        decides what happens to the requests in flight)."""
        self.shutting_down = True
        if (handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield handler, args, None
        return None

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> Any:
        """Run the server's ``exit`` handler; unlike pygls's, never ``sys.exit``."""
        if (handler := self.fm.features.get(types.EXIT)) is not None:
            yield handler, args, None


def _log_failure(method: str, future: asyncio.Future[Any]) -> None:
    """A notification's handler failed: nobody waits for an answer, so log it."""
    if not future.cancelled() and (exc := future.exception()) is not None:
        log.error("notification %s failed", method, exc_info=exc)
