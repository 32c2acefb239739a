"""bash and the user's login profile, over the wire, with a real HOME holding a noisy
.bash_profile: captured once for the local runner, at its first bash call; sourced every
call with execution.login_shell, and then never captured; never given to a sandboxed
runner, and then never sourced. The settings come from the editor's
initializationOptions, which reach the workspace's engine after it bound the workspace
with toold.toml (none here): the profile is sourced exactly as often as they say."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.wire import WireClient

PROFILE = """\
echo sourced >> "$HOME/sourced.log"
echo "profile noise on stdout"
echo "profile noise on stderr" >&2
export TOOLD_PROFILE_VAR=from-profile
"""
ECHO = 'echo "${TOOLD_PROFILE_VAR:-unset}"'

Start = Callable[[dict[str, Any]], WireClient]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bash_profile").write_text(PROFILE, encoding="utf-8")
    return home


@pytest.fixture
def start(workspace: Path, home: Path) -> Iterator[Start]:
    clients: list[WireClient] = []
    env = {k: v for k, v in os.environ.items() if k != "TOOLD_PROFILE_VAR"} | {"HOME": str(home)}

    def launch(execution: dict[str, Any]) -> WireClient:
        client = WireClient(workspace, env=env)
        clients.append(client)
        options = {"config": {"execution": execution}}
        client.initialize(rootUri=workspace.as_uri(), initializationOptions=options)
        return client

    yield launch
    for client in clients:
        client.close()


def _sourced(home: Path) -> int:
    log = home / "sourced.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


LOCAL = {"tool_runner": "local"}
"""The login environment is the local runner's: sandboxed runners never get it."""


def test_the_profile_is_captured_once_and_prints_nothing(start: Start, home: Path) -> None:
    client = start(LOCAL)
    for _ in range(3):
        assert client.tool("bash", command=ECHO) == {
            "content": "from-profile",
            "isError": False,
            "exitCode": 0,
        }
    assert _sourced(home) == 1


def test_login_shell_true_sources_the_profile_every_call(start: Start, home: Path) -> None:
    client = start({**LOCAL, "login_shell": True})
    for _ in range(3):
        result = client.tool("bash", command=ECHO)
        assert result["content"] == (
            "profile noise on stdout\nfrom-profile\nprofile noise on stderr"
        ), result
    assert _sourced(home) == 3


def test_sandboxed_bash_never_gets_the_login_environment(start: Start, home: Path) -> None:
    client = start({"tool_runner": "subprocess", "warm_workers": 0})
    result = client.tool("bash", command=ECHO)
    assert result == {"content": "unset", "isError": False, "exitCode": 0}
    assert _sourced(home) == 0  # nor captured for nothing


def test_changed_execution_settings_capture_it_again_when_needed(start: Start, home: Path) -> None:
    """A settings change drops the snapshot; the next bash call that needs one takes it
    (login_shell = true sources the profile itself and takes none)."""
    client = start(LOCAL)
    clean = {"content": "from-profile", "isError": False, "exitCode": 0}
    assert client.tool("bash", command=ECHO) == clean
    for login_shell, sourced in ((True, 2), (False, 3)):
        settings = {"toold": {"config": {"execution": {**LOCAL, "login_shell": login_shell}}}}
        client.notify("workspace/didChangeConfiguration", {"settings": settings})
        assert "from-profile" in client.tool("bash", command=ECHO)["content"]
        assert _sourced(home) == sourced
    assert client.tool("bash", command=ECHO) == clean
    assert _sourced(home) == 3
