"""The server: one session of toold's LSP-framed front end. Built by create_server().

A TooldServer is one client's session: its connection (connection.py), its editor
(editor.py), how it ends (lifecycle.py) and the workspace it serves. By default the
session binds the workspace itself after ``initialize`` and releases it at the end;
given an already-bound WorkspaceState it serves that one and leaves it open, so
several sessions can share one workspace. What belongs to a client (capabilities,
progress tokens, requests in flight, its processId) stays on the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.uris import to_fs_path

from toold import __version__, handlers
from toold.config import LimitsConfig
from toold.editor import EditorServer
from toold.initialization import parse_initialization_options
from toold.lifecycle import SessionEnd
from toold.rpc import Context
from toold.transport import FrameWriter, serve_streams
from toold_protocol import ALL_METHODS, PROTOCOL_VERSION, errors
from toold_protocol.names import CLIENT_REQUESTS

if TYPE_CHECKING:
    from toold.tools.base import Tool
    from toold.tools.toolset import ToolSet
    from toold.workspace import WorkspaceState
    from toold_protocol.models import InitializationOptions

log = logging.getLogger(__name__)

POLL_CLIENT_S = 2.0
"""How often a client process is checked where pidfd_open is missing."""


class TooldServer(EditorServer):
    """One client's session with a workspace."""

    def __init__(
        self,
        workspace: Path | None = None,
        *,
        max_message_bytes: int | None = None,
        state: WorkspaceState | None = None,
    ) -> None:
        super().__init__("toold", __version__)
        self.workspace_override = workspace
        self._state = state
        self.owns_state = state is None
        """Whether this session bound the workspace (and so closes it at its end)."""
        self.root = (state.root if state is not None else workspace or Path.cwd()).resolve()
        self._max_message_flag = max_message_bytes
        self._binding: asyncio.Future[None] | None = None
        self._opened = contextlib.AsyncExitStack()
        """The workspace this session opened (toold.opening), closed at its end."""
        self._reload: asyncio.Future[str | None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self.stopped = asyncio.Event()
        self.exit_code = 0
        self.ending = SessionEnd(self.protocol, self._grace, self.request_stop)
        self._watch_handle: Any = None
        self.client_process_id: int | None = None
        self.client_name = ""
        """initialize's ``clientInfo.name`` (pygls 2 keeps none): an editor, or toold's own."""
        self.execution_events = False
        self.from_tool = False
        """The client runs inside one of the engine's tool calls (an agent's command): its
        calls are the agent's, and it may not loosen the shared guard."""
        """initializationOptions.executionEvents (a shared workspace sends them per session)."""
        self._set_message_cap()

    # -- the workspace -------------------------------------------------------------
    @property
    def state(self) -> WorkspaceState:
        """The bound workspace (await ``bound()`` first)."""
        if self._state is None:
            raise RuntimeError("the workspace is not bound yet")
        return self._state

    @property
    def toolset(self) -> ToolSet:
        """The bound tools."""
        return self.state.toolset

    def start_binding(
        self, root: Path, overrides: dict[str, Any] | None, execution_events: bool = False
    ) -> None:
        """Open the workspace in the background (bound on a worker thread), so initialize
        answers at once."""
        self.root = root.resolve()
        self.loop = asyncio.get_running_loop()
        self._binding = asyncio.ensure_future(self.bind_workspace(overrides, execution_events))

    async def bound(self) -> None:
        """Wait until the workspace is bound (a no-op after the first time)."""
        if self._binding is None:
            self.loop = asyncio.get_running_loop()
            if self._state is None:
                self.start_binding(self.root, None)
            else:  # a shared workspace, bound by its owner
                self._binding = self.loop.create_future()
                self._binding.set_result(None)
        assert self._binding is not None
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
        if self.from_tool:
            self.show_warning(
                "configuration not applied: it came from inside a tool call (an agent's "
                "command), which may not change the workspace's settings"
            )
            return
        previous = self._reload

        async def apply() -> str | None:
            if previous is not None:  # changes apply in the order they were sent
                await asyncio.wait([previous])
            return await self.state.reload(overrides)  # a user action: its own keys apply

        self._reload = asyncio.ensure_future(apply())
        problem = await asyncio.shield(self._reload)
        if problem:
            self.show_error(problem)

    async def bind_workspace(
        self, overrides: dict[str, Any] | None = None, execution_events: bool = False
    ) -> None:
        """Open the workspace at ``root`` (toold.opening) until the session closes."""
        from toold.opening import open_workspace  # light: the tools load on its worker thread

        # Capabilities are known by now (binding follows initialize) and never change:
        # a client that cannot show message requests makes the guard non-interactive.
        can_ask = self.can_ask()
        opening = open_workspace(
            self.root,
            push=self.push,
            report=self.show_error,
            overrides=overrides,
            execution_events=execution_events,
            ask=self.ask_user if can_ask else None,
            warn=self.show_warning,
            confirm=self.confirm if can_ask else None,
        )
        self._state = await self._opened.enter_async_context(opening)
        self.root = self._state.root
        self._set_message_cap()

    def tool_named(self, name: str) -> Tool | None:
        """The bound workspace's tool called ``name``."""
        return self._state.toolset.get(name) if self._state is not None else None

    def prompt_timeout(self) -> float:
        """The bound workspace's ``permissions.ask_timeout``."""
        if self._state is None:
            return super().prompt_timeout()
        return float(self._state.config.permissions.ask_timeout)

    def _set_message_cap(self) -> None:
        bound = self._state.config.limits.max_message_bytes if self._state else None
        cap = self._max_message_flag or bound or errors.MAX_MESSAGE_BYTES
        self.protocol.max_message_bytes = cap

    async def binding_settled(self) -> None:
        """Wait for a workspace binding in progress to end (bound or failed)."""
        if self._binding is not None:
            await asyncio.wait([self._binding])

    async def _grace(self) -> float:
        """``limits.shutdown_grace`` (toold.toml is read by the binding: wait for it)."""
        await self.binding_settled()
        limits = self._state.config.limits if self._state is not None else LimitsConfig()
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
        self.loop = asyncio.get_running_loop()
        if self.client_process_id:
            self.watch_client(self.client_process_id)
        await serve_streams(self.protocol, reader, writer, self.stopped, self.ending.end_of_input)
        await self.protocol.cancel_requests()
        await self.close()
        await writer.drain()
        # Requests the shutdown grace cancelled: the script did not get all it asked for.
        return 1 if self.ending.abandoned else self.exit_code

    async def close(self) -> None:
        """Stop background work; a workspace this session bound releases its jobs and
        sandboxes (a shared one stays open for its owner)."""
        for task in list(self._background):
            task.cancel()
        if self._watch_handle is not None:
            self._watch_handle.cancel()
        if self._binding is not None and not self._binding.done():
            self._binding.cancel()  # still binding: nothing is opened yet, and nothing will be
        # A workspace this session opened: its watcher, jobs and sandboxes (a shared one
        # was never entered here, so it stays open for its owner).
        await self._opened.aclose()

    def request_stop(self, exit_code: int = 0) -> None:
        """Ask the session to finish (the first reason given sets the exit code)."""
        if not self.stopped.is_set():
            self.exit_code = exit_code
            self.stopped.set()

    def watch_client(self, pid: int) -> None:
        """End the session when the editor process ``pid`` dies (LSP's processId)."""
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
        loop = asyncio.get_running_loop()
        self._watch_handle = loop.call_later(POLL_CLIENT_S, self._poll_client, pid)


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
    state: WorkspaceState | None = None,
    from_tool: bool = False,
) -> TooldServer:
    """Build a session; ``workspace`` (the --workspace flag) beats what initialize says.

    ``client_process_id`` (--clientProcessId) is watched from the start, like initialize's
    processId. With ``state`` the session serves that bound workspace (initialize's
    workspace and configuration options are then not applied) and leaves it open."""
    server = TooldServer(workspace, max_message_bytes=max_message_bytes, state=state)
    server.client_process_id = client_process_id
    server.from_tool = from_tool

    @server.feature(types.INITIALIZE)
    def on_initialize(params: types.InitializeParams) -> None:
        server.client_name = params.client_info.name if params.client_info else ""
        parsed = parse_initialization_options(params.initialization_options)
        for problem in parsed.problems:
            server.show_error(problem)
        if server.owns_state:
            options = parsed.options
            root = server.workspace_override or _workspace_from(params, options) or Path.cwd()
            server.start_binding(root, parsed.overrides, options.execution_events)
        else:
            server.execution_events = parsed.options.execution_events
            if server.state.config_problem is not None:  # bound before this session came
                server.show_error(server.state.config_problem)
            if server.state.kept_out is not None:  # a refused loosening, held at start
                server.show_warning(server.state.kept_out)
            if server.state.runner.notice is not None:  # the default runner fell back
                server.show_warning(server.state.runner.notice)
            for notice in server.state.notices:  # e.g. the watchers poll (toold.watching)
                server.show_warning(notice)
            if parsed.overrides is not None:
                # The editor's settings, as a didChangeConfiguration would send them: they
                # apply to the shared workspace (every session; the latest editor's win).
                server.spawn(server.reload_config(parsed.overrides))
        server.protocol.experimental = {
            "toold": {
                "protocolVersion": PROTOCOL_VERSION,
                "methods": sorted(ALL_METHODS),
                "workspace": os.fspath(server.root),
            }
        }
        if params.process_id and params.process_id != server.client_process_id:
            with contextlib.suppress(RuntimeError):
                server.watch_client(params.process_id)
        log.info("toold %s serving %s", __version__, server.root)

    @server.feature(types.SHUTDOWN)
    async def on_shutdown(*_: Any) -> None:
        """Answered once every request received before it is answered; requests after it
        are refused (-32600) at once. ``limits.shutdown_grace`` bounds the wait."""
        await server.ending.finish_requests()

    @server.feature(types.EXIT)
    async def on_exit(*_: Any) -> None:
        """Stop serving; a ``shutdown`` still being answered is answered first (a script
        piped from a file sends ``exit`` right behind it)."""
        await server.ending.exit()

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

    for method in CLIENT_REQUESTS:
        server.feature(method)(_custom(server, method))
    return server


def _custom(server: TooldServer, method: str) -> Any:
    """The feature answering ``method`` once the workspace is ready."""

    async def feature(params: Any) -> dict[str, Any]:
        await server.ready()
        context = Context(server.state, server, server.from_tool)
        return await handlers.requests()[method](context, params)

    feature.__name__ = method.replace("/", "_")
    return feature
