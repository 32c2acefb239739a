"""The login environment capture behind bash (a real bash -l with a real HOME)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from tests.processes import wait_gone
from toold.tools.builtin._login_shell import (
    LoginEnvironment,
    LoginShellError,
    capture_login_environment,
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("TOOLD_PROFILE_VAR", raising=False)
    return home


def test_the_profile_sets_variables_and_its_output_is_dropped(home: Path, tmp_path: Path) -> None:
    (home / ".bash_profile").write_text(
        'echo noise; printf "more\\0noise"; export TOOLD_PROFILE_VAR="two\nlines"\n'
    )
    env = capture_login_environment(tmp_path)
    assert env["TOOLD_PROFILE_VAR"] == "two\nlines"
    assert env["HOME"] == str(home)
    assert "PATH" in env
    assert not {"PWD", "OLDPWD", "SHLVL", "_"} & set(env)


def test_a_failing_profile_falls_back_to_the_daemons_environment(
    home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (home / ".bash_profile").write_text("exit 3\n")
    with pytest.raises(LoginShellError, match="exited with status 3"):
        capture_login_environment(tmp_path)
    with caplog.at_level(logging.WARNING):
        assert asyncio.run(LoginEnvironment(tmp_path).get()) is None
    assert "could not capture the login environment" in caplog.text
    assert "execution.login_shell" in caplog.text


def test_a_hanging_profile_is_killed_with_its_children(home: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    (home / ".bash_profile").write_text(f"sleep 300 & echo $! > {pid_file}; wait\n")
    with pytest.raises(LoginShellError, match=r"did not finish within 0\.5 s"):
        capture_login_environment(tmp_path, timeout=0.5)
    child = int(pid_file.read_text())
    # The whole process group got SIGKILL; its delivery is asynchronous, so wait for the
    # child to die (gone, or a zombie awaiting init).
    wait_gone(child, "the profile's child")


def test_the_profile_is_sourced_at_the_first_get_once_for_every_caller(
    home: Path, tmp_path: Path
) -> None:
    """Nothing at construction (the workspace binds it whatever the settings); the first
    bash call starts the one capture, calls at the same time and after share it, and a
    call cancelled while it waits leaves it to the others."""
    sourced = tmp_path / "sourced.log"
    (home / ".bash_profile").write_text(
        f"echo x >> {sourced}; sleep 0.2; export TOOLD_PROFILE_VAR=set\n"
    )
    login = LoginEnvironment(tmp_path)
    assert not login.started and not sourced.exists()

    async def calls() -> list[str]:
        cancelled = asyncio.ensure_future(login.get())
        await asyncio.sleep(0)
        cancelled.cancel()
        envs = await asyncio.gather(login.get(), login.get())
        envs.append(await login.get())
        return [env["TOOLD_PROFILE_VAR"] for env in envs if env is not None]

    assert asyncio.run(calls()) == ["set", "set", "set"]
    assert login.started and sourced.read_text() == "x\n"
