"""Engines under a private runtime folder: start them through the real CLI, stop them all.

Every engine a test starts lives under its own ``TOOLD_RUNTIME_DIR``; the fixture's end
stops each one (``toold daemon stop``: jobs cancelled, their process groups killed) and
then kills its process group, so nothing outlives the test.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.e2e.wire import WireClient
from tests.processes import wait_gone


def local_runner(workspace: Path) -> None:
    """Run the workspace's tools with the local runner: a test that reads a pid its
    command wrote, or has the command reach the engine's socket, needs the engine's own
    pid namespace and runtime folder (the default runner sandboxes both away)."""
    (workspace / "toold.toml").write_text('[execution]\ntool_runner = "local"\n')


def live_engines(runtime: Path) -> list[int]:
    """Pids of the engines alive under ``runtime`` (each holds a lock on its pid file)."""
    pids = []
    for pid_file in runtime.glob("*.pid"):
        fd = os.open(pid_file, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode().strip()
            if text.isdigit():
                pids.append(int(text))
        finally:
            os.close(fd)
    return pids


class Engines:
    """The CLI, editors and engines of one test, all under one runtime folder."""

    def __init__(self) -> None:
        # Short, under /tmp: a socket's path must fit in 108 bytes.
        self.runtime = Path(tempfile.mkdtemp(prefix="toold-t-", dir="/tmp"))
        self.env = {**os.environ, "TOOLD_RUNTIME_DIR": os.fspath(self.runtime)}
        self.env.pop("TOOLD_NO_DAEMON", None)
        # Under CI=true a one-shot engine exits as its last session ends (toold.engine.idle):
        # these tests look at an engine after a call. tests/engine/test_idle_engines.py
        # runs the CI rule itself.
        self.env.pop("CI", None)
        self.editors: list[WireClient] = []

    def toold(
        self, *args: str, cwd: Path, stdin: str | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run the toold CLI to its end."""
        return subprocess.run(
            [sys.executable, "-m", "toold", *args],
            cwd=cwd,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def status(self, workspace: Path) -> dict[str, Any]:
        """``toold daemon status --json`` (asserting an engine runs)."""
        done = self.toold(
            "daemon", "status", "--json", "--workspace", str(workspace), cwd=workspace
        )
        assert done.returncode == 0, done.stdout + done.stderr
        status: dict[str, Any] = json.loads(done.stdout)
        return status

    def editor(self, workspace: Path, *args: str, **initialize: Any) -> WireClient:
        """An editor: ``toold serve`` (the relay) on the workspace, initialized."""
        client = WireClient(workspace, *args, env=self.env)
        self.editors.append(client)
        client.initialize(rootUri=workspace.as_uri(), **initialize)
        return client

    def close(self) -> None:
        """Close the editors, stop every engine, kill what is left, remove the folder."""
        for client in self.editors:
            with contextlib.suppress(Exception):
                client.close()
        stop_engines(self.runtime, self.env)
        if os.environ.get("TOOLD_KEEP_ENGINE_LOGS"):
            for log in self.runtime.glob("*.log"):
                print(log.read_text())
        shutil.rmtree(self.runtime, ignore_errors=True)


def stop_engines(runtime: Path, env: dict[str, str]) -> None:
    """Stop every engine alive under ``runtime`` (``toold daemon stop``: its jobs are
    cancelled), then kill its process group, and wait until they are gone."""
    pids = live_engines(runtime)
    for pid in pids:
        workspace = _engine_workspace(pid)
        if workspace is not None:
            with contextlib.suppress(Exception):
                subprocess.run(
                    [sys.executable, "-m", "toold", "daemon", "stop", "--workspace", workspace],
                    env={**env, "TOOLD_RUNTIME_DIR": os.fspath(runtime)},
                    capture_output=True,
                    timeout=60,
                )
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # the engine leads its own process group
    wait_gone(pids, "engines")


def _engine_workspace(pid: int) -> str | None:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    for flag, value in itertools.pairwise(argv):
        if flag == b"--workspace":
            return value.decode()
    return None
