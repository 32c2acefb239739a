"""The engine's files and socket under attack from processes of the same user (an agent's
command can reach the runtime folder): nothing is written through a planted symlink."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tests.engine.support import Engines, live_engines
from tests.waiting import wait_until
from toold.engine.engine import LOG_LIMIT


def _key(workspace: Path) -> str:
    return hashlib.sha256(os.fsencode(os.path.realpath(workspace))).hexdigest()[:20]


@pytest.mark.parametrize("suffix", [".pid", ".start.lock", ".log"])
def test_a_symlink_planted_for_an_engine_file_is_never_written_through(
    engines: Engines, workspace: Path, tmp_path: Path, suffix: str
) -> None:
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n")
    planted = engines.runtime / f"{_key(workspace)}{suffix}"
    planted.symlink_to(victim)
    done = engines.toold("call", "todo_read", cwd=workspace)
    assert victim.read_text() == "keep me\n"
    if suffix == ".log":  # the last engine's log is set aside (the link itself moved)
        assert done.returncode == 0, done.stderr
        assert (engines.runtime / f"{_key(workspace)}.log.1").is_symlink()
        assert not planted.is_symlink()
    else:
        assert done.returncode != 0
        assert "remove it" in done.stderr and str(planted) in done.stderr, done.stderr
        assert live_engines(engines.runtime) == []


def test_a_dangling_symlink_for_the_lock_creates_nothing(
    engines: Engines, workspace: Path, tmp_path: Path
) -> None:
    target = tmp_path / "created-by-engine"
    (engines.runtime / f"{_key(workspace)}.start.lock").symlink_to(target)
    done = engines.toold("call", "todo_read", cwd=workspace)
    assert done.returncode != 0 and not target.exists()


def test_a_log_past_its_limit_is_set_aside(engines: Engines, workspace: Path) -> None:
    (workspace / "toold.toml").write_text("[daemon]\nidle_timeout = 0.4\n")  # checks often
    editor = engines.editor(workspace)  # attached: the engine stays up
    log = engines.runtime / f"{_key(workspace)}.log"
    with log.open("ab") as flood:  # what weeks of sessions add up to
        flood.write(b"x" * (LOG_LIMIT + 1))
    old = engines.runtime / f"{_key(workspace)}.log.1"
    wait_until(lambda: old.exists() and old.stat().st_size > LOG_LIMIT, "the log set aside")
    assert engines.toold("call", "todo_read", cwd=workspace).returncode == 0
    assert 0 < log.stat().st_size < LOG_LIMIT
    assert "attached" in log.read_text()
    editor.close()
