"""A rename loop in the workspace root leaves every session of the engine fast.

The engine watches the root (toold.toml, .tasks.json) with inotify read by its event
loop. It used to read events until EAGAIN: a process renaming files as fast as it can
kept that loop busy, and another session's read_file waited 14.8 s. Now one bounded
read per wake-up, and a flood becomes one rescan of the root per second.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.support import Engines
from tests.engine.watch_support import announced, edit_outside, tasks_file

FAST_S = 2.0
"""The bound on the other session's read_file while one misbehaves: the issue's 1 s with
room for a loaded CI machine (typically 0.02-0.35 s here; 15-68 s before the fix)."""

RENAMER = textwrap.dedent(
    """
    import os, sys
    os.chdir(sys.argv[1])
    names = [f"flood-{i}" for i in range(64)]
    for name in names:
        open(name, "w").close()
    print("flooding", flush=True)
    while True:
        for name in names:
            os.rename(name, name + ".x")
            os.rename(name + ".x", name)
    """
)


@contextlib.contextmanager
def renaming(workspace: Path) -> Iterator[None]:
    """A process renaming files in the workspace root in a loop, while in the block."""
    proc = subprocess.Popen(
        [sys.executable, "-c", RENAMER, str(workspace)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "flooding"
        yield
    finally:
        proc.kill()
        proc.wait(timeout=10)
        proc.stdout.close()


@pytest.fixture
def fast_workspace(tmp_path: Path) -> Iterator[Path]:
    """A workspace on tmpfs where there is one: renames there are about 5 times as fast
    as on ext4 (88,000 a second against 19,000 here), the flood the issue saw."""
    shm = Path("/dev/shm")
    parent = Path(tempfile.mkdtemp(dir=shm)) if shm.is_dir() else tmp_path
    workspace = parent / "ws"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "main.py").write_text("print('needle')\n")
    try:
        yield workspace
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def test_a_rename_loop_in_the_root_leaves_read_file_fast(
    engines: Engines, fast_workspace: Path
) -> None:
    workspace = fast_workspace
    tasks_file(workspace).create("mine")
    first = engines.editor(workspace)
    other = engines.editor(workspace)
    other.tool("read_file", file_path="src/main.py")  # the tools are loaded
    with renaming(workspace):
        took = []
        for _ in range(5):
            started = time.monotonic()
            result = other.tool("read_file", file_path="src/main.py")
            took.append(time.monotonic() - started)
            assert result["content"] == "1: print('needle')", result
        shown = ", ".join(f"{t * 1000:.0f}" for t in took)
        print(f"read_file during the flood took {shown} ms")
        assert max(took) < FAST_S, took
        # Still watching: an outside edit in the flood is announced (a rescan of the root).
        edit_outside(workspace, "mine", "theirs")
        announced(first, "theirs")
