"""One language server as a child process: toold is its LSP client over the child's stdio.

The framing and JSON-RPC are toold's own (toold.transport's frame reader and writer,
toold.connection's requests and futures), used here in the client's seat: the server's
requests (workspace/configuration, client/registerCapability, progress tokens) get
empty answers, its ``textDocument/publishDiagnostics`` fill a per-document mailbox.
Documents are sent whole (``didOpen`` then full-text ``didChange``, which every sync
kind accepts). Diagnostics are pulled (``textDocument/diagnostic``) when the server
offers it, and otherwise waited for as pushed, matched by the document's version;
typescript-language-server's are pulled through its tsserver command (toold.diagnostics.
tsserver: its pushes say nothing when a file stays clean).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toold.connection import JsonRpcConnection, ResponseError
from toold.diagnostics import tsserver
from toold.sandbox.process import kill_group
from toold.transport import HEADER_LIMIT, FrameWriter, serve_streams

log = logging.getLogger(__name__)

INITIALIZE_TIMEOUT = 30.0
"""Seconds a server may take to answer ``initialize`` (a first start indexes)."""
STDERR_TAIL = 20
"""Lines of the server's stderr kept to explain a crash."""
CLIENT_CAPABILITIES: dict[str, Any] = {
    "textDocument": {
        "synchronization": {"dynamicRegistration": False},
        "publishDiagnostics": {"versionSupport": True, "relatedInformation": False},
        "diagnostic": {"dynamicRegistration": False, "relatedDocumentSupport": False},
    },
    "workspace": {"configuration": True, "workspaceFolders": True},
    "window": {"workDoneProgress": False},
}


class ServerGone(Exception):
    """The server exited (or never started): its diagnostics cannot come."""


@dataclass
class _Document:
    version: int
    text: str
    published: list[dict[str, Any]] | None = None
    """The last pushed diagnostics for this version (None: none yet)."""
    waiters: list[asyncio.Future[list[dict[str, Any]]]] = field(default_factory=list)


