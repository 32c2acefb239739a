"""initializationOptions over the wire: toold.toml sections at the top level or under
``config``, toold's own keys, and unknown keys refused by name in window/showMessage.

The protocol's InitializationOptions model checks them strictly: its aliases are toold's
keys (its snake_case field names are not, though pydantic would accept them by name), and
its types are strict (``1`` is not true, a number is not a folder). Each refusal is one
window/showMessage; the keys that are right still apply.

Moved from tests/e2e and tests/inprocess: the same initialize through the in-process
daemon (lsp_front.py).
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


def test_field_names_and_lax_values_are_refused(start: Start) -> None:
    client = start(
        {
            "execution_events": True,
            "executionEvents": 1,
            "workspace": 7,
            "limits": {"grep_max_matches": 1},
        }
    )
    shown = [client.notification("window/showMessage")["params"]["message"] for _ in range(3)]
    assert shown[0].startswith(
        "toold: initializationOptions.execution_events: unknown key, not applied; "
        "did you mean 'executionEvents'?"
    )
    assert shown[1:] == [
        "toold: initializationOptions.executionEvents: expected true or false",
        "toold: initializationOptions.workspace: expected a folder path (string)",
    ]
    # The top-level toold.toml section applied; the refused workspace did not.
    grep = client.tool("grep", pattern="needle")
    assert len(grep["content"]) == 1, grep


def test_options_that_are_not_an_object_are_refused_whole(start: Start) -> None:
    client = start([1])
    assert client.notification("window/showMessage")["params"]["message"] == (
        "toold: initializationOptions must be an object (got list); nothing of it was applied"
    )
    assert client.tool("read_file", file_path="src/main.py")["isError"] is False
