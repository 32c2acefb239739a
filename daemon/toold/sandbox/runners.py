"""Choosing the runner for a workspace from ``execution.tool_runner``."""

from __future__ import annotations

from pathlib import Path

from toold.config import TooldConfig
from toold.sandbox.runner import EventListener, LocalSandbox, ToolRunner


def make_runner(
    config: TooldConfig, workspace: Path, on_event: EventListener | None = None
) -> ToolRunner:
    """The ToolRunner the configuration asks for."""
    kind = config.execution.tool_runner
    if kind == "local":
        return ToolRunner(LocalSandbox(), on_event)
    raise NotImplementedError(f"execution.tool_runner = {kind!r} is not available yet")
