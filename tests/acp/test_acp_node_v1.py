"""ACP v1's newer surface (issue 25) on the TypeScript SDK's client, through the engine:
``session/close`` and ``session/resume`` across two ``toold acp`` processes, ``usage_update``
against a Messages API that reports known token counts, and a subagent's child session.

One node process per test; tests/acp/node_sdk.py checks that the SDK's schemas accepted
every message and that what its handlers got is what toold sent."""

from __future__ import annotations

from pathlib import Path

from tests.acp.node_sdk import drive, of_kind
from tests.acp.node_sdk import node_client as node_client  # the fixture
from tests.acp.scripts import MeteredModel, child_announced, child_idle, script, update
from tests.agents.conftest import ModelServer

SESSION_NOT_FOUND = -32002
"""ACP's "Resource not found", which the SDK's own session/close takes as closed."""


def test_a_typescript_client_closes_a_session_and_resumes_it_from_another_process(
    node_client: Path, metered: MeteredModel, workspace: Path
) -> None:
    first = {
        "input_tokens": 100,
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 50,
    }
    second = {"input_tokens": 300, "cache_read_input_tokens": 1100}
    metered.usages.extend([first, second])
    metered.text("First answer.")
    metered.text("Second answer.")
    record = drive(
        node_client,
        workspace,
        metered,
        steps=[
            {"prompt": "remember blue"},
            {"close": True},
            {"close": True},
            {"prompt": "again"},
            {"reconnect": True},
            {"resume": True},
            {"prompt": "which colour?"},
        ],
    )
    capabilities = record["initialize"]["agentCapabilities"]["sessionCapabilities"]
    assert capabilities["close"] == {} and capabilities["resume"] == {}
    assert record["resumed"]["modes"]["currentModeId"] == "default"
    assert record["stops"] == ["end_turn", "end_turn"]
    # No replay on resume: the client already shows the conversation; the model gets it all.
    assert of_kind(record, "user_message_chunk") == []
    text = "".join(u["content"]["text"] for u in of_kind(record, "agent_message_chunk"))
    assert text == "First answer.Second answer."
    later = metered.wait_requests(2)[1]["messages"]
    assert "remember blue" in str(later[0]) and "First answer." in str(later[1])
    assert "which colour?" in str(later[-1])
    # One usage_update per response, with the counts the API reported; a resumed session's
    # sums start again (its earlier turns are not counted twice).
    assert of_kind(record, "usage_update") == [update(first, first), update(second, second)]
    assert {n["sessionId"] for n in record["notifications"]} == {record["session"]["sessionId"]}
    # A closed session is ACP's "Resource not found": the SDK takes a second session/close
    # as done, and a prompt to it fails with that code.
    assert record["closed"] == [{}, {}]
    [closed] = record["errors"]
    assert closed["code"] == SESSION_NOT_FOUND
    assert "create one with session/new" in closed["message"]


def test_a_typescript_client_that_declares_subagents_sees_a_child_session(
    node_client: Path, model: ModelServer, workspace: Path
) -> None:
    script(model)  # the subagent writes out.txt (asked), then answers
    record = drive(
        node_client,
        workspace,
        model,
        unstable=True,  # the SDK's schemas for subagents and subagent_update
        clientCapabilities={"fs": {"readTextFile": False, "writeTextFile": False}, "subagents": {}},
        answers=["allow_once", "allow_once"],
        steps=[{"prompt": "delegate it"}],
    )
    assert record["stops"] == ["end_turn"]
    assert (workspace / "out.txt").read_text() == "42\n"
    parent = record["session"]["sessionId"]
    seen = [(n["sessionId"], n["update"]) for n in record["notifications"]]
    running, idle = of_kind(record, "subagent_update")
    child = running["sessionId"]
    assert child != parent
    assert running == child_announced(child)
    assert idle == child_idle(child)
    # Both announced on the parent: running before anything of the child's, idle after it.
    assert of_kind(record, "subagent_update", parent) == [running, idle]
    of_child = [i for i, (s, _) in enumerate(seen) if s == child]
    assert seen.index((parent, running)) < of_child[0] < of_child[-1] < seen.index((parent, idle))
    text = "".join(u["content"]["text"] for u in of_kind(record, "agent_message_chunk", child))
    assert text == "Writing.Wrote it."
    write = [u for s, u in seen if u.get("toolCallId") == "toolu_0003"]
    assert all(s == child for s, u in seen if u.get("toolCallId") == "toolu_0003")
    assert write[0]["kind"] == "edit" and write[-1]["status"] == "completed"
    assert write[-1]["content"][0]["type"] == "diff"
    # The subagent's question is asked in its child session, the delegation in the parent.
    assert [(p["sessionId"], p["toolCall"]["toolCallId"]) for p in record["permissions"]] == [
        (parent, "toolu_0001"),
        (child, "toolu_0003"),
    ]
    parent_text = "".join(
        u["content"]["text"] for u in of_kind(record, "agent_message_chunk", parent)
    )
    assert parent_text == "The subagent wrote out.txt."
