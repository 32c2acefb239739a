"""Choosing the runner for a workspace from ``execution.tool_runner``."""

from __future__ import annotations

from pathlib import Path

from toold.config import TooldConfig
from toold.sandbox.runner import EventListener, LocalSandbox, Sandbox, ToolRunner


def make_sandbox(config: TooldConfig, workspace: Path) -> Sandbox:
    """The sandbox ``execution.tool_runner`` names; it starts its warm workers at once."""
    kind = config.execution.tool_runner
    if kind == "subprocess":
        from toold.sandbox.forkserver import SubprocessSandbox

        return SubprocessSandbox(workspace, config)
    if kind == "bwrap":
        from toold.sandbox.bwrap import BwrapSandbox

        return BwrapSandbox(workspace, config)
    if kind == "docker":
        from toold.sandbox.docker import DockerSandbox

        return DockerSandbox(workspace, config)
    return LocalSandbox()


def make_runner(
    config: TooldConfig, workspace: Path, on_event: EventListener | None = None
) -> ToolRunner:
    """The ToolRunner the configuration asks for (callable from any thread).

    A sandbox that cannot work here (bwrap or Docker missing) still gives a runner: its
    calls fail with a message naming the fix, and ``runner.problem`` says it at once.
    Nothing silently runs unsandboxed.
    """
    return ToolRunner(make_sandbox(config, workspace.resolve()), on_event)
