"""Undo after bash through the bwrap and Docker runners: a real daemon, tools/call and
checkpoints/restore on the wire, the tree compared whole (bytes, modes, folders)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sandbox.conftest import Daemon
from tests.trees import SCENARIO, fingerprint, seed


@pytest.mark.parametrize("runner", ["bwrap", "docker"])
def test_undo_puts_back_what_a_sandboxed_bash_changed(
    runner: str, daemon: Daemon, workspace: Path, request: pytest.FixtureRequest
) -> None:
    request.getfixturevalue(f"{runner}_ready")
    client = daemon(runner, warm_workers=0)
    seed(workspace)
    before = fingerprint(workspace)
    result = client.tool("bash", command=SCENARIO)
    assert not result["isError"], result
    listed = client.call("checkpoints/list", {})["checkpoints"]
    assert listed[-1]["tool"] == "bash"
    assert sorted(listed[-1]["paths"]) == ["a.txt", "b.txt", "d/c.txt", "e.sh"]
    done = client.call("checkpoints/restore", {"id": listed[-1]["id"]})
    assert sorted(done["restored"]) == ["a.txt", "b.txt", "d/c.txt", "e.sh"]
    assert fingerprint(workspace) == before
