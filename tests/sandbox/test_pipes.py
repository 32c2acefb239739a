"""PipeWorker's watch on a real worker's stdout: kept across a shared worker's calls, and
stopped before its pipes close, whatever ends the worker (its death mid-call, an endless
reply, its exit while idle, a discard from another thread or after its loop ended)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toold.sandbox import channel
from toold.sandbox.channel import WorkerLost
from toold.sandbox.forkserver import ForkedWorker
from toold.sandbox.process import kill_group
from toold.tools.context import CallContext, current_call

Procs = list[subprocess.Popen[bytes]]


@pytest.fixture
def started() -> Iterator[Procs]:
    """The worker processes a test starts, ended and reaped after it."""
    procs: Procs = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def _worker(procs: Procs) -> tuple[ForkedWorker, subprocess.Popen[bytes]]:
    """``python -m toold.sandbox.worker`` in a session of its own, as the daemon holds one."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "toold.sandbox.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    procs.append(proc)
    assert proc.stdin is not None and proc.stdout is not None
    in_fd, out_fd = os.dup(proc.stdin.fileno()), os.dup(proc.stdout.fileno())
    proc.stdin.close()  # the worker's only stdin and stdout are now the handle's
    proc.stdout.close()
    return ForkedWorker("subprocess", proc.pid, in_fd, out_fd, kill_group), proc


def _request(workspace: Path, tool: str = "read_file", **args: Any) -> bytes:
    arguments = args or {"file_path": "notes.txt"}
    request = {"tool": tool, "args": arguments, "workspace": str(workspace), "reuse": True}
    return json.dumps(request).encode() + b"\n"


def _watched(fd: int) -> bool:
    """Whether the running loop watches ``fd`` (removing the watch to find out)."""
    return asyncio.get_running_loop().remove_reader(fd)


def test_a_shared_worker_keeps_its_watch_between_calls(workspace: Path, started: Procs) -> None:
    async def run() -> None:
        worker, _proc = _worker(started)
        for _ in range(3):
            assert await worker.call(_request(workspace), shared=True) == "1: alpha\n2: beta"
            assert worker.reusable and worker.alive()
        assert _watched(worker.out_fd)

    asyncio.run(run())


def test_a_worker_dying_mid_call_fails_the_call_and_its_watch_ends(
    workspace: Path, started: Procs
) -> None:
    async def run() -> None:
        worker, proc = _worker(started)
        out_fd = worker.out_fd
        running = asyncio.Event()
        current_call.set(CallContext(progress=lambda _text: running.set()))
        call = asyncio.ensure_future(
            worker.call(_request(workspace, "bash", command="echo started; sleep 300"))
        )
        await running.wait()  # its progress line: the command runs
        os.killpg(proc.pid, signal.SIGKILL)
        with pytest.raises(WorkerLost, match="exited without an answer"):
            await call
        assert not worker.reusable
        assert not _watched(out_fd), "the loop still watches a closed pipe"
        with pytest.raises(OSError):
            os.fstat(out_fd)

    asyncio.run(run())


def test_an_endless_reply_loses_the_worker_and_ends_it(
    workspace: Path, started: Procs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(channel, "READ_LIMIT", 100_000)
    (workspace / "big.txt").write_text("x" * 400_000 + "\n", encoding="utf-8")

    async def run() -> None:
        worker, proc = _worker(started)
        out_fd = worker.out_fd
        with pytest.raises(WorkerLost, match="sent a line over 100000 bytes"):
            await worker.call(_request(workspace, file_path="big.txt"), shared=True)
        assert not worker.reusable
        assert not _watched(out_fd)
        await asyncio.to_thread(proc.wait, 30)  # its pipes closed: it left (BrokenPipeError)

    asyncio.run(run())


def test_an_idle_worker_that_exits_is_unwatched_and_not_reused(
    workspace: Path, started: Procs
) -> None:
    async def run() -> None:
        worker, proc = _worker(started)
        await worker.call(_request(workspace), shared=True)
        os.killpg(proc.pid, signal.SIGKILL)
        await asyncio.to_thread(proc.wait, 30)
        for _ in range(3):  # the loop sees the end and drops the watch (no busy loop)
            await asyncio.sleep(0)
        assert not worker.alive()
        assert not _watched(worker.out_fd)
        worker.discard()
        with pytest.raises(OSError):
            os.fstat(worker.out_fd)

    asyncio.run(run())


def test_a_discard_from_another_thread_unwatches_before_closing(
    workspace: Path, started: Procs
) -> None:
    async def run() -> None:
        worker, proc = _worker(started)
        await worker.call(_request(workspace), shared=True)
        await asyncio.to_thread(worker.discard)  # as WorkerPool.close does
        assert await asyncio.to_thread(proc.wait, 30) == 0  # closed, so the worker left
        assert not _watched(worker.out_fd)

    asyncio.run(run())


def test_a_worker_kept_by_an_ended_loop_is_released_not_reused(
    workspace: Path, started: Procs
) -> None:
    worker, proc = _worker(started)

    async def first() -> None:
        await worker.call(_request(workspace), shared=True)

    async def second() -> None:
        assert not worker.alive()  # watched by the first loop, which is closed

    asyncio.run(first())
    asyncio.run(second())
    worker.discard()
    assert proc.wait(timeout=30) == 0


FLOODING_WORKER = """
import json, os, sys, time
sys.stdin.readline()
open("flooding", "w").close()
end = time.monotonic() + 5
while time.monotonic() < end and not os.path.exists("stop"):
    os.write(1, b"{}\\n" * 16384)
said = "stopped" if os.path.exists("stop") else "timed out"
os.write(1, json.dumps({"result": said}).encode() + b"\\n")
"""


def test_a_worker_flooding_its_stdout_with_lines_leaves_the_loop_running(
    workspace: Path, started: Procs
) -> None:
    """A worker writing endless lines (a bug, or what reached its pipe) must not hold the
    daemon's loop: other sessions go on, here the one that tells the flood to stop."""
    proc = subprocess.Popen(
        [sys.executable, "-c", FLOODING_WORKER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=workspace,
        start_new_session=True,
    )
    started.append(proc)
    assert proc.stdin is not None and proc.stdout is not None
    in_fd, out_fd = os.dup(proc.stdin.fileno()), os.dup(proc.stdout.fileno())
    proc.stdin.close()
    proc.stdout.close()
    worker = ForkedWorker("flooding", proc.pid, in_fd, out_fd, kill_group)

    async def run() -> None:
        async def other_session() -> None:  # what the rest of the engine does meanwhile
            while not (workspace / "flooding").exists():
                await asyncio.sleep(0.005)
            (workspace / "stop").touch()

        other = asyncio.ensure_future(other_session())
        result = await worker.call(_request(workspace))
        await other
        assert result == "stopped", "the loop ran nothing else while the worker flooded"

    asyncio.run(run())
