"""initializationOptions over the wire: toold.toml sections at the top level or under
``config``, toold's own keys, and unknown keys refused by name in window/showMessage.

Moved from tests/e2e: the same initialize through the in-process daemon (lsp_front.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.interaction.conftest import OpenLsp
from tests.interaction.lsp_front import InProcessDaemon

Start = Callable[[Any], InProcessDaemon]


@pytest.fixture
def start(lsp: OpenLsp, workspace: Path) -> Start:
    """Start a daemon on ``workspace`` initialized with these initializationOptions."""

    def launch(options: Any) -> InProcessDaemon:
        return lsp(workspace, initializationOptions=options)

    return launch


def _runner_of_a_call(client: InProcessDaemon) -> str:
    """The runner the execution/event of one read_file call names."""
    assert client.tool("read_file", file_path="src/main.py")["isError"] is False
    event = client.notification("execution/event")["params"]
    assert event["tool"] == "read_file"
    runner: str = event["runner"]
    return runner


def test_toml_sections_at_the_top_level_apply(start: Start) -> None:
    client = start({"executionEvents": True, "execution": {"tool_runner": "subprocess"}})
    assert _runner_of_a_call(client) == "subprocess"


def test_config_and_the_top_level_merge_config_winning(start: Start) -> None:
    client = start(
        {
            "executionEvents": True,
            "execution": {"tool_runner": "subprocess"},
            "limits": {"grep_max_matches": 5},
            "config": {"limits": {"grep_max_matches": 1}},
        }
    )
    assert _runner_of_a_call(client) == "subprocess"
    grep = client.tool("grep", pattern="needle")
    assert len(grep["content"]) == 1, grep


def test_an_unknown_key_is_refused_by_name_and_the_rest_applies(start: Start) -> None:
    client = start(
        {
            "executionEvents": True,
            "exection": {"tool_runner": "bwrap"},
            "execution": {"tool_runner": "subprocess"},
        }
    )
    shown = client.notification("window/showMessage")["params"]
    assert shown["type"] == 1  # Error
    assert shown["message"] == (
        "toold: initializationOptions.exection: unknown key, not applied; did you mean "
        "'execution'? expected one of: workspace, config, executionEvents or a toold.toml "
        "section (execution, limits, files, http, python_repl, web_search, permissions, agent, "
        "acp, daemon, hooks, checkpoints, diagnostics, search)"
    )
    assert _runner_of_a_call(client) == "subprocess"


def test_wrong_types_of_toold_options_are_refused(start: Start) -> None:
    client = start({"executionEvents": "yes", "config": ["not", "an", "object"]})
    messages = {client.notification("window/showMessage")["params"]["message"] for _ in range(2)}
    assert messages == {
        "toold: initializationOptions.executionEvents: expected true or false",
        "toold: initializationOptions.config: expected an object of toold.toml sections",
    }
    assert client.tool("read_file", file_path="src/main.py")["isError"] is False
