"""AgentSystem: runs the main agent and its subagents on one provider and one tool gateway."""

from __future__ import annotations

import asyncio
import logging
import secrets
import string
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from toold.agents.loop import AgentContext, agent_loop, current_events, current_tool_use
from toold.agents.usage import UsageMeter, current_meter
from toold.gateway import ToolGateway
from toold.permissions.guard import PermissionGuard
from toold.tools.context import failed
from toold.tools.toolset import ToolSet

log = logging.getLogger(__name__)

DEFAULT_TYPE = "general-purpose"


@dataclass(frozen=True)
class AgentType:
    """A kind of subagent: its prompt, tools and limits."""

    prompt: str
    read_only: bool
    max_turns: int


AGENT_TYPES: dict[str, AgentType] = {
    "general-purpose": AgentType(
        "You are a general-purpose subagent. Complete the task and report the result.", False, 200
    ),
    "explore": AgentType(
        "You are an explore subagent. Read and search the workspace; change nothing. "
        "Report what you found, with paths.",
        True,
        50,
    ),
    "plan": AgentType(
        "You are a planning subagent. Read what you need and return a step-by-step plan; "
        "change nothing.",
        True,
        50,
    ),
    "code-review": AgentType(
        "You are a code-review subagent. Review the code named in the task; report bugs, "
        "risks and fixes by severity with path:line; change nothing.",
        True,
        50,
    ),
}

agent_depth: ContextVar[int] = ContextVar("toold_agent_depth", default=0)
current_guard: ContextVar[PermissionGuard | None] = ContextVar("toold_agent_guard", default=None)


class AgentSystem:
    """The agents of one workspace."""

    def __init__(
        self,
        provider: Any,
        gateway: ToolGateway,
        *,
        system_prompt: str,
        max_depth: int = 3,
        max_iterations: int = 50,
        drain: Callable[[], list[dict[str, Any]]] | None = None,
        background: Any = None,
    ) -> None:
        self.provider = provider
        self.gateway = gateway
        self.system_prompt = system_prompt
        self.max_depth = max_depth
        self.max_iterations = max_iterations
        self.drain = drain
        self.background = background

    @property
    def toolset(self) -> ToolSet:
        """Every tool the main agent sees."""
        return self.gateway.toolset

    @property
    def guard(self) -> PermissionGuard:
        """The workspace's guard; subagents and teammates get children of it."""
        return self.gateway.guard

    def toolset_for(self, agent_type: str) -> ToolSet:
        """The tools a subagent of this type may see."""
        kind = AGENT_TYPES[agent_type]
        if kind.read_only:
            # Read-only types run in plan mode, where only tools that never ask run.
            return ToolSet(
                t for t in self.toolset if t.annotations.read_only and t.annotations.safe
            )
        return ToolSet(t for t in self.toolset if t.annotations.agents == "all")

    def toolset_for_teammate(self) -> ToolSet:
        """A teammate's tools: a general-purpose subagent's, plus the team's (team_send)."""
        return ToolSet(t for t in self.toolset if t.annotations.agents in ("all", "team"))

    async def run(
        self,
        prompt: str,
        *,
        on_tool: Callable[[str, Any], None] | None = None,
        gateway: ToolGateway | None = None,
        meter: UsageMeter | None = None,
    ) -> str:
        """The main agent (agent/run): every tool, the workspace's guard (or ``gateway``'s:
        a session's own mode, toold.modes), job notifications; ``meter`` counts its
        tokens."""
        gateway = gateway or self.gateway
        ctx = AgentContext(
            provider=self.provider,
            gateway=gateway,
            system=self.system_prompt,
            max_iterations=self.max_iterations,
            drain=self.drain,
            on_tool=on_tool,
            meter=meter,
        )
        token_depth, token_guard = agent_depth.set(0), current_guard.set(gateway.guard)
        try:
            return await agent_loop(ctx, [{"role": "user", "content": prompt}])
        finally:
            agent_depth.reset(token_depth)
            current_guard.reset(token_guard)

    def child_guard(
        self, parent: PermissionGuard, agent_type: str, background: bool
    ) -> PermissionGuard:
        """Read-only types: plan mode, fail-closed; background children: fail-closed."""
        if AGENT_TYPES[agent_type].read_only:
            return parent.child(mode="plan", fail_closed=True)
        return parent.child(fail_closed=True if background else None)

    async def run_subagent(
        self,
        task: str,
        agent_type: str | None = None,
        run_in_background: bool = False,
        *,
        on_tool: Callable[[str, Any], None] | None = None,
        gateway: ToolGateway | None = None,
        meter: UsageMeter | None = None,
    ) -> str:
        """The subagent tool: a fresh conversation with a filtered tool set (``gateway``:
        agent/run's, whose guard is the parent when no agent runs yet; ``meter``:
        agent/run's, else the calling loop's meter's child counts its tokens)."""
        kind_name = agent_type or DEFAULT_TYPE
        if kind_name not in AGENT_TYPES:
            log.warning("unknown agent_type %r; using %s", agent_type, DEFAULT_TYPE)
            kind_name = DEFAULT_TYPE
        kind = AGENT_TYPES[kind_name]
        depth = agent_depth.get() + 1
        if depth > self.max_depth:
            return failed(
                f"Subagent refused: recursion depth {depth} exceeds limit {self.max_depth}."
            )
        parent = current_guard.get() or (gateway or self.gateway).guard
        guard = self.child_guard(parent, kind_name, run_in_background)
        if meter is None:
            counting = current_meter.get()  # the caller's: a subagent's tokens are its bill
            meter = counting.child() if counting is not None else None
        ctx = AgentContext(
            provider=self.provider,
            gateway=self.gateway.narrowed(toolset=self.toolset_for(kind_name), guard=guard),
            system=f"{self.system_prompt}\n\n{kind.prompt}",
            max_iterations=kind.max_turns,
            on_tool=on_tool,
            meter=meter,
        )
        caller, call_id = current_events.get(), current_tool_use.get()
        if caller is not None and call_id is not None and not run_in_background:
            # A front end that shows it on its own (toold acp: a child session).
            ctx.events = caller.subagent(call_id, kind_name, task)

        async def work() -> str:
            token_depth, token_guard = agent_depth.set(depth), current_guard.set(guard)
            try:
                answer = await agent_loop(ctx, [{"role": "user", "content": task}])
            except asyncio.CancelledError:
                if ctx.events is not None:
                    ctx.events.ended("Cancelled by the user.")
                raise
            except BaseException as exc:
                if ctx.events is not None:
                    ctx.events.ended(f"The subagent failed: {type(exc).__name__}: {exc}")
                raise
            finally:
                agent_depth.reset(token_depth)
                current_guard.reset(token_guard)
            if ctx.events is not None:
                ctx.events.ended(None)
            return answer

        if not run_in_background:
            return await work()
        if self.background is None:
            return failed("Background manager unavailable.")
        alphabet = string.ascii_letters + string.digits
        job_id = "subagent-" + "".join(secrets.choice(alphabet) for _ in range(8))
        await self.background.start_work(job_id, f"subagent ({kind_name}): {task[:80]}", work)
        return f"Subagent {job_id} started in the background."
