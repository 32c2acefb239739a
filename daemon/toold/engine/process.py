"""The engine's process: main(), from the environment it is handed to its exit.

``python -P -m toold.engine`` runs ``main``: it takes the environment ``attach`` wrote on
a descriptor (``receive_environment``: what arrives there never shows in
/proc/PID/environ), hardens the process, takes the workspace's pid lock for the process's
life (``take_pid_lock``: one engine per workspace; a second one exits at once), listens
and runs the Engine (toold.engine.engine) until it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import socket
import time
from pathlib import Path

from toold.engine.engine import Engine
from toold.engine.location import EnginePaths, open_private

log = logging.getLogger(__name__)


def take_pid_lock(paths: EnginePaths, wait: float = 30.0) -> int | None:
    """Lock the pid file for this process's life; None when another engine serves.

    An engine that holds the lock but no longer listens is on its way out (idle, or
    stopped): wait for it to let go rather than leave the workspace without an engine.
    """
    fd = open_private(paths.pid_file, os.O_RDWR | os.O_CREAT)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if _listening(paths) or time.monotonic() > deadline:
                os.close(fd)
                return None
            time.sleep(0.01)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _listening(paths: EnginePaths) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(os.fspath(paths.socket))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def receive_environment(fd: int) -> None:
    """Take the environment ``attach`` wrote on ``fd`` (a JSON object) into os.environ.

    The engine is started with a few harmless variables only, so its
    ``/proc/PID/environ`` (the environment it was started with) holds no secret; the
    rest arrives here, where changes to the environment never show there."""
    data = bytearray()
    try:
        while chunk := os.read(fd, 1 << 16):
            data += chunk
    finally:
        os.close(fd)
    received = json.loads(data or b"{}")
    if not isinstance(received, dict):
        raise SystemExit("toold engine: --env-fd must carry a JSON object of strings")
    for name, value in received.items():
        if isinstance(name, str) and isinstance(value, str) and name and "=" not in name:
            with contextlib.suppress(ValueError):  # a NUL in it: not a valid variable
                os.environ[name] = value


def main(workspace: Path, ready_fd: int | None, env_fd: int | None = None) -> int:
    """Run the engine of ``workspace``; ``ready_fd`` gets a line once it listens, and
    ``env_fd`` carries the environment it runs with (see ``hardening``)."""
    from toold.engine.hardening import harden

    if env_fd is not None:
        receive_environment(env_fd)
    started_by = harden(runs_tools=True)  # non-dumpable, subreaper, secrets out of C env
    logging.basicConfig(
        level=os.environ.get("TOOLD_ENGINE_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("pygls").setLevel(logging.WARNING)
    paths = EnginePaths.of(workspace)
    lock = take_pid_lock(paths)

    def ready(word: str) -> None:
        if ready_fd is not None:
            with contextlib.suppress(OSError):
                os.write(ready_fd, word.encode() + b"\n")
                os.close(ready_fd)

    if lock is None:
        log.info("another engine serves %s; exiting", paths.workspace)
        ready("exists")
        return 0
    engine = Engine(paths, started_by)
    engine.listen()
    ready("ready")
    try:
        asyncio.run(engine.run())
    finally:
        os.close(lock)  # the pid file stays: a lock anyone can take says no engine runs
    log.info("engine stopped")
    return 0
