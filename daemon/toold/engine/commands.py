"""``toold daemon start|stop|status|list``, ``daemon stop --all`` and ``toold jobs [wait
ID]``: the engines from a shell.

Standard library only, like every attaching command.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from toold.engine.attach import EngineError, ask, attach, control, engine_pid, running_engines
from toold.engine.location import EnginePaths
from toold.terminal import one_line

EXIT_NO_ENGINE = 3
"""``toold daemon status`` when no engine runs (as LSB's ``status`` says "not running")."""
JOB_EXIT = {"timed_out": 124, "cancelled": 130}
"""``toold jobs wait``'s status for jobs that did not end by themselves."""


STOP_WAIT = 30.0
"""Seconds ``daemon stop`` waits for an engine to exit (its jobs' process groups killed)."""


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


def _idle(status: dict[str, Any]) -> str:
    """Like "idle 3 min (exits at 60 s)"; "busy" when a session, job or teammate runs."""
    idle_for = status.get("idleFor")
    if idle_for is None:
        return "busy"
    limit = status.get("idleLimit")
    return f"idle {_duration(idle_for)}" + (f" (exits at {limit:g} s)" if limit is not None else "")


def _describe(status: dict[str, Any]) -> str:
    sessions, jobs = status.get("sessions", []), status.get("jobs", [])
    uptime = max(0, int(time.time() - float(status.get("startedAt", time.time()))))
    running = ", ".join(one_line(j["jobId"]) for j in jobs)
    memory = f"; {status['rss'] / 2**20:.0f} MiB resident" if status.get("rss") else ""
    return (
        f"toold engine pid {status['pid']} serving {status['workspace']} (up {uptime} s)\n"
        f"sessions: {len(sessions)}\n"
        f"running jobs: {len(jobs)}{f' ({running})' if running else ''}\n"
        + (f"{_idle(status)}{memory}\n" if "idleLimit" in status else "")
        + f"socket: {status['socket']}\nlog: {status['log']}"
    )


def daemon_command(
    action: str, workspace: Path, as_json: bool, every: bool = False, if_idle: bool = False
) -> int:
    """start: ensure an engine runs; stop: end it (jobs cancelled; ``every``: all of this
    user's; ``if_idle``: only if idle, nothing cancelled); status: describe it; list:
    every engine of this user."""
    if (every or if_idle) and action != "stop":
        flag = "--all" if every else "--if-idle"
        print(f"toold: {flag} goes with stop only: toold daemon stop {flag}", file=sys.stderr)
        return 2
    if every and if_idle:
        print("toold: --if-idle stops one workspace's engine, not --all", file=sys.stderr)
        return 2
    try:
        if action == "list":
            return _list(as_json)
        if action == "stop" and every:
            return _stop_all(as_json)
        if action == "stop" and if_idle:
            return _stop_if_idle(workspace, as_json)
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
    if not _exited([paths]):
        print(f"toold: engine pid {reply['pid']} did not exit; see {paths.log}", file=sys.stderr)
        return 1
    cancelled = reply.get("cancelled", [])
    if as_json:
        print(json.dumps({"stopped": reply["pid"], "cancelled": cancelled}))
    else:
        jobs = f"; cancelled jobs: {', '.join(cancelled)}" if cancelled else ""
        print(f"stopped the toold engine pid {reply['pid']}{jobs}")
    return 0


IF_IDLE_REASON = "toold daemon stop --if-idle"
"""What ``daemon stop --if-idle`` tells the engine, which logs it as the reason it stops."""


def _stop_if_idle(workspace: Path, as_json: bool) -> int:
    """Stop the engine only if it is idle (no session, job or teammate, unused since its
    status was read), as a newer engine asks an idle one beyond the cap; it decides."""
    paths = EnginePaths.of(workspace)
    status = control(workspace, "status")
    reply = None
    if status is not None and status.get("idle") is True:
        hello = {"ifIdle": True, "uses": status.get("uses"), "reason": IF_IDLE_REASON}
        reply = ask(paths, "stop", hello)
    stopped = reply is not None and reply.get("stopped") is True
    pid = None if status is None else status.get("pid")
    if stopped and not _exited([paths]):
        print(f"toold: engine pid {pid} did not exit; see {paths.log}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps({"stopped": stopped, "pid": pid}))
    elif status is None:
        print(f"no toold engine runs for {paths.workspace}")
    elif stopped:
        print(f"stopped the idle toold engine pid {pid}")
    else:
        print(f"the toold engine pid {pid} is busy (or was just used); left running")
    return 0


def _exited(engines: list[EnginePaths]) -> bool:
    """Wait up to STOP_WAIT seconds for each engine to let go of its pid lock."""
    deadline = time.monotonic() + STOP_WAIT
    left = list(engines)
    while left and time.monotonic() < deadline:
        left = [paths for paths in left if engine_pid(paths) is not None]
        if left:
            time.sleep(0.01)  # its lock is released at exit: no event to wait for
    return not left


def engine_list() -> list[dict[str, Any]]:
    """Every engine of this user (the runtime folder): its status, counts and idle time,
    or its pid and why it did not answer."""
    listed = []
    for paths, pid in running_engines():
        entry: dict[str, Any] = {"pid": pid, "workspace": str(paths.workspace)}
        try:
            status = ask(paths, "status", timeout=5.0)
        except (EngineError, OSError, ValueError) as exc:
            listed.append({**entry, "error": str(exc)})
            continue
        if status is None:
            continue  # exited meanwhile
        status.pop("ok", None)
        listed.append(
            {
                **status,
                "sessions": len(status.get("sessions", [])),
                "jobs": len(status.get("jobs", [])),
            }
        )
    return listed


def _row(pid: Any, sessions: Any, jobs: Any, rss: Any, idle: Any, workspace: Any) -> str:
    return f"{pid:>7}  {sessions:>8}  {jobs:>4}  {rss:>8}  {idle:<26}  {workspace}"


def _list(as_json: bool) -> int:
    engines = engine_list()
    if as_json:
        print(json.dumps(engines, indent=2))
        return 0
    if not engines:
        print("no toold engine runs")
        return 0
    print(_row("PID", "SESSIONS", "JOBS", "RSS", "IDLE", "WORKSPACE"))
    for engine in engines:
        if "error" in engine:  # it did not answer: what is known of it
            print(_row(engine["pid"], "?", "?", "?", "not answering", engine["workspace"]))
            continue
        rss = f"{engine.get('rss', 0) / 2**20:.0f} MiB"
        state = _idle(engine) if "idleLimit" in engine else "?"  # an older engine
        print(
            _row(engine["pid"], engine["sessions"], engine["jobs"], rss, state, engine["workspace"])
        )
    total = sum(engine.get("rss", 0) for engine in engines) / 2**20
    print(f"{len(engines)} engine{'s' * (len(engines) != 1)}, {total:.0f} MiB resident")
    return 0


def _stop_all(as_json: bool) -> int:
    """Stop every engine of this user (their jobs cancelled) and wait for them to exit."""
    asked: list[tuple[EnginePaths, dict[str, Any]]] = []
    failed: list[dict[str, Any]] = []
    for paths, pid in running_engines():
        try:
            reply = ask(paths, "stop")
        except (EngineError, OSError, ValueError) as exc:
            failed.append({"pid": pid, "workspace": str(paths.workspace), "error": str(exc)})
            continue
        if reply is not None:
            asked.append((paths, {"workspace": str(paths.workspace), **reply}))
    _exited([paths for paths, _ in asked])
    stopped = []
    for paths, reply in asked:
        if engine_pid(paths) is None:
            stopped.append({key: reply[key] for key in ("pid", "workspace", "cancelled")})
        else:
            failed.append(
                {
                    "pid": reply["pid"],
                    "workspace": reply["workspace"],
                    "error": f"did not exit; see {paths.log}",
                }
            )
    if as_json:
        print(json.dumps({"stopped": stopped, "failed": failed}, indent=2))
    else:
        for done in stopped:
            jobs = ", ".join(one_line(job) for job in done["cancelled"])
            cancelled = f"; cancelled jobs: {jobs}" if jobs else ""
            print(f"stopped the toold engine pid {done['pid']} ({done['workspace']}){cancelled}")
        for problem in failed:
            print(
                f"toold: engine pid {problem['pid']} ({problem['workspace']}): {problem['error']}",
                file=sys.stderr,
            )
        if not stopped and not failed:
            print("no toold engine runs")
    return 1 if failed else 0


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
            print(
                f"{one_line(job['jobId'])}\t{job['status']}{exit_text}\t{one_line(job['command'])}"
            )
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
