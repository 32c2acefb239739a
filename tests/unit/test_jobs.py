"""background_run and the job records: real bash commands through the workspace binding."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.processes import process_gone
from toold.assembly import bind
from toold.config_loading import ConfigError, load_config
from toold.jobs.manager import BackgroundManager
from toold.jobs.records import Outcome
from toold.tools.context import CallContext
from toold.workspace import WorkspaceState
from toold_protocol import METHODS, names

from .conftest import Call

SUBMITTED = re.compile(r"^Submitted background task (\S+)$")
RANDOM_ID = re.compile(r"^[A-Za-z0-9]{8}$")
WAIT_S = 10.0


class Bound:
    """A workspace bound as the daemon binds it, with the notifications it pushes."""

    def __init__(self, root: Path, overrides: dict[str, Any] | None = None) -> None:
        self.finished: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.state: WorkspaceState = bind(root, overrides, self.push, pytest.fail)

    def push(self, method: str, params: dict[str, Any]) -> None:
        METHODS[method].params.model_validate(params)  # the server validates every push
        if method == names.JOBS_FINISHED:
            self.finished.put_nowait(params)

    @property
    def jobs(self) -> BackgroundManager:
        return self.state.jobs

    async def submit(self, command: str, **args: Any) -> str:
        match = SUBMITTED.match(await self.jobs.submit(command, **args))
        assert match, "not the spec's submission text"
        return match.group(1)

    async def next_finished(self) -> dict[str, Any]:
        return await asyncio.wait_for(self.finished.get(), WAIT_S)

    async def output_contains(self, job_id: str, text: str) -> str:
        """jobs/get's output once it holds ``text`` (bounded wait for the command to print)."""
        deadline = asyncio.get_running_loop().time() + WAIT_S
        while text not in (output := self.jobs.get(job_id)["output"]):
            assert asyncio.get_running_loop().time() < deadline, output
            await asyncio.sleep(0.01)
        return output


def run(
    workspace: Path,
    scenario: Callable[[Bound], Awaitable[None]],
    overrides: dict[str, Any] | None = None,
) -> None:
    async def main() -> None:
        bound = Bound(workspace, overrides)
        try:
            await scenario(bound)
        finally:
            await bound.state.aclose()  # the jobs, and the runner's sandboxes

    asyncio.run(main())


# The child's pid ($!) is the host's only outside a PID namespace (the bwrap runner's).
LOCAL = {"execution": {"tool_runner": "local"}}


async def wait_gone(pid: int) -> None:
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while not process_gone(pid):
        assert asyncio.get_running_loop().time() < deadline, f"process {pid} survived"
        await asyncio.sleep(0.01)


def test_done_job_result_notification_and_queue(workspace: Path) -> None:
    async def scenario(b: Bound) -> None:
        outcome = await b.state.gateway.call(
            "background_run", {"command": "echo hello"}, CallContext(origin="user")
        )
        match = SUBMITTED.match(outcome.content)
        assert match and not outcome.is_error
        job_id = match.group(1)
        assert RANDOM_ID.match(job_id)
        finished = await b.next_finished()
        assert finished == {
            "job_id": job_id,
            "command": "echo hello",
            "status": "done",
            "exit_code": 0,
            "started_at": finished["started_at"],
            "finished_at": finished["finished_at"],
            "result": "hello",
            "error": None,
        }
        assert finished["started_at"] <= finished["finished_at"]
        assert b.jobs.drain_notifications() == [
            {"task_id": job_id, "status": "done", "result": "hello"}
        ]
        assert b.jobs.drain_notifications() == []
        assert b.jobs.get(job_id)["output"] == "hello\n"

    run(workspace, scenario)


def test_failing_command(workspace: Path) -> None:
    async def scenario(b: Bound) -> None:
        job_id = await b.submit("echo out; echo oops >&2; exit 3")
        finished = await b.next_finished()
        assert (finished["status"], finished["exit_code"], finished["result"]) == (
            "failed",
            3,
            None,
        )
        assert finished["error"].startswith("Command failed with exit code 3")
        assert "out" in finished["error"] and "oops" in finished["error"]
        [note] = b.jobs.drain_notifications()
        assert note == {"task_id": job_id, "status": "failed", "error": finished["error"]}

    run(workspace, scenario)


