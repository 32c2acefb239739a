"""A root daemon whose bwrap sandbox gets no pids cgroup says that execution.pids_limit
does not bind (the kernel ignores RLIMIT_NPROC for root): each session is told, and
``toold call`` prints it on stderr. The machine without a writable pids controller is
made real with a mount namespace whose /sys/fs/cgroup is an empty tmpfs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.support import Engines
from tests.environment import unavailable

pytestmark = pytest.mark.usefixtures("bwrap_ready")

CALL = [sys.executable, "-m", "toold", "call", "bash", '{"command": "echo ran"}']


def _call(
    engines: Engines, workspace: Path, without_cgroups: bool
) -> subprocess.CompletedProcess[str]:
    """``toold call bash`` through the workspace's engine (started by it), the engine in a
    mount namespace with no cgroup controllers when ``without_cgroups``."""
    argv = [*CALL, "--workspace", str(workspace)]
    if without_cgroups:
        script = 'mount -t tmpfs none /sys/fs/cgroup && exec "$@"'
        argv = ["unshare", "--mount", "sh", "-c", script, "-", *argv]
    return subprocess.run(
        argv, cwd=workspace, env=engines.env, capture_output=True, text=True, timeout=120
    )


def test_a_root_daemon_without_a_pids_cgroup_says_the_limit_does_not_bind(
    engines: Engines, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("a normal user's sandbox is bound by RLIMIT_NPROC, not a cgroup")
    if shutil.which("unshare") is None:
        unavailable("unshare (util-linux) makes the machine without cgroups")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "toold.toml").write_text('[execution]\ntool_runner = "bwrap"\n')

    bound = _call(engines, workspace, without_cgroups=False)
    assert bound.returncode == 0 and bound.stdout.strip() == "ran", bound.stderr
    assert "pids_limit" not in bound.stderr, bound.stderr
    engines.toold("daemon", "stop", "--workspace", str(workspace), cwd=workspace)

    unbound = _call(engines, workspace, without_cgroups=True)
    assert unbound.returncode == 0 and unbound.stdout.strip() == "ran", unbound.stderr
    said = unbound.stderr
    assert "execution.pids_limit (256) does not bind the bwrap sandbox here" in said, said
    assert "Run toold as a normal user" in said, said
