"""Background jobs across two private daemons on one folder, one of them killed.

Spawned because it is about processes: a daemon (by pid) may not cancel another live
daemon's job, and a daemon killed with a job running leaves it failed for the next one.
Todos, tasks, skills and jobs requests themselves are tested in process
(tests/interaction/test_state.py).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.e2e.wire import WireClient, job_id_of
from tests.waiting import wait_until

WAIT_S = 10.0


def test_a_second_daemon_leaves_a_live_daemons_jobs_running(workspace: Path) -> None:
    """Two private daemons on one folder (``--no-daemon``; editors on the default path
    share one engine, tests/engine): one may not cancel the other's job."""
    first, second = WireClient(workspace, "--no-daemon"), WireClient(workspace, "--no-daemon")
    try:
        first.initialize()
        command = "until [ -e release ]; do sleep 0.02; done; echo released"
        job = job_id_of(first.tool("background_run", command=command, timeout=60))
        marker = f"sleep 29.{os.getpid()}"  # left running when the daemon is killed
        orphan = job_id_of(first.tool("background_run", command=marker, timeout=600))
        second.initialize()
        listed = {j["jobId"]: j["status"] for j in second.call("jobs/list", {})["jobs"]}
        assert listed == {job: "running", orphan: "running"}
        refused = second.response(second.request("jobs/cancel", {"jobId": job}))["error"]
        assert refused["code"] == -32600
        assert f"pid {first.proc.pid}" in refused["message"], refused
        (workspace / "release").touch()
        assert first.job_finished(job)["status"] == "done"
        # The record is written right after jobs/finished goes out.
        seen = wait_until(
            lambda: (j := second.call("jobs/get", {"jobId": job}))["status"] == "done" and j,
            "the second daemon to see the job finished",
        )
        assert seen["result"] == "released"
        first.proc.kill()  # the first daemon dies with a job still running
        first.proc.wait(timeout=WAIT_S)
    finally:
        first.close()
        second.close()
        subprocess.run(["pkill", "-f", marker], check=False)
    third = WireClient(workspace, "--no-daemon")
    try:
        third.initialize()
        statuses = {j["jobId"]: j["status"] for j in third.call("jobs/list", {})["jobs"]}
        assert statuses == {job: "done", orphan: "failed"}
    finally:
        third.close()