def test_timed_out_job(workspace: Path) -> None:
    async def scenario(b: Bound) -> None:
        job_id = await b.submit("echo begun; sleep 30", timeout=1)
        finished = await b.next_finished()
        assert finished["status"] == "timed_out"
        assert "timed out after 1 seconds" in finished["error"]
        assert "begun" in finished["error"]
        [note] = b.jobs.drain_notifications()
        assert (note["task_id"], note["status"]) == (job_id, "failed")
        assert "timed out" in note["error"]

    run(workspace, scenario)


def test_cancel_kills_the_process_group(workspace: Path) -> None:
    async def scenario(b: Bound) -> None:
        job_id = await b.submit("sleep 300 & echo child=$!; wait")
        output = await b.output_contains(job_id, "child=")
        child = int(output.split("child=")[1].split()[0])
        assert not process_gone(child)
        cancelled = await b.jobs.cancel(job_id)
        assert (cancelled["status"], cancelled["error"]) == ("cancelled", "Cancelled.")
        assert (await b.next_finished())["status"] == "cancelled"
        await wait_gone(child)
        [note] = b.jobs.drain_notifications()
        assert note == {"task_id": job_id, "status": "failed", "error": "Cancelled."}
        # Cancelling a finished job returns it unchanged.
        assert await b.jobs.cancel(job_id) == b.jobs.list()[0]

    run(workspace, scenario, LOCAL)


def test_cancel_right_after_submit(workspace: Path) -> None:
    """The job's task has not run a step yet: it must still end as cancelled."""

    async def scenario(b: Bound) -> None:
        job_id = await b.submit("sleep 300")
        assert (await b.jobs.cancel(job_id))["status"] == "cancelled"
        assert (await b.next_finished())["status"] == "cancelled"
        assert await b.submit("true", task_id=job_id) == job_id  # the id is free again

    run(workspace, scenario)


def test_ids_duplicates_and_bad_ids(workspace: Path) -> None:
    async def scenario(b: Bound) -> None:
        assert await b.submit("sleep 300", task_id="  build-1 ") == "build-1"
        with pytest.raises(ValueError, match=r"^Background task already running: build-1$"):
            await b.jobs.submit("true", task_id="build-1")
        for bad in ("../escape", "..", ".hidden", "a/b", "x" * 129):
            with pytest.raises(ValueError, match="Invalid task_id"):
                await b.jobs.submit("true", task_id=bad)
        await b.jobs.cancel("build-1")
        await b.next_finished()
        assert await b.submit("echo again", task_id="build-1") == "build-1"
        assert (await b.next_finished())["result"] == "again"
        random_ids = {await b.submit("true") for _ in range(5)}
        assert len(random_ids) == 5
        assert all(RANDOM_ID.match(i) for i in random_ids)
        for _ in random_ids:
            await b.next_finished()

    run(workspace, scenario)


def test_output_so_far_of_a_running_job(workspace: Path) -> None:
    async def scenario(b: Bound) -> None:
        job_id = await b.submit("echo first; echo second >&2; sleep 300")
        output = await b.output_contains(job_id, "second")
        assert "first\n" in output
        detail = b.jobs.get(job_id)
        assert detail["status"] == "running"
        assert detail["finished_at"] is None
        with pytest.raises(KeyError):
            b.jobs.get("nope")
        with pytest.raises(KeyError):
            await b.jobs.cancel("nope")

    run(workspace, scenario)


def test_records_survive_a_new_manager(workspace: Path) -> None:
    folder = workspace / ".toold" / "jobs"

    async def never(*_: Any) -> Outcome:
        raise AssertionError("a reloaded manager runs nothing by itself")

    async def scenario(b: Bound) -> None:
        done = await b.submit("echo kept")
        await b.next_finished()
        running = await b.submit("sleep 300")
        await b.output_contains(running, "")
        # Another manager over the same folder, as after a daemon crash and restart.
        later = BackgroundManager(folder, execute=never)
        listed = {j["job_id"]: j for j in later.list()}
        assert listed[done] == b.jobs.list()[0]
        assert listed[done]["status"] == "done"
        assert listed[running]["status"] == "failed"
        assert listed[running]["error"] == "toold stopped while the job was running"
        assert listed[running]["finished_at"] is not None
        assert later.get(done)["output"] == "kept\n"
        assert later.drain_notifications() == []
        # ...and the conversion is stored, for the next restart too.
        assert BackgroundManager(folder, execute=never).list() == later.list()

    run(workspace, scenario)


