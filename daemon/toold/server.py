"""The daemon: a pygls LanguageServer carrying toold's methods. Built by create_server()."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
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
from toold_protocol import ALL_METHODS, PROTOCOL_VERSION, errors

if TYPE_CHECKING:
    from toold.binding import WorkspaceState
    from toold.tools.toolset import ToolSet

log = logging.getLogger(__name__)

ASK_ACTIONS = {"Allow": "allow", "Always allow": "always", "Deny": "deny"}


class TooldProtocol(LanguageServerProtocol):
    """LSP lifecycle rules pygls leaves out, and raw params for toold's methods."""

    _server: TooldServer

    def __init__(self, server: TooldServer, converter: Any) -> None:
        super().__init__(server, converter)
        self.initialized = False

    def structure_message(self, data: dict[str, Any]) -> Any:
        """Keep toold's params as raw JSON (validated by pydantic in rpc.py)."""
        method = data.get("method")
        if isinstance(method, str) and method in ALL_METHODS:
            if "id" in data:
                return JsonRPCRequestMessage(
                    id=data["id"], method=method, jsonrpc="2.0", params=data.get("params")
                )
            return JsonRPCNotification(method=method, jsonrpc="2.0", params=data.get("params"))
        return super().structure_message(data)

    def handle_message(self, message: Any) -> None:
        """Answer -32002 before initialize and InvalidRequest after shutdown."""
        method = getattr(message, "method", None)
        if isinstance(message, RPCRequest):
            if self._shutdown:
                self._reject(message.id, errors.INVALID_REQUEST, "Server is shutting down")
                return
            if not self.initialized and method != types.INITIALIZE:
                self._reject(message.id, errors.SERVER_NOT_INITIALIZED, "Server not initialized")
                return
        elif isinstance(message, RPCNotification) and not self.initialized and method != types.EXIT:
            log.warning("dropping %s received before initialize", method)
            return
        super().handle_message(message)

    def _reject(self, msg_id: Any, code: int, text: str) -> None:
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": text}})

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Any:
        """pygls's initialize, plus toold's methods under capabilities.experimental."""
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


class TooldServer(LanguageServer):
    """One daemon for one workspace."""

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
        self._background: set[asyncio.Task[Any]] = set()
        self.stopped = asyncio.Event()
        self.exit_code = 0
        self._watch_handle: Any = None
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

    async def ready(self) -> None:
        """Wait until the workspace is bound (a no-op after the first time)."""
        if self._binding is None:
            self._loop = asyncio.get_running_loop()
            self.bind_workspace(self.root, None)
            self._binding = self._loop.create_future()
            self._binding.set_result(None)
        await self._binding

    def bind_workspace(
        self, root: Path, overrides: dict[str, Any] | None = None, execution_events: bool = False
    ) -> None:
        """Load the configuration and bind stores, runner and tools to ``root``."""
        from toold.binding import bind

        self.state = bind(
            root, overrides, self.push, self.show_error, execution_events, ask=self.ask_user
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

    def push(self, method: str, params: dict[str, Any]) -> None:
        """Send one of the contract's notifications, validated against its model."""
        from toold.rpc import dump
        from toold_protocol import METHODS

        payload = dump(METHODS[method].params.model_validate(params))
        self._in_loop(self.protocol.notify, method, payload)

    def show_error(self, message: str) -> None:
        """window/showMessage an error to the user."""
        log.error("%s", message)
        params = types.ShowMessageParams(type=types.MessageType.Error, message=f"toold: {message}")
        self._in_loop(self.window_show_message, params)

    def can_ask(self) -> bool:
        """Whether the client said it can show message requests with actions."""
        capabilities = getattr(self.protocol, "client_capabilities", None)
        window = getattr(capabilities, "window", None)
        return getattr(window, "show_message", None) is not None

    async def ask_user(self, tool: str, args: Any, reason: str) -> str | None:
        """window/showMessageRequest: Allow / Always allow / Deny; None without an answer."""
        if not self.can_ask():
            return None
        summary = json.dumps(args, ensure_ascii=False, default=str)
        if len(summary) > 300:
            summary = summary[:300] + "…"
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

    async def close(self) -> None:
        """Stop background work: watchers, jobs, sandboxes."""
        for task in list(self._background):
            task.cancel()
        if self._binding is not None and self._binding.done() and hasattr(self, "state"):
            await self.state.jobs.close()
            if self.state.team is not None:
                await self.state.team.close()
            await self.state.runner.close()

    def request_stop(self, exit_code: int = 0) -> None:
        """Ask the serve loop to finish."""
        self.exit_code = exit_code
        self.stopped.set()

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


def _workspace_from(params: types.InitializeParams) -> Path | None:
    options = params.initialization_options
    if isinstance(options, dict) and options.get("workspace"):
        return Path(options["workspace"])
    if params.workspace_folders:
        return Path(to_fs_path(params.workspace_folders[0].uri) or ".")
    if params.root_uri:
        return Path(to_fs_path(params.root_uri) or ".")
    if params.root_path:
        return Path(params.root_path)
    return None


def create_server(
    workspace: Path | None = None, *, max_message_bytes: int | None = None
) -> TooldServer:
    """Build a daemon; ``workspace`` (the --workspace flag) beats what initialize says."""
    from toold.handlers import HANDLERS
    from toold.rpc import register_methods

    server = TooldServer(workspace, max_message_bytes=max_message_bytes)

    @server.feature(types.INITIALIZE)
    def on_initialize(params: types.InitializeParams) -> None:
        root = server.workspace_override or _workspace_from(params) or Path.cwd()
        options = (
            params.initialization_options if isinstance(params.initialization_options, dict) else {}
        )
        server.start_binding(root, options.get("config"), bool(options.get("executionEvents")))
        if params.process_id:
            with contextlib.suppress(RuntimeError):
                server.watch_client(params.process_id)
        log.info("toold %s serving %s", __version__, server.root)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_configuration(params: types.DidChangeConfigurationParams) -> None:
        await server.ready()
        settings = params.settings
        if isinstance(settings, dict) and isinstance(settings.get("toold"), dict):
            settings = settings["toold"]
        overrides = settings.get("config", settings) if isinstance(settings, dict) else None
        problem = server.state.reload_config(overrides if isinstance(overrides, dict) else None)
        if problem:
            server.show_error(problem)

    @server.feature(types.EXIT)
    def on_exit(*_: Any) -> None:
        server.request_stop(0 if server.protocol._shutdown else 1)

    register_methods(server, HANDLERS)
    return server
