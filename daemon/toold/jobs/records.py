"""A background job's record, what its work reports, and the daemon that owns it.

``JobRecord`` is a job as stored in ``.toold/jobs/<id>.json`` (``public()``: what jobs/list
and jobs/get show); ``Outcome`` is what a job's command (or coroutine) reports when it
ends. A record names the daemon running it (``owner``: ``process_identity``, its pid and
start time), so a daemon starting up tells a job another live daemon runs
(``owner_alive``) from one whose daemon is gone. The jobs themselves: toold.jobs.manager.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from toold.storage import now


@dataclass
class Outcome:
    """What ``execute`` reports about a finished command."""

    text: str
    exit_code: int | None
    timed_out: bool = False
    is_error: bool = False


@dataclass
class JobRecord:
    """A job as stored in ``.toold/jobs/<id>.json``."""

    job_id: str
    command: str
    timeout: int
    status: str = "running"
    exit_code: int | None = None
    started_at: str = field(default_factory=now)
    finished_at: str | None = None
    result: str | None = None
    error: str | None = None
    owner: str | None = None
    """``pid:start-time`` of the daemon running the job (None in older records)."""

    def public(self) -> dict[str, Any]:
        """The record without internal fields."""
        data = asdict(self)
        data.pop("timeout")
        data.pop("owner")
        return data


def process_identity(pid: int) -> str | None:
    """``pid:start-time`` (clock ticks since boot): tells a process from a later one with
    the same pid; None when no such process runs (or /proc is unavailable)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] == b"Z":
        return None
    return f"{pid}:{int(fields[19])}"


def owner_alive(owner: str | None) -> bool:
    """Whether the daemon ``owner`` names still runs."""
    if not owner or ":" not in owner:
        return False
    pid = owner.split(":", 1)[0]
    return pid.isdigit() and process_identity(int(pid)) == owner
