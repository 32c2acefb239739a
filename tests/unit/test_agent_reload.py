"""A reload that changes [agent] reaches agent/run, the subagent tool and the team."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bound import run_bound
from toold.workspace import WorkspaceState


def test_a_reload_of_agent_settings_rebuilds_the_agents(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLD_TEST_KEY", "sk-test")
    monkeypatch.delenv("TOOLD_TEST_NO_KEY", raising=False)
    key = {"api_key_env": "TOOLD_TEST_KEY", "model": "first-model"}

    async def scenario(state: WorkspaceState) -> None:
        assert state.agents is not None and state.team is not None
        assert state.team.agents is state.agents is state.runtime.agents
        # The editor's own settings (a didChangeConfiguration) apply at once.
        await state.reload({"agent": {**key, "model": "second-model"}})
        second = state.agents
        assert second is not None and second.provider.model == "second-model"
        assert state.team.agents is second and state.runtime.agents is second
        await state.reload({"agent": {"api_key_env": "TOOLD_TEST_NO_KEY"}})
        assert state.agents is None and state.team.agents is None
        assert state.runtime.agents is None
        # Unrelated settings leave the agent system as it is.
        await state.reload({"agent": key})
        kept = state.agents
        await state.reload({"agent": key, "limits": {"max_finished_jobs": 7}})
        assert state.agents is kept is not None

    run_bound(workspace, scenario, agent=key)
