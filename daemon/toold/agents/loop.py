"""agent_loop: the conversation with the model and the tool calls it asks for.

Before each model call, finished background jobs are drained into the history;
each tool call goes through the workspace's gateway (guard, then the tool); parallel-safe
calls of one turn run concurrently, the others in order; the results go back as
one user message of tool_result blocks.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toold.gateway import ToolGateway
from toold.tools import formats
from toold.tools.context import CallContext
from toold.tools.toolset import UnknownToolError

NOTIFICATION_CHARS = 500


@dataclass
class AgentContext:
    """What one loop needs."""

    provider: Any
    gateway: ToolGateway
    """The tools this agent may call, its guard and the runner: every call goes through it."""
    system: str
    max_iterations: int = 50
    drain: Callable[[], list[dict[str, Any]]] | None = None
    on_tool: Callable[[str, Any], None] | None = None
    schemas: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.schemas:
            self.schemas = [formats.anthropic(t) for t in self.gateway.toolset]


def notifications_block(notes: list[dict[str, Any]]) -> str:
    """BareAgent's ``<background-notifications>`` text."""
    lines = []
    for note in notes:
        body = note.get("result") if note.get("status") == "done" else note.get("error")
        lines.append(
            f"- Task {note['task_id']}: {note['status']} - {str(body or '')[:NOTIFICATION_CHARS]}"
        )
    return "<background-notifications>\n" + "\n".join(lines) + "\n</background-notifications>"


def _inject(messages: list[dict[str, Any]], notes: list[dict[str, Any]]) -> None:
    if not notes:
        return
    block = {"type": "text", "text": notifications_block(notes)}
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "user":
        content = last["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        # Tool results must lead a user turn; the notice follows them.
        last["content"] = [*content, block] if _has_tool_results(content) else [block, *content]
    else:
        messages.append({"role": "user", "content": [block]})


def _has_tool_results(content: list[dict[str, Any]]) -> bool:
    return any(b.get("type") == "tool_result" for b in content)


def result_content(content: Any) -> Any:
    """Strings stay; lists of content blocks pass through; anything else becomes JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(b, dict) and "type" in b for b in content):
        return content
    return json.dumps(content, ensure_ascii=False, default=str)


async def _run_call(ctx: AgentContext, call: dict[str, Any]) -> dict[str, Any]:
    name, args = call["name"], call.get("input") or {}
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call["id"]}
    if ctx.on_tool is not None:
        ctx.on_tool(name, args)
    try:
        outcome = await ctx.gateway.call(name, args, CallContext(origin="agent"))
    except UnknownToolError as exc:
        return {**result, "content": str(exc), "is_error": True}
    result["content"] = result_content(outcome.content)
    if outcome.is_error:
        result["is_error"] = True
    return result


async def run_tool_calls(ctx: AgentContext, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run one turn's calls: consecutive parallel-safe ones together, the rest alone, in order."""
    results: list[dict[str, Any]] = []
    batch: list[dict[str, Any]] = []

    async def flush() -> None:
        results.extend(await asyncio.gather(*(_run_call(ctx, c) for c in batch)))
        batch.clear()

    for call in calls:
        tool = ctx.gateway.toolset.get(call["name"])
        if tool is not None and tool.parallel_safe:
            batch.append(call)
            continue
        await flush()
        results.append(await _run_call(ctx, call))
    await flush()
    return results


async def agent_loop(ctx: AgentContext, messages: list[dict[str, Any]]) -> str:
    """Talk to the model until it answers without tool calls; returns its final text."""
    for _ in range(ctx.max_iterations):
        if ctx.drain is not None:
            _inject(messages, ctx.drain())
        blocks = await ctx.provider.create(system=ctx.system, messages=messages, tools=ctx.schemas)
        messages.append({"role": "assistant", "content": blocks})
        calls = [b for b in blocks if b.get("type") == "tool_use"]
        if not calls:
            return "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        messages.append({"role": "user", "content": await run_tool_calls(ctx, calls)})
    raise RuntimeError(f"Agent loop exceeded {ctx.max_iterations} iterations")
