"""A bounded write's checkpoint is recorded on the event loop, never waiting there for the
index's lock: when another thread or process holds it, the record waits on a thread."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bound import call, run_bound
from tests.waiting import wait_until
from toold.checkpoints import CheckpointStore
from toold.checkpoints.objects import IndexBusy
from toold.storage import file_lock
from toold.workspace import WorkspaceState

# Holds the flock until a line comes on stdin (or 30 s pass: a hung test ends).
HOLDER = """
import fcntl, os, select, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
select.select([sys.stdin], [], [], 30)
"""


def holder(lock: Path) -> subprocess.Popen[str]:
    """Another process holding the index's lock, once it said so."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def release(proc: subprocess.Popen[str]) -> None:
    """Let the holder go and reap it."""
    proc.communicate("go\n", timeout=10)


@pytest.fixture
def store(workspace: Path) -> CheckpointStore:
    return CheckpointStore(workspace, workspace / ".toold" / "checkpoints", 1 << 20, 1 << 20)


def test_a_busy_lock_records_nothing_and_keeps_the_snapshot(store: CheckpointStore) -> None:
    target = store.workspace / "a.txt"
    target.write_text("before")
    pending = store.snapshot(["a.txt"])
    target.write_text("after")
    with file_lock(store.folder / "index.lock"), pytest.raises(IndexBusy):  # this thread's
        store.record(pending, "write_file", "agent", wait=False)
    proc = holder(store.folder / "index.lock")
    try:
        with pytest.raises(IndexBusy):
            store.record(pending, "write_file", "agent", wait=False)
    finally:
        release(proc)
    assert store.entries() == []
    assert pending.held, "the objects stored before the call are still held for it"
    done = store.record(pending, "write_file", "agent", wait=False)
    assert done is not None and [f.path for f in done.files] == ["a.txt"]
    assert store.diff(done.id).count("+after") == 1


def test_a_free_lock_records_without_waiting(store: CheckpointStore) -> None:
    pending = store.snapshot(["new.txt"])
    (store.workspace / "new.txt").write_text("x")
    done = store.record(pending, "write_file", "agent", wait=False)
    assert done is not None and [c.id for c in store.entries()] == [done.id]
    assert store.record(store.snapshot(["new.txt"]), "write_file", "agent", wait=False) is None


def test_a_write_under_another_process_lock_leaves_the_loop_free(workspace: Path) -> None:
    lock = workspace / ".toold" / "checkpoints" / "index.lock"
    target = workspace / "new.txt"

    async def scenario(state: WorkspaceState) -> list[str]:
        await call(state, "write_file", file_path="first.txt", content="1")  # lock made
        proc = holder(lock)
        try:
            task = asyncio.create_task(call(state, "write_file", file_path="new.txt", content="2"))
            # The loop answers the thread while the call's checkpoint waits for the lock.
            await asyncio.to_thread(wait_until, target.exists, "the write")
            await asyncio.sleep(0)
            assert not task.done(), "the call waits for its checkpoint"
        finally:
            release(proc)
        outcome = await task
        assert not outcome.is_error, outcome.content
        index = workspace / ".toold" / "checkpoints" / "index.jsonl"
        return [json.loads(line)["files"][0]["path"] for line in index.read_text().splitlines()]

    assert run_bound(workspace, scenario) == ["first.txt", "new.txt"]
