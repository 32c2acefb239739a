"""The gateway around file-changing calls: checkpoints recorded for every front end, and
the user's hooks (real bash hook scripts) before and after each call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.bound import call, run_bound
from toold.tools.toolset import ToolOutcome
from toold.workspace import WorkspaceState


def test_every_file_change_is_a_checkpoint(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\n")

    async def scenario(state: WorkspaceState) -> list[ToolOutcome]:
        return [
            await call(state, "write_file", file_path="new.txt", content="hi\n"),
            await call(state, "read_file", file_path="a.txt"),  # an agent edits what it read
            await call(state, "edit_file", file_path="a.txt", old_text="one", new_text="two"),
            await call(state, "str_replace", path="a.txt", old="two", new="three"),
            await call(state, "read_file", file_path="a.txt"),
            await call(state, "edit_file", file_path="a.txt", old_text="absent", new_text="x"),
        ]

    outcomes = run_bound(workspace, scenario)
    assert [o.is_error for o in outcomes] == [False, False, False, False, False, True]
    store = workspace / ".toold" / "checkpoints" / "index.jsonl"
    index = [json.loads(line) for line in store.read_text().splitlines()]
    assert [(c["tool"], c["origin"], [f["path"] for f in c["files"]]) for c in index] == [
        ("write_file", "agent", ["new.txt"]),
        ("edit_file", "agent", ["a.txt"]),
        ("str_replace", "agent", ["a.txt"]),
    ]


def test_restoring_the_first_checkpoint_undoes_them_all(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\n")

    async def scenario(state: WorkspaceState) -> None:
        await call(state, "read_file", file_path="a.txt")
        await call(state, "edit_file", file_path="a.txt", old_text="one", new_text="two")
        await call(state, "write_file", file_path="b.txt", content="b")
        store = state.gateway.checkpoints
        assert store is not None
        first = store.entries()[0].id
        assert "+two" in store.diff(first)
        store.restore(first, "user")

    run_bound(workspace, scenario)
    assert (workspace / "a.txt").read_text() == "one\n"
    assert not (workspace / "b.txt").exists()


def test_checkpoints_can_be_turned_off(workspace: Path) -> None:
    async def scenario(state: WorkspaceState) -> None:
        await call(state, "write_file", file_path="x.txt", content="x")

    run_bound(workspace, scenario, checkpoints={"enabled": False})
    assert (workspace / "x.txt").read_text() == "x"
    assert not (workspace / ".toold" / "checkpoints" / "index.jsonl").exists()


def hooks(*pre: tuple[str, str]) -> dict[str, Any]:
    return {"pre_tool_use": [{"matcher": m, "command": c} for m, c in pre]}


def steer(decision: str) -> str:
    return f'echo \'{{"decision": "{decision}", "reason": "policy"}}\''


def asking(state: WorkspaceState) -> list[str]:
    """Answer every prompt Deny, and keep what was asked."""
    asked: list[str] = []

    async def ask(tool: str, args: Any, reason: str) -> str:
        asked.append(reason)
        return "deny"

    state.guard.ask = ask
    return asked


def test_a_hook_deny_refuses_even_in_bypass_and_for_the_user(workspace: Path) -> None:
    async def scenario(state: WorkspaceState) -> list[ToolOutcome]:
        return [
            await call(state, "write_file", file_path="x.txt", content="x"),
            await call(state, "write_file", "user", file_path="x.txt", content="x"),
            await call(state, "read_file", file_path="a"),
        ]

    (workspace / "a").write_text("a")
    agent, user, other = run_bound(workspace, scenario, hooks=hooks(("write_file", steer("deny"))))
    assert (agent.content, agent.is_error) == ("Denied by hook: policy", True)
    assert (user.content, user.is_error) == ("Denied by hook: policy", True)
    assert not other.is_error
    assert not (workspace / "x.txt").exists()


def test_a_hook_ask_asks_where_the_rules_allow(workspace: Path) -> None:
    async def scenario(state: WorkspaceState) -> tuple[list[str], ToolOutcome, ToolOutcome]:
        asked = asking(state)
        denied = await call(state, "read_file", file_path="a")
        user = await call(state, "read_file", "user", file_path="a")
        return asked, denied, user

    (workspace / "a").write_text("a")
    asked, denied, user = run_bound(
        workspace, scenario, permissions={"mode": "default"}, hooks=hooks(("", steer("ask")))
    )
    assert asked == ["a pre_tool_use hook asks: policy"]
    assert denied.is_error and not user.is_error


def test_a_hook_allow_runs_what_would_ask_but_never_past_a_deny_rule(workspace: Path) -> None:
    async def scenario(state: WorkspaceState) -> tuple[list[str], list[ToolOutcome]]:
        asked = asking(state)
        return asked, [
            await call(state, "bash", command="touch allowed"),
            await call(state, "bash", command="touch denied"),
            await call(state, "bash", command="rm -rf /"),
        ]

    asked, (allowed, denied, dangerous) = run_bound(
        workspace,
        scenario,
        permissions={"mode": "default", "deny": ["bash(prefix:touch denied*)"]},
        hooks=hooks(("bash", steer("allow"))),
    )
    assert not allowed.is_error and (workspace / "allowed").exists()
    assert denied.is_error and not (workspace / "denied").exists()
    assert dangerous.is_error
    assert len(asked) == 2 and asked[0].startswith("deny rule")
    assert asked[1].startswith("dangerous command")


def test_a_post_hook_speaks_after_the_result(workspace: Path) -> None:
    async def scenario(state: WorkspaceState) -> ToolOutcome:
        return await call(state, "todo_read")

    outcome = run_bound(
        workspace,
        scenario,
        hooks={"post_tool_use": [{"command": "echo 'remember the tests'"}]},
    )
    assert isinstance(outcome.content, str)
    assert outcome.content.endswith("\n\nremember the tests")
