"""The bwrap runner: the fork server, and so every worker, inside a bubblewrap sandbox.

The sandbox sees the whole filesystem read-only, the workspace read-write at its own
path, a private /tmp, its own /dev and /proc; every namespace is unshared (the network
too, unless ``execution.network``), no capabilities survive, it leads a new session and
dies with the daemon. One sandbox serves the daemon's calls, each in a worker forked for
it, so a call costs a fork rather than a sandbox and an interpreter start (~250 ms); a
worker kills everything its call started (it is their subreaper) before it exits.

Process limit (``execution.pids_limit``, for the whole sandbox): a daemon running as a
normal user sets RLIMIT_NPROC inside the sandbox's user namespace, where it counts that
sandbox alone. The kernel never applies RLIMIT_NPROC to root, so a root daemon puts the
sandbox in a pids cgroup instead, when the pids controller is writable.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shutil
import signal
import subprocess
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from toold.sandbox.forkserver import ForkServerSandbox
from toold.sandbox.pool import python_paths, under

if TYPE_CHECKING:
    from toold.config import ExecutionConfig, TooldConfig

log = logging.getLogger(__name__)

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
    'bubblewrap) or set execution.tool_runner to another runner ("local" runs tools unsandboxed)'
)
PROBE_TIMEOUT = 15.0
_cgroup_ids = itertools.count(1)


def bwrap_argv(
    exe: str, workspace: Path, execution: ExecutionConfig, command: list[str]
) -> list[str]:
    """The bubblewrap command line that runs ``command`` sandboxed for ``workspace``."""
    ws = str(workspace)
    argv = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for path in python_paths():
        if under(path, "/tmp") and not under(path, ws):
            argv += ["--ro-bind", path, path]
    argv += ["--bind", ws, ws, "--chdir", ws, "--unshare-all"]
    if execution.network:
        argv.append("--share-net")
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--", *command]
    return argv


class PidsCgroup:
    """A pids cgroup for a root daemon's sandboxes (RLIMIT_NPROC does not bind root)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # A runner dropped without close() (a configuration change) still removes it.
        self._finalizer = weakref.finalize(self, _remove_cgroup, path)

    @classmethod
    def create(cls, limit: int) -> PidsCgroup | None:
        """A new cgroup limited to ``limit`` tasks, or None where that is not possible."""
        if os.geteuid() != 0:
            return None
        base = Path("/sys/fs/cgroup")
        if (base / "pids" / "cgroup.procs").exists():
            parent = base / "pids"  # cgroup v1
        elif "pids" in _read(base / "cgroup.subtree_control").split():
            parent = base  # cgroup v2
        else:
            return None
        path = parent / f"toold-{os.getpid()}-{next(_cgroup_ids)}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(limit))
        except OSError as exc:
            log.info("no pids cgroup for the bwrap runner: %s", exc)
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path)

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` started from inside the cgroup, so its first fork is already counted."""
        procs = str(self.path / "cgroup.procs")
        return ["/bin/sh", "-c", 'echo $$ > "$0" && shift && exec "$@"', procs, "-", *argv]

    def remove(self) -> None:
        """Kill what is left in the cgroup and delete it (blocking, bounded)."""
        self._finalizer()


def _remove_cgroup(path: Path) -> None:
    for _ in range(100):
        for pid in _read(path / "cgroup.procs").split():
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)  # killed a moment ago, still exiting
    log.info("could not remove %s: still in use", path)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


class BwrapSandbox(ForkServerSandbox):
    """Each call in a worker forked inside one bubblewrap sandbox."""

    name = "bwrap"
    kills_through_server = True

    def __init__(self, workspace: Path, config: TooldConfig) -> None:
        super().__init__(workspace, config)
        self._argv: list[str] = []
        self._cgroup: PidsCgroup | None = None
        self.activate()

    def check(self) -> str | None:
        """bwrap must exist and be able to build the sandbox here."""
        exe = shutil.which("bwrap")
        if exe is None:
            return f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}"
        execution = self.config.execution
        probe = bwrap_argv(exe, self.workspace, execution, ["true"])
        try:
            done = subprocess.run(probe, capture_output=True, timeout=PROBE_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap could not start ({exc}): {INSTALL_HINT}"
        if done.returncode != 0:
            reason = done.stderr.decode(errors="replace").strip() or f"exit {done.returncode}"
            return (
                f"bubblewrap cannot create its sandbox here ({reason}): allow unprivileged "
                "user namespaces (sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu "
                "an AppArmor profile for bwrap), or choose another execution.tool_runner"
            )
        server = super().server_argv()
        self._cgroup = PidsCgroup.create(execution.pids_limit)
        if self._cgroup is None:
            host_userns = os.stat("/proc/self/ns/user").st_ino
            server += ["--nproc", str(execution.pids_limit), "--host-userns", str(host_userns)]
        self._argv = bwrap_argv(exe, self.workspace, execution, server)
        if self._cgroup is not None:
            self._argv = self._cgroup.wrap(self._argv)
        return None

    def server_argv(self) -> list[str]:
        """bwrap running the fork server."""
        return self._argv

    def release(self) -> None:
        """Stop the sandbox and remove its cgroup."""
        super().release()
        if self._cgroup is not None:
            self._cgroup.remove()
