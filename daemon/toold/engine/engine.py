"""The Engine: one per workspace, serving every session on an owner-only socket.

``python -P -m toold.engine --workspace DIR`` (started detached by ``attach``) runs it
(toold.engine.process: the pid lock held for the process's whole life, so a second
engine for the workspace exits at once). It replaces a stale socket, listens, binds the
workspace once and serves each connection as a session of its own (who may connect, and
the hello: ``peers``; ``status`` and ``stop`` hellos are answered by ``control``).
It exits on ``toold daemon stop``, SIGTERM, or after ``daemon.idle_timeout`` seconds
with no session, no running job and no running teammate (shorter for a workspace only
one-shot commands used, and at once when a newer engine needs room: ``idle``), and as
soon as no session is attached once its workspace folder, socket or pid file is gone
(removed, renamed away, or another put in its place).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import signal
import socket
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toold import __version__
from toold.engine.attach import HANDED_STDIO, MCP_HTTP, STOPPING
from toold.engine.control import CONTROL, answer_control, send_line
from toold.engine.idle import (
    FRESH,
    TrackedSessions,
    Usage,
    evict_idle,
    idle_limit,
    in_ci,
    stop_reason,
)
from toold.engine.location import EnginePaths, open_private
from toold.engine.peers import (
    Doorway,
    PeerRefused,
    inside_tool_call,
    peer_credentials,
    read_hello,
)
from toold.engine.sessions import MCP, Session
from toold.fairness import FairExecutor

if TYPE_CHECKING:
    from toold.workspace import WorkspaceState

log = logging.getLogger(__name__)

LOG_LIMIT = 10 * 1024 * 1024
"""Bytes of log after which the engine sets it aside (``KEY.log.1``, one kept)."""


class Engine:
    """The engine of one workspace."""

    def __init__(self, paths: EnginePaths, started_by: int | None = None) -> None:
        self.paths = paths
        self.started_by = started_by
        """The toold process whose tool call started this engine (-1: one out of sight),
        None when the user did: an agent's command below it is the agent here too."""
        self.usage = Usage()
        self.sessions = TrackedSessions(self.usage)
        self.sessions.on_end = self._session_ended
        self.state: WorkspaceState | None = None
        self.bound: asyncio.Future[None] | None = None
        self.stacks: dict[str, asyncio.Future[None]] = {}
        """What sessions of each kind need before their first answer (STACKS), each loaded
        once on a thread: the first session's while the workspace binds (``_bind``)."""
        self.first_kind: str | None = None
        """The kind of the first session that said hello (``mcp`` or an LSP one)."""
        self.stopping = asyncio.Event()
        self.started = time.time()
        self.own = {path: _identity(path) for path in (paths.workspace, paths.pid_file)}
        """What the engine stands on (the socket once it listens): one removed, renamed away
        or replaced (a folder at the workspace's path, a newer engine's files) ends it."""
        self._tasks: set[asyncio.Task[Any]] = set()
        """The connections being served."""
        self.doorway = Doorway()
        """The connections that have not said hello yet (bounded: the oldest go)."""
        self._opened = contextlib.AsyncExitStack()
        """The workspace (toold.opening), bound once and released at the engine's end."""
        self._evicting: asyncio.Future[list[int]] | None = None
        self._listener: socket.socket | None = None

    # -- start and stop ------------------------------------------------------------------
    def listen(self) -> None:
        """Replace a stale socket (the caller holds the pid lock) and listen, owner-only."""
        path = os.fspath(self.paths.socket)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # born 0600: a chmod by path could follow a swapped-in symlink
        try:
            listener.bind(path)
        finally:
            os.umask(old_umask)
        listener.listen(64)
        listener.setblocking(False)
        self._listener = listener
        self.own[self.paths.socket] = _identity(self.paths.socket)

    async def run(self) -> None:
        """Serve until stopped: bind the workspace, accept, watch for idleness."""
        loop = asyncio.get_running_loop()
        # Blocking work with a share per session: one session's slow calls leave threads
        # for the others' (toold.fairness).
        loop.set_default_executor(FairExecutor())
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(signum, self.stop, f"signal {signum}")
        self.bound = asyncio.ensure_future(self._bind())
        accepting = asyncio.ensure_future(self._accept())
        idle = asyncio.ensure_future(self._idle_watch())
        await self.stopping.wait()
        accepting.cancel()
        idle.cancel()
        await self._shutdown()

    def stop(self, why: str) -> None:
        """End the engine: sessions end, running jobs are cancelled (and reported)."""
        if not self.stopping.is_set():
            log.info("stopping: %s", why)
            self.stopping.set()

    async def _shutdown(self) -> None:
        assert self._listener is not None
        self._listener.close()
        if _identity(self.paths.socket) == self.own[self.paths.socket]:  # not a newer engine's
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.paths.socket)
        if self.state is not None:
            # Jobs first: their cancellation is announced to the sessions still attached.
            await self.state.jobs.close()
        for session in self.sessions.all():
            session.server.request_stop(1)
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=10)
        await self._opened.aclose()

    async def _bind(self) -> None:
        from toold.opening import open_workspace

        # The workspace's modules first, then the session stack on a thread of its own
        # while the workspace binds: the bind waits on the runner's probe and other
        # subprocesses, time the stack's import fills. Importing both graphs at once
        # from the start would have two threads in pydantic's own imports.
        await asyncio.to_thread(importlib.import_module, "toold.assembly")
        # The stack of the session that came (the relay says hello as soon as the engine
        # listens): an MCP client's engine loads the MCP SDK, not the LSP stack.
        self.stack_for(self.first_kind or STACK_LSP)
        sessions = self.sessions
        opening = open_workspace(
            self.paths.workspace,
            push=sessions.push,
            report=sessions.show_error,
            execution_events=True,  # each session that asked gets them (Sessions.push)
            ask=sessions.ask,
            warn=sessions.warn,
            confirm=sessions.confirm,
        )
        self.state = await self._opened.enter_async_context(opening)
        if self.state.team is not None:  # a teammate ends with the session that spawned it
            self.state.team.session_of = sessions.current_id
        log.info("toold %s engine serving %s", __version__, self.paths.workspace)
        self._make_room()  # for this engine: idle ones beyond the cap exit

    def _session_ended(self, session: Session) -> None:
        """End what a session started that spends on its behalf: its teammates and its
        background subagents (its calls are cancelled already; command jobs go on)."""
        if self.state is not None and not self.stopping.is_set():  # else aclose ends all
            self._spawn(self._end_started_by(session))

    async def _end_started_by(self, session: Session) -> None:
        assert self.state is not None
        team = self.state.team
        teammates = await team.end_session(session.id) if team is not None else ()
        subagents = self.state.jobs.work_of(session.id)  # a stopped teammate's among them
        for job_id in subagents:
            await self.state.jobs.cancel(job_id)
        if teammates or subagents:
            log.info(
                "session %d ended: stopped its teammates %s and background subagents %s",
                session.id,
                ", ".join(teammates) or "(none)",
                ", ".join(subagents) or "(none)",
            )

    def stack_for(self, kind: str) -> asyncio.Future[None]:
        """The loading of what ``kind``'s sessions need (STACKS), begun on a thread at the
        first call (once the workspace's modules are in: the threads then share none of
        pydantic's own imports)."""
        family = kind if kind in (MCP, MCP_HTTP) else STACK_LSP
        if family not in self.stacks:
            loading = asyncio.to_thread(load_modules, STACKS[family])
            self.stacks[family] = asyncio.ensure_future(loading)
        return self.stacks[family]

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- idleness ------------------------------------------------------------------------
    def busy(self) -> bool:
        """Sessions attached, a job running, a teammate running, or still binding."""
        if len(self.sessions) or self.state is None:
            return True
        if any(job.get("status") == "running" for job in self.state.jobs.list()):
            return True
        team = self.state.team
        return team is not None and any(mate.get("running") for mate in team.list())

    def evictable(self) -> bool:
        """Idle, and not a new engine whose first client is still on its way."""
        fresh = not self.usage.sessions and time.time() - self.started < FRESH
        return not fresh and not self.busy()

    def idle_limit(self) -> tuple[float, str]:
        """Seconds the engine may stay idle now, and the setting that says so."""
        if self.state is None:
            return float("inf"), "binding"
        daemon = self.state.config.daemon
        limit = idle_limit(
            daemon.idle_timeout,
            daemon.one_shot_idle_timeout,
            editor_seen=self.usage.editor_seen,
            one_shot_ended=self.usage.one_shot_ended,
            ci=in_ci(),
        )
        if limit == daemon.idle_timeout:
            return limit, "daemon.idle_timeout"
        return limit, "daemon.one_shot_idle_timeout" + (", CI=true" if in_ci() else "")

    def _make_room(self) -> None:
        """Ask the least recently used idle engines beyond ``daemon.max_idle_engines``
        (this one counted) to stop if still idle; on a thread, one round at a time."""
        if self.state is None or (self._evicting is not None and not self._evicting.done()):
            return
        cap = self.state.config.daemon.max_idle_engines
        self._evicting = asyncio.ensure_future(asyncio.to_thread(evict_idle, self.paths, cap))

    async def _idle_watch(self) -> None:
        was_busy = True
        while True:
            busy = self.busy()
            if busy:
                self.usage.last_used = time.monotonic()
            limit, why = self.idle_limit()
            if not busy and self.usage.idle_for() >= limit:
                self.stop(f"idle for {limit:g} s ({why})")
                return
            if was_busy and not busy:
                # Idle now: engines that went idle meanwhile were not there to count when
                # this one started, so the cap holds once everyone is idle.
                self._make_room()
            was_busy = busy
            # Woken by a session's start or end and by a job's: a one-shot engine under
            # CI=true exits as its last session ends, not at the next tick.
            idle_timeout = self.state.config.daemon.idle_timeout if self.state else 0.4
            tick = min(max(idle_timeout / 4, 0.05), 15.0)
            left = limit - self.usage.idle_for()
            await self.usage.wait(tick if self.busy() else min(tick, left))
            bound_log(self.paths)
            lost = [path for path, known in self.own.items() if _identity(path) != known]
            if lost and not len(self.sessions):  # nothing to serve, or no way to be reached
                self.stop(f"{lost[0]} was removed or replaced")
                return

    # -- connections ---------------------------------------------------------------------
    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._listener is not None
        while True:
            try:
                conn, _ = await loop.sock_accept(self._listener)
            except OSError as exc:  # EMFILE, ENOBUFS: refuse this one, keep listening
                log.warning("could not accept a connection: %s", exc)
                await asyncio.sleep(0.1)
                continue
            self.doorway.admit(self._spawn(self._connection(conn)))

    async def _connection(self, conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            pid, uid, _ = peer_credentials(conn)
            if uid != os.getuid():
                log.warning("refused a connection from pid %d of uid %d", pid, uid)
                raise PeerRefused(f"uid {uid} may not use the engine of uid {os.getuid()}")
            hello, fds = await read_hello(conn)
            self.doorway.greeted(asyncio.current_task())
            await self._serve(conn, pid, hello, fds)
        except PeerRefused as exc:
            with contextlib.suppress(OSError, TimeoutError):
                await send_line(conn, {"ok": False, "error": str(exc)})
        except (OSError, TimeoutError) as exc:
            log.info("connection dropped: %s", exc)
        except Exception:
            log.exception("a session failed")
        finally:
            conn.close()
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)

    async def _serve(
        self, conn: socket.socket, pid: int, hello: dict[str, Any], fds: list[int]
    ) -> None:
        kind = hello["kind"]
        if kind in CONTROL:  # status, stop: answered, no session
            await answer_control(self, conn, pid, hello)
            return
        if self.stopping.is_set():
            raise PeerRefused(STOPPING)
        if self.first_kind is None:
            self.first_kind = kind
        assert self.bound is not None
        await asyncio.shield(self.bound)
        loading = self.stack_for(kind)
        if kind != MCP:  # an mcp session waits in its own import, counted as attached
            await asyncio.shield(loading)
        from toold.engine.serving import serve_session

        stdio = (fds[0], fds[1]) if kind in HANDED_STDIO else None
        listener = fds[0] if kind == MCP_HTTP else None  # toold mcp --http's socket
        inside = self.inside_tool_call(pid)
        # Binding the arguments may fail (the descriptors stay ours to close); from the
        # coroutine's first line they are the session's, closed by it whatever happens.
        serving = serve_session(self, conn, stdio, pid, hello, inside, listener)
        fds.clear()
        await serving

    def evict(self, hello: dict[str, Any], pid: int) -> bool:
        """Stop if idle at this instant and unused since the status the asker judged by
        (``uses``); no other connection may be in progress (a client on its way). Nothing
        is cancelled, so any peer may ask: at worst the next client starts anew. The log
        names the asker's pid and the reason its hello gives (a newer engine's
        ``daemon.max_idle_engines``, ``toold daemon stop --if-idle``, a test harness)."""
        if not self.evictable() or hello.get("uses") != self.usage.uses or len(self._tasks) > 1:
            return False
        self.stop(f"idle, asked to stop if idle by pid {pid}: {stop_reason(hello)}")
        return True

    def inside_tool_call(self, pid: int) -> bool:
        """Whether peer ``pid`` is an agent's command: it runs below this engine, below
        the toold process whose tool call started this engine, or below any process
        running toold's tools (another workspace's engine: its agent is not our user)."""
        from toold.engine.hardening import tool_runner_above

        if inside_tool_call(pid, os.getpid()):
            return True
        outer = self.started_by
        if outer is not None and (outer < 0 or inside_tool_call(pid, outer)):
            return True
        return tool_runner_above(pid) is not None


