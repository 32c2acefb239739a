"""The worker: one tool call in a process of its own (subprocess, bwrap and docker runners).

``python -m toold.sandbox.worker`` reads one request line from stdin::

    {"tool": "bash", "args": {...}, "workspace": "/abs/ws", "config": {...}, "origin": "agent"}

rebuilds the tool through BuiltinToolProvider with a ToolRuntime(workspace, config), runs
``tool.call(args)`` and writes JSON lines to stdout: any number of
``{"progress": text}`` while it runs, then exactly one ``{"result": value, "meta": {...}}``
or ``{"error": {"type", "module", "message"}}``. It then waits for stdin to close, kills
every process the call left behind (it is their subreaper, so even daemonised ones) and
exits. Closing stdin while the tool runs cancels the call: the tool's own clean-up runs
(bash kills its process group), then the same sweep, and the worker exits without a reply.

A request with ``"reuse": true`` (the daemon sends it for tools that run no command or
code the caller chose: see toold.sandbox.channel.shareable) is answered with ``"next": true`` when
it succeeded and the worker has served fewer than MAX_CALLS: the worker then sweeps and
reads the next request, or stdin's end. Any other call is the worker's last. A further
request leaves ``config`` out when it is the one the worker already has: the worker keeps
the runtime it built from it (validating the configuration costs more than a small call);
a first request without one gets the defaults.

``--fork-server`` turns the process into a fork server: it imports everything once and
forks one such worker per request received on its control socket (stdin), so a worker is
ready in a few milliseconds instead of the ~200 ms a fresh interpreter spends importing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toold.tools.base import Tool
    from toold.tools.runtime import ToolRuntime

PID_FORMAT = "=i"
"""Fork server reply: the new worker's pid."""
WARM, COLD, KILL = b"W", b"C", b"K"
"""Fork server requests: fork a worker for the pool, fork one a call is waiting for (both
with the worker's stdin and stdout attached), kill a worker's process group (+ its pid)."""
ORIGINAL_PYTHONPATH = "TOOLD_ORIGINAL_PYTHONPATH"
"""The daemon's own PYTHONPATH, put back once the worker has imported toold."""
SWEEP_SECONDS = 5.0
"""How long the final sweep keeps killing and reaping what the call left behind."""
MAX_CALLS = 100
"""Calls one worker serves at most (only shareable ones follow its first)."""

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)
"""Built once: json.dumps with options builds an encoder on every call."""


class _Channel:
    """JSON lines to the daemon; safe from worker threads (sync tools report from there)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        data = (_ENCODER.encode(message) + "\n").encode()
        view = memoryview(data)
        with self._lock:
            while view:
                view = view[os.write(self.fd, view) :]


def _wait_for_eof(fd: int) -> None:
    with contextlib.suppress(OSError):
        while os.read(fd, 65536):
            pass


def error_payload(exc: BaseException) -> dict[str, Any]:
    """How an exception travels back to the daemon."""
    kind = type(exc)
    return {"type": kind.__name__, "module": kind.__module__, "message": str(exc)}


def _prctl(option: int, value: int) -> None:
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def _children(pid: int) -> list[int]:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(child) for child in f.read().split()]
        except OSError:
            continue
    return found


def _childless() -> bool:
    """Whether this process has no child at all, living or not (one system call). As
    their subreaper, every descendant is a child or below a living one, so none is left."""
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return True
    return False  # a living child (0), or a reaped one: others may follow


def sweep_descendants() -> None:
    """SIGKILL every descendant and reap them; orphans come back to us as we are their
    subreaper, so a few rounds catch those that forked or daemonised meanwhile."""
    if _childless():  # the common case: a file call started nothing
        return
    deadline = time.monotonic() + SWEEP_SECONDS
    while time.monotonic() < deadline:
        pending = _children(os.getpid())
        if not pending:
            return
        seen: set[int] = set()
        while pending:
            pid = pending.pop()
            if pid not in seen:
                seen.add(pid)
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                pending += _children(pid)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        time.sleep(0.001)


def prepare() -> None:
    """Import and warm up what every call needs, so forked workers start with it done."""
    # The searches load pathspec (with RE2) and regex on first use: in a fresh fork that
    # would be on every call.
    import pathspec  # noqa: F401
    import pydantic_core  # noqa: F401
    import regex  # noqa: F401

    import toold.tools.context  # noqa: F401
    from toold.tools.registry import BuiltinToolProvider

    BuiltinToolProvider.tool_classes()
    # The first event loop, to_thread and tool build import and cache a fair amount.
    loop = asyncio.new_event_loop()
    loop.run_until_complete(_warm_up())
    loop.run_until_complete(loop.shutdown_default_executor())
    loop.close()


async def _warm_up() -> None:
    """A dry run while idle: a fresh fork pays ~2 ms of page faults and cold caches on its
    first call; doing it here keeps them off the call's critical path."""
    tool = _Runtimes().build_tool({"tool": "read_file", "workspace": "/", "config": {}})
    with contextlib.suppress(Exception):
        await tool.call({"file_path": ".toold-worker-warm-up", "offset": 0})


