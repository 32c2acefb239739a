"""Helpers shared by the hardening tests: scale, daemons, /proc probes.

The suite runs at CI scale by default; ``TOOLD_FULL_HARDENING=1`` runs the issue's
full sizes (hours, not minutes: 200 kill rounds per store, 100,000 soak calls,
a 1,000,000-file tree, 5,000 fuzz examples).
"""

from __future__ import annotations

import contextlib
import os
import queue
from pathlib import Path
from typing import Any

from tests.e2e.wire import WireClient

FULL = os.environ.get("TOOLD_FULL_HARDENING") == "1"


def scale(ci: int, full: int) -> int:
    """``full`` under TOOLD_FULL_HARDENING=1, else ``ci``."""
    return full if FULL else ci


def start_daemon(workspace: Path, *args: str, **init: Any) -> WireClient:
    """A real ``toold serve`` on ``workspace``, initialized."""
    client = WireClient(workspace, *args)
    client.initialize(rootUri=workspace.as_uri(), **init)
    return client


def next_raw(client: WireClient, timeout: float) -> dict[str, Any] | None:
    """The next message the daemon sent (kept ones first); None once it closed stdout."""
    if client._pending:
        return client._pending.pop(0)
    try:
        return client.messages.get(timeout=timeout)
    except queue.Empty:
        raise TimeoutError(f"no message within {timeout}s; stderr: {client.stderr()}") from None


def exited_cleanly(client: WireClient, timeout: float = 15.0) -> int:
    """Wait for the daemon to exit by itself; its status (0 or 1), else AssertionError."""
    status = client.proc.wait(timeout=timeout)
    stderr = client.stderr()
    assert status in (0, 1), f"daemon died with status {status}: {stderr}"
    assert "Traceback" not in stderr, stderr
    return status


# -- /proc ----------------------------------------------------------------------------


def rss_kib(pid: int) -> int:
    """VmRSS of ``pid``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def fd_count(pid: int) -> int:
    """Open file descriptors of ``pid``."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_targets(pid: int) -> list[str]:
    """What each open descriptor of ``pid`` points at (for leak reports)."""
    targets = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return sorted(targets)


def _stat_fields(pid: int) -> list[str]:
    # The command name may hold spaces and parentheses: split after the last ')'.
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def children(pid: int) -> dict[int, str]:
    """Direct children of ``pid`` and their states (R, S, Z, ...)."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError):
            fields = _stat_fields(int(entry))
            if int(fields[1]) == pid:
                found[int(entry)] = fields[0]
    return found


def zombies(pid: int) -> list[int]:
    """Children of ``pid`` that exited and were never reaped."""
    return [child for child, state in children(pid).items() if state == "Z"]