STACK_LSP = "lsp"
STACKS = {
    STACK_LSP: (
        "toold.engine.serving",
        "toold.server",
        "toold.transport",
        "toold_protocol.models",
        "toold.handlers.table",
    ),
    MCP: ("toold.engine.serving", "toold.bridge.mcp_server"),
    MCP_HTTP: ("toold.engine.serving", "toold.bridge.mcp_server", "toold.bridge.attached_http"),
}
"""What a session needs before its first answers: an LSP one (``toold serve``, the
command line, ``toold acp``) the server, the contract's models (``initialize``) and the
method table (``tools/list``); an ``mcp`` one the MCP SDK's server (~400 ms of CPU, so
only an engine an MCP client came to loads it), and an ``mcp-http`` one that server
with uvicorn. The first session's loads while the workspace binds."""


def load_modules(names: tuple[str, ...]) -> None:
    """Import ``names`` (a failure is left for the session's own import to raise)."""
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:
            log.exception("could not load %s ahead of its session", name)
            return


def _identity(path: Path) -> tuple[int, int, int] | None:
    """(device, inode, file type) of what is at ``path`` itself; None when nothing is."""
    try:
        found = os.lstat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino, stat.S_IFMT(found.st_mode)


def bound_log(paths: EnginePaths) -> None:
    """Set the log aside as ``KEY.log.1`` once it passes LOG_LIMIT and go on in a new one
    (its stdout and stderr): an engine up for weeks logs every session it serves."""
    try:
        current = os.fstat(2)
        if current.st_size <= LOG_LIMIT or not stat.S_ISREG(current.st_mode):
            return
        named = os.lstat(paths.log)
        if (named.st_dev, named.st_ino) != (current.st_dev, current.st_ino):
            return  # not started with its log as stderr (run by hand): not ours to move
        os.replace(paths.log, paths.log.with_suffix(".log.1"))
        fresh = open_private(paths.log, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND)
    except OSError as exc:
        log.warning("could not set the log aside: %s", exc)
        return
    for target in (1, 2):
        os.dup2(fresh, target)
    os.close(fresh)
    log.info("the previous %d bytes of this log are in %s.1", current.st_size, paths.log)
