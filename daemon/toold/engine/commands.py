"""``toold daemon start|stop|status`` and ``toold jobs [wait ID]``: the engine from a shell.

Standard library only, like every attaching command.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from toold.engine.attach import EngineError, attach, control, engine_pid
from toold.engine.location import EnginePaths
from toold.undo import shown

EXIT_NO_ENGINE = 3
"""``toold daemon status`` when no engine runs (as LSB's ``status`` says "not running")."""
JOB_EXIT = {"timed_out": 124, "cancelled": 130}
"""``toold jobs wait``'s status for jobs that did not end by themselves."""


def _describe(status: dict[str, Any]) -> str:
    sessions, jobs = status.get("sessions", []), status.get("jobs", [])
    uptime = max(0, int(time.time() - float(status.get("startedAt", time.time()))))
    running = ", ".join(shown(j["jobId"]) for j in jobs)
    return (
        f"toold engine pid {status['pid']} serving {status['workspace']} (up {uptime} s)\n"
        f"sessions: {len(sessions)}\n"
        f"running jobs: {len(jobs)}{f' ({running})' if running else ''}\n"
        f"socket: {status['socket']}\nlog: {status['log']}"
    )


def daemon_command(action: str, workspace: Path, as_json: bool) -> int:
    """start: ensure an engine runs; stop: end it (jobs cancelled); status: describe it."""
    try:
        if action == "start":
            attached = attach(workspace, "status")
            attached.close()
            status: dict[str, Any] | None = attached.reply
        elif action == "stop":
            return _stop(workspace, as_json)
        else:
            status = control(workspace, "status")
    except (EngineError, OSError) as exc:
        print(f"toold: {exc}", file=sys.stderr)
        return 1
    if status is None:
        paths = EnginePaths.of(workspace)
        if as_json:
            print(json.dumps({"running": False, "workspace": str(paths.workspace)}))
        else:
            print(f"no toold engine runs for {paths.workspace}")
        return EXIT_NO_ENGINE
    if as_json:
        print(json.dumps({"running": True, **status}, indent=2))
    else:
        print(_describe(status))
    return 0


def _stop(workspace: Path, as_json: bool) -> int:
    paths = EnginePaths.of(workspace)
    reply = control(workspace, "stop")
    if reply is None:
        print(f"no toold engine runs for {paths.workspace}")
        return 0
    deadline = time.monotonic() + 30
    while engine_pid(paths) is not None and time.monotonic() < deadline:
        time.sleep(0.01)  # its lock is released at exit: no event to wait for
    if engine_pid(paths) is not None:
        print(f"toold: engine pid {reply['pid']} did not exit; see {paths.log}", file=sys.stderr)
        return 1
    cancelled = reply.get("cancelled", [])
    if as_json:
        print(json.dumps({"stopped": reply["pid"], "cancelled": cancelled}))
    else:
        jobs = f"; cancelled jobs: {', '.join(cancelled)}" if cancelled else ""
        print(f"stopped the toold engine pid {reply['pid']}{jobs}")
    return 0


def jobs_command(client: Any, wait: str | None, as_json: bool) -> int:
    """List the jobs, or wait for one to end and exit with its status."""
    if wait is None:
        jobs = client.request("jobs/list", {})["jobs"]
        if as_json:
            print(json.dumps(jobs, indent=2, ensure_ascii=False))
            return 0
        for job in jobs:
            code = job.get("exitCode")
            exit_text = "" if code is None else f" (exit {code})"
            # The agent chose the id and the command: escapes in them are shown, not obeyed.
            print(f"{shown(job['jobId'])}\t{job['status']}{exit_text}\t{shown(job['command'])}")
        return 0
    job = client.request("jobs/get", {"jobId": wait})
    if job["status"] == "running":
        client.wait_notification("jobs/finished", jobId=wait)
        job = client.request("jobs/get", {"jobId": wait})
    if as_json:
        print(json.dumps(job, indent=2, ensure_ascii=False))
    elif job.get("output"):
        print(job["output"], end="" if job["output"].endswith("\n") else "\n")
    return job_status(job)


def job_status(job: dict[str, Any]) -> int:
    """The exit status a finished job stands for."""
    status, code = job["status"], job.get("exitCode")
    if status in JOB_EXIT:
        return JOB_EXIT[status]
    if isinstance(code, int) and code < 0:
        return 128 - code  # killed by signal -code, as a shell reports it
    if status == "done":
        return int(code or 0)
    return int(code) if code else 1
