"""Stop the idle engines of the suite's runtime folder between tests, the engine's own way.

Every test workspace is a temp folder, so every test that spawns ``toold serve``,
``toold call`` or ``toold run`` on the default path starts an engine of its own. An
editor's engine stays idle ``daemon.idle_timeout`` (30 min) and only
``daemon.max_idle_engines`` (8) bounds them; so after each test the engines that say
they are idle are asked to stop *if still idle*, as a new engine asks the ones beyond
that cap (``toold.engine.idle``). An engine a session-wide client still uses is busy and
stays; the run's end stops every engine left (``tests.engine.support.stop_engines``).
The pid files of engines gone are removed, so this check costs the same at the run's end
as at its start (each is opened and locked to learn whether its engine lives).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
from pathlib import Path

from tests.processes import wait_gone
from toold.engine.attach import EngineError, ask, engine_pid, running_engines
from toold.engine.location import EnginePaths, engine_keys, open_private

LOG_TAIL = 40
"""Lines of a stopped engine's log printed (pytest shows them when the test failed)."""
REASON = "the test suite's sweep of idle engines after a test (tests/idle_engines.py)"
"""What the engine logs as the reason it stopped."""


def stop_idle_engines(runtime: Path) -> list[int]:
    """Ask every idle engine under ``runtime`` to stop if still idle, wait until those
    that agreed are gone, and print the tail of their logs; their pids."""
    stopped: list[tuple[int, Path]] = []
    for paths, pid in running_engines(runtime):
        try:
            status = ask(paths, "status", timeout=5.0)
            if status is None or status.get("idle") is not True:
                continue  # gone meanwhile, or still used (a session, a job, a fresh start)
            hello = {"ifIdle": True, "uses": status.get("uses"), "reason": REASON}
            reply = ask(paths, "stop", hello, timeout=5.0)
        except (EngineError, OSError, ValueError):
            continue  # the run's end kills what does not answer
        if reply is not None and reply.get("stopped"):
            stopped.append((pid, paths.log))
    wait_gone([pid for pid, _ in stopped], "idle engines asked to stop")
    forget_gone_engines(runtime)
    for pid, log in stopped:
        with contextlib.suppress(OSError):
            lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
            print(f"--- engine {pid}: {log} (last {LOG_TAIL} lines)")
            print("\n".join(lines[-LOG_TAIL:]))
    return [pid for pid, _ in stopped]


def forget_gone_engines(runtime: Path) -> None:
    """Remove the pid file of every engine under ``runtime`` that no longer runs (logs
    stay), under its start lock: no client is starting an engine there meanwhile."""
    for key in engine_keys(runtime):
        paths = EnginePaths.keyed(runtime, key)
        try:
            lock = open_private(paths.start_lock, os.O_RDWR | os.O_CREAT)
        except OSError:
            continue
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if engine_pid(paths) is None:
                os.unlink(paths.pid_file)
        except OSError:
            continue  # a client holds the start lock, or the file went meanwhile
        finally:
            os.close(lock)


def stop_engine(workspace: Path) -> None:
    """``toold daemon stop`` of the workspace's engine (its sessions end), waited for: a
    restart on the default path, since the next client starts a new engine that reads
    toold.toml as it is. Nothing when no engine runs there."""
    paths = EnginePaths.of(workspace)
    pid = engine_pid(paths)
    if pid is None:
        return
    argv = [sys.executable, "-m", "toold", "daemon", "stop", "--workspace", os.fspath(workspace)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    wait_gone(pid, "the stopped engine")
