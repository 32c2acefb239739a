"""Idle timeouts: output restarts the window, silence ends the command, the cap still holds.

Real subprocesses: a command printing every 0.2 s outlives an idle timeout shorter than
its run; a silent one dies (with its process group) at the idle timeout; the hard
``timeout`` ends a chatty one; each result says which limit fired.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from tests.processes import wait_gone
from toold.assembly import bind
from toold.jobs.manager import BackgroundManager
from toold.sandbox.process import run_command
from toold.tools.builtin.shell import idle_limit, idle_message

from .conftest import Call, ToolsWith

CHATTY = "for i in $(seq 1 {n}); do echo tick $i; sleep 0.2; done"
"""Prints every 0.2 s, ``n`` times."""


def _run(argv: list[str], cwd: Path, **limits: Any) -> tuple[Any, float]:
    started = time.monotonic()
    result = asyncio.run(run_command(argv, cwd=cwd, output_limit=10_000, **limits))
    return result, time.monotonic() - started


def test_a_command_printing_steadily_outlives_the_idle_timeout(tmp_path: Path) -> None:
    # 8 ticks over about 1.6 s, each well inside the 0.8 s idle window.
    result, took = _run(["bash", "-c", CHATTY.format(n=8)], tmp_path, timeout=20, idle_timeout=0.8)
    assert (result.returncode, result.timed_out, result.idle) == (0, False, False)
    assert "tick 8" in result.stdout
    assert took > 0.8  # it ran past one idle window


def test_output_on_stderr_restarts_the_window_too(tmp_path: Path) -> None:
    command = "for i in 1 2 3 4 5 6; do echo e$i >&2; sleep 0.2; done"
    result, _ = _run(["bash", "-c", command], tmp_path, timeout=20, idle_timeout=0.8)
    assert (result.returncode, result.timed_out) == (0, False)


def test_a_silent_command_dies_at_the_idle_timeout_with_its_group(tmp_path: Path) -> None:
    # The shell starts a child that would outlive it, then goes silent.
    command = "sleep 30 & echo $!; wait"
    result, took = _run(["bash", "-c", command], tmp_path, timeout=30, idle_timeout=0.5)
    assert (result.timed_out, result.idle) == (True, True)
    assert took < 10  # not the 30 s cap
    wait_gone(int(result.stdout.strip()), "the silent command's child")


def test_the_hard_timeout_ends_a_chatty_command(tmp_path: Path) -> None:
    result, took = _run(["bash", "-c", CHATTY.format(n=100)], tmp_path, timeout=1, idle_timeout=5)
    assert (result.timed_out, result.idle) == (True, False)
    assert "tick 1" in result.stdout
    assert took < 10


def test_bash_says_which_limit_fired(call: Call) -> None:
    idle = call.outcome("bash", command="echo started; sleep 30", timeout=30, idle_timeout=0.5)
    assert idle.timed_out
    assert idle.content == f"{idle_message(0.5)}\nstarted"
    assert idle.content.startswith("Error: command timed out after 0.5 seconds without output")
    hard = call.outcome("bash", command=CHATTY.format(n=100), timeout=1, idle_timeout=5)
    assert hard.timed_out
    assert hard.content.startswith("Error: command timed out after 1 seconds\ntick 1")  # spec


def test_the_configured_idle_timeout_is_the_default(tools_with: ToolsWith) -> None:
    from toold.config import LimitsConfig, TooldConfig

    assert LimitsConfig().idle_timeout == 120
    assert (idle_limit(None, 120), idle_limit(None, 0), idle_limit(3, 0)) == (120, None, 3)
    config = TooldConfig(limits=LimitsConfig(idle_timeout=0.5))
    caller = tools_with(config=config)
    assert caller.outcome("bash", command="sleep 30", timeout=30).content == idle_message(0.5)
    # An argument wins over the configuration.
    assert caller("bash", command=CHATTY.format(n=5), timeout=30, idle_timeout=5).endswith("5")


def test_idle_timeout_must_be_positive(call: Call) -> None:
    from toold.tools import ToolArgumentError

    with call.fails(ToolArgumentError, match="idle_timeout"):
        call("bash", command="true", idle_timeout=0)


def test_a_background_job_takes_an_idle_timeout(workspace: Path) -> None:
    async def main() -> None:
        finished: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        def push(method: str, params: dict[str, Any]) -> None:
            if method == "jobs/finished":
                finished.put_nowait(params)

        state = bind(workspace, {"execution": {"tool_runner": "local"}}, push, print)
        jobs: BackgroundManager = state.jobs
        try:
            silent = await jobs.start_command("sleep 30", timeout=30, idle_timeout=0.5)
            chatty = await jobs.start_command(CHATTY.format(n=6), timeout=30, idle_timeout=0.8)
            ended = {}
            for _ in range(2):
                record = await asyncio.wait_for(finished.get(), 20)
                ended[record["job_id"]] = record
            assert ended[silent]["status"] == "timed_out"
            assert ended[silent]["error"] == idle_message(0.5)
            assert ended[chatty]["status"] == "done"
        finally:
            await state.aclose()

    asyncio.run(main())
