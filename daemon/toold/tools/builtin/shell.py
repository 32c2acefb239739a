"""bash: run a shell command in the workspace."""

from __future__ import annotations

import sys
from typing import Annotated, Any, Self

from pydantic import AfterValidator, Field, ModelWrapValidatorHandler, model_validator

from toold.sandbox.process import Clipped, join_clipped, run_command
from toold.tools.annotations import SHELL
from toold.tools.base import ToolArguments
from toold.tools.builtin._alternatives import validate_with_alternatives
from toold.tools.builtin._spill import Spill
from toold.tools.builtin._workspace import WorkspaceTool
from toold.tools.context import report_progress, set_exit_code


def _non_blank(command: str) -> str:
    if not command.strip():
        raise ValueError("the command is empty; pass the shell command to run")
    return command


ShellCommand = Annotated[str, AfterValidator(_non_blank)]
"""A shell command line; empty or whitespace-only is invalid (nothing a rule could name)."""


class BashArguments(ToolArguments):
    command: ShellCommand = Field(description="The shell command to run.")
    timeout: int = Field(30, ge=1, description="Seconds before the command is killed.")
    idle_timeout: float | None = Field(
        None,
        gt=0,
        description=(
            "Seconds without output before the command is killed (output restarts the "
            "count; timeout stays the hard cap). Default: limits.idle_timeout."
        ),
    )

    @model_validator(mode="wrap")
    @classmethod
    def _jianmu_command(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        # Jianmu's BashTool reads command, then input, then cmd.
        return validate_with_alternatives(data, handler, "command", ("input", "cmd"))


def format_command_result(
    stdout: str | Clipped,
    stderr: str | Clipped,
    returncode: int | None,
    timed_out: bool,
    timeout: float,
    limit: int,
    idle_timeout: float | None = None,
) -> str:
    """The spec's merged text: the failure line if any, then stdout, then stderr.

    Output past ``limit`` characters keeps its head and tail around one marker. A
    command the idle timeout ended (``idle_timeout`` given) says so instead of the
    spec's hard-timeout line.
    """
    streams = [s if isinstance(s, Clipped) else Clipped(s) for s in (stdout, stderr)]
    parts = [c for c in (s.rstrip() for s in streams) if c.total]
    output = join_clipped(parts, "\n", limit)
    if timed_out and idle_timeout is not None:
        head = idle_message(idle_timeout)
    elif timed_out:
        head = f"Error: command timed out after {timeout:g} seconds"
    elif returncode:
        head = f"Command failed with exit code {returncode}"
    else:
        return output
    return f"{head}\n{output}" if output else head


def idle_message(idle_timeout: float) -> str:
    """The failure line of a command killed for printing nothing for ``idle_timeout`` s."""
    return f"Error: command timed out after {idle_timeout:g} seconds without output (idle_timeout)"


def idle_limit(argument: float | None, configured: float) -> float | None:
    """The idle timeout a call runs with: its argument, else ``limits.idle_timeout``
    (0 there: none)."""
    if argument is not None:
        return argument
    return configured or None


def shell_argv(command: str, *, login: bool = False) -> list[str]:
    """The interpreter line for this platform (``login``: bash sources the profile)."""
    if sys.platform == "win32":
        prefix = "[Console]::OutputEncoding = [System.Text.Encoding]::UTF8; "
        return ["powershell", "-NoProfile", "-Command", prefix + command]
    return ["bash", "-lc" if login else "-c", command]


class BashTool(WorkspaceTool):
    name = "bash"
    annotations = SHELL
    description = (
        "Run a shell command in the workspace and return its merged stdout/stderr. "
        "Long output keeps its head and tail; all of it is saved to a file the result names."
    )
    Arguments = BashArguments
    parallel_safe = False
    effect_tags = ("shell:execute",)

    async def run(self, args: BashArguments) -> str:
        """Run ``command`` under ``bash -c`` in the login environment, captured at the
        first call (``bash -lc`` with execution.login_shell); the process group dies on
        timeout, after ``idle_timeout`` seconds without output, or on cancel."""
        limit = self.config.limits.bash_output_chars
        login = self.config.execution.login_shell
        env = None
        snapshot = getattr(self.runtime, "login_environment", None)
        if not login and snapshot is not None:
            env = await snapshot.get()
        idle = idle_limit(args.idle_timeout, self.config.limits.idle_timeout)
        spill = Spill(self.workspace, limit, self.config.limits.max_finished_jobs)
        try:
            result = await run_command(
                shell_argv(args.command, login=login),
                cwd=self.workspace,
                timeout=args.timeout,
                output_limit=limit,
                on_output=report_progress,
                env=env,
                tee=spill.write,
                idle_timeout=idle,
            )
        finally:
            where = spill.finish()
        set_exit_code(result.returncode, timed_out=result.timed_out)
        text = format_command_result(
            result.out,
            result.err,
            result.returncode,
            result.timed_out,
            args.timeout,
            limit,
            idle if result.idle else None,
        )
        return f"{text}\n{spill.note()}" if where is not None else text


TOOLS = (BashTool,)