class _Runtimes:
    """The runtime of the configuration the daemon sent last (a request without one
    means the same again), rebuilt only when the configuration or workspace changes."""

    def __init__(self) -> None:
        self._runtime: ToolRuntime | None = None
        self._workspace = ""
        self._tools: dict[str, Tool] = {}
        """Tools built on ``_runtime``, by name: a tool serves call after call (as in the
        daemon, which keeps one instance per workspace)."""

    def build_tool(self, request: dict[str, Any]) -> Tool:
        """The requested tool, bound to the request's workspace and configuration."""
        from toold.tools.registry import BuiltinToolProvider

        runtime = self._for(request)
        name = request["tool"]
        tool = self._tools.get(name)
        if tool is None:
            tool_cls = BuiltinToolProvider.get_tool_class(name)
            if tool_cls is None:
                raise LookupError(f"Unknown tool: {name} (the worker cannot rebuild it)")
            tool = self._tools[name] = tool_cls(runtime)
        return tool

    def _for(self, request: dict[str, Any]) -> ToolRuntime:
        from toold.config import TooldConfig
        from toold.tools.runtime import ToolRuntime

        workspace = str(request["workspace"])
        runtime = self._runtime
        if "config" in request or runtime is None:  # none yet: the defaults, as ever
            config = TooldConfig.model_validate(request.get("config") or {})
        else:
            config = runtime.config
        if runtime is None or runtime.config is not config or self._workspace != workspace:
            runtime = self._runtime = ToolRuntime(workspace=Path(workspace), config=config)
            self._workspace = workspace
            self._tools = {}
        return runtime


class _Stdin:
    """Watches the worker's stdin for the whole life of its loop (registered once, not
    per call). Between calls, stdin turning readable brings the next request (or the
    end), read here as it arrives, so the loop never sees it readable again once a call
    runs: one loop serves every call (see _serve), which costs less than a
    run_until_complete per call. While a call runs the daemon writes nothing, so stdin
    turning readable then means it was closed, the daemon's way to cancel the call."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        self.loop = loop
        self.fd = fd
        self.call: asyncio.Task[Any] | None = None
        """The call running now; None between calls."""
        self._pending = bytearray()
        """The next request, as much of it as came."""
        self._ended = False
        self._waiter: asyncio.Future[None] | None = None
        """Between calls: woken once the next request came whole (or the end)."""
        loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        if self.call is not None:
            self.loop.remove_reader(self.fd)
            self.call.cancel()
            return
        chunk = os.read(self.fd, 65536)  # readable, so this does not block
        self._pending += chunk
        if chunk and not chunk.endswith(b"\n"):
            return  # the rest of the line is coming
        if not chunk:
            self._ended = True
            self.loop.remove_reader(self.fd)  # the end stays readable
        if (waiter := self._waiter) is not None and not waiter.done():
            waiter.set_result(None)

    async def next_line(self) -> bytes:
        """The next request line; b"" once stdin ended."""
        if not self._ended and not self._pending.endswith(b"\n"):
            self._waiter = self.loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        line = bytes(self._pending)
        self._pending.clear()
        return line


async def _run(
    tool: Tool, request: dict[str, Any], stdin: _Stdin, channel: _Channel, last: bool
) -> bool:
    """Run the call and send its answer; True when the worker offered to serve another."""
    from pydantic_core import to_jsonable_python

    from toold.tools.context import CallContext, current_call

    ctx = CallContext(
        origin=str(request.get("origin") or "agent"),
        progress=lambda text: channel.send({"progress": text}),
    )
    current_call.set(ctx)
    stdin.call = asyncio.current_task()
    try:
        result = await tool.call(request.get("args"))
    except asyncio.CancelledError:
        return False
    except Exception as exc:
        stdin.call = None
        channel.send({"error": error_payload(exc)})
        return False
    stdin.call = None
    answer = {"result": to_jsonable_python(result, fallback=str), "meta": ctx.meta}
    offered = request.get("reuse") is True and not last
    if offered:
        answer["next"] = True
    channel.send(answer)
    return offered


def serve_one(in_fd: int, out_fd: int, warm_up: bool | None = None) -> None:
    """Answer a request read from ``in_fd`` on ``out_fd`` (and the shareable ones that
    follow it, see MAX_CALLS), then clean up after it.

    ``warm_up``: dry-run first (a worker started ahead of its call); by default only when
    no request is waiting yet.
    """
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    # Not dumpable: the commands it runs (same user, same pid namespace) cannot open its
    # protocol pipes through /proc/PID/fd to forge answers or flood them. A command
    # it starts is dumpable again (execve resets it).
    _prctl(_PR_SET_DUMPABLE, 0)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    if warm_up is None:
        warm_up = not select.select([in_fd], [], [], 0)[0]
    if warm_up:
        loop.run_until_complete(_warm_up())
    stdin = _Stdin(loop, in_fd)
    if not loop.run_until_complete(_serve(stdin, _Channel(out_fd))):
        return  # the pool was closed before we got a (further) call
    _wait_for_eof(in_fd)  # the daemon has the answer (or gave up on it)
    sweep_descendants()


async def _serve(stdin: _Stdin, channel: _Channel) -> bool:
    """Serve calls until one is the last; False if stdin ended before a request."""
    runtimes = _Runtimes()
    for served in range(1, MAX_CALLS + 1):
        line = await stdin.next_line()
        if not line.strip():
            return False
        try:
            request = json.loads(line)
            tool = runtimes.build_tool(request)
            os.chdir(request["workspace"])
        except Exception as exc:
            channel.send({"error": error_payload(exc)})
            break
        if not await _run(tool, request, stdin, channel, served == MAX_CALLS):
            break
        sweep_descendants()  # nothing a call left behind sees the next one
    return True


def _private_stdio() -> tuple[int, int]:
    """Move the protocol pipes off 0 and 1, so nothing a tool starts can touch them."""
    in_fd, out_fd = os.dup(0), os.dup(1)  # os.dup gives non-inheritable descriptors
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return in_fd, out_fd


def _limit_processes(count: int, host_userns: int) -> None:
    """RLIMIT_NPROC counts per user namespace: apply it only inside a fresh one (bwrap),
    where it bounds this sandbox alone instead of every process of the user."""
    import resource

    try:
        inside = os.stat("/proc/self/ns/user").st_ino
    except OSError:
        return
    if inside != host_userns:
        resource.setrlimit(resource.RLIMIT_NPROC, (count, count))


def _restore_pythonpath() -> None:
    """Tools (and what they start) see the daemon's PYTHONPATH, not the one that led here."""
    if ORIGINAL_PYTHONPATH not in os.environ:
        return
    original = os.environ.pop(ORIGINAL_PYTHONPATH)
    if original:
        os.environ["PYTHONPATH"] = original
    else:
        del os.environ["PYTHONPATH"]


