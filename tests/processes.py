"""Process checks shared by every test tier: is a pid still running, wait for pids to exit."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from tests.waiting import WAIT_S, wait_until
from toold.engine.attach import engine_pid
from toold.engine.location import EnginePaths


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs. A zombie (exited, not reaped: its parent may never reap it)
    and a dead entry count as gone; ``kill(pid, 0)`` would call both alive."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            state = fh.read().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def process_gone(pid: int) -> bool:
    """True once ``pid`` has exited (see ``process_alive``)."""
    return not process_alive(pid)


def wait_gone(pids: int | Iterable[int], what: str = "", timeout: float = WAIT_S) -> None:
    """Wait until every pid has exited; the failure names the survivors and ``what`` they are."""
    pending = [pids] if isinstance(pids, int) else list(pids)

    def survivors() -> list[int]:
        return [pid for pid in pending if process_alive(pid)]

    wait_until(
        lambda: not survivors(), lambda: f"{what or 'pids'} to exit ({survivors()} run)", timeout
    )


def processes_matching(marker: str) -> list[int]:
    """Host pids whose command line (arguments joined by spaces) contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if marker.encode() in f.read().replace(b"\0", b" ") and process_alive(
                        int(entry)
                    ):
                        found.append(int(entry))
            except OSError:
                continue
    return found


def serving_pid(serve_pid: int) -> int:
    """The process that serves the session of the ``toold serve`` at ``serve_pid``, whose
    memory, descriptors and children a test looks at: the engine of its workspace (its
    working folder, as the suite starts it) on the default path, where ``toold serve``
    hands its stdio over and only waits; else that ``toold serve`` itself (a private
    daemon: no engine runs for the folder). Its command line and environment cannot
    tell: the waiting relay re-executes itself with neither."""
    workspace = Path(os.readlink(f"/proc/{serve_pid}/cwd"))
    engine = engine_pid(EnginePaths.of(workspace))
    return serve_pid if engine is None else engine
