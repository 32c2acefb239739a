"""Suite-wide settings and the default workspace fixture."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.support import Engines, stop_engines

# bash captures the login environment with `bash -l` (and runs `bash -lc` with
# execution.login_shell); on machines whose login profile runs `pyenv rehash`, a shell
# killed mid-rehash leaves a lock that makes every later login shell wait up to 60 s.
# Fail that wait fast instead.
os.environ.setdefault("PYENV_REHASH_TIMEOUT", "1")
# Every toold command a test starts serves privately (as with --no-daemon): the shared
# engine's tests (tests/engine) opt in per process and stop what they start.
os.environ.setdefault("TOOLD_NO_DAEMON", "1")


@pytest.fixture(scope="session", autouse=True)
def engine_runtime() -> Iterator[Path]:
    """A runtime folder of this run's own for engine sockets (never a stale shared one);
    any engine a test left running there is stopped at the end."""
    runtime = Path(tempfile.mkdtemp(prefix="toold-run-", dir="/tmp"))
    os.environ["TOOLD_RUNTIME_DIR"] = os.fspath(runtime)
    # The per-user state (checkpoint key, refused loosenings) of this run's own, never the
    # real ~/.local/state/toold; tests that need another set theirs.
    state = Path(tempfile.mkdtemp(prefix="toold-state-", dir="/tmp"))
    os.environ.setdefault("TOOLD_STATE_DIR", os.fspath(state))
    try:
        yield runtime
    finally:
        stop_engines(runtime, dict(os.environ))
        shutil.rmtree(runtime, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A small workspace with two files holding ``needle`` (folders may override it)."""
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "main.py").write_text("print('needle')\n", encoding="utf-8")
    (ws / "src" / "helper.txt").write_text("needle line\n", encoding="utf-8")
    return ws


@pytest.fixture
def engines() -> Iterator[Engines]:
    """The CLI and editors of one test on the default path (the workspace's shared
    engine), attached to engines that are all stopped after it."""
    box = Engines()
    try:
        yield box
    finally:
        box.close()
