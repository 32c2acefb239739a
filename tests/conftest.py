"""Suite-wide settings and the default workspace fixture."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.support import Engines, stop_engines
from tests.idle_engines import stop_idle_engines

# bash captures the login environment with `bash -l` (and runs `bash -lc` with
# execution.login_shell); on machines whose login profile runs `pyenv rehash`, a shell
# killed mid-rehash leaves a lock that makes every later login shell wait up to 60 s.
# Fail that wait fast instead.
os.environ.setdefault("PYENV_REHASH_TIMEOUT", "1")
# No TOOLD_NO_DAEMON here: every toold command a test starts takes the path users run,
# the workspace's shared engine (fixtures below stop the engines). A test or folder that
# needs a private daemon says so itself (`--no-daemon`, or its conftest).


# The fast loop, ``python -m pytest -m "not slow"``, leaves out what spawns processes
# (daemons, editors, containers) or generates hundreds of sandboxed calls; the full suite
# (no -m) runs everything. A folder here is slow as a whole, except the files listed as
# fast in it; a file of a fast folder can be slow too. Paths are relative to tests/.
SLOW_FOLDERS = {
    "acp": "spawns toold acp (and Node's ACP client)",
    "agents": "spawns toold serve with the scripted model",
    "bench": "benchmarks against spawned peers",
    "ci": "spawns toold ci / the run script",
    "clients": "real Neovim and VS Code",
    "diagnostics": "real language servers (ruff server) as child processes",
    "e2e": "spawns toold serve: exit codes, signals, stdin, logs",
    "engine": "spawned shared engines, scale and flood",
    "hardening": "bwrap, fuzzing and races against spawned daemons",
    "mcp": "spawns toold mcp",
    "network": "bwrap and Docker sandboxes behind the network proxy",
    "sandbox": "bwrap and Docker sandboxes",
    "security": "generated spellings through spawned daemons and bwrap",
}
FAST_FILES = {
    "acp/test_updates.py",
    "agents/test_loop.py",
    "agents/test_subagents.py",
    "security/test_descriptor_leaks.py",
    "security/test_outside_corpora.py",
    "security/test_parse_agrees_with_bash.py",  # no daemon: the parse against real bash
}
"""Files of a slow folder that run in process in seconds (measured): in the fast loop."""
SLOW_FILES: set[str] = set()
"""Files of a fast folder that are slow."""
SLOW_TESTS = {
    # Floods of thousands of events, and a polling fallback that waits out its interval.
    "unit/test_watching.py::test_one_read_is_bounded",
    "unit/test_watching.py::test_a_flood_comes_as_the_roots",
    "unit/test_watching.py::test_a_folder_replaced_during_a_flood_is_watched_again",
    "unit/test_watching.py::test_polling_sees_what_inotify_would",
    # Matches a catastrophic pattern for its whole 3 s budget on purpose.
    "unit/test_search_redos.py::test_the_event_loop_runs_while_a_slow_pattern_is_matched",
}
"""Tests of a fast file that take seconds by design (node ids without parameters)."""
TESTS = Path(__file__).resolve().parent


def slow_reason(path: Path, name: str) -> str | None:
    """Why test ``name`` of the file at ``path`` is out of the fast loop; None when it is in."""
    try:
        relative = path.resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return None
    if f"{relative}::{name.partition('[')[0]}" in SLOW_TESTS:
        return "listed in SLOW_TESTS"
    if relative in SLOW_FILES:
        return "listed in SLOW_FILES"
    if relative in FAST_FILES:
        return None
    return SLOW_FOLDERS.get(relative.partition("/")[0])


def stale_entries() -> list[str]:
    """Entries of the lists above that name no file or test any more (a rename)."""
    stale = [f for f in FAST_FILES | SLOW_FILES if not (TESTS / f).is_file()]
    for entry in SLOW_TESTS:
        file, _, name = entry.partition("::")
        path = TESTS / file
        if not path.is_file() or f"def {name}(" not in path.read_text(encoding="utf-8"):
            stale.append(entry)
    return stale


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``slow`` what the fast loop leaves out (the lists above)."""
    if stale := stale_entries():
        raise pytest.UsageError(f"tests/conftest.py lists what is not there: {stale}")
    for item in items:
        if slow_reason(item.path, item.name) is not None:
            item.add_marker(pytest.mark.slow)


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


@pytest.fixture(autouse=True)
def idle_engines_stopped(engine_runtime: Path) -> Iterator[None]:
    """After each test, the run's engines that are idle stop (tests.idle_engines): the
    engines of finished tests do not pile up; one a session-wide client uses stays."""
    yield
    stop_idle_engines(engine_runtime)


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
