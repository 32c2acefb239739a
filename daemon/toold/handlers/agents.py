"""permissions/setMode and agent/run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toold.agents.usage import UsageMeter
from toold.errors import AgentUnavailable, InsideToolCall
from toold_protocol.models import (
    AgentRunParams,
    AgentRunResult,
    SetModeParams,
    SetModeResult,
    Teammate,
    TeamRegisterParams,
    TokenUsage,
)

if TYPE_CHECKING:
    from toold.rpc import Context


async def permissions_set_mode(ctx: Context, params: SetModeParams) -> SetModeResult:
    """Switch this session's mode (not from inside a tool call); other sessions on the
    workspace keep theirs (toold.modes)."""
    if ctx.from_tool:
        raise InsideToolCall(
            "permissions/setMode from inside a tool call (an agent's command) is refused: "
            "change the mode from your editor"
        )
    ctx.modes.set(params.mode)
    return SetModeResult(mode=params.mode)


async def agent_run(ctx: Context, params: AgentRunParams) -> AgentRunResult:
    """Run the agent on a prompt; with a token each tool call is a $/progress report."""
    agents = ctx.workspace.agents
    if agents is None:
        raise AgentUnavailable(ctx.workspace.config.agent.api_key_env)
    with ctx.editor.work_done(params.work_done_token, "agent") as progress:
        on_tool = None
        if progress.reporting:

            def on_tool(name: str, args: Any) -> None:
                progress.report(f"{name}: {str(args)[:120]}")

        gateway = ctx.gateway  # the agent runs under the session's mode
        meter = UsageMeter()
        if params.agent_type:
            text = await agents.run_subagent(
                params.prompt, params.agent_type, on_tool=on_tool, gateway=gateway, meter=meter
            )
        else:
            text = await agents.run(params.prompt, on_tool=on_tool, gateway=gateway, meter=meter)
    used = meter.total
    usage = TokenUsage(
        input_tokens=used.input_tokens,
        output_tokens=used.output_tokens,
        cache_read_tokens=used.cache_read_tokens,
        cache_write_tokens=used.cache_write_tokens,
        total_tokens=used.total,
    )
    return AgentRunResult(text=text, usage=usage)


async def team_register(ctx: Context, params: TeamRegisterParams) -> Teammate:
    """Register a teammate (not from inside a tool call: its system prompt is the user's)."""
    import asyncio

    if ctx.from_tool:
        raise InsideToolCall(
            "team/register from inside a tool call (an agent's command) is refused: a "
            "teammate's role and system prompt are the user's to set, from your editor"
        )
    team = ctx.workspace.team
    assert team is not None, "bind() always creates the team manager"
    entry = await asyncio.to_thread(
        team.register, params.name, params.role, params.system_prompt, params.model
    )
    return Teammate.model_validate({**entry, "running": team.is_running(params.name)})
