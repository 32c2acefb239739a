"""The guard and the agent through the real daemon over stdio, the model a real local server.

The daemon runs with ANTHROPIC_API_KEY=test-key and ANTHROPIC_BASE_URL pointing at
the scripted Messages API server, so its anthropic SDK talks real HTTP. The test
client plays the editor: it answers window/showMessageRequest with Allow, Always
allow or Deny and asserts on the raw JSON the daemon sends.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents.conftest import API_KEY, ModelServer, tool_names, tool_results
from tests.e2e.wire import WireClient
from tests.waiting import wait_until

ASK = "window/showMessageRequest"
ACTIONS = [{"title": "Allow"}, {"title": "Always allow"}, {"title": "Deny"}]
CAN_ASK: dict[str, Any] = {"window": {"showMessage": {}}}

Start = Callable[..., WireClient]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "main.py").write_text("print('needle')\n", encoding="utf-8")
    (ws / "notes.txt").write_text("keep me\n", encoding="utf-8")
    return ws.resolve()


@pytest.fixture
def start(workspace: Path, model: ModelServer) -> Iterator[Start]:
    """``start(can_ask=, key=, toml=, config=)``: a daemon on ``workspace``, initialized."""
    clients: list[WireClient] = []

    def _start(
        *,
        can_ask: bool = True,
        key: bool = True,
        toml: str | None = None,
        config: dict[str, Any] | None = None,
    ) -> WireClient:
        if toml is not None:
            (workspace / "toold.toml").write_text(toml, encoding="utf-8")
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "TOOLD_MODEL")
        }
        if key:
            env |= {"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": model.url}
        client = WireClient(workspace, env=env)
        clients.append(client)
        client.initialize(
            rootUri=workspace.as_uri(),
            capabilities=CAN_ASK if can_ask else {},
            initializationOptions={"config": config or {}},
        )
        return client

    yield _start
    for client in clients:
        client.close()


def next_prompt(client: WireClient) -> dict[str, Any]:
    """The next permission request the daemon sends."""
    return client.next_message(lambda m: m.get("method") == ASK and "id" in m)


def answer(client: WireClient, prompt: dict[str, Any], title: str | None) -> None:
    result = None if title is None else {"title": title}
    client.send({"jsonrpc": "2.0", "id": prompt["id"], "result": result})


def prompts_left(client: WireClient) -> list[dict[str, Any]]:
    """Permission requests received but not consumed (drains what has arrived)."""
    while not client.messages.empty():
        msg = client.messages.get_nowait()
        if msg is not None:
            client._pending.append(msg)
    return [m for m in client._pending if m.get("method") == ASK]


def audit(workspace: Path, count: int) -> list[dict[str, Any]]:
    """The audit log once it holds ``count`` entries (they are written after the answer)."""
    path = workspace / ".toold" / "audit.jsonl"

    def lines() -> list[str]:
        return path.read_text(encoding="utf-8").splitlines() if path.exists() else []

    wait_until(lambda: len(lines()) >= count, lambda: f"{count} lines, not {lines()}")
    return [json.loads(line) for line in lines()]


def write_turn(model: ModelServer, name: str = "out.txt", content: str = "hello") -> None:
    model.tool_use(("write_file", {"file_path": name, "content": content}))


def test_allow_deny_always_allow_and_plan_mode(
    start: Start, model: ModelServer, workspace: Path
) -> None:
    client = start()

    # Allow: the write runs and the next model request carries its result.
    write_turn(model)
    model.text("I wrote out.txt.")
    run = client.request("agent/run", {"prompt": "write hello to out.txt"})
    prompt = next_prompt(client)
    assert prompt["params"]["actions"] == ACTIONS
    assert prompt["params"]["type"] == 2  # Warning
    assert "write_file" in prompt["params"]["message"]
    assert "out.txt" in prompt["params"]["message"]
    answer(client, prompt, "Allow")
    assert client.response(run) == {
        "jsonrpc": "2.0",
        "id": run,
        "result": {
            "text": "I wrote out.txt.",
            "usage": {  # two responses of 12 input and 7 output tokens (ModelServer)
                "inputTokens": 24,
                "outputTokens": 14,
                "cacheReadTokens": 0,
                "cacheWriteTokens": 0,
                "totalTokens": 38,
            },
        },
    }
    assert (workspace / "out.txt").read_text() == "hello"
    first, second = model.wait_requests(2)
    assert first["messages"] == [{"role": "user", "content": "write hello to out.txt"}]
    assert {"write_file", "bash", "subagent", "read_file"} <= tool_names(first)
    [result] = tool_results(second)
    assert result["content"] == "Wrote 5 characters to out.txt"
    assert "is_error" not in result

    # Deny: an error result for the model, nothing written.
    write_turn(model, "denied.txt")
    model.text("The user said no.")
    run = client.request("agent/run", {"prompt": "write"})
    answer(client, next_prompt(client), "Deny")
    assert client.response(run)["result"]["text"] == "The user said no."
    assert not (workspace / "denied.txt").exists()
    [result] = tool_results(model.wait_requests(4)[3])
    assert (result["content"], result["is_error"]) == ("User denied.", True)

    # Always allow: the second write of the run is not asked about.
    write_turn(model, "a.txt", "1")
    write_turn(model, "b.txt", "2")
    model.text("both written")
    run = client.request("agent/run", {"prompt": "write two files"})
    answer(client, next_prompt(client), "Always allow")
    assert client.response(run)["result"]["text"] == "both written"
    assert prompts_left(client) == []
    assert (workspace / "a.txt").read_text() == "1"
    assert (workspace / "b.txt").read_text() == "2"

    # Plan mode refuses writes without asking, even after "Always allow"; reads still run.
    assert client.call("permissions/setMode", {"mode": "plan"}) == {"mode": "plan"}
    model.tool_use(
        ("write_file", {"file_path": "plan.txt", "content": "x"}),
        ("read_file", {"file_path": "notes.txt"}),
    )
    model.text("planned")
    assert client.call("agent/run", {"prompt": "plan"})["text"] == "planned"
    write, read = tool_results(model.wait_requests(9)[8])
    assert write["content"] == "Plan mode: write_file blocked (read-only)"
    assert write["is_error"] is True
    assert read["content"] == "1: keep me"
    assert prompts_left(client) == []
    assert not (workspace / "plan.txt").exists()

    # Every call is in the audit log: one line, its decision and what came of it.
    lines = audit(workspace, 6)
    entries = [(e["event"], e["tool"], e["decision"], e.get("outcome")) for e in lines]
    assert entries == [
        ("call", "write_file", "user-allowed", "ok"),
        ("call", "write_file", "denied", None),
        ("call", "write_file", "always-allowed", "ok"),
        ("call", "write_file", "allowed", "ok"),
        ("call", "write_file", "denied", None),
        ("call", "read_file", "allowed", "ok"),
    ]
    reasons = [e["reason"] for e in lines]
    assert reasons[1] == "user denied (write_file always asks)"
    assert reasons[3].startswith("always allowed this session")
    assert reasons[4] == "write_file always asks"  # plan mode's refusal of an always-ask tool


def test_a_client_that_cannot_show_requests_is_never_asked(
    start: Start, model: ModelServer, workspace: Path
) -> None:
    client = start(can_ask=False)
    write_turn(model)
    model.text("denied")
    assert client.call("agent/run", {"prompt": "write"})["text"] == "denied"
    assert not (workspace / "out.txt").exists()
    assert tool_results(model.wait_requests(2)[1])[0]["content"] == "User denied."
    (workspace / "build").mkdir()
    result = client.tool("bash", origin="agent", command="rm -rf build")
    assert result == {"content": "User denied.", "isError": True, "decision": "denied_by_rule"}
    assert (workspace / "build").is_dir()
    assert prompts_left(client) == []
    assert [e["reason"] for e in audit(workspace, 2)] == [
        "non-interactive (write_file always asks)",
        "non-interactive (dangerous command (recursive rm))",
    ]
    # A model failure is an error response naming it (here: no reply left in the script).
    error = client.response(client.request("agent/run", {"prompt": "again"}))["error"]
    assert error["code"] == -32603
    assert "ProviderError" in error["message"]
    assert "the test scripted no more replies" in error["message"]


def test_agent_run_reports_the_tokens_of_the_run_and_its_subagents(
    start: Start, model: ModelServer
) -> None:
    client = start()
    # Every scripted response reports 12 input and 7 output tokens (ModelServer).
    model.tool_use(("subagent", {"task": "count the files"}))

    def by_caller(body: dict[str, Any]) -> list[dict[str, Any]]:
        child = "general-purpose subagent" in body["system"]
        return [{"type": "text", "text": "child done" if child else "all counted"}]

    model.reply(by_caller)
    model.reply(by_caller)
    run = client.request("agent/run", {"prompt": "delegate"})
    answer(client, next_prompt(client), "Allow")  # subagent is not a safe tool
    result = client.response(run)["result"]
    assert result["text"] == "all counted"
    # One tool round (two parent responses) and the subagent's one response: 3 x (12 + 7).
    assert result["usage"] == {
        "inputTokens": 36,
        "outputTokens": 21,
        "cacheReadTokens": 0,
        "cacheWriteTokens": 0,
        "totalTokens": 57,
    }
    assert len(model.wait_requests(3)) == 3

    # agent/run with an agentType runs the subagent itself: its one response is the run's.
    model.text("explored")
    result = client.call("agent/run", {"prompt": "look around", "agentType": "explore"})
    assert result["usage"]["inputTokens"] == 12
    assert result["usage"]["totalTokens"] == 19


def test_progress_agent_types_and_cancel(start: Start, model: ModelServer) -> None:
    client = start()

    # A workDoneToken: begin, one report per tool call naming the tool, end.
    model.tool_use(("read_file", {"file_path": "src/main.py"}), ("glob", {"pattern": "*.py"}))
    model.text("read")
    result = client.call("agent/run", {"prompt": "read", "workDoneToken": "agent-1"})
    assert result["text"] == "read"
    values: list[dict[str, Any]] = []
    while not values or values[-1]["kind"] != "end":
        note = client.notification("$/progress")
        assert note["params"]["token"] == "agent-1"
        values.append(note["params"]["value"])
    assert values[0] == {"kind": "begin", "title": "agent", "cancellable": True}
    reports = [v["message"] for v in values if v["kind"] == "report"]
    assert [r.split(":")[0] for r in reports] == ["read_file", "glob"]
    assert values[-1] == {"kind": "end", "message": "done"}

    # agentType explore: the model is offered no write tools.
    model.text("explored")
    result = client.call("agent/run", {"prompt": "look around", "agentType": "explore"})
    assert result["text"] == "explored"
    explore = model.wait_requests(3)[2]
    assert not tool_names(explore) & {"write_file", "edit_file", "bash", "subagent"}
    assert {"read_file", "grep", "glob"} <= tool_names(explore)
    assert explore["messages"] == [{"role": "user", "content": "look around"}]

    # A background subagent is a job: the run returns at once, jobs/finished follows.
    # The child's and the parent's second requests race, so one reply serves both by prompt.
    def by_caller(body: dict[str, Any]) -> list[dict[str, Any]]:
        child = "general-purpose subagent" in body["system"]
        return [{"type": "text", "text": "child done" if child else "started it"}]

    model.tool_use(("subagent", {"task": "index the repo", "run_in_background": True}))
    model.reply(by_caller)
    model.reply(by_caller)
    run = client.request("agent/run", {"prompt": "delegate"})
    answer(client, next_prompt(client), "Allow")  # subagent is not a safe tool
    assert client.response(run)["result"]["text"] == "started it"
    finished = client.notification("jobs/finished")["params"]
    assert finished["jobId"].startswith("subagent-")
    assert (finished["status"], finished["result"]) == ("done", "child done")
    started = [r for r in model.wait_requests(6)[3:] if tool_results(r)]
    assert tool_results(started[0])[0]["content"] == (
        f"Subagent {finished['jobId']} started in the background."
    )

    # $/cancelRequest while the model is thinking: -32800, progress ends "cancelled".
    model.hold()  # the model does not answer until the test ends
    run = client.request("agent/run", {"prompt": "think hard", "workDoneToken": "t"})
    held = model.wait_requests(7)[6]
    # The finished background job reaches the next conversation as a notification.
    assert held["messages"][0]["content"][0]["text"] == (
        "<background-notifications>\n"
        f"- Task {finished['jobId']}: done - child done\n"
        "</background-notifications>"
    )
    client.notify("$/cancelRequest", {"id": run})
    assert client.response(run)["error"]["code"] == -32800
    end = client.next_message(
        lambda m: m.get("method") == "$/progress" and m["params"]["value"]["kind"] == "end"
    )
    assert end["params"] == {"token": "t", "value": {"kind": "end", "message": "cancelled"}}
    # The daemon goes on serving.
    assert client.tool("read_file", file_path="notes.txt")["content"] == "1: keep me"


def test_an_agent_tools_call_of_a_dangerous_command_asks(start: Start, workspace: Path) -> None:
    client = start()
    (workspace / "build").mkdir()
    (workspace / "scratch").mkdir()
    call = client.request(
        "tools/call",
        {"name": "bash", "arguments": {"command": "rm -rf build"}, "origin": "agent"},
    )
    prompt = next_prompt(client)
    assert "dangerous command (recursive rm)" in prompt["params"]["message"]
    answer(client, prompt, "Deny")
    assert client.response(call)["result"] == {
        "content": "User denied.",
        "isError": True,
        "decision": "denied_by_user",
    }
    assert (workspace / "build").is_dir()

    call = client.request(
        "tools/call",
        {"name": "bash", "arguments": {"command": "rm -rf scratch"}, "origin": "agent"},
    )
    answer(client, next_prompt(client), "Allow")
    assert client.response(call)["result"]["isError"] is False
    assert not (workspace / "scratch").exists()
    # Read-only commands from agents run without a prompt.
    assert client.tool("bash", origin="agent", command="ls")["isError"] is False
    assert prompts_left(client) == []


def test_user_calls_skip_the_prompt_but_obey_deny_rules(start: Start, workspace: Path) -> None:
    client = start(toml='[permissions]\ndeny = ["bash(prefix:rm*)"]\n')
    assert client.tool("bash", command="rm notes.txt") == {
        "content": "User denied.",
        "isError": True,
        "decision": "denied_by_rule",
        "rule": "bash(prefix:rm*)",
    }
    assert (workspace / "notes.txt").exists()
    assert client.tool("bash", command="touch made.txt")["isError"] is False
    assert client.tool("write_file", file_path="w.txt", content="x")["isError"] is False
    assert prompts_left(client) == []
    entries = audit(workspace, 3)
    assert [(e["event"], e["tool"], e["decision"]) for e in entries] == [
        ("call", "bash", "denied"),
        ("call", "bash", "allowed"),
        ("call", "write_file", "allowed"),
    ]
    assert entries[0]["reason"] == "deny rule bash(prefix:rm*)"
    assert all(e["origin"] == "user" for e in entries)
    assert entries[1]["exitCode"] == 0 and "durationMs" in entries[1]


def test_mode_and_rules_from_initialization_options(start: Start, workspace: Path) -> None:
    client = start(
        key=False,
        can_ask=False,
        config={"permissions": {"mode": "auto", "deny": ["bash(prefix:touch blocked*)"]}},
    )
    # auto mode: a shell command that is not dangerous runs without asking...
    assert client.tool("bash", origin="agent", command="touch made.txt")["isError"] is False
    assert (workspace / "made.txt").exists()
    # ...unless a deny rule covers it.
    denied = client.tool("bash", origin="agent", command="touch blocked.txt")
    assert denied == {
        "content": "User denied.",
        "isError": True,
        "decision": "denied_by_rule",
        "rule": "bash(prefix:touch blocked*)",
    }
    assert not (workspace / "blocked.txt").exists()
    assert client.call("permissions/setMode", {"mode": "plan"}) == {"mode": "plan"}
    result = client.tool("bash", origin="agent", command="touch again.txt")
    plan = {"content": "Plan mode: bash blocked (read-only)", "isError": True}
    assert result == {**plan, "decision": "denied_by_rule"}
    bad = client.response(client.request("permissions/setMode", {"mode": "yolo"}))
    assert bad["error"]["code"] == -32602
    assert "mode" in bad["error"]["message"]


def test_audit_redacts_secrets(start: Start, workspace: Path) -> None:
    client = start()
    client.tool("write_file", file_path="cfg.env", content="API_KEY=sk-ant-abcdefghijklmnop12")
    [call] = audit(workspace, 1)
    # The guard judges (and the audit records) the validated arguments, defaults filled in.
    assert call["arguments"]["file_path"] == "cfg.env"
    assert (call["arguments"]["append"], call["arguments"]["encoding"]) == (False, "utf-8")
    assert "[REDACTED]" in call["arguments"]["content"]
    assert "sk-ant" not in json.dumps(call)


def test_without_an_api_key(start: Start) -> None:
    client = start(key=False)
    reply = client.response(client.request("agent/run", {"prompt": "hello"}))
    assert "provider is not configured" in reply["error"]["message"]
    assert "no API key in $ANTHROPIC_API_KEY" in reply["error"]["message"]
    assert "[agent] api_key_env" in reply["error"]["message"]
    assert reply["error"]["data"] == {"apiKeyEnv": "ANTHROPIC_API_KEY"}
    assert client.tool("subagent", task="anything") == {
        "content": "Subagent unavailable: provider is not configured.",
        "isError": True,
    }
