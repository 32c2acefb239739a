"""A background job's record, what its work reports, and the daemon that owns it.

``JobRecord`` is a job as stored in ``.toold/jobs/<id>.json`` (``public()``: what jobs/list
and jobs/get show); ``Outcome`` is what a job's command (or coroutine) reports when it
ends. A record names the daemon running it (``owner``: ``process_identity``, its pid and
start time), so a daemon starting up tells a job another live daemon runs
(``owner_alive``) from one whose daemon is gone. ``JobFolder``: the records and output
logs in ``.toold/jobs/``. The jobs themselves: toold.jobs.manager.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from toold.sandbox.paths import DIR_FLAGS
from toold.storage import (
    atomic_write_text,
    check_name,
    file_lock,
    now,
    open_state,
    read_state,
    refuse_symlink_at,
    remove_state,
    state_names,
)

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"


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


class JobFolder:
    """``.toold/jobs/``: each job's record (``<id>.json``) and output log (``<id>.log``).

    Files in the folder are written and removed under an flock on ``.lock``, so temp
    files found there under that lock are stale (a daemon killed mid-write) and go.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def _lock_path(self) -> Path:
        return self.path / LOCK_FILE

    def _record_path(self, job_id: str) -> Path:
        return self.path / f"{check_name('job id', job_id)}.json"

    def log_path(self, job_id: str) -> Path:
        """Where job ``job_id``'s output log is (ValueError for a bad id)."""
        return self.path / f"{check_name('job id', job_id)}.log"

    def stored(self) -> Iterator[JobRecord]:
        """Every record that reads and names its own job; stale temp files go first."""
        names = state_names(self.path)  # a symlinked folder is refused, not listed
        if not names:
            return
        with file_lock(self._lock_path):
            for name in names:  # atomic_write_text's temp files
                if name.startswith(".") and name.endswith(".tmp") and ".json." in name:
                    log.info("removing %s, left by a daemon that stopped mid-write", name)
                    remove_state(self.path / name)
        for name in names:
            if not name.endswith(".json") or name.startswith("."):
                continue
            path = self.path / name
            try:
                job_id = check_name("job id", name[: -len(".json")])
                record = JobRecord(**json.loads(read_state(path).decode("utf-8")))
            except (OSError, ValueError, TypeError) as exc:
                log.warning("skipping unreadable job record %s: %s", path, exc)
                continue
            if record.job_id != job_id:  # its log, and what pruning removes, go by the id
                log.warning("skipping job record %s: it names job %r", path, record.job_id)
                continue
            yield record

    def read(self, job_id: str) -> JobRecord:
        """Job ``job_id``'s record as stored now (OSError, ValueError, TypeError if not)."""
        return JobRecord(**json.loads(read_state(self._record_path(job_id)).decode("utf-8")))

    def save(self, record: JobRecord) -> None:
        """Write ``record`` whole (temp file and rename)."""
        with file_lock(self._lock_path):  # creates the folder
            atomic_write_text(self._record_path(record.job_id), json.dumps(asdict(record)))

    def new_log(self, job_id: str) -> None:
        """A fresh, empty log; an old one goes, a symlink there is refused (never followed)."""
        path = self.log_path(job_id)
        with file_lock(self._lock_path):  # creates the folder
            dir_fd = open_state(path.parent, DIR_FLAGS)
            try:
                refuse_symlink_at(dir_fd, path)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path.name, dir_fd=dir_fd)
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                os.close(os.open(path.name, flags, 0o600, dir_fd=dir_fd))
            finally:
                os.close(dir_fd)

    def remove(self, job_ids: Iterable[str]) -> None:
        """Remove the jobs' logs and records."""
        with file_lock(self._lock_path):
            for job_id in job_ids:
                # The log first: a crash in between leaves a record without output
                # (dropped next time), never an output log that nothing lists.
                remove_state(self.log_path(job_id))
                remove_state(self._record_path(job_id))
