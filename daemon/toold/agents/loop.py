"""agent_loop: the conversation with the model and the tool calls it asks for.

Before each model call, finished background jobs are drained into the history;
each tool call goes through the workspace's gateway (guard, then the tool); parallel-safe
calls of one turn run concurrently, the others in order; the results go back as
one user message of tool_result blocks.

A front end that shows a turn as it happens (``toold acp``) gives the loop LoopEvents:
the model's text as it streams, and each tool call's start, progress and outcome.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from toold.agents.usage import UsageMeter, current_meter
from toold.gateway import ToolGateway
from toold.outcome import ToolOutcome
from toold.tools import formats
from toold.tools.context import CallContext
from toold.tools.toolset import UnknownToolError

NOTIFICATION_CHARS = 500

current_tool_use: ContextVar[str | None] = ContextVar("toold_tool_use", default=None)
"""The id of the model's tool_use block being run (a guard's asker links its question to it)."""


class TurnLimitReached(RuntimeError):
    """The loop made ``max_iterations`` model calls without a final answer."""


class LoopEvents:
    """What a front end may watch of a loop; every hook is a no-op here.

    Hooks are synchronous and may be called from worker threads (``tool_progress``):
    a front end queues what it sends.
    """

    def text(self, chunk: str) -> None:
        """A piece of the model's text, as the model streams it."""

    def tool_started(self, call_id: str, name: str, args: Any) -> None:
        """The model asked for a call; the guard has not judged it yet."""

    def tool_progress(self, call_id: str, text: str) -> None:
        """Output the running call reported (a command's lines)."""

    def tool_finished(self, call_id: str, name: str, args: Any, outcome: ToolOutcome) -> None:
        """The call's outcome (a refusal and an unknown tool are error outcomes)."""

    def subagent(self, call_id: str, agent_type: str, task: str) -> LoopEvents | None:
        """A subagent the call ``call_id`` starts: the events its loop reports to (None:
        it is not shown on its own)."""
        return None

    def ended(self, error: str | None) -> None:
        """This loop (a subagent's) ended: None when it answered, else what stopped it
        (the text its open calls end with)."""


current_events: ContextVar[LoopEvents | None] = ContextVar("toold_loop_events", default=None)
"""The events of the loop whose tool call runs (a subagent it starts reports under them)."""


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
    events: LoopEvents | None = None
    """Streams text and reports each call (toold acp); None: only the final text matters."""
    schemas: list[dict[str, Any]] = field(default_factory=list)
    meter: UsageMeter | None = None
    """Counts each response's tokens (toold acp's usage_update); its subagents' meters
    are its children."""

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
    name, args, call_id = call["name"], call.get("input") or {}, call["id"]
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
    if ctx.on_tool is not None:
        ctx.on_tool(name, args)
    events = ctx.events
    progress = None
    if events is not None:
        events.tool_started(call_id, name, args)

        def progress(text: str) -> None:
            events.tool_progress(call_id, text)

    token, watched = current_tool_use.set(call_id), current_events.set(events)
    try:
        outcome = await ctx.gateway.call(name, args, CallContext(origin="agent", progress=progress))
    except UnknownToolError as exc:
        outcome = ToolOutcome(str(exc), is_error=True, decision="refused", reason=str(exc))
    finally:
        current_tool_use.reset(token)
        current_events.reset(watched)
    if events is not None:
        events.tool_finished(call_id, name, args, outcome)
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
    token = current_meter.set(ctx.meter)  # what a subagent call counts under
    try:
        return await _loop(ctx, messages)
    finally:
        current_meter.reset(token)


async def _loop(ctx: AgentContext, messages: list[dict[str, Any]]) -> str:
    for _ in range(ctx.max_iterations):
        if ctx.drain is not None:
            _inject(messages, ctx.drain())
        blocks = await _model_turn(ctx, messages)
        messages.append({"role": "assistant", "content": blocks})
        calls = [b for b in blocks if b.get("type") == "tool_use"]
        if not calls:
            return "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        messages.append({"role": "user", "content": await run_tool_calls(ctx, calls)})
    raise TurnLimitReached(f"Agent loop exceeded {ctx.max_iterations} iterations")


async def _model_turn(ctx: AgentContext, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One model call; streamed to ``ctx.events`` when a front end watches."""
    request: dict[str, Any] = {"system": ctx.system, "messages": messages, "tools": ctx.schemas}
    if ctx.events is not None:
        request["on_text"] = ctx.events.text
    if ctx.meter is not None:
        request["on_usage"] = ctx.meter.record
    blocks: list[dict[str, Any]] = await ctx.provider.create(**request)
    return blocks
