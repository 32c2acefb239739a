"""Teammates and background subagents end with the editor session that started them, in
an engine two editors share: a closed editor's agents stop spending tokens, whoever they
were working for; the other editor keeps working, and the mailboxes stay on disk.

The model is the scripted Messages API on 127.0.0.1 (tests/agents/conftest.py), reached
by the engine through the real SDK; held requests keep the agents mid-turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.agents.conftest as scripted
from tests.agents.conftest import API_KEY, ModelServer
from tests.agents.conftest import model as model  # the scripted Messages API
from tests.e2e.wire import WireClient
from tests.engine.support import Engines
from tests.waiting import wait_until
from toold.engine.location import workspace_key

STOPPED = "Teammate alice stopped before answering: the session that started it ended."


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "a.txt").write_text("alpha\n")
    return folder


@pytest.fixture
def editors(
    engines: Engines, workspace: Path, model: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[WireClient, WireClient]]:
    """Two editors on one folder, one engine; the model's held requests wait for the test."""
    monkeypatch.setattr(scripted, "WAIT", 120.0)
    engines.env = {k: v for k, v in engines.env.items() if not k.startswith("ANTHROPIC_")}
    engines.env |= {"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": model.url}
    first = engines.editor(workspace)
    second = engines.editor(workspace)
    assert len(engines.status(workspace)["sessions"]) == 2  # one engine serves both
    yield first, second


def _running(client: WireClient) -> list[tuple[str, bool]]:
    return [(t["name"], t["running"]) for t in client.tool("team_list")["content"]]


def test_an_editors_teammates_and_subagents_end_with_its_session(
    editors: tuple[WireClient, WireClient], engines: Engines, workspace: Path, model: ModelServer
) -> None:
    a, b = editors
    a.call("team/register", {"name": "alice", "role": "reviewer"})
    spawn = {"name": "team_spawn", "arguments": {"name": "alice"}, "origin": "user"}
    assert a.call("tools/call", spawn)["content"] == "Spawned teammate alice (reviewer)"
    assert _running(b) == [("alice", True)]

    model.hold()  # the subagent's first turn
    subagent = {"task": "survey", "run_in_background": True}
    started = a.tool("subagent", **subagent)["content"]
    job_id = started.removeprefix("Subagent ").removesuffix(" started in the background.")
    model.wait_requests(1)
    model.hold()  # alice's turn for b's request
    asked = b.request(
        "tools/call",
        {
            "name": "team_send",
            "arguments": {"to_agent": "alice", "content": "review"},
            "origin": "user",
        },
    )
    model.wait_requests(2)

    assert a.close() == 0
    # b's question is answered at once (not after team_send's 60 s), and says why.
    assert b.response(asked)["result"] == {"content": STOPPED, "isError": True}
    note = b.notification("team/message")["params"]["message"]
    assert (note["from"], note["to"], note["type"], note["content"]) == (
        "alice",
        "main",
        "stopped",
        STOPPED,
    )
    assert _running(b) == [("alice", False)]  # her lock went before her word was sent
    # The subagents are cancelled once the teammates stopped (they may have started some).
    wait_until(lambda: b.call("jobs/get", {"jobId": job_id})["status"] != "running", "the job")
    job = b.call("jobs/get", {"jobId": job_id})
    assert (job["status"], job["error"]) == ("cancelled", "Cancelled.")
    log = (engines.runtime / f"{workspace_key(workspace)}.log").read_text()
    assert f"stopped its teammates alice and background subagents {job_id}" in log
    # The mailboxes stay: b's request in alice's, alice's word in main's.
    mailboxes = workspace / ".toold" / "mailboxes"
    [request] = [json.loads(line) for line in (mailboxes / "alice.jsonl").read_text().splitlines()]
    assert (request["from"], request["content"]) == ("main", "review")
    assert STOPPED in (mailboxes / "main.jsonl").read_text()

    # b goes on, and may start alice again: hers now, and she ends with b's session.
    assert b.tool("read_file", file_path="a.txt")["content"] == "1: alpha"
    assert b.call("tools/call", spawn)["content"] == "Spawned teammate alice (reviewer)"
    assert b.close() == 0
    wait_until(lambda: engines.status(workspace)["idle"], "the engine to go idle", 30)
