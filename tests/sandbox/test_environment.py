"""Workers get an allow-listed environment: the daemon's secrets never reach a tool.

Each runner but ``local`` is started by a real daemon whose own environment holds a
canary API key and other secrets; ``env`` in bash and ``os.environ`` in python_repl,
run inside, must show neither, while a name listed in ``execution.env_passthrough``
crosses.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.wire import WireClient
from toold.config import TooldConfig
from toold.config_loading import ConfigError, load_config
from toold.sandbox.environment import sandbox_environment

CANARY = "sk-ant-canary-4f1d"
SECRETS = {
    "ANTHROPIC_API_KEY": CANARY,
    "OTHER_SECRET": "other-secret-9c2e",
    "AWS_SECRET_ACCESS_KEY": "aws-canary-77a1",
}


def test_only_the_allow_list_and_the_chosen_names_cross() -> None:
    source = {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "xterm",
        "HOME": "/root",
        "TMPDIR": "/var/tmp/daemon",
        "PYTHONPATH": "/somewhere",
        "LD_PRELOAD": "/evil.so",
        "LCX": "not a locale",
        **SECRETS,
    }
    config = TooldConfig.model_validate({"execution": {"env_passthrough": ["OTHER_SECRET"]}})
    env = sandbox_environment(config, home="/h", tmpdir="/t", source=source)
    assert env == {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "xterm",
        "HOME": "/h",
        "TMPDIR": "/t",
        "OTHER_SECRET": "other-secret-9c2e",
    }
    bare = sandbox_environment(TooldConfig(), home="/h", tmpdir="/t", path="/p", source={})
    assert bare == {"PATH": "/p", "HOME": "/h", "TMPDIR": "/t"}


@pytest.mark.parametrize("bad", ["A=1", "WITH SPACE", "", "1ABC", "$HOME"])
def test_env_passthrough_takes_names_only(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ConfigError, match=r"execution\.env_passthrough\.0: .*names only"):
        load_config(tmp_path, {"execution": {"env_passthrough": [bad]}})


SecretDaemon = Callable[[str], WireClient]


@pytest.fixture
def secret_daemon(workspace: Path) -> Iterator[SecretDaemon]:
    """Start a daemon on ``runner`` with SECRETS in its environment."""
    clients: list[WireClient] = []

    def start(runner: str) -> WireClient:
        (workspace / "toold.toml").write_text(
            f'[execution]\ntool_runner = "{runner}"\nwarm_workers = 0\n'
            'env_passthrough = ["OTHER_SECRET"]\n',
            encoding="utf-8",
        )
        client = WireClient(workspace, env={**os.environ, **SECRETS})
        clients.append(client)
        client.initialize(rootUri=workspace.as_uri())
        return client

    yield start
    for client in clients:
        client.close()


def _seen_by(client: WireClient) -> tuple[dict[str, str], dict[str, str]]:
    """The environment bash's ``env`` and python_repl's ``os.environ`` show inside."""
    shell = client.tool("bash", command="env -0 | base64 -w0")
    assert shell["isError"] is False, shell
    pairs = base64.b64decode(shell["content"].strip()).split(b"\0")
    bash_env = dict(p.decode().split("=", 1) for p in pairs if b"=" in p)
    repl = client.tool("python_repl", code="import os, json; print(json.dumps(dict(os.environ)))")
    assert repl["isError"] is False, repl
    repl_env = json.loads(repl["content"].strip().splitlines()[-1])
    return bash_env, repl_env


def _check(bash_env: dict[str, str], repl_env: dict[str, str]) -> None:
    for env in (bash_env, repl_env):
        assert CANARY not in json.dumps(env)
        assert "ANTHROPIC_API_KEY" not in env
        assert "AWS_SECRET_ACCESS_KEY" not in env
        assert env["OTHER_SECRET"] == "other-secret-9c2e"  # listed in env_passthrough
        assert env["HOME"] and env["TMPDIR"] and env["PATH"]
        assert env["HOME"] != os.environ.get("HOME")


def test_subprocess_workers_get_no_secret(secret_daemon: SecretDaemon) -> None:
    _check(*_seen_by(secret_daemon("subprocess")))


@pytest.mark.usefixtures("bwrap_ready")
def test_bwrap_workers_get_no_secret(secret_daemon: SecretDaemon) -> None:
    bash_env, repl_env = _seen_by(secret_daemon("bwrap"))
    _check(bash_env, repl_env)
    assert bash_env["HOME"] == bash_env["TMPDIR"] == "/tmp"


@pytest.mark.usefixtures("docker_ready")
def test_docker_workers_get_no_secret(secret_daemon: SecretDaemon) -> None:
    _check(*_seen_by(secret_daemon("docker")))


def test_the_local_runner_keeps_the_daemons_secrets_from_commands(
    secret_daemon: SecretDaemon,
) -> None:
    """What daemon/docs/runners.md says: local runs tools in the daemon, with its environment
    less the variables counted as secrets (the model provider still reads them in the daemon)."""
    for env in _seen_by(secret_daemon("local")):  # bash's and python_repl's
        assert CANARY not in json.dumps(env) and "ANTHROPIC_API_KEY" not in env
        assert "PATH" in env
