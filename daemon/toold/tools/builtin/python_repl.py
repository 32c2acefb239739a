"""python_repl: Python snippets in a long-lived worker process, one per tool instance.

The worker (``_repl_worker.py``) keeps the snippets' names between calls. It runs in
its own session, so a snippet that times out or is cancelled is stopped by killing
the whole process group, whatever it started; the daemon never waits on it. The next
call starts a fresh interpreter and its output says that earlier names were lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import selectors
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from toold.sandbox.process import kill_group
from toold.tools.annotations import ToolAnnotations
from toold.tools.base import ToolArguments
from toold.tools.builtin._workspace import WorkspaceTool
from toold.tools.context import failed

WORKER_SCRIPT = Path(__file__).with_name("_repl_worker.py")
STARTUP_TIMEOUT = 30.0
READ_CHUNK = 65536
TIMED_OUT = "timed out"
ENDED = "ended"
Reply = dict[str, Any] | str
"""A reply from the worker, or TIMED_OUT, or ENDED (the worker closed its output)."""


@dataclass(frozen=True)
class Launch:
    """How a sandbox starts the interpreter: its command line wrapped (``bwrap ... --
    python ...``) and its whole environment (the sandbox's allow-list)."""

    wrap: Callable[[list[str]], list[str]]
    env: Mapping[str, str]
    owner: object
    """The sandbox it belongs to: an interpreter started for another one is replaced."""


LAUNCH: ContextVar[Launch | None] = ContextVar("python_repl_launch", default=None)
"""Set by a sandbox runner around a call it runs in the daemon (toold.sandbox.forkserver),
so the names persist in one long-lived interpreter inside that sandbox; None: the
interpreter is the daemon's own child."""


class PythonReplArguments(ToolArguments):
    code: str = Field(description="The Python code to execute")


class WorkerError(RuntimeError):
    """The worker could not be started or broke the protocol."""


@dataclass
class ReplCall:
    """One call, so that cancelling it stops that call and no other."""

    cancelled: bool = False


class ReplWorker:
    """A worker process and what is known about the state it holds.

    ``execute`` blocks (it runs in a thread) and serialises calls; ``cancel`` may be
    called from any thread.
    """

    def __init__(self, cwd: Path, launch: Launch | None = None) -> None:
        self.cwd = cwd
        self.launch = launch
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._selector: selectors.BaseSelector | None = None
        self._buffer = b""
        self._ids = itertools.count(1)
        self._busy = threading.Lock()
        self._guard = threading.Lock()
        self._current: ReplCall | None = None
        self._lost: str | None = None

    @property
    def pid(self) -> int | None:
        """The running worker's pid, if any."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def execute(
        self,
        call: ReplCall,
        code: str,
        *,
        timeout: float,
        max_output: int,
        allowed_modules: list[str] | None,
    ) -> str:
        """Run ``code`` and return Jianmu's result text (errors included)."""
        with self._busy:
            notice = ""
            if self.pid is None:
                if self._proc is not None:
                    self._stop(f"the previous interpreter exited (status {self._proc.poll()})")
                self._start()
                if self._lost:
                    notice = (
                        f"[python_repl: {self._lost}; this is a fresh interpreter, "
                        "names defined before are lost]\n"
                    )
                    self._lost = None
            request_id = next(self._ids)
            request = {
                "id": request_id,
                "code": code,
                "max_output": max_output,
                "allowed_modules": allowed_modules,
            }
            with self._guard:
                if call.cancelled:
                    return ""
                self._current = call
            try:
                reply = self._exchange(request, time.monotonic() + timeout)
            finally:
                with self._guard:
                    self._current = None
            if isinstance(reply, dict):
                text = notice + str(reply["output"])
                return failed(text) if reply.get("error") else text
            if call.cancelled:
                self._stop("the previous call was cancelled")
                return ""
            if reply == TIMED_OUT:
                self._stop(f"the previous snippet timed out after {timeout}s")
                return failed(
                    f"{notice}Error: Code execution timed out after {timeout}s\n"
                    "The Python worker was stopped; the next call starts a fresh interpreter."
                )
            assert self._proc is not None
            status = self._proc.wait()
            self._stop(f"the previous interpreter exited (status {status})")
            return failed(
                f"{notice}Error: the Python worker exited (status {status}) while running "
                "this code; the next call starts a fresh interpreter."
            )

    def cancel(self, call: ReplCall) -> None:
        """Stop ``call``: kill the worker if it is running it, else keep it from starting."""
        with self._guard:
            call.cancelled = True
            if self._current is call and self._proc is not None:
                kill_group(self._proc.pid)

    def close(self) -> None:
        """Kill the worker and release it (its names are lost)."""
        with self._guard:
            if self._proc is not None:
                kill_group(self._proc.pid)
        with self._busy:
            self._stop(None)

    # -- process ---------------------------------------------------------
    def _start(self) -> None:
        argv = [sys.executable, "-P", "-u", os.fspath(WORKER_SCRIPT)]  # -P: see the worker's main
        launch = self.launch
        proc = subprocess.Popen(
            argv if launch is None else launch.wrap(argv),
            cwd=self.cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            # A sandbox's allow-list; else the inherited environment: a worker's own, or the
            # daemon's less its secrets (removed from what children inherit, kept in
            # os.environ: engine/hardening.py).
            env=None if launch is None else dict(launch.env),
        )
        assert proc.stdout is not None and proc.stderr is not None
        self._proc = proc
        # Kills the group if this object is collected, and at interpreter exit.
        self._finalizer = weakref.finalize(self, _reap, proc)
        self._selector = selectors.DefaultSelector()
        self._selector.register(proc.stdout, selectors.EVENT_READ)
        self._buffer = b""
        ready = self._read_reply(time.monotonic() + STARTUP_TIMEOUT)
        if not isinstance(ready, dict) or not ready.get("ready"):
            kill_group(proc.pid)
            proc.wait()
            detail = proc.stderr.read().decode("utf-8", "replace").strip()
            self._stop(None)
            raise WorkerError(
                f"could not start the Python worker ({sys.executable}): "
                f"{detail or f'exit code {proc.returncode}'}"
            )
        # The worker has moved its stderr away; nothing more arrives on this pipe.
        proc.stderr.close()

    def _stop(self, reason: str | None) -> None:
        """Kill and reap the worker; ``reason`` says why its names were lost."""
        self._proc = None
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        if self._selector is not None:
            self._selector.close()
            self._selector = None
        self._buffer = b""
        if reason is not None:
            self._lost = reason

    def _exchange(self, request: dict[str, Any], deadline: float) -> Reply:
        """Send one request and wait for its reply."""
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(request).encode("utf-8") + b"\n")
            proc.stdin.flush()
        except OSError:
            return ENDED
        while True:
            reply = self._read_reply(deadline)
            if not isinstance(reply, dict) or reply.get("id") == request["id"]:
                return reply

    def _read_reply(self, deadline: float) -> Reply:
        """The next JSON line from the worker, TIMED_OUT at the deadline or ENDED."""
        proc, selector = self._proc, self._selector
        assert proc is not None and proc.stdout is not None and selector is not None
        fd = proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                if time.monotonic() >= deadline:
                    return TIMED_OUT
                continue
            chunk = os.read(fd, READ_CHUNK)
            if not chunk:
                return ENDED
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            message: dict[str, Any] = json.loads(line)
        except ValueError:
            raise WorkerError(f"the Python worker sent an invalid reply: {line[:200]!r}") from None
        return message


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Kill the worker's process group, wait for it and close its pipes."""
    kill_group(proc.pid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


class PythonReplTool(WorkspaceTool):
    name = "python_repl"
    annotations = ToolAnnotations(runs_code=True)
    description = (
        "Execute Python code and return the output. An expression returns its value; "
        "statements return what they print (stderr after '[stderr]'). Names persist "
        "between calls. Runs in the workspace in a separate process; a call that times out "
        "(python_repl.timeout, 30 s) is killed and the next call starts a fresh interpreter. "
        "python_repl.allowed_modules is a convenience filter on imports, not a security "
        "boundary (code can reach any module and open any file the process can); the "
        "sandbox runners (bwrap, docker) are the boundary."
    )
    Arguments = PythonReplArguments
    parallel_safe = False
    effect_tags = ("code:execute",)

    def __init__(self, runtime: Any = None) -> None:
        super().__init__(runtime)
        self._worker: ReplWorker | None = None
        self._worker_lock = threading.Lock()

    @property
    def worker(self) -> ReplWorker:
        """This instance's worker for the sandbox of this call (created on first use,
        started on first call); one made for another sandbox is stopped and replaced."""
        launch = LAUNCH.get()
        with self._worker_lock:
            old = self._worker
            worker = old
            if worker is None or worker.launch != launch:
                cwd = self.runtime.workspace if self.runtime is not None else Path.cwd()
                worker = self._worker = ReplWorker(cwd, launch)
        if old is not None and old is not worker:
            old.close()
        return worker

    async def run(self, args: PythonReplArguments) -> str:
        """Run the snippet in the worker; cancellation kills the worker."""
        code = args.code
        if not code.strip():
            return failed("Error: No code provided")
        settings = self.config.python_repl
        worker = self.worker
        call = ReplCall()
        try:
            return await asyncio.to_thread(
                worker.execute,
                call,
                code,
                timeout=settings.timeout,
                max_output=settings.max_output_length,
                allowed_modules=settings.allowed_modules,
            )
        except asyncio.CancelledError:
            worker.cancel(call)
            raise

    def close(self) -> None:
        """Stop the worker."""
        if self._worker is not None:
            self._worker.close()


TOOLS = (PythonReplTool,)
