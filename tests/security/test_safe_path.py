"""No file of the workspace or of the launch folder is ever imported by toold.

Both folders hold ``logging.py``, ``token.py`` and a ``toold/`` package that write a
canary when imported (the shapes a new user's project really has). The CLI, ``toold
serve`` under a real client, every runner and python_repl run there; no canary may
appear. The editors' launch arguments are checked by their own unit tests (the VS Code
suite asserts ``python -P -m toold``; Neovim runs the console script).
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.wire import WireClient
from tests.environment import unavailable
from tests.sandbox.conftest import bwrap_ready, docker_ready  # noqa: F401  (fixtures)

TRAPS = ("logging.py", "token.py", "toold/__init__.py", "toold/__main__.py", "toold/cli.py")


def _toold() -> str:
    found = shutil.which("toold")
    if found is None:
        pytest.fail("the toold console script is not on PATH (pip install -e .)")
    return found


def plant(folder: Path, canaries: Path) -> None:
    """Fill ``folder`` with modules that record, in ``canaries``, that they were imported."""
    for name in TRAPS:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        mark = canaries / f"{folder.name}-{name.replace('/', '-')}"
        path.write_text(f"open({os.fspath(mark)!r}, 'w').write('ran')\n", encoding="utf-8")


@pytest.fixture
def trapped(tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    """(workspace, launch folder, canary folder); fails the test if any canary was written."""
    canaries, workspace, launch = tmp_path / "canaries", tmp_path / "ws", tmp_path / "launch"
    for folder in (canaries, workspace, launch):
        folder.mkdir()
    plant(workspace, canaries)
    plant(launch, canaries)
    (workspace / "notes.txt").write_text("alpha\n", encoding="utf-8")
    yield workspace, launch, canaries
    assert sorted(p.name for p in canaries.iterdir()) == [], "a planted module was imported"


class ConsoleClient(WireClient):
    """WireClient over ``toold serve`` started as a user starts it: the console script
    (or ``argv``), from ``cwd``. Same reader threads; only the command line differs."""

    def __init__(self, workspace: Path, cwd: Path, *argv: str) -> None:
        self.proc = subprocess.Popen(
            [*(argv or (_toold(),)), "serve", "--workspace", os.fspath(workspace)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
        )
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._pending: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self.stderr_lines: list[str] = []
        self._threads = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=self._drain_stderr, daemon=True),
        ]
        for thread in self._threads:
            thread.start()


def run_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``toold ARGS`` from ``cwd``."""
    return subprocess.run(
        [_toold(), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_cli_imports_nothing_from_the_launch_folder_or_the_workspace(
    trapped: tuple[Path, Path, Path],
) -> None:
    workspace, launch, _ = trapped
    listed = run_cli(launch, "tools", "--workspace", os.fspath(workspace))
    assert listed.returncode == 0, listed.stderr
    assert "read_file" in listed.stdout
    # The example: a new folder holding logging.py, read from inside it.
    read = run_cli(workspace, "call", "read_file", json.dumps({"file_path": "logging.py"}))
    assert read.returncode == 0, read.stderr
    assert "open(" in read.stdout
    read = run_cli(launch, "call", "--workspace", os.fspath(workspace), "read_file", "{}")
    assert "file_path" in read.stdout + read.stderr  # a tool error, from the real toold


NEOVIM = Path(__file__).resolve().parents[2] / "editor-clients" / "neovim"


def test_neovims_default_command_is_the_console_script_tested_above() -> None:
    """Neovim starts ``cmd`` with the workspace as cwd: the console script (whose own
    folder, not the cwd, leads sys.path), or a Python with -P."""
    nvim = shutil.which("nvim")
    if nvim is None:
        unavailable("Neovim is not installed (apt-get install neovim)")
    lua = 'io.stdout:write(vim.fn.json_encode(require("toold").config.cmd))'
    argv = [nvim, "--headless", "-u", "NONE", "--cmd", f"set rtp+={NEOVIM}"]
    done = subprocess.run(
        [*argv, "-c", f"lua {lua}", "-c", "qa!"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    cmd = json.loads(done.stdout)
    assert cmd == ["toold", "serve"] or (cmd[:2] == [cmd[0], "-P"] and "python" in cmd[0])


def test_python_dash_p_dash_m_toold_serves_from_a_trapped_folder(
    trapped: tuple[Path, Path, Path],
) -> None:
    """The VS Code launcher's form (toold.pythonPath): ``python -P -m toold serve``."""
    workspace, _, _ = trapped
    client = ConsoleClient(workspace, workspace, sys.executable, "-P", "-m", "toold")
    try:
        client.initialize(rootUri=workspace.as_uri())
        assert client.tool("read_file", file_path="notes.txt")["content"] == "1: alpha"
    finally:
        client.close()


def _serve_with(runner: str, workspace: Path, launch: Path) -> None:
    (workspace / "toold.toml").write_text(
        f'[execution]\ntool_runner = "{runner}"\n', encoding="utf-8"
    )
    client = ConsoleClient(workspace, launch)
    try:
        client.initialize(rootUri=workspace.as_uri())
        assert client.tool("read_file", file_path="notes.txt")["content"] == "1: alpha"
        echoed = client.tool("bash", command="echo ran-$((6*7))")
        assert echoed["content"] == "ran-42", echoed
        if runner == "local":
            snippet = (
                "import logging, token, sys\n"
                "print(logging.__file__.startswith(sys.base_prefix))"  # the stdlib's home
            )
            repl = client.tool("python_repl", code=snippet)
            assert repl["content"].strip() == "True", repl
    finally:
        client.close()


@pytest.mark.parametrize("runner", ["local", "subprocess"])
def test_toold_serve_and_its_runners_import_nothing_from_either_folder(
    runner: str, trapped: tuple[Path, Path, Path]
) -> None:
    workspace, launch, _ = trapped
    _serve_with(runner, workspace, launch)


@pytest.mark.usefixtures("bwrap_ready")
def test_the_bwrap_runner_imports_nothing_from_either_folder(
    trapped: tuple[Path, Path, Path],
) -> None:
    workspace, launch, _ = trapped
    _serve_with("bwrap", workspace, launch)


@pytest.mark.usefixtures("docker_ready")
def test_the_docker_runner_imports_nothing_from_either_folder(
    trapped: tuple[Path, Path, Path],
) -> None:
    workspace, launch, _ = trapped
    _serve_with("docker", workspace, launch)


def test_the_traps_fire_for_an_interpreter_without_safe_path(
    trapped: tuple[Path, Path, Path],
) -> None:
    """The control: plain ``python -m``/``-c`` from the folder does import them."""
    workspace, launch, canaries = trapped
    for folder in (workspace, launch):
        subprocess.run([sys.executable, "-c", "import logging, token"], cwd=folder, check=True)
    fired = sorted(p.name for p in canaries.iterdir())
    assert fired == ["launch-logging.py", "launch-token.py", "ws-logging.py", "ws-token.py"]
    for path in canaries.iterdir():
        path.unlink()
