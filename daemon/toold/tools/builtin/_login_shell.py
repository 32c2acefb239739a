"""The user's login environment, captured once per workspace for the local runner's bash.

``bash -lc`` on every call sources the user's profile each time (about 130 ms, and
whatever the profile prints lands in every output). Instead, like Claude Code's shell
snapshot, the login shell runs once (``bash -lc 'env -0'``) on a thread, at the first
bash call that runs in that environment, and each command then runs with ``bash -c`` in
it. Not at bind: the settings that apply then may not be the ones a call runs under (an
engine binds with ``toold.toml``, an editor's ``initializationOptions`` come after), and
a profile sourced for nothing (``login_shell = true``, a sandboxed runner) is once too
often. The workspace drops the snapshot when the execution settings change.

Only the local runner uses it: the daemon already runs with the user's environment
there. Sandboxed runners rebuild their tools from the configuration alone, so the
snapshot (which may hold secrets) never reaches a worker; they keep their allow-list.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import signal
import subprocess
import threading
from pathlib import Path

log = logging.getLogger(__name__)

CAPTURE_TIMEOUT = 10.0
"""Seconds the login shell may take before the daemon's own environment is used."""
_MARK = b"\0--toold-login-environment--\0"
_SCRIPT = r"printf '\0--toold-login-environment--\0'; exec env -0"
# Set by the shell itself for each process; the command's own shell sets them again.
_PER_SHELL = frozenset({"_", "SHLVL", "PWD", "OLDPWD"})


class LoginShellError(RuntimeError):
    """The login shell could not report its environment."""


def capture_login_environment(cwd: Path, timeout: float = CAPTURE_TIMEOUT) -> dict[str, str]:
    """Run ``bash -l`` once and return the environment it ends with.

    Whatever the profile prints comes before a marker and is dropped. The shell runs in
    its own process group, killed whole on timeout (a profile may start helpers).
    """
    proc = subprocess.Popen(
        ["bash", "-lc", _SCRIPT],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise LoginShellError(f"bash -l did not finish within {timeout:g} s") from None
    if proc.returncode != 0 or _MARK not in out:
        raise LoginShellError(f"bash -l exited with status {proc.returncode}")
    env: dict[str, str] = {}
    for item in out.split(_MARK, 1)[1].split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name and name.decode(errors="replace") not in _PER_SHELL:
            env[os.fsdecode(name)] = os.fsdecode(value)
    if "PATH" not in env:
        raise LoginShellError("the login shell's environment has no PATH")
    return env


class LoginEnvironment:
    """The capture, run on a thread at the first ``get`` (the first bash call that needs
    it); every later call, and calls waiting meanwhile, get its result."""

    def __init__(self, cwd: Path, timeout: float = CAPTURE_TIMEOUT) -> None:
        self._cwd, self._timeout = cwd, timeout
        self._result: concurrent.futures.Future[dict[str, str] | None] | None = None
        self._starting = threading.Lock()

    @property
    def started(self) -> bool:
        """Whether the login shell has been run (or is running)."""
        return self._result is not None

    def _start(self) -> concurrent.futures.Future[dict[str, str] | None]:
        with self._starting:
            if self._result is None:
                result: concurrent.futures.Future[dict[str, str] | None]
                result = concurrent.futures.Future()
                # Running from here: a cancelled bash call that awaited it cannot cancel
                # the capture the next calls share.
                result.set_running_or_notify_cancel()
                threading.Thread(
                    target=self._capture, args=(result,), name="toold-login-env", daemon=True
                ).start()
                self._result = result
            return self._result

    def _capture(self, result: concurrent.futures.Future[dict[str, str] | None]) -> None:
        try:
            env: dict[str, str] | None = capture_login_environment(self._cwd, self._timeout)
        except (OSError, LoginShellError) as exc:
            log.warning(
                "bash: could not capture the login environment (%s); commands run with "
                "the daemon's environment (execution.login_shell = true sources the "
                "profile on every call instead)",
                exc,
            )
            env = None
        result.set_result(env)

    async def get(self) -> dict[str, str] | None:
        """The login environment (captured now if no call needed it yet), or None (use
        the daemon's own) when it could not be had."""
        return await asyncio.wrap_future(self._start())
