"""agent_loop against a real Messages API server on 127.0.0.1, through the real SDK."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.agents.conftest import API_KEY, ModelServer, tool_results
from toold.agents.loop import AgentContext, agent_loop, notifications_block
from toold.agents.provider import AnthropicProvider
from toold.gateway import ToolGateway
from toold.jobs.manager import BackgroundManager
from toold.jobs.records import Outcome
from toold.permissions.audit import AuditLog
from toold.permissions.guard import PermissionGuard
from toold.tools import formats
from toold.tools.decorator import tool
from toold.tools.toolset import ToolSet

# How long two concurrent calls wait for each other; sequential calls would time out.
RENDEZVOUS = 5.0


def run_loop(
    model: ModelServer,
    toolset: ToolSet,
    prompt: str = "hi",
    *,
    guard: PermissionGuard | None = None,
    setup: Callable[[], Awaitable[dict[str, Any]]] | None = None,
    **options: Any,
) -> str:
    """Run agent_loop with a real provider pointed at ``model``."""

    async def main() -> str:
        provider = AnthropicProvider(API_KEY, base_url=model.url)
        extra = await setup() if setup is not None else {}
        try:
            ctx = AgentContext(
                provider=provider,
                gateway=ToolGateway(toolset, guard or PermissionGuard(mode="bypass")),
                system="SYSTEM",
                **options,
                **extra,
            )
            return await agent_loop(ctx, [{"role": "user", "content": prompt}])
        finally:
            await provider.close()

    return asyncio.run(main())


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def boom() -> str:
    """Always fails."""
    raise ValueError("boom")


def test_schemas_tool_use_and_one_message_of_tool_results(model: ModelServer) -> None:
    tools = ToolSet([add, boom])
    model.tool_use(("add", {"a": 1, "b": 2}), ("boom", {}), text="Let me compute.")
    model.text("The sum is 3.")

    assert run_loop(model, tools, "add 1 and 2") == "The sum is 3."

    first, second = model.wait_requests(2)
    assert first["system"] == "SYSTEM"
    assert first["tools"] == [formats.anthropic(add), formats.anthropic(boom)]
    assert all(set(t) == {"name", "description", "input_schema"} for t in first["tools"])
    assert first["tools"][0]["input_schema"]["required"] == ["a", "b"]
    assert first["messages"] == [{"role": "user", "content": "add 1 and 2"}]
    assistant, results = second["messages"][1], second["messages"][2]
    assert assistant["role"] == "assistant"
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use", "tool_use"]
    ids = [b["id"] for b in assistant["content"][1:]]
    # One user message; is_error only where true; the spec's error text for a failed handler.
    assert results == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": ids[0], "content": "3"},
            {
                "type": "tool_result",
                "tool_use_id": ids[1],
                "content": "Error: ValueError: boom",
                "is_error": True,
            },
        ],
    }
    assert len(second["messages"]) == 3


def test_the_sdk_sends_the_key_and_version_headers(model: ModelServer) -> None:
    model.text("ok")
    run_loop(model, ToolSet([add]))
    headers = {k.lower(): v for k, v in model.headers[0].items()}
    assert API_KEY in (headers.get("x-api-key"), headers.get("authorization", "")[7:])
    assert "anthropic-version" in headers


def test_unknown_tool(model: ModelServer) -> None:
    model.tool_use(("nope", {"x": 1}))
    model.text("sorry")
    assert run_loop(model, ToolSet([add])) == "sorry"
    [result] = tool_results(model.wait_requests(2)[1])
    assert result["content"] == "Unknown tool: nope"
    assert result["is_error"] is True


def test_invalid_arguments_are_an_error_result_the_model_can_fix(model: ModelServer) -> None:
    model.tool_use(("add", {"a": "one", "b": 2}))
    model.text("fixed")
    run_loop(model, ToolSet([add]))
    [result] = tool_results(model.wait_requests(2)[1])
    assert result["is_error"] is True
    assert "invalid arguments for add" in result["content"]


def test_parallel_safe_calls_of_one_turn_run_concurrently(model: ModelServer) -> None:
    barrier: asyncio.Barrier | None = None

    async def meet(name: str) -> str:
        assert barrier is not None
        # Both calls must be inside the barrier at once; run one after the other, they time out.
        await asyncio.wait_for(barrier.wait(), RENDEZVOUS)
        return f"{name} met"

    @tool(parallel_safe=True)
    async def left() -> str:
        """Waits for right."""
        return await meet("left")

    @tool(parallel_safe=True)
    async def right() -> str:
        """Waits for left."""
        return await meet("right")

    async def setup() -> dict[str, Any]:
        nonlocal barrier
        barrier = asyncio.Barrier(2)
        return {}

    model.tool_use(("left", {}), ("right", {}))
    model.text("done")
    run_loop(model, ToolSet([left, right]), setup=setup)
    results = tool_results(model.wait_requests(2)[1])
    assert [r["content"] for r in results] == ["left met", "right met"]
    assert not any(r.get("is_error") for r in results)


def test_other_calls_run_one_at_a_time_in_order(model: ModelServer) -> None:
    events: list[str] = []

    def recorder(name: str) -> Any:
        @tool(name=name, description=f"Records {name}.", parallel_safe=False)
        async def step() -> str:
            events.append(f"{name}:start")
            for _ in range(3):
                await asyncio.sleep(0)  # yield to anything that could interleave
            events.append(f"{name}:end")
            return name

        return step

    @tool(parallel_safe=True)
    async def quick(label: str) -> str:
        """Parallel-safe."""
        events.append(f"quick-{label}")
        return label

    tools = ToolSet([recorder("first"), recorder("second"), quick])
    model.tool_use(
        ("quick", {"label": "a"}), ("first", {}), ("second", {}), ("quick", {"label": "b"})
    )
    model.text("done")
    run_loop(model, tools)
    assert events == [
        "quick-a",
        "first:start",
        "first:end",
        "second:start",
        "second:end",
        "quick-b",
    ]
    results = tool_results(model.wait_requests(2)[1])
    assert [r["content"] for r in results] == ["a", "first", "second", "b"]


def test_structured_results_are_json_and_content_blocks_pass_through(model: ModelServer) -> None:
    @tool
    def listing() -> list[str]:
        """A list of paths."""
        return ["a.py", "b.py"]

    @tool
    def blocks() -> list[dict[str, str]]:
        """Content blocks."""
        return [{"type": "text", "text": "block"}]

    model.tool_use(("listing", {}), ("blocks", {}))
    model.text("ok")
    run_loop(model, ToolSet([listing, blocks]))
    results = tool_results(model.wait_requests(2)[1])
    assert json.loads(results[0]["content"]) == ["a.py", "b.py"]
    assert results[1]["content"] == [{"type": "text", "text": "block"}]


def test_background_notifications_are_drained_before_each_model_call(
    model: ModelServer, tmp_path: Path
) -> None:
    async def execute(command: str, timeout: int, on_output: Callable[[str], None]) -> Outcome:
        if command == "fail":
            return Outcome(text="Command failed with exit code 2", exit_code=2)
        return Outcome(text="x" * 600, exit_code=0)

    async def setup() -> dict[str, Any]:
        finished = asyncio.Event()
        seen: list[str] = []

        def on_finished(job: dict[str, Any]) -> None:
            seen.append(job["job_id"])
            if len(seen) == 2:
                finished.set()

        jobs = BackgroundManager(tmp_path / "jobs", execute, on_finished=on_finished)
        await jobs.submit("long output", task_id="job1")
        await jobs.submit("fail", task_id="job2")
        await asyncio.wait_for(finished.wait(), 10)
        return {"drain": jobs.drain_notifications}

    model.tool_use(("add", {"a": 1, "b": 1}))
    model.text("done")
    run_loop(model, ToolSet([add]), "go", setup=setup)
    first, second = model.wait_requests(2)
    notice = first["messages"][0]["content"][0]
    assert notice["type"] == "text"
    lines = notice["text"].splitlines()
    assert lines[0] == "<background-notifications>"
    assert lines[-1] == "</background-notifications>"
    assert sorted(lines[1:-1]) == [
        f"- Task job1: done - {'x' * 500}",
        "- Task job2: failed - Command failed with exit code 2",
    ]
    # The prompt itself follows the notice in the same user message.
    assert first["messages"][0]["content"][1] == {"type": "text", "text": "go"}
    # Drained once: the next call carries no second copy.
    assert "<background-notifications>" not in json.dumps(second["messages"][2])


def test_notifications_follow_the_tool_results_they_arrive_with(model: ModelServer) -> None:
    queue: list[list[dict[str, Any]]] = [
        [],
        [{"task_id": "t9", "status": "done", "result": "finished"}],
    ]
    model.tool_use(("add", {"a": 2, "b": 2}))
    model.text("done")
    run_loop(model, ToolSet([add]), drain=lambda: queue.pop(0) if queue else [])
    first, second = model.wait_requests(2)
    assert first["messages"] == [{"role": "user", "content": "hi"}]
    content = second["messages"][-1]["content"]
    assert content[0]["type"] == "tool_result"
    assert content[1] == {
        "type": "text",
        "text": "<background-notifications>\n- Task t9: done - finished\n"
        "</background-notifications>",
    }


def test_notifications_block_text() -> None:
    text = notifications_block(
        [
            {"task_id": "a1", "status": "done", "result": "r" * 501},
            {"task_id": "b2", "status": "failed", "error": "bad"},
        ]
    )
    assert text == (
        "<background-notifications>\n"
        f"- Task a1: done - {'r' * 500}\n"
        "- Task b2: failed - bad\n"
        "</background-notifications>"
    )


def test_max_iterations(model: ModelServer) -> None:
    for _ in range(3):
        model.tool_use(("add", {"a": 1, "b": 1}))
    with pytest.raises(RuntimeError, match=r"^Agent loop exceeded 2 iterations$"):
        run_loop(model, ToolSet([add]), max_iterations=2)
    assert len(model.requests) == 2


def test_every_call_passes_the_guard(model: ModelServer, tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.jsonl")
    asked: list[str] = []

    async def ask(name: str, args: Any, reason: str) -> Any:
        asked.append(name)
        return "deny"

    guard = PermissionGuard(mode="default", ask=ask, audit=audit)
    model.tool_use(("add", {"a": 1, "b": 2}))
    model.text("ok")
    run_loop(model, ToolSet([add]), guard=guard)
    [result] = tool_results(model.wait_requests(2)[1])
    assert result == {
        "type": "tool_result",
        "tool_use_id": result["tool_use_id"],
        "content": "User denied.",
        "is_error": True,
    }
    assert asked == ["add"]
    [entry] = [json.loads(line) for line in audit.path.read_text().splitlines()]
    assert entry["tool"] == "add"
    assert entry["decision"] == "denied"
    assert entry["origin"] == "agent"


def test_plan_mode_in_the_loop(model: ModelServer) -> None:
    model.tool_use(("add", {"a": 1, "b": 2}))
    model.text("ok")
    run_loop(model, ToolSet([add]), guard=PermissionGuard(mode="plan"))
    [result] = tool_results(model.wait_requests(2)[1])
    assert result["content"] == "Plan mode: add blocked (read-only)"
    assert result["is_error"] is True


def test_a_provider_error_names_the_problem(model: ModelServer) -> None:
    from toold.agents.provider import ProviderError

    with pytest.raises(ProviderError, match="scripted no more replies"):
        run_loop(model, ToolSet([add]))