def test_unreadable_record_is_skipped(workspace: Path) -> None:
    folder = workspace / ".toold" / "jobs"
    folder.mkdir(parents=True)
    (folder / "broken.json").write_text("{", encoding="utf-8")
    (folder / "alien.json").write_text('{"unknown": 1}', encoding="utf-8")

    async def never(*_: Any) -> Outcome:
        raise AssertionError

    assert BackgroundManager(folder, execute=never).list() == []


def test_background_work_for_subagents(workspace: Path) -> None:
    async def scenario(b: Bound) -> None:
        async def answer() -> str:
            return "the answer"

        async def broken() -> str:
            raise RuntimeError("model unreachable")

        await b.jobs.start_work("subagent-aaaaaaaa", "subagent (explore): look", answer)
        first = await b.next_finished()
        assert (first["job_id"], first["status"], first["result"]) == (
            "subagent-aaaaaaaa",
            "done",
            "the answer",
        )
        assert first["command"] == "subagent (explore): look"
        await b.jobs.start_work("subagent-bbbbbbbb", "subagent (plan): x", broken)
        second = await b.next_finished()
        assert second["status"] == "failed"
        assert second["error"] == "Error: RuntimeError: model unreachable"
        assert [n["status"] for n in b.jobs.drain_notifications()] == ["done", "failed"]

    run(workspace, scenario)


def test_close_cancels_running_jobs(workspace: Path) -> None:
    async def scenario(b: Bound) -> None:
        job_id = await b.submit("sleep 300 & echo child=$!; wait")
        output = await b.output_contains(job_id, "child=")
        child = int(output.split("child=")[1].split()[0])
        await b.jobs.close()
        assert b.jobs.get(job_id)["status"] == "cancelled"
        await wait_gone(child)

    run(workspace, scenario, LOCAL)


def test_unbound_tool_says_unavailable(call: Call, workspace: Path) -> None:
    assert call.failed("background_run", command="true") == "Background manager unavailable."
    assert os.listdir(workspace) == []


def job_files(folder: Path) -> set[str]:
    """The job files in ``folder`` (the lock file aside)."""
    return {p.name for p in folder.iterdir() if p.name != ".lock"}


def test_only_the_newest_finished_jobs_are_kept(workspace: Path) -> None:
    folder = workspace / ".toold" / "jobs"

    async def scenario(b: Bound) -> None:
        running = await b.submit("sleep 300", task_id="oldest-running")
        done = []
        for n in range(3):
            done.append(await b.submit(f"echo {n}"))
            assert (await b.next_finished())["job_id"] == done[-1]
        # The first finished job is gone, from memory and from disk; the running one stays.
        assert [j["job_id"] for j in b.jobs.list()] == [running, done[1], done[2]]
        with pytest.raises(KeyError):
            b.jobs.get(done[0])
        assert job_files(folder) == {
            f"{job}.{ext}" for job in (running, *done[1:]) for ext in ("json", "log")
        }
        assert b.jobs.get(done[2])["output"] == "2\n"
        # The running job finishes last, so it is the newest finished one: done[1] goes.
        await b.jobs.cancel(running)
        assert (await b.next_finished())["job_id"] == running
        assert [j["job_id"] for j in b.jobs.list()] == [running, done[2]]
        assert not (folder / f"{done[1]}.json").exists()
        assert not (folder / f"{done[1]}.log").exists()
        # A finished job's id used again counts once, as the newest.
        assert await b.submit("echo again", task_id=done[2]) == done[2]
        assert (await b.next_finished())["result"] == "again"
        assert [j["job_id"] for j in b.jobs.list()] == [running, done[2]]
        # A configuration reload changes the limit for the next finished job.
        assert b.state.reload_config({"limits": {"max_finished_jobs": 1}}) is None
        last = await b.submit("echo last")
        await b.next_finished()
        assert [j["job_id"] for j in b.jobs.list()] == [last]
        assert job_files(folder) == {f"{last}.json", f"{last}.log"}

    run(workspace, scenario, {"limits": {"max_finished_jobs": 2}})


