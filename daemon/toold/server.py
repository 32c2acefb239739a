"""The daemon: a pygls LanguageServer carrying toold's methods. Built by create_server()."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, LanguageServerProtocol
from pygls.protocol.json_rpc import RPCNotification, RPCRequest
from pygls.protocol.language_server import lsp_method
from pygls.uris import to_fs_path

from toold import __version__
from toold.initialization import InitializationOptions, parse_initialization_options
from toold.lifecycle import SessionEnd
from toold_protocol import ALL_METHODS, PROTOCOL_VERSION, errors

if TYPE_CHECKING:
    from toold.tools.toolset import ToolSet
    from toold.workspace import WorkspaceState

log = logging.getLogger(__name__)

ASK_ACTIONS = {"Allow": "allow", "Always allow": "always", "Deny": "deny"}


class TooldProtocol(LanguageServerProtocol):
    """LSP lifecycle rules pygls leaves out, and a short path for toold's own methods.

    The transport hands over messages already parsed and checked as JSON-RPC 2.0
    (``dispatch``). Requests for toold's methods go straight to their handler with raw
    params (validated by pydantic in rpc.py); everything else takes pygls's path. Replies
    are written as JSON directly, through lsprotocol's converter only for LSP's types.
    """

    _server: TooldServer

    def __init__(self, server: TooldServer, converter: Any) -> None:
        super().__init__(server, converter)
        self.initialized = False
        self._initialize_seen = False
        self._inflight: dict[Any, str] = {}
        """The client's requests admitted and not answered yet: id → method."""

    # -- incoming ----------------------------------------------------------------
    def dispatch(self, data: dict[str, Any]) -> None:
        """Route one JSON-RPC 2.0 message (a dict the transport has checked)."""
        method = data.get("method")
        if method is None:
            self._dispatch_response(data)
            return
        if "id" not in data:
            self._dispatch_notification(method, data)
            return
        msg_id = data["id"]
        if not self._admit(msg_id, method):
            return
        if method in ALL_METHODS:
            contextvars.copy_context().run(self._handle_request, msg_id, method, data.get("params"))
            return
        try:
            message = self.structure_message(data)
        except JsonRpcException as exc:
            self._reject(msg_id, exc.code, exc.message or "Invalid params")
            return
        super().handle_message(message)

    def _admit(self, msg_id: Any, method: str) -> bool:
        """Lifecycle rules for a request: -32600 after shutdown, -32002 before initialize."""
        if self._shutdown:
            self._reject(msg_id, errors.INVALID_REQUEST, "Server is shutting down")
            return False
        if method == types.INITIALIZE:
            if self._initialize_seen:
                self._reject(msg_id, errors.INVALID_REQUEST, "initialize may only be sent once")
                return False
            return True
        if not self.initialized:
            self._reject(msg_id, errors.SERVER_NOT_INITIALIZED, "Server not initialized")
            return False
        self._inflight[msg_id] = method
        return True

    def pending_requests(self, *, with_shutdown: bool = False) -> dict[Any, tuple[str, Any]]:
        """The client's requests still running: id → (method, future)."""
        return {
            msg_id: (method, future)
            for msg_id, method in self._inflight.items()
            if (with_shutdown or method != types.SHUTDOWN)
            and (future := self._request_futures.get(msg_id)) is not None
            and not future.done()
        }

    def _dispatch_notification(self, method: str, data: dict[str, Any]) -> None:
        if not self.initialized and method != types.EXIT:
            log.warning("dropping %s received before initialize", method)
            return
        if method == types.CANCEL_REQUEST:
            params = data.get("params")
            target = params.get("id") if isinstance(params, dict) else None
            if not isinstance(target, (str, int)) or isinstance(target, bool):
                log.warning("dropping $/cancelRequest without a valid id: %r", params)
                return
        self._handle_or_drop(data, f"notification {method}")

    def _dispatch_response(self, data: dict[str, Any]) -> None:
        msg_id = data["id"]
        # Only ids of requests this daemon sent: a client's "response" must never
        # complete one of its own requests' futures.
        if not isinstance(msg_id, (str, int)) or msg_id not in self._result_types:
            log.warning("ignoring a response to unknown request %r", msg_id)
            return
        self._handle_or_drop(data, f"response to {msg_id!r}")

    def _handle_or_drop(self, data: dict[str, Any], what: str) -> None:
        """Hand a notification or response to pygls; one it cannot decode is logged."""
        try:
            message = self.structure_message(data)
        except JsonRpcException as exc:
            log.warning("dropping undecodable %s: %s", what, exc)
            return
        super().handle_message(message)

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

    def handle_message(self, message: Any) -> None:
        """pygls's entry point for structured messages, with toold's lifecycle rules."""
        method = getattr(message, "method", None)
        if isinstance(message, RPCRequest):
            if not self._admit(message.id, method or ""):
                return
        elif isinstance(message, RPCNotification) and not self.initialized and method != types.EXIT:
            log.warning("dropping %s received before initialize", method)
            return
        super().handle_message(message)

    # -- outgoing ----------------------------------------------------------------
    def send_json(self, payload: dict[str, Any]) -> None:
        """Write one message; LSP's attrs types inside go through lsprotocol's converter."""
        writer = self.writer
        if writer is None:
            log.error("no transport to send %s", payload.get("method") or payload.get("id"))
            return
        try:
            body = json.dumps(payload, default=self._serialize_message, allow_nan=False).encode(
                "utf-8"
            )
        except (TypeError, ValueError, RecursionError) as exc:
            log.error("cannot encode a message: %s", exc)
            if "id" in payload and "method" not in payload:
                error = {"code": errors.INTERNAL_ERROR, "message": f"Unencodable result: {exc}"}
                self.send_json({"jsonrpc": "2.0", "id": payload["id"], "error": error})
            return
        writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    def _send_data(self, data: Any) -> None:
        if not data:
            return
        if isinstance(data, dict):
            self.send_json(data)
            return
        super()._send_data(data)

    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        """Answer a request; internal errors keep their traceback in the log, not the wire."""
        self._inflight.pop(msg_id, None)
        if error is None:
            self.send_json({"jsonrpc": "2.0", "id": msg_id, "result": result})
            return
        if getattr(error, "code", None) == errors.INTERNAL_ERROR and getattr(error, "data", None):
            log.error("internal error answering %r: %s", msg_id, error.data)
            error.data = None
        self.send_json({"jsonrpc": "2.0", "id": msg_id, "error": error})

    def _reject(self, msg_id: Any, code: int, text: str) -> None:
        self._inflight.pop(msg_id, None)
        self.send_json({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": text}})

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Any:
        """pygls's initialize, plus toold's methods under capabilities.experimental."""
        self._initialize_seen = True
        result = yield from super().lsp_initialize(params)
        result.capabilities.experimental = {
            "toold": {
                "protocolVersion": PROTOCOL_VERSION,
                "methods": sorted(ALL_METHODS),
                "workspace": os.fspath(self._server.root),
            }
        }
        self.initialized = True
        return result

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Any:
        """Answered once every request received before it is answered; requests after it
        are refused (-32600) at once. ``limits.shutdown_grace`` bounds the wait."""
        self._shutdown = True
        yield self._server.ending.finish_requests, (), None
        return None

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> Any:
        """Stop serving; a ``shutdown`` still being answered is answered first (a script
        piped from a file sends ``exit`` right behind it)."""
        yield self._server.ending.exit, (), None


class WorkDone:
    """One request's progress: ``report`` texts, then the ``outcome`` its end names
    (``done`` unless the handler says otherwise; ``cancelled`` or ``failed`` when it
    was cancelled or raised)."""

    def __init__(self, server: TooldServer, token: types.ProgressToken | None) -> None:
        self._server, self._token = server, token
        self.outcome = "done"

    @property
    def reporting(self) -> bool:
        """Whether the client asked for progress (reports are dropped otherwise)."""
        return self._token is not None

    def report(self, text: str) -> None:
        """One ``$/progress`` report."""
        if self._token is not None:
            self._server.work_done_progress.report(
                self._token, types.WorkDoneProgressReport(message=text)
            )


class TooldServer(LanguageServer):
    """One daemon for one workspace."""

    protocol: TooldProtocol

    def __init__(
        self,
        workspace: Path | None = None,
        *,
        max_message_bytes: int | None = None,
    ) -> None:
        super().__init__("toold", __version__, protocol_cls=TooldProtocol)
        self.workspace_override = workspace
        self.root = (workspace or Path.cwd()).resolve()
        self._max_message_flag = max_message_bytes
        self.max_message_bytes = max_message_bytes or errors.MAX_MESSAGE_BYTES
        self.state: WorkspaceState
        self._binding: asyncio.Future[None] | None = None
        self._cancellable: dict[types.ProgressToken, asyncio.Task[Any]] = {}
        self._reload: asyncio.Future[str | None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self.stopped = asyncio.Event()
        self.exit_code = 0
        self.ending = SessionEnd(self)
        self._watch_handle: Any = None
        self.client_process_id: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- binding -----------------------------------------------------------------
    def start_binding(
        self, root: Path, overrides: dict[str, Any] | None, execution_events: bool = False
    ) -> None:
        """Bind the workspace on a worker thread, so initialize answers at once."""
        self.root = root.resolve()
        self._loop = loop = asyncio.get_running_loop()
        future = loop.run_in_executor(
            None, self.bind_workspace, self.root, overrides, execution_events
        )
        self._binding = asyncio.ensure_future(self._after_binding(future))

    async def _after_binding(self, bound: asyncio.Future[None]) -> None:
        await bound
        from toold.watch import watch_workspace

        self.spawn(watch_workspace(self.state, self.show_error))

    async def bound(self) -> None:
        """Wait until the workspace is bound (a no-op after the first time)."""
        if self._binding is None:
            self._loop = asyncio.get_running_loop()
            self.bind_workspace(self.root, None)
            self._binding = self._loop.create_future()
            self._binding.set_result(None)
        await self._binding

    async def ready(self) -> None:
        """Wait until the workspace is bound and a configuration change sent before is applied."""
        await self.bound()
        reload = self._reload
        if reload is not None and not reload.done():
            await asyncio.shield(reload)

    async def reload_config(self, overrides: dict[str, Any] | None) -> None:
        """Apply ``workspace/didChangeConfiguration`` off the loop (a runner may probe
        bwrap or Docker for seconds); requests received meanwhile wait for it."""
        previous = self._reload

        async def apply() -> str | None:
            if previous is not None:  # changes apply in the order they were sent
                await asyncio.wait([previous])
            return await self.state.reload(overrides)  # a user action: its own keys apply

        self._reload = asyncio.ensure_future(apply())
        problem = await asyncio.shield(self._reload)
        if problem:
            self.show_error(problem)

    def bind_workspace(
        self, root: Path, overrides: dict[str, Any] | None = None, execution_events: bool = False
    ) -> None:
        """Load the configuration and bind stores, runner and tools to ``root``."""
        from toold.workspace import bind

        # Capabilities are known by now (binding follows initialize) and never change:
        # a client that cannot show message requests makes the guard non-interactive.
        ask = self.ask_user if self.can_ask() else None
        self.state = bind(
            root,
            overrides,
            self.push,
            self.show_error,
            execution_events,
            ask=ask,
            warn=self.show_warning,
            confirm=self.confirm if self.can_ask() else None,
        )
        self.root = self.state.root
        self.max_message_bytes = (
            self._max_message_flag or self.state.config.limits.max_message_bytes
        )

    @property
    def toolset(self) -> ToolSet:
        """The bound tools."""
        return self.state.toolset

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        """Run a background coroutine for the daemon's life."""
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # -- talking to the client (safe from any thread) ----------------------------------
    def _in_loop(self, func: Any, *args: Any) -> None:
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            func(*args)
        else:
            loop.call_soon_threadsafe(func, *args)

    @contextlib.contextmanager
    def work_done(self, token: types.ProgressToken | None, title: str) -> Iterator[WorkDone]:
        """``$/progress`` begin, reports and end for a request carrying ``token``.

        The client's ``window/workDoneProgress/cancel`` for the token cancels the
        running request (answered -32800), as ``$/cancelRequest`` does. Without a
        token nothing is sent.
        """
        done = WorkDone(self, token)
        if token is None:
            yield done
            return
        self.work_done_progress.begin(
            token, types.WorkDoneProgressBegin(title=title, cancellable=True)
        )
        task = asyncio.current_task()
        if task is not None:
            self._cancellable[token] = task
        try:
            yield done
        except asyncio.CancelledError:
            done.outcome = "cancelled"
            raise
        except Exception:
            done.outcome = "failed"
            raise
        finally:
            self._cancellable.pop(token, None)
            self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=done.outcome))

    def cancel_work(self, token: types.ProgressToken) -> None:
        """Cancel the request whose progress ``token`` the client cancelled."""
        task = self._cancellable.get(token)
        if task is not None:
            task.cancel()

    def push(self, method: str, params: dict[str, Any]) -> None:
        """Send one of the contract's notifications, validated against its model."""
        from toold.rpc import dump
        from toold_protocol import METHODS

        payload = dump(METHODS[method].params.model_validate(params))
        self._in_loop(self.protocol.notify, method, payload)

    def show_error(self, message: str, kind: types.MessageType = types.MessageType.Error) -> None:
        """window/showMessage an error (or a message of another ``kind``) to the user."""
        log.log(
            logging.ERROR if kind == types.MessageType.Error else logging.WARNING, "%s", message
        )
        params = types.ShowMessageParams(type=kind, message=f"toold: {message}")
        self._in_loop(self.window_show_message, params)

    def show_warning(self, message: str) -> None:
        """window/showMessage a warning to the user."""
        self.show_error(message, types.MessageType.Warning)

    def can_ask(self) -> bool:
        """Whether the client said it can show message requests with actions."""
        capabilities = getattr(self.protocol, "client_capabilities", None)
        window = getattr(capabilities, "window", None)
        return getattr(window, "show_message", None) is not None

    async def ask_user(self, tool: str, args: Any, reason: str) -> str | None:
        """window/showMessageRequest: Allow / Always allow / Deny; None without an answer."""
        if not self.can_ask():
            return None
        from toold.permissions.prompt import summary as prompt_summary

        summary = prompt_summary(args)
        params = types.ShowMessageRequestParams(
            type=types.MessageType.Warning,
            message=f"toold: the agent wants to run {tool} {summary} ({reason}). Allow it?",
            actions=[types.MessageActionItem(title=t) for t in ASK_ACTIONS],
        )
        timeout = self.state.config.permissions.ask_timeout
        try:
            item = await asyncio.wait_for(self.window_show_message_request_async(params), timeout)
        except (TimeoutError, JsonRpcException) as exc:
            log.info("permission request for %s got no answer: %s", tool, exc or "timeout")
            return None
        title = getattr(item, "title", None)
        return ASK_ACTIONS.get(title) if isinstance(title, str) else None

    async def confirm(self, message: str, actions: list[str], timeout: float) -> str | None:
        """window/showMessageRequest offering ``actions``: the title chosen, None without one."""
        params = types.ShowMessageRequestParams(
            type=types.MessageType.Warning,
            message=f"toold: {message}",
            actions=[types.MessageActionItem(title=t) for t in actions],
        )
        try:
            item = await asyncio.wait_for(self.window_show_message_request_async(params), timeout)
        except (TimeoutError, JsonRpcException) as exc:
            log.info("no answer to %r: %s", message, exc or "timeout")
            return None
        title = getattr(item, "title", None)
        return title if title in actions else None

    async def close(self) -> None:
        """Stop background work: watchers, jobs, sandboxes."""
        for task in list(self._background):
            task.cancel()
        if self._binding is not None and self._binding.done() and hasattr(self, "state"):
            await self.state.aclose()

    def request_stop(self, exit_code: int = 0) -> None:
        """Ask the serve loop to finish (the first reason given sets the exit code)."""
        if not self.stopped.is_set():
            self.exit_code = exit_code
            self.stopped.set()

    async def binding_settled(self) -> None:
        """Wait for a workspace binding in progress to end (bound or failed)."""
        if self._binding is not None:
            await asyncio.wait([self._binding])

    async def cancel_inflight(self) -> None:
        """Cancel running requests so their process groups die before we exit."""
        pending: list[Any] = [
            f for f in self.protocol._request_futures.values() if isinstance(f, asyncio.Future)
        ]
        for fut in pending:
            fut.cancel()
        if pending:
            await asyncio.wait(pending, timeout=5)

    def watch_client(self, pid: int) -> None:
        """Exit when the editor process ``pid`` dies (LSP's processId)."""
        loop = asyncio.get_running_loop()
        try:
            fd = os.pidfd_open(pid)
        except (OSError, AttributeError):
            self._poll_client(pid)
            return

        def on_exit() -> None:
            loop.remove_reader(fd)
            os.close(fd)
            log.info("client process %s exited; stopping", pid)
            self.request_stop(0)

        loop.add_reader(fd, on_exit)

    def _poll_client(self, pid: int) -> None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            log.info("client process %s exited; stopping", pid)
            self.request_stop(0)
            return
        except PermissionError:
            pass
        self._watch_handle = asyncio.get_running_loop().call_later(2.0, self._poll_client, pid)

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Log only; request errors already reach the client in their response."""
        if isinstance(error, JsonRpcException) and error.code in (
            errors.INVALID_PARAMS,
            errors.METHOD_NOT_FOUND,
        ):
            log.info("%s", error)
        else:
            log.error("%s", error)


def _workspace_from(params: types.InitializeParams, options: InitializationOptions) -> Path | None:
    if options.workspace:
        return Path(options.workspace)
    if params.workspace_folders:
        return Path(to_fs_path(params.workspace_folders[0].uri) or ".")
    if params.root_uri:
        return Path(to_fs_path(params.root_uri) or ".")
    if params.root_path:
        return Path(params.root_path)
    return None


def create_server(
    workspace: Path | None = None,
    *,
    max_message_bytes: int | None = None,
    client_process_id: int | None = None,
) -> TooldServer:
    """Build a daemon; ``workspace`` (the --workspace flag) beats what initialize says.

    ``client_process_id`` (--clientProcessId) is watched from the start, like initialize's
    processId."""
    from toold.handlers import HANDLERS
    from toold.rpc import register_methods

    server = TooldServer(workspace, max_message_bytes=max_message_bytes)
    server.client_process_id = client_process_id

    @server.feature(types.INITIALIZE)
    def on_initialize(params: types.InitializeParams) -> None:
        options = parse_initialization_options(params.initialization_options)
        for problem in options.problems:
            server.show_error(problem)
        root = server.workspace_override or _workspace_from(params, options) or Path.cwd()
        server.start_binding(root, options.overrides, options.execution_events)
        if params.process_id and params.process_id != server.client_process_id:
            with contextlib.suppress(RuntimeError):
                server.watch_client(params.process_id)
        log.info("toold %s serving %s", __version__, server.root)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_configuration(params: types.DidChangeConfigurationParams) -> None:
        await server.bound()  # not ready(): changes queue behind each other in reload_config
        settings = params.settings
        if isinstance(settings, dict) and isinstance(settings.get("toold"), dict):
            settings = settings["toold"]
        overrides = settings.get("config", settings) if isinstance(settings, dict) else None
        await server.reload_config(overrides if isinstance(overrides, dict) else None)

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def on_progress_cancel(params: types.WorkDoneProgressCancelParams) -> None:
        server.cancel_work(params.token)

    register_methods(server, HANDLERS)
    return server
