"""BackgroundManager: background_run's jobs, their records and their notifications.

A job runs its command through the configured runner (the caller supplies
``execute``). Records and output logs live in ``.toold/jobs/`` so a restarted
daemon still lists finished jobs, up to ``max_finished`` of them (``limits.max_finished_jobs``):
when a job ends, the oldest finished ones beyond that go, record and log. What they
hold is redacted (toold.permissions.redaction: the command, the result, the log as it
is written, a line at a time) and they are private (0600 in a 0700 folder). When a job
ends, ``on_finished`` fires (the server pushes ``jobs/finished``) and a notification
waits in the queue that the agent loop drains into the message history.

Running jobs are capped (``limits.max_running_jobs`` for the workspace and
``limits.max_running_jobs_per_session`` for one session of the engine, the session being
``toold.fairness.caller``): each holds a process group and its pipes, so four hundred
unasked ``sleep 90`` jobs used to take the descriptors every other session needs. A job
beyond a cap is refused at once (``JobLimitReached``, naming the key), never queued.

Several daemons may share a workspace: each record names the daemon that runs it
(``owner``: its pid and start time). A daemon starting up marks a running record as
failed only when its owner is gone; a job another live daemon runs is listed as
running and must be cancelled through that daemon. The record, the outcome, the
owner's identity and the folder's files: toold.jobs.records.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import secrets
import string
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from toold.errors import ForeignJob, UnknownJob
from toold.fairness import caller
from toold.jobs.records import JobFolder, JobRecord, Outcome, owner_alive, process_identity
from toold.permissions.redaction import StreamRedactor, redact_text
from toold.sandbox.process import CappedText
from toold.storage import check_name, now, open_state, read_state

log = logging.getLogger(__name__)

_ALPHABET = string.ascii_letters + string.digits
OUTPUT_CAP = 30_000
LOG_CAP_BYTES = 16 * 1024 * 1024
MAX_FINISHED = 100
MAX_RUNNING = 64
MAX_RUNNING_PER_SESSION = 16

Execute = Callable[..., Awaitable[Outcome]]
"""Runs a command through the configured runner: (command, timeout, on_output), and the
job's idle timeout as a fourth argument when background_run gave one."""
Work = Callable[[Callable[[str], None]], Awaitable[Outcome]]


def _redacted(record: JobRecord) -> bool:
    """Redact the record's command, result and error in place; whether that changed it."""
    before = (record.command, record.result, record.error)
    record.command = redact_text(record.command)
    record.result = None if record.result is None else redact_text(record.result)
    record.error = None if record.error is None else redact_text(record.error)
    return (record.command, record.result, record.error) != before


class JobLimitReached(Exception):
    """A job beyond ``limits.max_running_jobs`` or its per-session share; the message names
    the key and the way out."""


