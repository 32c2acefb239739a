"""An edit's diagnostics reach an ACP client: a real ``toold acp`` session (through the
workspace's engine, as users run it) driven by the ACP SDK's own client, with a real
``ruff server`` checking the files. The write_file call's last ``tool_call_update``
carries ``rawOutput`` = ``{content, diagnostics}``, and its text says the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp import text_block

from tests.acp.conftest import Recorder, acp_agent, agent_env, run, start_session
from tests.agents.conftest import ModelServer
from tests.diagnostics.conftest import UNUSED_OS, ruff_defaults
from toold.diagnostics.servers import find_program


def finished(recorder: Recorder, call_id: str) -> dict[str, Any]:
    """The call's last tool_call_update (its outcome)."""
    return recorder.call_updates(call_id)[-1]


def test_a_write_file_update_carries_the_diagnostics_it_introduced_and_fixed(
    model: ModelServer, workspace: Path, recorder: Recorder
) -> None:
    assert find_program("ruff"), "ruff is not installed: pip install -e '.[dev]'"
    ruff_defaults(workspace)
    # A first check (the server's start, in bwrap) may take seconds on a loaded machine:
    # the budget is an upper bound, never a wait.
    (workspace / "toold.toml").write_text("[diagnostics]\nwait_ms = 60000\n")
    model.tool_use(("write_file", {"file_path": "a.py", "content": "import os\n"}))
    model.tool_use(("write_file", {"file_path": "a.py", "content": "x = 1\n"}))
    model.text("Done.")
    recorder.answers = ["allow_always"]  # write_file asks once in the default mode

    async def scenario() -> str:
        async with acp_agent(workspace, agent_env(model), recorder) as conn:
            session_id = await start_session(conn, workspace)
            reply = await conn.prompt(session_id=session_id, prompt=[text_block("Edit a.py")])
            return reply.stop_reason

    assert run(scenario) == "end_turn"
    first, second = [u["toolCallId"] for u in recorder.updates("tool_call")]

    broke = finished(recorder, first)
    assert broke["status"] == "completed"
    assert broke["rawOutput"]["diagnostics"] == {
        "new": [UNUSED_OS],
        "fixed": [],
        "unchanged": 0,
        "pending": [],
        "missing": [],
    }
    assert broke["rawOutput"]["content"].startswith("Wrote 10 characters to a.py")
    assert "warning a.py:1:8 `os` imported but unused" in broke["rawOutput"]["content"]

    fixed = finished(recorder, second)
    assert fixed["status"] == "completed"
    assert fixed["rawOutput"]["diagnostics"]["new"] == []
    assert fixed["rawOutput"]["diagnostics"]["fixed"] == [UNUSED_OS]
    assert "Diagnostics fixed by this change (1):" in fixed["rawOutput"]["content"]