def test_a_restart_keeps_the_newest_finished_jobs_and_drops_stale_temp_files(
    workspace: Path,
) -> None:
    folder = workspace / ".toold" / "jobs"
    outside = workspace / "victim.json"
    outside.write_text("{}", encoding="utf-8")

    async def never(*_: Any) -> Outcome:
        raise AssertionError("a reloaded manager runs nothing by itself")

    async def scenario(b: Bound) -> None:
        ids = []
        for n in range(4):
            ids.append(await b.submit(f"echo {n}"))
            await b.next_finished()
        running = await b.submit("sleep 300")
        await b.output_contains(running, "")
        # What a daemon killed in the middle of atomic_write_text leaves behind.
        (folder / f".{ids[0]}.json.a1b2c3d4.tmp").write_text("{", encoding="utf-8")
        # A record whose id is not its file name must never steer what gets removed.
        (folder / "forged.json").write_text(
            json.dumps({"job_id": "../../victim", "command": "x", "timeout": 1, "status": "done"}),
            encoding="utf-8",
        )
        # A restart after a crash: the running job becomes the newest finished one.
        later = BackgroundManager(folder, execute=never, max_finished=3)
        assert [j["job_id"] for j in later.list()] == [ids[2], ids[3], running]
        assert job_files(folder) == {
            "forged.json",
            *(f"{job}.{ext}" for job in (ids[2], ids[3], running) for ext in ("json", "log")),
        }
        assert later.get(ids[3])["output"] == "3\n"
        assert outside.read_text(encoding="utf-8") == "{}"

    run(workspace, scenario, {"limits": {"max_finished_jobs": 10}})


def test_max_finished_jobs_is_validated() -> None:
    assert load_config(Path("/nonexistent")).limits.max_finished_jobs == 100
    with pytest.raises(
        ConfigError, match=r"limits\.max_finished_jobs: Input should be greater than or equal to 1"
    ):
        load_config(Path("/nonexistent"), {"limits": {"max_finished_jobs": 0}})


SECRET = "Jb4" + "qW8hunter2Zx"


def test_a_jobs_record_and_log_hold_no_secret_and_are_private(workspace: Path) -> None:
    """What the command prints reaches the agent as it is; what is stored is redacted."""
    folder = workspace / ".toold" / "jobs"

    async def scenario(b: Bound) -> None:
        command = (
            f"printf -- '--password {SECRET[:5]}'; printf '{SECRET[5:]}\\n'; "
            f"echo 'curl -H \"Authorization: Bearer {SECRET}\"'"
        )
        job_id = await b.submit(command)
        finished = await b.next_finished()
        assert SECRET not in json.dumps(finished)  # jobs/finished shows the stored record
        [note] = b.jobs.drain_notifications()
        assert SECRET in note["result"]  # the agent's own notification: its output
        record, log = folder / f"{job_id}.json", folder / f"{job_id}.log"
        stored = json.loads(record.read_text())
        assert stored["status"] == "done" and "[REDACTED]" in stored["result"]
        assert SECRET not in record.read_text() and SECRET not in log.read_text()
        assert "--password [REDACTED]" in log.read_text()
        for path in (record, log, folder):
            assert path.stat().st_mode & 0o077 == 0, (path, oct(path.stat().st_mode))

    run(workspace, scenario)


def test_an_older_record_in_clear_is_redacted_when_loaded(workspace: Path) -> None:
    folder = workspace / ".toold" / "jobs"
    folder.mkdir(parents=True)
    record = folder / "old1.json"
    record.write_text(
        json.dumps(
            {
                "job_id": "old1",
                "command": f"deploy --token {SECRET}",
                "timeout": 30,
                "status": "done",
                "exit_code": 0,
                "finished_at": "2026-01-01T00:00:00+00:00",
                "result": f"export API_TOKEN={SECRET}",
            }
        )
    )

    async def never(*_: Any) -> Outcome:
        raise AssertionError

    [listed] = BackgroundManager(folder, execute=never).list()
    assert listed["command"] == "deploy --token [REDACTED]"
    assert listed["result"] == "export API_TOKEN=[REDACTED]"
    assert SECRET not in record.read_text()
