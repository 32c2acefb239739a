"""What a bwrap sandbox leaves on the host does not pile up: its /etc folder in the
temporary folder, and a root daemon's pids cgroup. A process killed before it could remove
its own has it removed by the next toold process's first sandbox, and nothing else is
touched (a live process's, a link, an unnamed folder, a cgroup with a task in it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.environment import unavailable
from tests.waiting import wait_until

MAKE_ONE = (
    "import sys, time\n"
    "from toold.sandbox.bwrap import etc_folder\n"
    "print(etc_folder(), flush=True)\n"
    "if sys.argv[1] == 'wait':\n"
    "    sys.stdin.read()\n"
)


MAKE_CGROUP = (
    "import sys, time\n"
    "from toold.sandbox.bwrap import PidsCgroup\n"
    "cgroup = PidsCgroup.create(64)\n"
    "print(cgroup.path, flush=True)\n"
    "if sys.argv[1] == 'wait':\n"
    "    sys.stdin.read()\n"
)


def _start(tmp: Path, mode: str, script: str = MAKE_ONE) -> tuple[subprocess.Popen[str], Path]:
    """A toold process that made one /etc folder under ``tmp``, or one pids cgroup
    (``wait``: until its stdin closes; ``exit``: at once)."""
    env = {**os.environ, "TMPDIR": os.fspath(tmp)}
    process = subprocess.Popen(
        [sys.executable, "-c", script, mode],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, Path(process.stdout.readline().strip())


def _end(process: subprocess.Popen[str]) -> int:
    """Its exit status, once its stdin is closed, its pipes too."""
    with process:
        assert process.stdin is not None
        process.stdin.close()
        return process.wait(timeout=60)


def test_a_killed_processs_folder_is_removed_by_the_next_process(tmp_path: Path) -> None:
    killed, killed_etc = _start(tmp_path, "wait")
    alive, alive_etc = _start(tmp_path, "wait")
    killed.send_signal(signal.SIGKILL)
    _end(killed)
    assert killed_etc.is_dir()  # nothing ran at its death
    (killed_etc / "passwd").write_text("root:x:0:0::/:/bin/sh\n")
    target = tmp_path / "not-a-sandbox"
    target.mkdir()
    (target / "keep.txt").write_text("kept\n")
    dead_pid = killed.pid
    link = tmp_path / f"toold-bwrap-etc-{dead_pid}-link"
    link.symlink_to(target)
    unnamed = tmp_path / "toold-bwrap-etc-abc123"  # an older toold's name: no pid in it
    unnamed.mkdir()

    later, later_etc = _start(tmp_path, "exit")
    assert _end(later) == 0

    assert not killed_etc.exists()
    assert alive_etc.is_dir() and later_etc.is_dir()
    assert link.is_symlink() and (target / "keep.txt").read_text() == "kept\n"
    assert unnamed.is_dir()
    assert _end(alive) == 0


def _pids_cgroups() -> Path:
    """Where a root daemon makes its pids cgroups."""
    if os.geteuid() != 0:
        pytest.skip("pids cgroups are a root daemon's (a user's daemon sets RLIMIT_NPROC)")
    base = Path("/sys/fs/cgroup")
    if (base / "pids" / "cgroup.procs").exists():
        return base / "pids"
    if "pids" in (base / "cgroup.subtree_control").read_text().split():
        return base
    unavailable("no writable pids cgroup controller on this machine")


def test_a_killed_root_daemons_pids_cgroup_is_removed_by_the_next_one(tmp_path: Path) -> None:
    parent = _pids_cgroups()
    killed, killed_cgroup = _start(tmp_path, "wait", MAKE_CGROUP)
    alive, alive_cgroup = _start(tmp_path, "wait", MAKE_CGROUP)
    killed.send_signal(signal.SIGKILL)
    _end(killed)
    assert killed_cgroup.is_dir()  # nothing ran at its death
    assert killed_cgroup.parent == parent
    # A dead process's cgroup that still has a task in it is not removed (nor the task).
    busy = parent / f"toold-{killed.pid}-busy"
    busy.mkdir()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        (busy / "cgroup.procs").write_text(str(sleeper.pid))

        later, later_cgroup = _start(tmp_path, "exit", MAKE_CGROUP)
        assert _end(later) == 0

        assert not killed_cgroup.exists()
        assert alive_cgroup.is_dir() and busy.is_dir()
        assert sleeper.poll() is None
        assert not later_cgroup.exists()  # its own, removed as it exited
        assert later_cgroup.name != killed_cgroup.name
    finally:
        sleeper.kill()
        sleeper.wait()
        wait_until(lambda: not (busy / "cgroup.procs").read_text().split(), "the cgroup to empty")
        busy.rmdir()
    assert _end(alive) == 0
    assert not alive_cgroup.exists()
