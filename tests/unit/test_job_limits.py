"""Running background jobs are capped per workspace and per engine session; a job beyond a
cap is refused at once with the key to raise, and leaves no record behind."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from toold.config_loading import load_config
from toold.fairness import caller
from toold.jobs.manager import BackgroundManager, JobLimitReached
from toold.jobs.records import Outcome


class Held:
    """Jobs whose commands run until released (real tasks, no processes needed)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def execute(
        self, command: str, timeout: int, on_output: Callable[[str], None]
    ) -> Outcome:
        await self.release.wait()
        return Outcome(text=command, exit_code=0)


def _manager(tmp_path: Path, held: Held, **caps: int) -> BackgroundManager:
    return BackgroundManager(tmp_path / "jobs", held.execute, **caps)


async def _submit_as(session: int | None, jobs: BackgroundManager, command: str) -> str:
    token = caller.set(session)
    try:
        return await jobs.submit(command, timeout=60)
    finally:
        caller.reset(token)


def test_the_workspace_cap_refuses_the_next_job_and_names_the_key(tmp_path: Path) -> None:
    async def main() -> None:
        held = Held()
        jobs = _manager(tmp_path, held, max_running=3, max_running_per_session=16)
        for n in range(3):
            await _submit_as(None, jobs, f"sleep {n}")
        with pytest.raises(JobLimitReached, match=r"limits\.max_running_jobs \(3\)"):
            await _submit_as(None, jobs, "sleep refused")
        assert [j["command"] for j in jobs.list()] == ["sleep 0", "sleep 1", "sleep 2"]
        held.release.set()
        while any(j["status"] == "running" for j in jobs.list()):
            await asyncio.sleep(0.01)
        await _submit_as(None, jobs, "sleep again")  # room again once they ended
        await jobs.close()

    asyncio.run(main())


def test_one_session_cannot_take_the_workspace_share_of_another(tmp_path: Path) -> None:
    async def main() -> None:
        held = Held()
        jobs = _manager(tmp_path, held, max_running=10, max_running_per_session=2)
        await _submit_as(1, jobs, "a")
        await _submit_as(1, jobs, "b")
        with pytest.raises(JobLimitReached, match=r"limits\.max_running_jobs_per_session \(2\)"):
            await _submit_as(1, jobs, "c")
        await _submit_as(2, jobs, "d")  # another session still has its share
        await jobs.cancel(jobs.list()[0]["job_id"])
        await _submit_as(1, jobs, "e")  # a cancelled job frees its session's slot
        await jobs.close()

    asyncio.run(main())


def test_the_caps_are_configured_under_limits(tmp_path: Path) -> None:
    (tmp_path / "toold.toml").write_text(
        "[limits]\nmax_running_jobs = 5\nmax_running_jobs_per_session = 2\n"
    )
    limits = load_config(tmp_path).limits
    assert (limits.max_running_jobs, limits.max_running_jobs_per_session) == (5, 2)
    defaults = load_config(tmp_path / "nowhere").limits
    assert (defaults.max_running_jobs, defaults.max_running_jobs_per_session) == (64, 16)
