"""``[diagnostics]`` in toold.toml: defaults, and errors that name the key and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from toold.config import TooldConfig
from toold.config_loading import ConfigError, load_config
from toold.diagnostics.servers import ServerSpec, resolve


def _invalid(tmp_path: Path, toml: str) -> str:
    (tmp_path / "toold.toml").write_text(toml)
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path)
    return str(raised.value)


def test_the_defaults() -> None:
    settings = TooldConfig().diagnostics
    assert (settings.enabled, settings.wait_ms, settings.idle_seconds) == (True, 2000, 600.0)
    usable = {spec.name for spec in resolve(settings).usable}
    assert "ruff" in usable  # installed with the dev extra
    assert len({"ty", "basedpyright", "pyright"} & usable) <= 1  # one type checker at most


def test_a_new_server_needs_command_and_files(tmp_path: Path) -> None:
    message = _invalid(tmp_path, '[diagnostics.servers.gopls]\ncommand = ["gopls"]\n')
    assert "diagnostics.servers.gopls" in message and "needs both command and files" in message
    assert 'files = ["*.ext"]' in message


def test_an_empty_command_and_a_bad_wait_are_refused(tmp_path: Path) -> None:
    message = _invalid(tmp_path, "[diagnostics.servers.ruff]\ncommand = []\n")
    assert "diagnostics.servers.ruff" in message and "command is empty" in message
    assert "diagnostics.wait_ms" in _invalid(tmp_path, "[diagnostics]\nwait_ms = -1\n")


def test_a_default_can_be_turned_off_or_pointed_elsewhere() -> None:
    settings = TooldConfig.model_validate(
        {
            "diagnostics": {
                "servers": {
                    "ruff": {"enabled": False},
                    "mine": {"command": ["/bin/true"], "files": ["src/*.py"]},
                }
            }
        }
    ).diagnostics
    servers = resolve(settings)
    assert "ruff" not in {spec.name for spec in servers.usable}
    assert ServerSpec("mine", ("/bin/true",), ("src/*.py",)) in servers.usable
    assert [s.name for s in servers.for_file("src/a.py") if s.name == "mine"] == ["mine"]
    assert not [s for s in servers.for_file("lib/a.py") if s.name == "mine"]
