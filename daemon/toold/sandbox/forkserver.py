"""Fork-server sandboxes: each call in a worker forked from a warm fork server.

A fresh interpreter spends ~200 ms importing pydantic and the tools; forking a process
that already has them costs a few milliseconds. The fork server is
``python -m toold.sandbox.worker --fork-server``; each worker it forks runs exactly the
code a standalone ``python -m toold.sandbox.worker`` runs, in a session of its own. The
subprocess runner starts the fork server as a plain process; the bwrap runner starts it
inside a bubblewrap sandbox (see toold.sandbox.bwrap).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toold.sandbox.channel import SandboxUnavailable, WorkerLost
from toold.sandbox.environment import sandbox_environment
from toold.sandbox.pipes import PipeWorker
from toold.sandbox.pool import CANCEL_GRACE, WorkerSandbox, worker_env
from toold.sandbox.process import kill_group
from toold.sandbox.toolchains import git_identity, toolchain_env
from toold.sandbox.worker import COLD, KILL, PID_FORMAT, WARM

if TYPE_CHECKING:
    from toold.config import TooldConfig
    from toold.tools.base import Tool

START_TIMEOUT = 60.0
"""Seconds the fork server may take to import everything and answer its first request."""

WORKER_MODULE = "toold.sandbox.worker"


class ForkedWorker(PipeWorker):
    """A worker forked by the fork server; it leads its own process group.

    Once its stdin closes it kills whatever the call left behind and exits by itself.
    """

    def __init__(
        self, who: str, pid: int, in_fd: int, out_fd: int, kill: Callable[[int], None]
    ) -> None:
        super().__init__(in_fd, out_fd)
        self.who = who
        self.pid = pid
        self._kill = kill

    async def cancelled(self) -> None:
        """Give the worker time to cancel its tool and sweep; then kill its group."""
        if not await self.wait_exit(CANCEL_GRACE):
            # No EOF yet, so it is alive and the pid is still its own.
            await asyncio.to_thread(self._kill, self.pid)

    def finished(self, exited: bool) -> None:
        """Nothing to do: closing its stdin is what makes the worker clean up and exit."""


def _kill_quietly(proc: subprocess.Popen[bytes], sock: socket.socket | None = None) -> None:
    if sock is not None:
        sock.close()
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


class ForkServer:
    """Owns the fork server process and sends it requests, one at a time."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.argv = argv
        self.env = env
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                start_new_session=True,
                env=self.env,
            )
        ours.settimeout(START_TIMEOUT)
        self._sock = ours
        # A runner dropped without close() (a configuration change) still stops its server
        # and closes its socket (unclosed, it would warn as it is collected).
        weakref.finalize(self, _kill_quietly, self._proc, ours)
        return ours

    def fork(self, warm: bool) -> tuple[int, int, int]:
        """A new worker waiting for its call (blocking): its pid (as the fork server sees
        it), its stdin and its stdout. ``warm`` ones dry-run first."""
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        try:
            pid = self._request(WARM if warm else COLD, [in_r, out_w], restart=True)
        except BaseException:
            os.close(in_w)
            os.close(out_r)
            raise
        finally:
            os.close(in_r)
            os.close(out_w)
        return pid, in_w, out_r

    def kill(self, pid: int) -> None:
        """Kill a worker's process group from inside the fork server's namespaces."""
        with contextlib.suppress(WorkerLost):
            self._request(KILL + struct.pack(PID_FORMAT, pid), [], restart=False)

    def _request(self, message: bytes, fds: list[int], restart: bool) -> int:
        with self._lock:
            for _attempt in range(2 if restart else 1):  # a dead fork server: restart once
                sock = self._sock or (self._start() if restart else None)
                if sock is None:
                    break
                try:
                    socket.send_fds(sock, [message], fds)
                    reply = sock.recv(16)
                except OSError:
                    reply = b""
                if len(reply) == struct.calcsize(PID_FORMAT):
                    pid: int = struct.unpack(PID_FORMAT, reply)[0]
                    if pid >= 0:
                        return pid
                self._stop()
        raise WorkerLost("the fork server did not start; see the daemon's log")

    def _stop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.send_signal(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
            self._proc = None

    @property
    def pid(self) -> int | None:
        """The fork server's process (for bwrap: bubblewrap's), while it runs."""
        return self._proc.pid if self._proc is not None else None

    def close(self) -> None:
        """Stop the fork server; idle workers exit as their stdin closes."""
        with self._lock:
            self._stop()


class ForkServerSandbox(WorkerSandbox):
    """Each call in a worker forked by a fork server this sandbox starts on first need."""

    pool_threads = 1  # the fork server answers one request at a time anyway
    refill_after_call = True  # a fork takes milliseconds; during a call it only competes
    kills_through_server = False
    """Worker pids are in the fork server's PID namespace: ask it to kill them."""

    def __init__(self, workspace: Path, config: TooldConfig) -> None:
        super().__init__(workspace, config)
        self.server: ForkServer | None = None
        self._home: str | None = None

    def server_argv(self) -> list[str]:
        """The fork server's command line (-P: the cwd is never on sys.path)."""
        return [sys.executable, "-P", "-m", WORKER_MODULE, "--fork-server"]

    def server_env(self) -> dict[str, str]:
        """The fork server's environment, which every worker inherits: the allow-list of
        sandbox_environment with a private HOME, never the daemon's own environment."""
        if self._home is None:
            self._home = tempfile.mkdtemp(prefix="toold-home-")
            weakref.finalize(self, shutil.rmtree, self._home, ignore_errors=True)
            identity = git_identity(Path(self._home))
            if identity is not None:
                identity.rename(Path(self._home) / ".gitconfig")
        base = sandbox_environment(self.config, home=self._home, tmpdir=tempfile.gettempdir())
        return worker_env({**toolchain_env(), **base})

    def interpreter_argv(self, argv: list[str]) -> list[str]:
        """How a tool's long-lived interpreter starts in this sandbox (here: as it is)."""
        return argv

    async def run_tool(self, tool: Tool, args: Any) -> Any:
        """One call in a fresh worker; python_repl, whose names persist between calls, in
        the daemon with its one interpreter started in this sandbox instead."""
        from toold.tools.builtin.python_repl import LAUNCH, Launch, PythonReplTool

        if not isinstance(tool, PythonReplTool):
            return await super().run_tool(tool, args)
        if self.problem is None and self._pool is None:
            await asyncio.to_thread(self.activate)
        if self.problem is not None:
            raise SandboxUnavailable(self.problem)
        token = LAUNCH.set(Launch(self.interpreter_argv, self.server_env(), self))
        try:
            return self.explain(await tool.call(args))
        finally:
            LAUNCH.reset(token)

    def spawn(self, warm: bool) -> ForkedWorker:
        """Fork a worker (on the pool's single thread)."""
        if self.server is None:
            self.server = ForkServer(self.server_argv(), self.server_env())
        pid, in_fd, out_fd = self.server.fork(warm)
        kill = self.server.kill if self.kills_through_server else kill_group
        return ForkedWorker(self.name, pid, in_fd, out_fd, kill)

    def release(self) -> None:
        """Stop the fork server."""
        if self.server is not None:
            self.server.close()
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)


class SubprocessSandbox(ForkServerSandbox):
    """Each call in a worker process: killable, its memory apart from the daemon's."""

    name = "subprocess"

    def __init__(self, workspace: Path, config: TooldConfig) -> None:
        super().__init__(workspace, config)
        self.activate()
