"""An agent's shell command that runs toold itself runs tools as the user (origin user,
through the workspace's engine), outside the guard judging that command: it asks, in
every mode but bypass, and "Always allow" never answers it."""

from __future__ import annotations

import pytest

from toold.permissions.guard import PermissionGuard

RUNS_TOOLS = [
    'toold call bash \'{"command": "rm -rf ~"}\'',
    "toold call write_file -",
    ".venv/bin/toold run steps.json",
    "toold serve --no-daemon",
    "toold mcp --workspace .",
    "toold acp",
    "toold daemon stop",
    "python -m toold call bash x",
    "python3 -mtoold run s.json",
    "python -m toold.cli call bash x",
    "env toold call bash x",
    "toold",
]
HARMLESS = ["toold tools", "toold --version", "toold jobs", "python -m pytest -q"]


@pytest.mark.parametrize("mode", ["default", "auto"])
@pytest.mark.parametrize("command", RUNS_TOOLS)
def test_running_toold_asks_and_cannot_be_always_allowed(mode: str, command: str) -> None:
    decision = PermissionGuard.from_config(mode, [], []).decide("bash", {"command": command})
    assert (decision.action, decision.approvable) == ("ask", False), decision
    assert "toold" in decision.reason


@pytest.mark.parametrize("command", HARMLESS)
def test_listing_runs_no_tool(command: str) -> None:
    decision = PermissionGuard.from_config("auto", [], []).decide("bash", {"command": command})
    assert decision.action == "allow", decision