def _exit_now(code: int) -> None:
    """Leave without joining threads: a sync tool cancelled mid-call may still hold one."""
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(code)


def _forked_worker(control: socket.socket, fds: list[int], warm: bool) -> None:
    code = 0
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        control.close()
        os.setsid()
        for fd in fds:
            os.set_inheritable(fd, False)  # received descriptors are inheritable
        serve_one(fds[0], fds[1], warm_up=warm)
    except BaseException:
        code = 1
        with contextlib.suppress(Exception):
            import traceback

            traceback.print_exc()
    finally:
        _exit_now(code)


def fork_server(control: socket.socket) -> None:
    """Serve WARM, COLD and KILL requests until the daemon hangs up."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    _prctl(_PR_SET_DUMPABLE, 0)  # its pipes, as a worker's (serve_one), are no command's
    prepare()
    gc.collect()
    gc.freeze()  # keep the collector from touching (and copying) inherited objects
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped by the kernel
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(control, 16, 2)
        except OSError:
            return
        if not msg:
            return  # the daemon is gone
        if msg.startswith(KILL):
            with contextlib.suppress(OSError, struct.error):
                os.killpg(struct.unpack(PID_FORMAT, msg[1:])[0], signal.SIGKILL)
            control.send(struct.pack(PID_FORMAT, 0))
            continue
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            control.send(struct.pack(PID_FORMAT, -1))
            continue
        pid = os.fork()
        if pid == 0:
            _forked_worker(control, fds, warm=msg == WARM)
        for fd in fds:
            os.close(fd)
        control.send(struct.pack(PID_FORMAT, pid))


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m toold.sandbox.worker``."""
    parser = argparse.ArgumentParser(prog="python -m toold.sandbox.worker")
    parser.add_argument("--fork-server", action="store_true", help="fork workers on request")
    parser.add_argument("--nproc", type=int, help="process limit inside a user namespace")
    parser.add_argument("--host-userns", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    _restore_pythonpath()
    in_fd, out_fd = _private_stdio()
    if args.nproc:
        _limit_processes(args.nproc, args.host_userns)
    if args.fork_server:
        os.close(out_fd)
        fork_server(socket.socket(fileno=in_fd))
        return 0
    serve_one(in_fd, out_fd)
    _exit_now(0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