class LanguageServer:
    """One running server: started by ``start``, asked by ``diagnose``, ended by ``stop``."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        env: Mapping[str, str],
        root: Path,
        *,
        cwd: Path,
        parent_pid: int | None = None,
    ) -> None:
        self.name = name
        self.parent_pid = parent_pid
        """``initialize``'s processId: the daemon as the server sees it (None when the
        server cannot see it, as in bwrap's PID namespace: a server that watches that pid,
        as typescript-language-server does, would exit at once)."""
        self.argv = argv
        self.root = root
        self._env = dict(env)
        self._cwd = cwd
        self._process: asyncio.subprocess.Process | None = None
        self._transport: asyncio.SubprocessTransport | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        """The loop the server's pipes belong to."""
        self._connection = JsonRpcConnection()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._documents: dict[str, _Document] = {}
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self.capabilities: dict[str, Any] = {}
        self.exited = asyncio.Event()

    @property
    def pid(self) -> int | None:
        """The server's process id once started."""
        return None if self._process is None else self._process.pid

    @property
    def pulls(self) -> bool:
        """The server answers ``textDocument/diagnostic`` (pull diagnostics)."""
        return bool(self.capabilities.get("diagnosticProvider"))

    def crash_report(self) -> str:
        """How the server ended: its exit status and the last lines of its stderr."""
        code = None if self._process is None else self._process.returncode
        tail = " | ".join(self._stderr)
        return f"exit status {code}" + (f": {tail[-400:]}" if tail else "")

    async def start(self) -> None:
        """Spawn the server (its own process group) and initialize it with the workspace
        root; OSError when the command cannot run, ServerGone when it dies on the way."""
        connection = self._connection
        connection.initialized = True  # the client's seat: the server's messages are taken
        connection.on_notification("textDocument/publishDiagnostics", self._published)
        # Notifications toold has no use for ($/typescriptVersion: typescript-language-server's).
        quiet = ("window/logMessage", "window/showMessage", "$/progress", "$/logTrace")
        for method in (*quiet, "$/typescriptVersion"):
            connection.on_notification(method, lambda _params: None)
        connection.on_notification("telemetry/event", lambda _params: None)
        connection.on_request("workspace/configuration", _configuration)
        connection.on_request("workspace/workspaceFolders", lambda _params: [self._folder()])
        for method in (
            "client/registerCapability",
            "client/unregisterCapability",
            "window/workDoneProgress/create",
            "workspace/diagnostic/refresh",
            "window/showMessageRequest",
        ):
            connection.on_request(method, lambda _params: None)
        loop = asyncio.get_running_loop()
        self.loop = loop
        transport, protocol = await loop.subprocess_exec(
            lambda: asyncio.subprocess.SubprocessStreamProtocol(limit=HEADER_LIMIT, loop=loop),
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=self._cwd,
            env=self._env,
            start_new_session=True,  # its own group: stop() kills whatever it started
        )
        self._transport = transport  # closed by stop(): a loop must not end with it open
        self._process = asyncio.subprocess.Process(transport, protocol, loop)
        process = self._process
        assert process.stdin is not None and process.stdout is not None
        writer = FrameWriter.over(process.stdin)
        connection.set_writer(writer)  # before the read loop's task runs: initialize goes now
        self._tasks = [
            asyncio.create_task(
                serve_streams(connection, process.stdout, writer, self._stop, self._ended)
            ),
            asyncio.create_task(self._drain_stderr()),
            asyncio.create_task(self._watch_exit()),
        ]
        params = {
            "processId": self.parent_pid,
            "clientInfo": {"name": "toold"},
            "rootUri": self.root.as_uri(),
            "rootPath": str(self.root),
            "workspaceFolders": [self._folder()],
            "capabilities": CLIENT_CAPABILITIES,
        }
        result = await self._request("initialize", params, INITIALIZE_TIMEOUT)
        capabilities = result.get("capabilities") if isinstance(result, dict) else None
        self.capabilities = capabilities if isinstance(capabilities, dict) else {}
        connection.notify("initialized", {})

    def _folder(self) -> dict[str, str]:
        return {"uri": self.root.as_uri(), "name": self.root.name}

    async def _request(self, method: str, params: Any, timeout: float) -> Any:
        """A request's result; ServerGone when the server exits first, TimeoutError."""
        future = self._connection.send_request(method, params)
        gone = asyncio.ensure_future(self.exited.wait())
        try:
            done, _ = await asyncio.wait(
                {future, gone}, timeout=timeout, return_when="FIRST_COMPLETED"
            )
        finally:
            gone.cancel()
        if future in done:
            return future.result()
        future.cancel()
        if gone in done:
            raise ServerGone(f"{self.name} exited ({self.crash_report()})")
        raise TimeoutError(f"{self.name} did not answer {method} in {timeout:g} s")

    async def _ended(self) -> None:
        """Its stdout closed: it exited, or is about to."""
        self._stop.set()

    async def _drain_stderr(self) -> None:
        """Keep the last lines of stderr (a server logs there; the pipe must not fill)."""
        assert self._process is not None and self._process.stderr is not None
        stream = self._process.stderr
        while True:
            try:
                line = await stream.readline()
            except ValueError:  # a line past the limit: skip it
                continue
            if not line:
                return
            self._stderr.append(line.decode("utf-8", "replace").rstrip())

    async def _watch_exit(self) -> None:
        assert self._process is not None
        await self._process.wait()
        self._stop.set()
        self.exited.set()
        for document in self._documents.values():
            for waiter in document.waiters:
                if not waiter.done():
                    waiter.set_exception(ServerGone(f"{self.name} exited"))

    def _published(self, params: Any) -> None:
        """``textDocument/publishDiagnostics``: kept for the document's version it names."""
        if not isinstance(params, dict):
            return
        document = self._documents.get(str(params.get("uri")))
        items = params.get("diagnostics")
        if document is None or not isinstance(items, list):
            return
        version = params.get("version")
        if isinstance(version, int) and version != document.version:
            return  # about an older text: the one asked for is still to come
        document.published = [item for item in items if isinstance(item, dict)]
        for waiter in document.waiters:
            if not waiter.done():
                waiter.set_result(document.published)
        document.waiters.clear()

    def sync(self, uri: str, language: str, text: str) -> None:
        """Send the document's text: didOpen the first time, a full didChange after."""
        document = self._documents.get(uri)
        if document is None:
            self._documents[uri] = _Document(1, text)
            item = {"uri": uri, "languageId": language, "version": 1, "text": text}
            self._connection.notify("textDocument/didOpen", {"textDocument": item})
            return
        if document.text == text:
            return
        document.version += 1
        document.text, document.published = text, None
        self._connection.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": uri, "version": document.version},
                "contentChanges": [{"text": text}],
            },
        )

    async def diagnose(self, uri: str, timeout: float) -> list[dict[str, Any]]:
        """The diagnostics of the document's synced text (raw LSP dicts): pulled where the
        server offers it, else the push for this version; TimeoutError, ServerGone."""
        if self.exited.is_set():
            raise ServerGone(f"{self.name} exited ({self.crash_report()})")
        document = self._documents[uri]
        if tsserver.offered(self.capabilities):  # its pushes cannot tell a clean edit
            try:
                return await tsserver.pull(self._request, uri, timeout)
            except (ResponseError, tsserver.Refused) as exc:
                raise ServerGone(f"{self.name}: {exc}") from None
        if self.pulls:
            params = {"textDocument": {"uri": uri}}
            try:
                report = await self._request("textDocument/diagnostic", params, timeout)
            except ResponseError as exc:
                raise ServerGone(f"{self.name} refused textDocument/diagnostic: {exc}") from None
            items = report.get("items") if isinstance(report, dict) else None
            return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []
        if document.published is not None:
            return document.published
        waiter: asyncio.Future[list[dict[str, Any]]] = asyncio.get_running_loop().create_future()
        document.waiters.append(waiter)
        return await asyncio.wait_for(waiter, timeout)

    async def stop(self, grace: float = 2.0) -> None:
        """shutdown and exit (``grace`` seconds at most; 0: none), then its process group
        killed and its pipes closed."""
        process = self._process
        if process is not None and process.returncode is None and grace > 0:
            with contextlib.suppress(ServerGone, TimeoutError, ResponseError):
                await self._request("shutdown", None, grace)
                self._connection.notify("exit")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), grace)
        if process is not None:
            kill_group(process.pid)  # it, or whatever it left in its group
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 5.0)
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._transport is not None:
            self._transport.close()

    def kill(self) -> None:
        """Kill the process group at once (the daemon is going away, no loop to wait on)."""
        if self._process is not None and self._process.returncode is None:
            kill_group(self._process.pid)


def _configuration(params: Any) -> list[None]:
    """``workspace/configuration``: no settings of ours (the server's defaults and files)."""
    items = params.get("items") if isinstance(params, dict) else None
    return [None] * (len(items) if isinstance(items, list) else 0)
