"""The daemon: a pygls LanguageServer carrying toold's methods. Built by create_server()."""

from __future__ import annotations

import asyncio
import contextlib
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
    from toold.config import TooldConfig
    from toold.tools.toolset import ToolSet

log = logging.getLogger(__name__)

STATE_DIR = ".toold"


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
        self.config: TooldConfig
        self.toolset: ToolSet
        self._binding: asyncio.Future[None] | None = None
        self.stopped = asyncio.Event()
        self.exit_code = 0
        self._watch_handle: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start_binding(self, root: Path, overrides: dict[str, Any] | None) -> None:
        """Bind the workspace on a worker thread, so initialize answers at once."""
        self.root = root.resolve()
        loop = asyncio.get_running_loop()
        self._binding = loop.run_in_executor(None, self.bind_workspace, self.root, overrides)

    async def ready(self) -> None:
        """Wait until the workspace is bound (a no-op after the first time)."""
        if self._binding is None:
            self.bind_workspace(self.root, None)
            self._binding = asyncio.get_running_loop().create_future()
            self._binding.set_result(None)
        await self._binding

    def bind_workspace(self, root: Path, overrides: dict[str, Any] | None = None) -> None:
        """Load the workspace's configuration and bind every tool to it.

        An invalid configuration is reported to the client and replaced by defaults.
        """
        from toold.config import ConfigError, TooldConfig, load_config
        from toold.tools.provider import BuiltinToolProvider
        from toold.tools.runtime import ToolRuntime
        from toold.tools.toolset import ToolSet

        self.root = root.resolve()
        try:
            self.config = load_config(self.root, overrides)
        except ConfigError as exc:
            log.error("%s", exc)
            self.config = TooldConfig()
            self.show_error(f"toold: {exc}; using defaults")
        self.max_message_bytes = self._max_message_flag or self.config.limits.max_message_bytes
        runtime = ToolRuntime(workspace=self.root, config=self.config)
        self.toolset = ToolSet(BuiltinToolProvider(runtime).get_tools())

    def show_error(self, message: str) -> None:
        """window/showMessage an error (safe from any thread)."""
        params = types.ShowMessageParams(type=types.MessageType.Error, message=message)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None:
            self.window_show_message(params)
        elif self._loop is not None:
            self._loop.call_soon_threadsafe(self.window_show_message, params)

    @property
    def state_dir(self) -> Path:
        """toold's own folder inside the workspace."""
        return self.root / STATE_DIR

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
        options = params.initialization_options
        overrides = options.get("config") if isinstance(options, dict) else None
        server._loop = asyncio.get_running_loop()
        server.start_binding(root, overrides)
        if params.process_id:
            with contextlib.suppress(RuntimeError):
                server.watch_client(params.process_id)
        log.info("toold %s serving %s", __version__, server.root)

    @server.feature(types.EXIT)
    def on_exit(*_: Any) -> None:
        server.request_stop(0 if server.protocol._shutdown else 1)

    register_methods(server, HANDLERS)
    return server
