"""The bwrap sandbox's /etc folders in the temporary folder do not pile up: a process
killed before it could remove its own has it removed by the next toold process's first
sandbox, and nothing else is touched (a live process's folder, a link, an unnamed one)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

MAKE_ONE = (
    "import sys, time\n"
    "from toold.sandbox.bwrap import etc_folder\n"
    "print(etc_folder(), flush=True)\n"
    "if sys.argv[1] == 'wait':\n"
    "    sys.stdin.read()\n"
)


def _start(tmp: Path, mode: str) -> tuple[subprocess.Popen[str], Path]:
    """A toold process that made one /etc folder under ``tmp`` (``wait``: until its stdin
    closes; ``exit``: at once)."""
    env = {**os.environ, "TMPDIR": os.fspath(tmp)}
    process = subprocess.Popen(
        [sys.executable, "-c", MAKE_ONE, mode],
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