class BackgroundManager:
    """Runs, tracks, cancels and persists background jobs."""

    SUBMITTED = "Submitted background task {job_id}"
    """background_run's result: the job started (the spec's text)."""

    def __init__(
        self,
        folder: Path,
        execute: Execute,
        on_finished: Callable[[dict[str, Any]], None] | None = None,
        max_finished: int = MAX_FINISHED,
        max_running: int = MAX_RUNNING,
        max_running_per_session: int = MAX_RUNNING_PER_SESSION,
    ) -> None:
        self.folder = folder
        self.files = JobFolder(folder)
        """The records and logs in ``folder``."""
        self.execute = execute
        self.on_finished = on_finished
        self.max_finished = max_finished
        """Finished jobs kept; the oldest beyond it are dropped when a job finishes."""
        self.max_running = max_running
        """Jobs running at once in this workspace (``limits.max_running_jobs``)."""
        self.max_running_per_session = max_running_per_session
        """Of those, started by one engine session (``limits.max_running_jobs_per_session``)."""
        self._records: dict[str, JobRecord] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._sessions: dict[str, int | None] = {}
        """The session that started each running job (None: no engine session)."""
        self._work: set[str] = set()
        """Running jobs that are coroutines of this process (``start_work``: subagents)."""
        self._output: dict[str, CappedText] = {}
        self._finished: dict[str, None] = {}
        """Finished job ids, oldest first (an ordered set)."""
        self._queue: list[dict[str, Any]] = []
        self.identity = process_identity(os.getpid())
        """This daemon, as job records name their owner."""
        self._load()

    # -- persistence -----------------------------------------------------------
    def _load(self) -> None:
        try:
            self._load_records()
        except OSError as exc:  # a symlinked folder or lock: each call says so again
            log.error("not loading job records: %s", exc)

    def _load_records(self) -> None:
        finished: list[JobRecord] = []
        for record in self.files.stored():
            if record.status == "running":
                if owner_alive(record.owner) and record.owner != self.identity:
                    self._records[record.job_id] = record  # another daemon's: listed only
                    continue
                record.status, record.finished_at = "failed", now()
                record.error = "toold stopped while the job was running"
                self.files.save(record)
            elif _redacted(record):  # written by a toold that did not redact it all
                self.files.save(record)
            self._records[record.job_id] = record
            finished.append(record)
        finished.sort(key=lambda r: (r.finished_at or "", r.started_at, r.job_id))
        self._finished = dict.fromkeys(r.job_id for r in finished)
        self._prune()

    def _prune(self) -> None:
        """Drop the oldest finished jobs beyond ``max_finished``; running ones never go."""
        excess = len(self._finished) - max(self.max_finished, 1)
        if excess <= 0:
            return
        oldest = list(self._finished)[:excess]
        dropped = [job_id for job_id in oldest if self._records[job_id].status != "running"]
        try:
            self.files.remove(dropped)
        except OSError as exc:
            log.error("could not remove old job files in %s: %s", self.folder, exc)
        for job_id in dropped:
            del self._finished[job_id]
            self._records.pop(job_id, None)
            self._output.pop(job_id, None)

    # -- starting jobs --------------------------------------------------------------
    def _claim_id(self, task_id: str | None) -> str:
        job_id = task_id.strip() if task_id else ""
        if not job_id:
            job_id = "".join(secrets.choice(_ALPHABET) for _ in range(8))
        if job_id in self._tasks:
            raise ValueError(f"Background task already running: {job_id}")
        return check_name("task_id", job_id)

    def _check_room(self) -> None:
        """Refuse a job beyond the workspace's cap or the calling session's."""
        running = len(self._tasks)
        if running >= self.max_running:
            raise JobLimitReached(
                f"{running} background jobs are running in this workspace, as many as "
                f"limits.max_running_jobs ({self.max_running}) allows: wait for one to end "
                "or cancel one (jobs/cancel), or raise limits.max_running_jobs in toold.toml"
            )
        session = caller.get()
        if session is None:  # one process, one session: the workspace's cap is its own
            return
        mine = sum(1 for owner in self._sessions.values() if owner == session)
        if mine >= self.max_running_per_session:
            raise JobLimitReached(
                f"this session runs {mine} background jobs, as many as "
                f"limits.max_running_jobs_per_session ({self.max_running_per_session}) "
                "allows: wait for one to end or cancel one (jobs/cancel), or raise "
                "limits.max_running_jobs_per_session in toold.toml"
            )

    def _start(self, record: JobRecord, work: Work) -> None:
        job_id = record.job_id
        self._check_room()  # before anything is written: a refused job leaves no trace
        self.files.new_log(job_id)  # first: a refused log leaves no record claiming the job runs
        self._finished.pop(job_id, None)  # a finished job's id, used again
        self._records[job_id] = record
        self._output[job_id] = CappedText(OUTPUT_CAP)
        self.files.save(record)
        self._sessions[job_id] = caller.get()
        # The job runs outside its session's shares of the engine (toold.fairness): it has
        # caps of its own, and its session's calls must not wait behind its jobs.
        context = contextvars.copy_context()
        context.run(caller.set, None)
        self._tasks[job_id] = asyncio.create_task(
            self._run(record, work), name=f"job-{job_id}", context=context
        )

    async def submit(self, command: str, timeout: int = 30, task_id: str | None = None) -> str:
        """Start the command and return at once: ``Submitted background task <id>``."""
        return self.SUBMITTED.format(job_id=await self.start_command(command, timeout, task_id))

    async def start_command(
        self,
        command: str,
        timeout: int = 30,
        task_id: str | None = None,
        idle_timeout: float | None = None,
    ) -> str:
        """``background_run``: start the command as a job and return its id at once;
        ``idle_timeout`` (None: ``limits.idle_timeout``) kills it after that long silent."""
        job_id = self._claim_id(task_id)
        # The record (on disk, in jobs/list) names the command with its secrets redacted.
        record = JobRecord(
            job_id=job_id, command=redact_text(command), timeout=timeout, owner=self.identity
        )
        limits = () if idle_timeout is None else (idle_timeout,)
        self._start(record, lambda on_output: self.execute(command, timeout, on_output, *limits))
        return job_id

    def ended(self, job_id: str) -> asyncio.Task[None] | None:
        """The task running job ``job_id`` (done once the job has ended and its record
        is saved); None when this daemon runs no such job."""
        return self._tasks.get(job_id)

    async def start_work(self, job_id: str, label: str, work: Callable[[], Awaitable[str]]) -> str:
        """Run a coroutine (a background subagent) as a job whose text is its result."""

        async def run(_: Callable[[str], None]) -> Outcome:
            return Outcome(text=await work(), exit_code=None)

        record = JobRecord(
            job_id=self._claim_id(job_id),
            command=redact_text(label),
            timeout=0,
            owner=self.identity,
        )
        self._start(record, run)
        self._work.add(record.job_id)
        return record.job_id

    def work_of(self, session: int) -> list[str]:
        """The running ``start_work`` jobs (background subagents) engine session
        ``session`` started: they end with it, unlike commands (toold.engine)."""
        return [job for job in self._work if self._sessions.get(job) == session]

    async def _run(self, record: JobRecord, work: Work) -> None:
        sink = self._output[record.job_id]
        written = 0
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        fd = open_state(self.files.log_path(record.job_id), flags, single_link=True)
        log_file = os.fdopen(fd, "a", encoding="utf-8")
        # The log is redacted as it is written; jobs/get's live output (sink) is not.
        redactor = StreamRedactor()

        def on_output(text: str) -> None:
            nonlocal written
            chunk = text + "\n"
            sink.append(chunk)
            if written < LOG_CAP_BYTES:
                shown = redactor.feed(chunk)
                log_file.write(shown)
                log_file.flush()
                written += len(shown)

        try:
            outcome = await work(on_output)
        except asyncio.CancelledError:
            self._finish(record, "cancelled", None, error="Cancelled.")
            raise
        except Exception as exc:
            self._finish(record, "failed", None, error=f"Error: {type(exc).__name__}: {exc}")
        else:
            if outcome.timed_out:
                self._finish(record, "timed_out", outcome.exit_code, error=outcome.text)
            elif outcome.is_error or outcome.exit_code:
                self._finish(record, "failed", outcome.exit_code, error=outcome.text)
            else:
                self._finish(record, "done", outcome.exit_code, result=outcome.text)
        finally:
            with contextlib.suppress(OSError):
                log_file.write(redactor.flush())
            log_file.close()
            self._tasks.pop(record.job_id, None)
            self._sessions.pop(record.job_id, None)
            self._work.discard(record.job_id)

    def _finish(
        self,
        record: JobRecord,
        status: str,
        exit_code: int | None,
        *,
        result: str | None = None,
        error: str | None = None,
    ) -> None:
        record.status, record.exit_code, record.finished_at = status, exit_code, now()
        record.result, record.error = result, error
        # What is stored and listed is redacted; the agent's notification is its output.
        _redacted(record)
        # The agent loop sees BareAgent's two outcomes: done, or failed with the reason.
        note: dict[str, Any] = {
            "task_id": record.job_id,
            "status": "done" if status == "done" else "failed",
        }
        note["result" if status == "done" else "error"] = result if status == "done" else error
        self._queue.append(note)
        # Tell the editor first: the record's fsync must not delay the notification.
        if self.on_finished is not None:
            self.on_finished(record.public())
        try:
            self.files.save(record)
        except OSError as exc:
            log.error("could not save the record of job %s: %s", record.job_id, exc)
        self._finished[record.job_id] = None
        self._prune()

    # -- queries and control -----------------------------------------------------
    def drain_notifications(self) -> list[dict[str, Any]]:
        """Finished-job notifications not yet handed to the agent loop."""
        drained, self._queue = self._queue, []
        return drained

    def list(self) -> list[dict[str, Any]]:
        """Every job, oldest first."""
        records = sorted(map(self._current, self._records.values()), key=lambda r: r.started_at)
        return [r.public() for r in records]

    def _current(self, record: JobRecord) -> JobRecord:
        """``record``, re-read from disk when another daemon runs it (it may have ended)."""
        if record.status != "running" or record.job_id in self._tasks:
            return record
        try:
            fresh = self.files.read(record.job_id)
        except (OSError, ValueError, TypeError):
            return record
        if fresh.job_id == record.job_id:
            self._records[record.job_id] = fresh
            return fresh
        return record

    def get(self, job_id: str) -> dict[str, Any]:
        """One job with its output so far."""
        record = self._records.get(job_id)
        if record is None:
            raise UnknownJob(job_id)
        record = self._current(record)
        sink = self._output.get(job_id)
        if sink is not None:
            output = sink.text()
        else:
            try:
                raw = read_state(self.files.log_path(job_id)).decode("utf-8", errors="replace")
            except FileNotFoundError:
                raw = ""
            keep = CappedText(OUTPUT_CAP)
            keep.append(raw)
            output = keep.text()
        return {**record.public(), "output": output}

    async def cancel(self, job_id: str) -> dict[str, Any]:
        """Cancel a running job (its process group dies); a finished one is returned as is."""
        record = self._records.get(job_id)
        if record is None:
            raise UnknownJob(job_id)
        task = self._tasks.get(job_id)
        if task is None and record.status == "running" and owner_alive(record.owner):
            pid = (record.owner or "").split(":", 1)[0]
            raise ForeignJob(
                f"Job {job_id} runs in another toold on this workspace (pid {pid}): "
                "cancel it through that daemon"
            )
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if record.status == "running":  # cancelled before its first step: _run never ran
                self._tasks.pop(job_id, None)
                self._sessions.pop(job_id, None)
                self._work.discard(job_id)
                self._finish(record, "cancelled", None, error="Cancelled.")
        return record.public()

    async def close(self) -> None:
        """Cancel every running job."""
        for job_id in list(self._tasks):
            await self.cancel(job_id)
