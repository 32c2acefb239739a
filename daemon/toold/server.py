"""One session of toold's LSP-framed front end (``LspSession``). Built by create_server().

A session is one client's: its JSON-RPC connection (connection.py), its editor
(editor.py), the workspace it serves (binding.py), how it ends (lifecycle.py: shutdown,
exit, the end of input, the client process dying). Here those parts are put together
and LSP's own methods answered: ``initialize`` (toold's capabilities under
``experimental``), ``shutdown``, ``exit``, ``workspace/didChangeConfiguration`` and
``window/workDoneProgress/cancel``; toold's custom methods go to their handlers through
the typed table (toold.handlers), each with a Context of what it uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pygls.uris import to_fs_path

from toold import __version__, handlers
from toold.binding import ConfigReloads, WorkspaceBinding
from toold.config import LimitsConfig, PermissionsConfig
from toold.connection import (
    EXIT,
    INITIALIZE,
    INITIALIZED,
    SHUTDOWN,
    JsonRpcConnection,
    ResponseError,
)
from toold.editor import Editor
from toold.initialization import parse_initialization_options
from toold.initialize_params import InitializeParams, UndecodableParams, converter, read_initialize
from toold.lifecycle import ClientWatch, SessionEnd
from toold.modes import SessionMode
from toold.rpc import Context
from toold.transport import FrameWriter, serve_streams
from toold_protocol import ALL_METHODS, PROTOCOL_VERSION, errors
from toold_protocol.names import CLIENT_REQUESTS

if TYPE_CHECKING:
    from toold.tools.base import Tool
    from toold.workspace import WorkspaceState
    from toold_protocol.models import InitializationOptions

log = logging.getLogger(__name__)
SET_TRACE = "$/setTrace"
DID_CHANGE_CONFIGURATION = "workspace/didChangeConfiguration"
PROGRESS_CANCEL = "window/workDoneProgress/cancel"


def _unstructure(value: Any) -> Any:
    """An lsprotocol type as JSON (what the connection cannot encode itself)."""
    if hasattr(value, "__attrs_attrs__"):
        return converter().unstructure(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


class LspSession:
    """One client's session with a workspace."""

    def __init__(
        self,
        workspace: Path | None = None,
        *,
        max_message_bytes: int | None = None,
        state: WorkspaceState | None = None,
        client_process_id: int | None = None,
        from_tool: bool = False,
    ) -> None:
        self.connection = JsonRpcConnection(encode=_unstructure)
        self.editor = Editor(
            self.connection, tool_named=self._tool_named, prompt_timeout=self._prompt_timeout
        )
        self.workspace_override = workspace
        """The --workspace flag: it beats what initialize says."""
        self.binding = WorkspaceBinding(self.editor, workspace, state, self._on_bound)
        self.from_tool = from_tool
        """The client runs inside one of the engine's tool calls (an agent's command): its
        calls are the agent's, and it may not loosen the shared guard."""
        self.reloads = ConfigReloads(self.binding, self.editor, from_tool)
        self.modes = SessionMode()
        """This session's permission mode (permissions/setMode); others keep theirs."""
        self.stopped = asyncio.Event()
        self.exit_code = 0
        self.ending = SessionEnd(self.connection, self._grace, self.request_stop)
        self.client_watch = ClientWatch(self.request_stop)
        self.client_process_id = client_process_id
        """--clientProcessId: watched from the start."""
        self.process_id: int | None = None
        """initialize's ``processId``."""
        self.client_name = ""
        """initialize's ``clientInfo.name``: an editor, or toold's own."""
        self.execution_events = False
        """initializationOptions.executionEvents (a shared workspace sends them per session)."""
        self._max_message_flag = max_message_bytes
        self._background: set[asyncio.Task[Any]] = set()
        self._set_message_cap()
        self._register()

    # -- the parts ----------------------------------------------------------------
    @property
    def state(self) -> WorkspaceState:
        """The bound workspace (await ``bound()`` first)."""
        return self.binding.state

    @property
    def owns_state(self) -> bool:
        """Whether this session bound the workspace (and so closes it at its end)."""
        return self.binding.owns_state

    @property
    def initialized(self) -> bool:
        """``initialize`` was answered (notifications may go to the client)."""
        return self.connection.initialized

    async def bound(self) -> None:
        """Wait until the workspace is bound."""
        await self.binding.bound()

    async def ready(self) -> None:
        """Wait until the workspace is bound and a configuration change sent before is applied."""
        await self.binding.bound()
        await self.reloads.applied()

    def _tool_named(self, name: str) -> Tool | None:
        state = self.binding.current
        return state.toolset.get(name) if state is not None else None

    def _prompt_timeout(self) -> float:
        state = self.binding.current
        permissions = state.config.permissions if state is not None else PermissionsConfig()
        return float(permissions.ask_timeout)

    def _on_bound(self, state: WorkspaceState) -> None:
        self._set_message_cap()

    def _set_message_cap(self) -> None:
        state = self.binding.current
        bound = state.config.limits.max_message_bytes if state is not None else None
        cap = self._max_message_flag or bound or errors.MAX_MESSAGE_BYTES
        self.connection.max_message_bytes = cap

    async def _grace(self) -> float:
        """``limits.shutdown_grace`` (toold.toml is read by the binding: wait for it)."""
        await self.binding.binding_settled()
        state = self.binding.current
        limits = state.config.limits if state is not None else LimitsConfig()
        return float(limits.shutdown_grace)

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        """Run a background coroutine for the session's life."""
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # -- the session's life --------------------------------------------------------
    async def serve(self, reader: asyncio.StreamReader, writer: FrameWriter) -> int:
        """Serve this session over a pair of streams until exit, end of input, a stop or
        the client process dying. The exit code: 0 after shutdown and exit, 1 otherwise
        or when the shutdown grace cancelled requests."""
        self.editor.loop = asyncio.get_running_loop()
        if self.client_process_id:
            self.client_watch.watch(self.client_process_id)
        connection, ending = self.connection, self.ending
        await serve_streams(connection, reader, writer, self.stopped, ending.end_of_input)
        await self.connection.cancel_requests()
        await self.close()
        await writer.drain()
        # Requests the shutdown grace cancelled: the script did not get all it asked for.
        return 1 if self.ending.abandoned else self.exit_code

    async def close(self) -> None:
        """Stop background work; a workspace this session bound releases its jobs and
        sandboxes (a shared one stays open for its owner)."""
        for task in list(self._background):
            task.cancel()
        self.client_watch.close()
        await self.binding.close()

    def request_stop(self, exit_code: int = 0) -> None:
        """Ask the session to finish (the first reason given sets the exit code)."""
        if not self.stopped.is_set():
            self.exit_code = exit_code
            self.stopped.set()

    # -- LSP's methods ---------------------------------------------------------------
    def _register(self) -> None:
        on_request, on_notification = self.connection.on_request, self.connection.on_notification
        on_request(INITIALIZE, self._initialize)
        on_request(SHUTDOWN, self._shutdown)
        on_notification(EXIT, self._exit)
        on_notification(INITIALIZED, _ignore)
        on_notification(SET_TRACE, _ignore)
        on_notification(DID_CHANGE_CONFIGURATION, self._configuration)
        on_notification(PROGRESS_CANCEL, self._progress_cancel)
        for method in CLIENT_REQUESTS:
            on_request(method, functools.partial(self._custom, method))

    def _initialize(self, raw: Any) -> dict[str, Any]:
        """Take the client's capabilities and options, start binding the workspace (a
        session of its own) and answer with toold's methods under ``experimental``."""
        try:
            params = read_initialize(raw)
        except UndecodableParams as exc:
            log.error("undecodable initialize params: %s", exc)
            raise ResponseError("Invalid Params", errors.INVALID_PARAMS) from None
        self.editor.capabilities = params.capabilities
        self.process_id = params.process_id
        self.client_name = params.client_name
        parsed = parse_initialization_options(params.initialization_options)
        for problem in parsed.problems:
            self.editor.show_error(problem)
        if self.owns_state:
            options = parsed.options
            root = self.workspace_override or _workspace_from(params, options) or Path.cwd()
            self.binding.start_binding(root, parsed.overrides, options.execution_events)
        else:
            self._join_shared(parsed.options.execution_events, parsed.overrides)
        if params.process_id and params.process_id != self.client_process_id:
            with contextlib.suppress(RuntimeError):
                self.client_watch.watch(params.process_id)
        log.info("toold %s serving %s", __version__, self.binding.root)
        toold = {
            "protocolVersion": PROTOCOL_VERSION,
            "methods": sorted(ALL_METHODS),
            "workspace": os.fspath(self.binding.root),
        }
        return {
            "capabilities": {"experimental": {"toold": toold}},
            "serverInfo": {"name": "toold", "version": __version__},
        }

    def _join_shared(self, execution_events: bool, overrides: dict[str, Any] | None) -> None:
        """A workspace bound before this session came: tell its editor what the others
        were told, and apply the editor's settings as a didChangeConfiguration would."""
        self.execution_events = execution_events
        state, editor = self.state, self.editor
        if state.config_problem is not None:
            editor.show_error(state.config_problem)
        if state.kept_out is not None:  # a refused loosening, held at start
            editor.show_warning(state.kept_out)
        runner = state.runner_warning()  # it cannot work here, or auto fell back
        if runner is not None:
            editor.show_warning(runner)
        for notice in state.notices:  # e.g. the watchers poll (toold.watching)
            editor.show_warning(notice)
        if overrides is not None:
            # The shared workspace's settings for every session; the latest editor's win.
            self.spawn(self.reloads.reload(overrides, joining=True))

    async def _shutdown(self, raw: Any) -> None:
        """Answered once every request received before it is answered; requests after it
        are refused (-32600) at once. ``limits.shutdown_grace`` bounds the wait."""
        await self.ending.finish_requests()

    async def _exit(self, raw: Any) -> None:
        """Stop serving; a ``shutdown`` still being answered is answered first (a script
        piped from a file sends ``exit`` right behind it)."""
        await self.ending.exit()

    async def _configuration(self, raw: Any) -> None:
        await self.binding.bound()  # not ready(): changes queue behind each other
        settings = raw.get("settings") if isinstance(raw, dict) else None
        if isinstance(settings, dict) and isinstance(settings.get("toold"), dict):
            settings = settings["toold"]
        overrides = settings.get("config", settings) if isinstance(settings, dict) else None
        await self.reloads.reload(overrides if isinstance(overrides, dict) else None)

    def _progress_cancel(self, raw: Any) -> None:
        token = raw.get("token") if isinstance(raw, dict) else None
        if isinstance(token, (str, int)) and not isinstance(token, bool):
            self.editor.cancel_work(token)
        else:
            log.warning("dropping window/workDoneProgress/cancel without a token: %r", raw)

    async def _custom(self, method: str, raw: Any) -> dict[str, Any]:
        """One of toold's methods, once the workspace is ready."""
        await self.ready()
        context = Context(self.state, self.editor, self.modes, self.from_tool)
        return await handlers.requests()[method](context, raw)


def _ignore(raw: Any) -> None:
    """A notification toold takes and has nothing to do for."""


def _workspace_from(params: InitializeParams, options: InitializationOptions) -> Path | None:
    if options.workspace:
        return Path(options.workspace)
    if params.first_folder is not None:
        return Path(to_fs_path(params.first_folder) or ".")
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
    state: WorkspaceState | None = None,
    from_tool: bool = False,
) -> LspSession:
    """Build a session; ``workspace`` (the --workspace flag) beats what initialize says.

    ``client_process_id`` (--clientProcessId) is watched from the start, like initialize's
    processId. With ``state`` the session serves that bound workspace (initialize's
    workspace and configuration options are then not applied) and leaves it open."""
    return LspSession(
        workspace,
        max_message_bytes=max_message_bytes,
        state=state,
        client_process_id=client_process_id,
        from_tool=from_tool,
    )
